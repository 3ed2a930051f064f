"""Scans and sorting along one dim, all lowered to existing graph ops.

* ``cumsum``, ``cumprod``, ``cummax``/``cummin``, ``logcumsumexp``: log-depth doubling (Hillis and
  Steele, "Data parallel algorithms", 1986): ``ceil(log2 n)`` steps, each combining every
  element with the one ``2**k`` before it (a shifted view padded with the identity).
* ``sort``/``argsort``/``topk``: Batcher's bitonic sorting network ("Sorting networks and
  their applications", 1968) over the dim padded to a power of two with ``+inf``:
  ``log2 n (log2 n + 1) / 2`` compare-exchange stages of views and ``where``. Keys are
  ``(value, original index)`` pairs, so the order is stable (PyTorch's ``stable=True``).
* ``kthvalue``, ``median``/``nanmedian``, ``quantile``/``nanquantile``: the same network on
  ``(value, index)`` keys with NaN sorted last (after ``+inf``, as PyTorch), then a
  ``gather`` of the elements at the selected sorted positions.

Values move through ``where`` selections, so gradients reach exactly the elements the
result came from (PyTorch's convention for ``sort``, ``cummax`` and ``topk``).
"""
from __future__ import annotations

import collections
import math
import numbers

import numpy as np

from ...errors import DimError, TracedValueError
from .. import ops
from ..dtypes import INT32_MAX
from ..trace import no_grad, user_site
from .reduce import as_index

SortResult = collections.namedtuple("SortResult", ["values", "indices"])
TopKResult = collections.namedtuple("TopKResult", ["values", "indices"])
CumResult = collections.namedtuple("CumResult", ["values", "indices"])
KthvalueResult = collections.namedtuple("KthvalueResult", ["values", "indices"])
MedianResult = collections.namedtuple("MedianResult", ["values", "indices"])


def _or(a, b):
    return (a.float() + b.float()) > 0


def _and(a, b):
    return (a.float() * b.float()) > 0


