"""Ops whose result shape depends on values: ``nonzero``/``argwhere``, ``masked_select``,
``unique``, ``unique_consecutive``, ``bincount``; and ``histc``, whose shape is fixed.

An ahead-of-time compiled program has static shapes, so the value-dependent ops work on
values known while tracing: a tensor made from data (a variable whose host value is
current, :func:`~.scan.known_values`) gives its result on the host, as a tensor made from
data, at once (as PyTorch's eager ops). ``masked_select`` only needs the *mask* known (the
result is then a ``GATHER`` of the input at constant positions, traced and
differentiable); ``bincount`` only needs the input known (weights are added on the device).
A traced input raises ``RuntimeError`` naming the op, the shape, the user's line and a
fixed-shape alternative.

``histc`` runs on the device for any input: its bin edges, even from the data's range
(``min == max``), are values, not shapes.
"""
from __future__ import annotations

import numpy as np

from .. import ops
from ..trace import TRACER, no_grad, user_site
from .scan import known_values


def _host(t, name: str, instead: str) -> np.ndarray:
    """The values of tensor ``t`` known while tracing, else ``RuntimeError`` explaining
    why ``name`` cannot have a static shape here."""
    v = known_values(t)
    if v is not None:
        return v
    if t._var is None:
        what = "a traced tensor (its values exist only when the program runs)"
    elif TRACER.scope is not TRACER.root:
        what = "a tensor read inside a loop or branch body (its values change per iteration)"
    else:
        what = "a variable assigned by the program being traced (its values are known only " \
               "when the program runs)"
    raise RuntimeError(f"{name}(): the shape of the result depends on the values of its input, "
                       f"{what} of shape {list(t.shape)} (traced at {user_site()}); an "
                       f"ahead-of-time compiled program needs static shapes. {instead}")


def _data(t, array, dtype=None):
    """A tensor made from ``array`` (of ``dtype``), as ``t``'s class makes them."""
    return type(t)(np.ascontiguousarray(array), dtype=dtype)


class DynamicShapeMixin:
    def nonzero(self, *, as_tuple: bool = False):
        """The indices of the nonzero elements, row-major (``torch.nonzero``): an int64
        tensor ``[count, ndim]``, or with ``as_tuple`` one 1-D tensor per dim (a 0-d tensor
        counts as 1-D). Values must be known while tracing (module docstring).

        Raises:
            RuntimeError: a traced tensor (the count depends on its values).
        """
        v = _host(self, "nonzero", "Keep the shape with masked_fill/where, or count with "
                                   "count_nonzero.")
        if as_tuple:
            return tuple(_data(self, i.astype(np.int64), "int64")
                         for i in np.nonzero(np.atleast_1d(v)))
        return _data(self, np.argwhere(v).astype(np.int64), "int64")

    def argwhere(self):
        """``nonzero()``: the indices of the nonzero elements, ``[count, ndim]`` int64."""
        v = _host(self, "argwhere", "Keep the shape with masked_fill/where, or count with "
                                    "count_nonzero.")
        return _data(self, np.argwhere(v).astype(np.int64), "int64")

    def masked_select(self, mask):
        """The elements where ``mask`` (bool, broadcast with this tensor) is true, as a 1-D
        tensor in row-major order (``torch.masked_select``). The mask's values must be
        known while tracing; the input may be traced: the result is then a ``GATHER`` at
        the mask's positions, with the gradient to those elements.

        Raises:
            RuntimeError: a non-bool mask; a traced mask (the count depends on its values).
        """
        m = mask if hasattr(mask, "node") else np.asarray(mask)
        if m.dtype != "bool":
            raise RuntimeError("masked_select: expected BoolTensor for mask")
        shape = ops.broadcast_shape("masked_select", self.shape, m.shape)
        mv = m if isinstance(m, np.ndarray) else \
            _host(m, "masked_select", "Keep the shape with masked_fill/where (zeros where the "
                                      "mask is false), or sum with (x * mask).sum().")
        pos = np.flatnonzero(np.broadcast_to(mv, shape))
        xv = known_values(self)
        if xv is not None and not self.requires_grad:
            return _data(self, np.broadcast_to(xv, shape).reshape(-1)[pos], self.dtype)
        flat = self.broadcast_to(shape).reshape(-1)
        return flat._gather_flat(self._const(pos.astype(np.int32)))

    def unique(self, sorted: bool = True, return_inverse: bool = False,
               return_counts: bool = False, dim=None):
        """The distinct values, sorted (``torch.unique``; ``sorted=False`` sorts too, as
        PyTorch on the CPU), with the index of each element's value (``return_inverse``,
        this tensor's shape, or ``[size of dim]``) and each value's count
        (``return_counts``); with ``dim``, the distinct slices along it. NaNs are all
        distinct, after the numbers. Values must be known while tracing.

        Raises:
            RuntimeError: a traced tensor (the count of distinct values depends on them).
        """
        v = _host(self, "unique", "Sort with sort() (a static shape), or compare with a "
                                  "fixed set of values.")
        if dim is None:
            vals, inv, cnt = np.unique(v.reshape(-1), return_inverse=True, return_counts=True,
                                       equal_nan=False)
            inv = inv.reshape(v.shape)
        else:
            d = self._dim(dim)
            vals, inv, cnt = np.unique(v, axis=d, return_inverse=True, return_counts=True)
            inv = inv.reshape(-1)
        return self._unique_result(vals, inv, cnt, return_inverse, return_counts)

    def _unique_result(self, vals, inv, cnt, return_inverse: bool, return_counts: bool):
        out = [_data(self, vals, self.dtype)]
        if return_inverse:
            out.append(_data(self, inv.astype(np.int64), "int64"))
        if return_counts:
            out.append(_data(self, cnt.astype(np.int64), "int64"))
        return out[0] if len(out) == 1 else tuple(out)

    def unique_consecutive(self, return_inverse: bool = False, return_counts: bool = False,
                           dim=None):
        """The first of each run of equal consecutive values (of the flattened tensor, or
        of slices along ``dim``), with ``return_inverse`` (each element's run) and
        ``return_counts`` (each run's length), as ``torch.unique_consecutive``. Values must
        be known while tracing.

        Raises:
            RuntimeError: a traced tensor.
        """
        v = _host(self, "unique_consecutive", "Compare neighbours with diff() or x[1:] != "
                                              "x[:-1] (a static shape).")
        if dim is None:
            x = v.reshape(-1)
        else:
            x = np.moveaxis(v, self._dim(dim), 0)
        n = x.shape[0]
        new = np.ones(n, bool)
        if n > 1:
            new[1:] = (x[1:] != x[:-1]).reshape(n - 1, -1).any(axis=1)
        starts = np.flatnonzero(new)
        vals = x[starts]
        if dim is not None:
            vals = np.moveaxis(vals, 0, self._dim(dim))
        inv = (np.cumsum(new) - 1).reshape(v.shape if dim is None else (n,))
        cnt = np.diff(np.append(starts, n))
        return self._unique_result(vals, inv, cnt, return_inverse, return_counts)

    def bincount(self, weights=None, minlength: int = 0):
        """How often each value ``0..max`` occurs in this 1-D non-negative integer tensor
        (``torch.bincount``): ``max(max + 1, minlength)`` counts, int64; with ``weights``
        (this shape) their sums, float32 (PyTorch gives float64 for weights other than
        float32, which autodiff lacks). The input must be known while tracing (the
        length depends on its maximum); traced weights are added on the device. No
        gradient (PyTorch has none).

        Raises:
            NotImplementedError: a non-integer input.
            RuntimeError: an input of rank other than 1 or with negative values; weights
                of another shape; ``minlength < 0``; a traced input.
        """
        if self.dtype not in ("int32", "int64"):
            raise NotImplementedError(f"\"bincount_cpu\" not implemented for "
                                      f"'{self.dtype.name}'")
        if self.ndim != 1:
            raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
        if minlength < 0:
            raise RuntimeError(f"minlength should be >= 0, got {minlength}")
        v = _host(self, "bincount", "Count into a fixed number of bins n with "
                                    "nn.functional.one_hot(x, n).sum(0) or "
                                    "zeros(n).scatter_add(0, x, ones).")
        v = v.astype(np.int64)
        if v.size and v.min() < 0:
            raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
        n = max(int(v.max()) + 1 if v.size else 0, int(minlength))
        if weights is None:
            return _data(self, np.bincount(v, minlength=n), "int64")
        w = weights if hasattr(weights, "node") else self._wrap(self._lift(weights))
        if tuple(w.shape) != tuple(self.shape):
            raise RuntimeError(f"weights should be 1-d and have the same length as input "
                               f"(shapes {list(w.shape)} and {list(self.shape)})")
        wv = known_values(w)
        if wv is not None:
            return _data(self, np.bincount(v, wv.astype(np.float64), minlength=n), "float32")
        with no_grad():
            return self._wrap(ops.scatter_add(w.float().detach().node,
                                              self._const(v.astype(np.int32)).node, n))

    def histc(self, bins: int = 100, min: float = 0, max: float = 0):
        """The histogram of the elements in ``bins`` equal bins over ``[min, max]``
        (``torch.histc``): elements outside (and NaN) are ignored, ``max`` falls in the
        last bin; ``min == max`` takes the data's range (widened by 1 each way if it is
        one value). Computed on the device in float32 as PyTorch's CPU kernel does (bin
        ``trunc((x - min) * bins / (max - min))``): one ``SCATTER_ADD`` of ones, and
        ``amin``/``amax`` for the data's range. The result has this tensor's dtype; no
        gradient.

        Raises:
            NotImplementedError: a non-floating tensor.
            RuntimeError: ``bins <= 0``; ``min > max``; a range that is not finite (checked
                while tracing when the values are known; a traced tensor's infinite range
                gives an empty or meaningless histogram).
        """
        if not self.is_floating_point():
            raise NotImplementedError(f"\"histogram_cpu\" not implemented for "
                                      f"'{self.dtype.name}'")
        bins = int(bins)
        if bins <= 0:
            raise RuntimeError(f"torch.histc: bins must be > 0, but got {bins} for dimension 0")
        lo, hi = float(min), float(max)
        known = known_values(self)
        if lo == hi and known is not None and known.size:
            lo, hi = float(np.min(known)), float(np.max(known))     # NaN propagates
        if lo == hi:
            lo, hi = lo - 1, hi + 1
        if not (np.isfinite(lo) and np.isfinite(hi)):
            raise RuntimeError(f"torch.histc: range of [{lo}, {hi}] is not finite")
        if not lo < hi:
            raise RuntimeError("torch.histc: max must be larger than min")
        with no_grad():
            x = self.float().reshape(-1)
            if float(min) == float(max) and known is None and self.numel():
                a, b = x.amin(), x.amax()
                same = a == b
                lo_t, hi_t = (a - 1.0).where(same, a), (b + 1.0).where(same, b)
            else:
                lo_t = self._wrap(ops.const(lo, ()))
                hi_t = self._wrap(ops.const(hi, ()))
            inside = ((x >= lo_t).float() * (x <= hi_t).float()) > 0
            pos = ((x - lo_t) * float(bins) / (hi_t - lo_t)).floor().minimum(float(bins - 1))
            ok = (inside.float() * (pos >= 0).float()) > 0        # NaN positions: not counted
            at = pos.where(ok, float(bins)).int()
            ones = ops.const(1.0, x.shape)
            counts = self._wrap(ops.scatter_add(ones, at.node, bins + 1))[:bins]
            return counts.to(self.dtype)