class ScanMixin:
    def _last(self, dim):
        """(this tensor with ``dim`` moved last, normalized dim)."""
        d = self._dim(dim)
        return (self.movedim(d, -1) if self.ndim else self.reshape(1)), d

    def _back(self, d: int, ndim: int):
        return self.movedim(-1, d) if ndim else self.reshape(())

    def _shift(self, s: int, fill):
        """Along the last dim: ``s`` copies of ``fill`` then all but the last ``s`` elements."""
        n = self.shape[-1]
        pad = self._wrap(ops.const(fill, self.shape[:-1] + (min(s, n),), self.dtype))
        return pad.cat(self[..., :max(n - s, 0)], dim=-1) if n > s else pad

    # -- cumulative sums -----------------------------------------------------------------
    def cumsum(self, dim: int, *, dtype=None):
        """Running sum along ``dim``: ``out[i] = x[0] + ... + x[i]``; integers and bool
        are summed as int64 (PyTorch's result dtype) unless ``dtype`` is given."""
        x, d = self._accumulating(dtype)._last(dim)
        return x._cumsum_last()._back(d, self.ndim)

    def _cumsum_last(self):
        """Doubling with adds: each element sums only elements at or before it, so an
        ``inf`` or NaN reaches the positions after it alone (a product with a triangular
        ones matrix, the form before, multiplied it by the zeros above the diagonal:
        ``cumsum([1, inf, 2])`` was ``[nan, inf, inf]``); integers stay exact."""
        x, s = self, 1
        while s < x.shape[-1]:
            x = x + x._shift(s, 0)
            s *= 2
        return x

    def cumprod(self, dim: int, *, dtype=None):
        """Running product along ``dim`` (log-depth doubling; exact with zeros); integers
        and bool multiply as int64 (PyTorch's result dtype) unless ``dtype`` is given."""
        x, d = self._accumulating(dtype)._last(dim)
        s = 1
        while s < x.shape[-1]:
            x = x * x._shift(s, 1)
            s *= 2
        return x._back(d, self.ndim)

    def logcumsumexp(self, dim: int):
        """``log(cumsum(exp(x)))`` along ``dim`` without overflow: doubling with
        :meth:`logaddexp`."""
        x, d = self._last(dim)
        s = 1
        while s < x.shape[-1]:
            x = x.logaddexp(x._shift(s, -math.inf))
            s *= 2
        return x._back(d, self.ndim)

    def _cumext(self, dim: int, sign: float):
        """Running maximum (``sign`` 1) or minimum (-1) and its index, in this tensor's
        dtype (PyTorch's): floats as ``sign * x`` (the shifted-in padding is ``-inf``),
        integers as ``x`` or ``~x`` (decreasing and, unlike ``-``, never overflowing; the
        padding, at index -1, is never taken), bool as int32 0/1 then back."""
        if self.dtype == "bool":
            v, i = self.int()._cumext(dim, sign)
            return CumResult(v.bool(), i)
        floating = self.is_floating_point()
        flip = (lambda t: t * sign) if floating else (lambda t: t if sign > 0 else ~t)
        x, d = flip(self)._last(dim)
        n = x.shape[-1]
        idx = x._index_grid()
        s = 1
        while s < n:
            px, pi = x._shift(s, -math.inf if floating else 0), idx._shift(s, -1.0)
            with no_grad():                    # ties keep the later index, as PyTorch;
                if floating:                   # NaN is the extreme
                    take = (px > x) | ((px != px) & (x == x))
                else:
                    take = (px > x) & (pi >= 0)
            x, idx = px.where(take, x), pi.where(take, idx)
            s *= 2
        return CumResult(flip(x)._back(d, self.ndim), as_index(idx._back(d, self.ndim)))

    def _index_grid(self):
        """``0, 1, ..`` along the last dim, float32, broadcast to this shape (a constant)."""
        n = self.shape[-1]
        return self._const(np.arange(n, dtype=np.float32)).broadcast_to(self.shape)

    def cummax(self, dim: int):
        """``(values, indices)``: running maximum along ``dim`` and where it was (the last
        position among ties, as PyTorch; from a NaN on, NaN and the last NaN's index)."""
        return self._cumext(dim, 1.0)

    def cummin(self, dim: int):
        """``(values, indices)``: running minimum along ``dim``."""
        return self._cumext(dim, -1.0)

    # -- sorting -------------------------------------------------------------------------
    def sort(self, dim: int = -1, descending: bool = False, *, stable: bool = False):
        """``(values, indices)`` sorted along ``dim``, equal values in their original order.
        Values keep this tensor's dtype (integers exactly, as int32 storage), indices are
        int64, as in PyTorch.

        NaN is not ordered (PyTorch puts it last); the gradient of ``values`` goes to the
        element each value came from.
        """
        if self.dtype == "bool":                      # ordered as 0/1
            v, i = self.int().sort(dim, descending, stable=stable)
            return SortResult(v.bool(), i)
        x, d = self._last(dim)
        n = x.shape[-1]
        if n <= 1:
            idx = self._const(np.zeros(x.shape, np.float32))
            return SortResult(x._back(d, self.ndim), as_index(idx._back(d, self.ndim)))
        floating = x.is_floating_point()
        # descending sorts a decreasing map of the values: -x for floats, ~x for integers
        # (no overflow at the smallest int32)
        flip = (lambda t: -t) if floating else (lambda t: ~t)
        key = flip(x) if descending else x
        p = 1 << (n - 1).bit_length()
        idx = self._const(np.arange(p, dtype=np.float32)).broadcast_to(x.shape[:-1] + (p,))
        if p > n:       # padding after every value: +inf, or the largest int32 (its index
            big = math.inf if floating else INT32_MAX       # orders it after equal values)
            key = key.cat(self._wrap(ops.const(big, x.shape[:-1] + (p - n,), key.dtype)),
                          dim=-1)
        key, idx = _network(key, idx)
        key, idx = key[..., :n], idx[..., :n]
        values = flip(key) if descending else key
        return SortResult(values._back(d, self.ndim), as_index(idx._back(d, self.ndim)))

    def argsort(self, dim: int = -1, descending: bool = False, *, stable: bool = False):
        """Indices that sort along ``dim`` (``sort(...).indices``)."""
        with no_grad():
            return self.sort(dim, descending).indices

    def msort(self):
        return self.sort(0).values

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
        """``(values, indices)`` of the ``k`` largest (or smallest) elements along ``dim``,
        in sorted order.

        Raises:
            RuntimeError: ``k`` is out of range for the dim, or a bool tensor (as
                PyTorch on the CPU).
        """
        if self.dtype == "bool":
            raise RuntimeError(f"topk does not support bool dtypes on CPU (traced at "
                               f"{user_site()})")
        d = self._dim(dim)
        n = self.shape[d] if self.ndim else 1
        if not 0 <= k <= n:
            raise RuntimeError(f"topk: selected index k={k} out of range for a dim of size {n}")
        v, i = self.sort(d, descending=largest)
        return TopKResult(v._slice_dim(d, 0, k) if self.ndim else v,
                          i._slice_dim(d, 0, k) if self.ndim else i)

    # -- order statistics (built on the network above) ------------------------------------
    def _order(self, dim: int):
        """``(x, order, nans)`` for the order statistics along ``dim``: ``x`` this tensor
        with ``dim`` moved last, ``order`` the (float32, no gradient) positions along it
        that sort ``x`` stably with NaN last (after ``+inf``, as PyTorch's ``sort``), and
        ``nans`` the number of NaN (keepdim; a zero constant for integers)."""
        x, _ = self._last(dim)
        n = x.shape[-1]
        p = 1 << max(n - 1, 0).bit_length()
        lead = x.shape[:-1]
        with no_grad():
            pos = self._const(np.arange(n, dtype=np.float32)).broadcast_to(x.shape)
            if x.is_floating_point():
                isnan = x != x
                key = x.float().where(x == x, math.inf)
                tie = pos + isnan.float() * float(p)     # NaN after +inf, in their order
                nans = isnan.float().sum(-1, keepdim=True)
            else:                                       # integers as they are (exact)
                key, tie = x, pos
                nans = self._wrap(ops.const(0.0, lead + (1,)))
            if p > n:                                   # padding sorts after every NaN
                big = math.inf if x.is_floating_point() else INT32_MAX
                key = key.cat(self._wrap(ops.const(big, lead + (p - n,), key.dtype)), dim=-1)
                pad = self._const(np.arange(2 * p, 3 * p - n, dtype=np.float32))
                tie = tie.cat(pad.broadcast_to(lead + (p - n,)), dim=-1)
            _, order = _network(key, tie)
            order = order[..., :n]
            order = order - (order >= p).float() * float(p)
        return x, order, nans

    def _pick(self, x, order, at, dim: int, keepdim: bool):
        """``(values, indices)`` of the elements of ``x`` (``dim`` moved last) at sorted
        positions ``at`` (float32, keepdim), ``dim`` put back; the gradient reaches the
        element picked alone (PyTorch's ``value_selecting_reduction_backward``)."""
        index = as_index(order.gather(-1, as_index(at)))
        values = x.gather(-1, index)
        values, index = values._back(dim, self.ndim), index._back(dim, self.ndim)
        if not keepdim and self.ndim:
            values, index = values.squeeze(dim), index.squeeze(dim)
        return values, index

    def kthvalue(self, k: int, dim: int = -1, keepdim: bool = False):
        """``(values, indices)`` of the ``k``-th smallest element (``k`` from 1) along
        ``dim``, NaN counting as the largest (``torch.kthvalue``); any dtype but bool.

        Raises:
            RuntimeError: ``k`` is not in ``[1, size of dim]``.
            IndexError: ``dim`` is out of range, or of size 0 (a :class:`DimError`).
            NotImplementedError: a bool tensor (as PyTorch).
        """
        _not_bool(self, "kthvalue_cpu")
        d = self._dim(dim)
        n = self.shape[d] if self.ndim else 1
        if n == 0:
            raise DimError("kthvalue", [self.shape], user_site(),
                           f"Expected reduction dim {d} to have non-zero size.")
        if not 1 <= k <= n:
            raise RuntimeError(f"kthvalue(): selected number k out of range for dimension "
                               f"{d} (k={k}, input shape {list(self.shape)}, traced at "
                               f"{user_site()})")
        x, order, _ = self._order(d)
        at = self._wrap(ops.const(float(k - 1), x.shape[:-1] + (1,)))
        return KthvalueResult(*self._pick(x, order, at, d, keepdim))

    def _median(self, dim, keepdim: bool, ignore_nan: bool, name: str):
        """Lower median along ``dim`` (of every element if None); with ``ignore_nan`` of
        the elements that are not NaN, else NaN where any is (at the first NaN)."""
        _not_bool(self, "median_cpu" if dim is None else "median_out")
        if dim is None:
            flat = self.reshape(-1)
            if flat.shape[0] == 0:
                return self._wrap(ops.const(math.nan, (), self.dtype))
            with no_grad():
                v = flat._median(0, False, ignore_nan, name).values
            return flat._spread(v)
        d = self._dim(dim)
        self._nonempty(d, name)
        x, order, nans = self._order(d)
        n = float(x.shape[-1])
        with no_grad():
            if ignore_nan:                       # lower median of the n - nans others
                at = ((n - nans - 1.0) * 0.5).floor().maximum(0.0)
            else:                                # the first NaN where there is one
                at = (n - nans).where(nans > 0, float((x.shape[-1] - 1) // 2))
        return MedianResult(*self._pick(x, order, at, d, keepdim))

    def _spread(self, v):
        """``v`` (0-d, no gradient: one of this 1-D tensor's values) with the gradient
        shared evenly by every element equal to it, or by the NaN elements if it is NaN
        (PyTorch's ``evenly_distribute_backward`` for ``median()``)."""
        if not (self.is_floating_point() and self.requires_grad):
            return v
        hit = self == v
        ties = self.where(hit, -math.inf).amax()       # amax shares among its ties
        low = self.where(hit, math.inf).amin()         # v == -inf: -inf ties among hits
        isnan = self != self
        share = isnan.float().sum().maximum(1.0).reciprocal()
        nan = (self.where(isnan, 0.0) * share).sum()   # NaN, 1/count to each NaN
        return nan.where(v != v, low.where(v == -math.inf, ties))

    def median(self, dim=None, keepdim: bool = False):
        """The lower median (``torch.median``): of every element (``dim=None``: a 0-d
        tensor, NaN if any is NaN or none; the gradient shared by the elements equal to
        it), or ``(values, indices)`` along ``dim`` (NaN and its first index where a NaN
        is; the gradient to the element at the index). Ordered by a stable sort, so of
        tied elements the index is the one a stable sort puts at the median.

        Raises:
            IndexError: ``dim`` is out of range, or of size 0.
            NotImplementedError: a bool tensor (as PyTorch).
        """
        return self._median(dim, keepdim, False, "median")

    def nanmedian(self, dim=None, keepdim: bool = False):
        """:meth:`median` of the elements that are not NaN (NaN where all are, index 0)."""
        return self._median(dim, keepdim, True, "nanmedian")

    def quantile(self, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear"):
        """The ``q``-quantiles along ``dim`` (of every element if None), as
        ``torch.quantile``: the sorted values at rank ``q * (n - 1)`` combined by
        ``interpolation`` (``"linear"``, ``"lower"``, ``"higher"``, ``"midpoint"``,
        ``"nearest"``: halves to even); NaN where a NaN is. ``q`` is a float or a 0-d or
        1-D tensor of this dtype (its values in ``[0, 1]``; it gets a gradient through the
        linear weights, as in PyTorch); a 1-D ``q`` adds a first dim of its length.

        Raises:
            RuntimeError: a non-floating input, an empty input, ``q`` out of ``[0, 1]``
                (checked when its values are known while tracing), a ``q`` of another dtype
                or rank > 1, an unknown ``interpolation``.
            TypeError: ``q`` is neither a number nor a tensor.
        """
        return self._quantile(q, dim, keepdim, interpolation, False, "quantile")

    def nanquantile(self, q, dim=None, keepdim: bool = False, *,
                    interpolation: str = "linear"):
        """:meth:`quantile` of the elements that are not NaN (NaN where all are)."""
        return self._quantile(q, dim, keepdim, interpolation, True, "nanquantile")

    def _quantile(self, q, dim, keepdim, interpolation, ignore_nan, name):
        qt, scalar = self._quantile_args(q, interpolation, name)
        x = self.reshape(-1) if dim is None else self
        d = 0 if dim is None else self._dim(dim)
        xl, order, nans = x._order(d)
        qt = qt.reshape(*([1] * (xl.ndim - 1)), qt.shape[0])      # [1, .., 1, Q]
        v = xl.gather(-1, as_index(order))                 # sorted, NaN last
        last = float(xl.shape[-1] - 1)
        if ignore_nan:                                     # rank among the others
            rank = qt * (last - nans)
            rank = rank.where(rank >= 0, 0.0)
        else:                                              # the last (NaN) where a NaN is
            rank = (qt * last).where(nans == 0, last)
        with no_grad():
            rounded = {"lower": rank.floor, "higher": rank.ceil, "nearest": rank.round,
                       "linear": rank.floor, "midpoint": rank.floor}[interpolation]()
        out = v.gather(-1, as_index(rounded.broadcast_to(rank.shape)))
        if interpolation in ("linear", "midpoint"):
            with no_grad():
                above = as_index(rank.ceil().broadcast_to(rank.shape))
            w = rank - rounded if interpolation == "linear" else 0.5
            out = out.lerp(v.gather(-1, above), w)
        out = out.movedim(-1, 0)                           # [Q, dims kept...]
        if keepdim:
            out = out.reshape(out.shape[0], *[1 if dim is None or i == d else s
                                               for i, s in enumerate(self.shape)])
        return out.squeeze(0) if scalar else out

    def _quantile_args(self, q, interpolation, name):
        """``q`` as a 1-D tensor and whether it was a scalar, after PyTorch's checks."""
        modes = ("linear", "lower", "higher", "midpoint", "nearest")
        if interpolation not in modes:
            raise RuntimeError(f"{name}() interpolation must be one of linear, lower, higher, "
                               f"midpoint or nearest, but got {interpolation}")
        if not self.is_floating_point():
            raise RuntimeError(f"{name}() input tensor must be either float or double dtype, "
                               f"got {self.dtype}")
        if self.numel() == 0:
            raise RuntimeError(f"{name}() input tensor must be non-empty (input shape "
                               f"{list(self.shape)}, traced at {user_site()})")
        if isinstance(q, numbers.Real) and not isinstance(q, bool):
            if not 0 <= q <= 1:
                raise RuntimeError(f"{name}() q must be in the range [0, 1] but got {q}")
            qt, scalar = self._wrap(ops.const(float(q), (1,), self.dtype)), True
        elif hasattr(q, "node"):
            if q.ndim > 1:
                raise RuntimeError(f"{name}() q must be a scalar or 1D tensor, got shape "
                                   f"{list(q.shape)}")
            if q.dtype != self.dtype:
                raise RuntimeError(f"{name}() q tensor must be same dtype as the input "
                                   f"tensor, got {q.dtype} and {self.dtype}")
            known = known_values(q)
            if known is not None and not ((known >= 0) & (known <= 1)).all():
                raise RuntimeError(f"{name}() q values must be in the range [0, 1]")
            qt, scalar = q.reshape(-1), q.ndim == 0
        else:
            raise TypeError(f"{name}() q must be a float or a tensor, got "
                            f"{type(q).__name__}")
        return qt, scalar


def _not_bool(t, kernel: str) -> None:
    """PyTorch's ``NotImplementedError`` for an order statistic of a bool tensor."""
    if t.dtype == "bool":
        raise NotImplementedError(f'"{kernel}" not implemented for \'Bool\' (traced at '
                                  f'{user_site()})')


def known_values(t):
    """The values of tensor ``t`` while tracing if it is a variable whose host value is
    current (None for a traced tensor), for argument checks that need values."""
    try:
        return t._host_value("check", "")
    except TracedValueError:
        return None


def _network(key, idx):
    """Batcher's bitonic network over the last dim (a power of two long): ``(key, idx)``
    pairs sorted ascending, ties in ``key`` ordered by ``idx``."""
    p, k = key.shape[-1], 2
    while k <= p:
        key, idx = _compare_exchange(key, idx, k, True)
        j = k // 4
        while j >= 1:
            key, idx = _compare_exchange(key, idx, 2 * j, False)
            j //= 2
        k *= 2
    return key, idx


def _compare_exchange(key, idx, size: int, mirror: bool):
    """One stage of the network on the last dim: within each block of ``size``, element
    ``t`` of the first half meets element ``t`` of the second half (``size-1-t`` with
    ``mirror``); the smaller ``(key, idx)`` pair goes first. Each element reads itself and
    its partner (a view: the block's halves swapped), so a stage is one elementwise
    kernel per output."""
    lead, n = key.shape[:-1], key.shape[-1]

    def partner(t):
        b = t.reshape(*lead, n // size, 2, size // 2).flip(-2)
        return (b.flip(-1) if mirror else b).reshape(*lead, n)

    pk, pi = partner(key), partner(idx)
    with no_grad():
        first = key._const(np.array([[1.0], [0.0]], np.float32)).expand(2, size // 2) \
            .reshape(size).repeat(n // size).reshape(n)           # 1 in each first half
        smaller = _or(key < pk, _and(key == pk, idx < pi))
        keep = (smaller.float() == first)                      # first half keeps the min
    return key.where(keep, pk), idx.where(keep, pi)
