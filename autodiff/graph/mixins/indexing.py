"""Indexing: ``x[key]`` and ``x[key] = v`` (basic and advanced), the gather/scatter family,
masked writes.

* Basic indexing (ints, slices with positive steps, ``None``, ``...``) is a view: a strided
  slice and a reshape. A negative step raises ``ValueError`` as in PyTorch (use ``flip``).
* Advanced indexing follows NumPy/PyTorch (index arrays broadcast together; their result
  dims go where the first one was when they are adjacent, else first). Index arrays given
  as numpy arrays or lists (bool masks included) are resolved on the host at trace time
  into one constant int32 array of flat offsets: the op is one ``GATHER``. Index tensors
  (traced or data) are combined on the device into flat offsets (float32 arithmetic, exact
  below ``2**24`` elements); negative indices count from the end, out-of-range ones make
  the ``GATHER`` raise ``IndexError``.
* ``x[key] = v`` on a traced tensor is *out of place*: ``x`` names a new value from then
  on (``where`` of the old value and ``v`` placed by views or a scatter); tensors taken
  from ``x`` earlier keep the old values (there is no aliasing). On a variable it is an
  in-place update (an ``ASSIGN``). A basic index is a view: an in-place update of it
  (``x[0].add_(1)``) is written back as ``x[0] = ...`` (``Tensor._viewed``). Duplicate
  advanced indices add their values (PyTorch leaves the result unspecified).
* ``gather``/``take_along_dim``/``scatter``/``scatter_add``/``scatter_reduce("sum",
  "mean")``/``index_add`` use ``GATHER``/``SCATTER_ADD`` on flat offsets.
  ``scatter_reduce("amax", "amin")`` compares every index with every position of the
  scattered dim (one-hot, ``index.numel() * n`` work) and reduces with ``RMAX``.
"""
from __future__ import annotations

import numbers

import numpy as np

from ...errors import ShapeError
from .. import ops
from ..trace import no_grad, user_site
from .dims import norm_dim
from .scan import known_values

_EXACT = 1 << 24        # float32 represents every integer below this exactly


def _is_tensor(k) -> bool:
    return hasattr(k, "node") and hasattr(k, "_var")


def _is_adv(k) -> bool:
    return _is_tensor(k) or isinstance(k, (list, np.ndarray)) and not (
        isinstance(k, np.ndarray) and k.ndim == 0)


def _expand_key(key, ndim: int) -> tuple:
    """``key`` as a tuple of one entry per dim (plus ``None`` entries); a bool mask array
    becomes its ``nonzero()`` index arrays."""
    key = key if isinstance(key, tuple) else (key,)
    out = []
    for k in key:
        if isinstance(k, (list, np.ndarray)) and not _is_tensor(k):
            a = np.asarray(k)
            if a.dtype == np.bool_:
                out.extend(a.nonzero())
                continue
            if a.dtype.kind not in "iu" and a.size:
                raise IndexError("tensors used as indices must be long, int or bool")
            out.append(a.astype(np.int64))
        elif isinstance(k, np.ndarray):
            out.append(k.item())
        else:
            out.append(k)
    if sum(k is Ellipsis for k in out) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    real = sum(1 for k in out if k is not None and k is not Ellipsis)
    if real > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim}")
    ell = [j for j, k in enumerate(out) if k is Ellipsis]
    if ell:
        out = out[:ell[0]] + [slice(None)] * (ndim - real) + out[ell[0] + 1:]
    else:
        out += [slice(None)] * (ndim - real)
    return tuple(out)


def _basic(shape, key):
    """The slice spec and result shape of a key of ints, slices and ``None`` only."""
    spec, out, d = [], [], 0
    for k in key:
        if k is None:
            out.append(1)
            continue
        size = shape[d]
        if isinstance(k, slice):
            if k.step is not None and k.step <= 0:
                raise ValueError("step must be greater than zero")
            a, b, s = k.indices(size)
            spec.append((a, b, s))
            out.append(len(range(a, b, s)))
        elif isinstance(k, numbers.Integral):
            i = int(k) + size if k < 0 else int(k)
            if not 0 <= i < size:
                raise IndexError(f"index {int(k)} is out of bounds for dimension {d} with size "
                                 f"{size}")
            spec.append((i, i + 1, 1))
        else:
            raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None and long or "
                             f"bool tensors are valid indices (got {type(k).__name__})")
        d += 1
    return spec, out


class IndexingMixin:
    # -- reading ---------------------------------------------------------------------------
    def __getitem__(self, key):
        if _is_tensor(key) and key.dtype in ("int32", "int64") and self.ndim >= 1:
            return self._take_rows(key)
        key = _expand_key(key, self.ndim)
        if not any(_is_adv(k) for k in key):             # a view, as in PyTorch
            spec, out = _basic(self.shape, key)
            return self._view(self._wrap(ops.reshape(ops.slice_(self.node, spec), out)),
                              lambda b, v: b._put(key, v))
        y, key = self._split_key(key)
        if not any(_is_tensor(k) for k in key):
            flat = np.arange(y.numel(), dtype=np.int64).reshape(y.shape)[key]
            return y._gather_flat(self._const(flat.astype(np.int32)))
        return y._advanced(key)

    def _split_key(self, key):
        """PyTorch applies the basic entries (ints, slices, ``None``) first, as views: the
        view, and the advanced key left for it (index arrays and full slices)."""
        spec, out = _basic(self.shape, [slice(None) if _is_adv(k) else k for k in key])
        y = self._wrap(ops.reshape(ops.slice_(self.node, spec), out))
        rest = tuple(k if _is_adv(k) else slice(None) for k in key
                     if not isinstance(k, numbers.Integral))
        return y, rest

    def _take_rows(self, idx):
        """``x[idx]`` for an integer index tensor: rows of dim 0, negative ones counted from
        the end (one fused elementwise op on the indices, then a ``GATHER``)."""
        n = self.shape[0]
        with no_grad():
            f = idx.float()
            idx = (f + n).where(f < 0, f).int()
        return self._wrap(ops.gather(self.node, idx.node))

    def _gather_flat(self, flat):
        """Elements at the int32 flat (row-major) offsets ``flat`` (any shape)."""
        return self._wrap(ops.gather(ops.reshape(self.node, (self.numel(),)), flat.node))

    def _advanced(self, key):
        """Advanced indexing with index tensors (``key``: one entry per dim, index arrays
        or full slices): the indexed dims moved first and flattened, one ``GATHER`` of flat
        offsets, its result dims moved to where the first index was when the indices are
        adjacent."""
        y = self
        ydims, idxs = [], []
        for pos, k in enumerate(key):
            if isinstance(k, slice):
                continue
            if _is_tensor(k) and k.dtype not in ("int32", "int64"):
                raise IndexError("tensors used as indices must be integer tensors; a mask "
                                 "would give a data-dependent shape (use masked_fill or where)")
            ydims.append(pos)
            idxs.append(k if _is_tensor(k) else self._const(np.asarray(k, np.float32)))
        flat = y._flat_offsets(ydims, idxs)
        rest = [d for d in range(y.ndim) if d not in ydims]
        table = y.permute(*ydims, *rest) if y.ndim else y
        lead = int(np.prod([y.shape[d] for d in ydims], dtype=np.int64))
        out = table.reshape(lead, *[y.shape[d] for d in rest])
        out = out._wrap(ops.gather(out.node, flat.node))
        adjacent = ydims == list(range(ydims[0], ydims[0] + len(ydims)))
        if adjacent and ydims[0] > 0:
            nb = flat.ndim
            at = ydims[0]
            perm = list(range(nb, nb + at)) + list(range(nb)) + list(range(nb + at, out.ndim))
            out = out.permute(*perm)
        return out

    def _flat_offsets(self, dims, idxs):
        """int32 row-major offsets into the sub-array of ``dims`` of this tensor for the
        index tensors ``idxs`` (broadcast together), -1 where an index is out of range."""
        sizes = [self.shape[d] for d in dims]
        total = int(np.prod(sizes, dtype=np.int64))
        if total >= _EXACT:
            raise ShapeError("index", [self.shape], user_site(),
                             f"index tensors over {total} >= 2**24 positions")
        with no_grad():
            flat, bad, stride = None, None, 1
            for n, t in reversed(list(zip(sizes, idxs))):
                f = t.float() if _is_tensor(t) else t
                f = (f + n).where(f < 0, f)
                out = ((f < 0).float() + (f >= n).float())
                bad = out if bad is None else bad + out
                term = f * float(stride) if stride != 1 else f
                flat = term if flat is None else flat + term
                stride *= n
            return self._minus_one().where(bad > 0, flat).int()

    def _minus_one(self):
        return self._wrap(ops.const(-1.0, ()))

    def index_select(self, dim: int, index):
        """Slices ``index`` (1-D int tensor) of dim ``dim``: a ``GATHER`` of rows after moving
        ``dim`` first. Indices must lie in ``[0, n)`` (else ``IndexError`` at run time)."""
        d = self._dim(dim)
        index = index if _is_tensor(index) else self._const(np.asarray(index, np.int32))
        if index.ndim > 1:
            raise IndexError("index_select(): Index is supposed to be a vector")
        if self.ndim == 0:
            return self._wrap(ops.gather(ops.reshape(self.node, (1,)), index.reshape(-1).node)) \
                .reshape(index.shape)
        x = self.movedim(d, 0)
        out = x._wrap(ops.gather(x.node, index.reshape(-1).node))
        return out.movedim(0, d)

    def _dim_offsets(self, dim: int, index):
        """Flat offsets into this tensor of ``index`` (same rank) along ``dim``: the
        positions of ``index`` in every other dim, its values in ``dim`` (-1 where out of
        range, so that the ``GATHER`` raises)."""
        d = self._dim(dim)
        if index.ndim != self.ndim:
            raise RuntimeError(f"Index tensor must have the same number of dimensions as input "
                               f"tensor ({index.ndim} vs {self.ndim})")
        for i, (a, b) in enumerate(zip(index.shape, self.shape)):
            if i != d and a > b:
                raise RuntimeError(f"Size does not match at dimension {i}: index {a} vs input "
                                   f"{b}")
        strides = [int(np.prod(self.shape[i + 1:], dtype=np.int64)) for i in range(self.ndim)]
        if self.numel() >= _EXACT:
            raise ShapeError("gather", [self.shape], user_site(), "more than 2**24 elements")
        grid = np.zeros(index.shape, np.float64)
        for i, n in enumerate(index.shape):
            if i != d:
                shape = [1] * index.ndim
                shape[i] = n
                grid = grid + (np.arange(n) * strides[i]).reshape(shape)
        n = self.shape[d] if self.ndim else 1
        with no_grad():
            f = index.float()
            flat = f * float(strides[d] if self.ndim else 1) + self._const(grid.astype(np.float32))
            bad = (f < 0).float() + (f >= n).float()
            return self._minus_one().where(bad > 0, flat).int()

    def gather(self, dim: int, index):
        """``out[..i, j, k..] = x[..i, index[..i, j, k..], k..]`` along ``dim`` (``index`` of
        the same rank, no larger in other dims): one ``GATHER`` of flat offsets; its
        gradient is a ``SCATTER_ADD``."""
        index = index if _is_tensor(index) else self._const(np.asarray(index, np.int32))
        if self.ndim == 0:
            return self._gather_flat(self._dim_offsets(dim, index.reshape(())))
        return self._gather_flat(self._dim_offsets(dim, index))

    def take_along_dim(self, indices, dim=None):
        """``gather`` with ``indices`` and this tensor broadcast together except along
        ``dim``; ``dim=None`` indexes the flattened tensor."""
        indices = indices if _is_tensor(indices) else self._const(np.asarray(indices, np.int32))
        if dim is None:
            return self.reshape(-1).gather(0, indices.reshape(-1))
        d = self._dim(dim)
        if indices.ndim != self.ndim:
            raise RuntimeError("take_along_dim(): input and indices should have the same "
                               "number of dimensions")
        shape = list(ops.broadcast_shape("take_along_dim",
                                         self.shape[:d] + (1,) + self.shape[d + 1:],
                                         indices.shape[:d] + (1,) + indices.shape[d + 1:]))
        xs, ix = list(shape), list(shape)
        xs[d], ix[d] = self.shape[d], indices.shape[d]
        return self.broadcast_to(xs).gather(d, indices.broadcast_to(ix))

    # -- writing ---------------------------------------------------------------------------
    def _scatter_parts(self, dim: int, index, src):
        """(flat offsets of ``index`` along ``dim``, ``src`` cut to ``index``'s shape as a
        flat vector, ``SCATTER_ADD`` of ``src``, ``SCATTER_ADD`` of ones)."""
        index = index if _is_tensor(index) else self._const(np.asarray(index, np.int32))
        flat = self._dim_offsets(dim, index).reshape(-1)
        if _is_tensor(src):
            for i, (a, b) in enumerate(zip(index.shape, src.shape)):
                if a > b:
                    raise RuntimeError(f"scatter: index size {a} exceeds src size {b} in dim {i}")
            src = src[tuple(slice(0, n) for n in index.shape)] if src.ndim else src
            vals = src.reshape(-1) if src.ndim else src.broadcast_to(index.shape).reshape(-1)
        else:
            vals = self._wrap(ops.const(float(src), (flat.shape[0],)))
        n = self.numel()
        summed = self._wrap(ops.scatter_add(vals.node, flat.node, n)).reshape(self.shape)
        ones = self._wrap(ops.const(1.0, (flat.shape[0],)))
        with no_grad():
            count = self._wrap(ops.scatter_add(ones.node, flat.node, n)).reshape(self.shape)
        return summed, count

    def scatter(self, dim: int, index, src=None, *, value=None, reduce=None):
        """A copy of this tensor with ``src`` (a tensor or a number) written at ``index``
        along ``dim`` (``out[..i, index[..i, j, k..], k..] = src[..i, j, k..]``).
        ``reduce="add"`` / ``"multiply"``-less forms only; duplicate indices add."""
        src = value if src is None else src
        if reduce is not None:
            if reduce == "add":
                return self.scatter_add(dim, index, src if _is_tensor(src) else
                                        self._wrap(ops.const(float(src), tuple(index.shape))))
            raise NotImplementedError(f"scatter(reduce={reduce!r}): use scatter_reduce")
        summed, count = self._scatter_parts(dim, index, src)
        return summed.where(count > 0, self)

    def scatter_add(self, dim: int, index, src):
        """This tensor plus ``src`` added at ``index`` along ``dim`` (duplicates add)."""
        summed, _ = self._scatter_parts(dim, index, src)
        return self + summed

    def scatter_reduce(self, dim: int, index, src, reduce: str, *, include_self: bool = True):
        """``src`` reduced into this tensor at ``index`` along ``dim`` with ``reduce`` in
        ``"sum"``, ``"mean"`` (integer division is not applied: float32), ``"amax"``,
        ``"amin"``; ``include_self`` counts this tensor's value as one of the reduced.

        Raises:
            RuntimeError: another ``reduce`` (``"prod"`` is not supported).
        """
        if reduce in ("sum", "mean"):
            summed, count = self._scatter_parts(dim, index, src)
            base = self if include_self else self.where(count == 0, 0.0)
            total = base + summed
            if reduce == "sum":
                return total
            return total / (count + float(include_self)).where(count > 0, 1.0)
        if reduce in ("amax", "amin"):
            return self._scatter_extreme(dim, index, src, reduce == "amax", include_self)
        raise RuntimeError(f"scatter_reduce: reduce must be 'sum', 'mean', 'amax' or 'amin', "
                           f"got {reduce!r}")

    def _scatter_extreme(self, dim, index, src, is_max: bool, include_self: bool):
        """One-hot form: for each position ``t`` of ``dim`` and each other position, the
        extreme of the ``src`` values whose index is ``t`` (and of this tensor's value),
        ties sharing the gradient evenly as PyTorch's."""
        d = self._dim(dim)
        index = index if _is_tensor(index) else self._const(np.asarray(index, np.int32))
        sub = tuple(slice(0, n) if i != d else slice(None) for i, n in enumerate(index.shape))
        src = src[tuple(slice(0, n) for n in index.shape)]
        x = self[sub]                                     # the box the index covers
        n = self.shape[d]
        s = src if is_max else -src
        xv = x if is_max else -x
        with no_grad():
            shape = [1] * (index.ndim + 1)
            shape[d] = n
            pos = self._const(np.arange(n, dtype=np.float32).reshape(shape))
            hit = index.float().unsqueeze(d) == pos        # [.., n, J, ..]: index j hits t
            any_hit = hit.float().sum(d + 1) > 0
        cand = s.unsqueeze(d).where(hit, -np.inf)          # [.., n, J, ..]
        if include_self:
            cand = cand.cat(xv.unsqueeze(d + 1), dim=d + 1)
        best = cand.amax(d + 1)
        best = best if is_max else -best
        out = best.where(any_hit, x)
        if x.shape == self.shape:
            return out
        pads = [(0, a - b) for a, b in zip(self.shape, out.shape)]
        placed = self._wrap(ops.pad(out.node, pads))
        inside = self._wrap(ops.pad(ops.const(1.0, out.shape), pads))
        return placed.where(inside > 0, self)

    def index_add(self, dim: int, index, source, *, alpha: float = 1.0):
        """This tensor plus ``alpha * source`` added at the slices ``index`` (1-D) of ``dim``
        (duplicates add): a ``SCATTER_ADD`` of rows after moving ``dim`` first."""
        d = self._dim(dim)
        index = index if _is_tensor(index) else self._const(np.asarray(index, np.int32))
        if index.ndim > 1:
            raise IndexError("index_add_(): Index is supposed to be a vector")
        x = self.movedim(d, 0) if self.ndim else self.reshape(1)
        s = source.movedim(d, 0) if source.ndim else source.reshape(1)
        if alpha != 1:
            s = s * alpha
        added = self._wrap(ops.scatter_add(s.node, index.reshape(-1).node, x.shape[0]))
        out = x + added
        return out.movedim(0, d) if self.ndim else out.reshape(())

    def masked_fill(self, mask, value):
        """``value`` where ``mask`` is nonzero (broadcast), this tensor elsewhere."""
        return self._wrap(ops.where(self._lift(mask), ops.cast(self._lift(value), self.dtype),
                                    self.node))

    def index_fill(self, dim: int, index, value):
        """A copy with every slice ``index`` (a 0-d or 1-D integer tensor; negative counts
        from the end) of dim ``dim`` set to ``value`` (a number, or a 0-d tensor, which
        gets the sum of the gradient of the filled elements), as ``torch.index_fill``:
        one ``where`` of a mask of the dim (``index`` compared with each position).

        Raises:
            IndexError: a non-integer ``index``; an index out of range when its values are
                known while tracing (a traced index out of range fills nothing); ``dim``
                out of range.
            RuntimeError: ``index`` of rank > 1; ``value`` a tensor of rank > 0.
            TypeError: ``index`` not a tensor (PyTorch's too).
        """
        d = self._dim(dim)
        if not _is_tensor(index):
            raise TypeError(f"index_fill(): index must be a Tensor, got {type(index).__name__}")
        if index.dtype not in ("int32", "int64"):
            raise IndexError(f"index_fill_(): Expected dtype int64 for index, got {index.dtype}")
        if index.ndim > 1:
            raise RuntimeError(f"index_fill(): Index has to be a vector/scalar, got shape "
                               f"{list(index.shape)} (traced at {user_site()})")
        if _is_tensor(value) and value.ndim:
            raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but "
                               f"got tensor with {value.ndim} dimension(s).")
        n = self.shape[d] if self.ndim else 1
        known = known_values(index)
        if known is not None and ((known < -n) | (known >= n)).any():
            bad = int(known[(known < -n) | (known >= n)].reshape(-1)[0])
            raise IndexError(f"index_fill(): index {bad} is out of bounds for dimension {d} "
                             f"with size {n} (input shape {list(self.shape)})")
        shape = [1] * self.ndim
        if self.ndim:
            shape[d] = n
        with no_grad():
            f = index.float().reshape(-1, 1)
            f = (f + float(n)).where(f < 0, f)
            pos = self._const(np.arange(n, dtype=np.float32).reshape(1, n))
            hit = ((f == pos).float().sum(0) > 0).reshape(shape)
        return self.masked_fill(hit, value)

    def index_fill_(self, dim: int, index, value):
        """In-place :meth:`index_fill`."""
        return self._set_promoted(self.index_fill(dim, index, value))

    def masked_scatter(self, mask, source):
        """A copy with the elements where ``mask`` (bool, broadcast with this tensor) is
        true taken from ``source`` in order (row-major; ``torch.masked_scatter``): the
        running count of the mask (``cumsum``) picks each one with a ``GATHER``, so the
        gradient of ``source`` is the upstream gradient at the masked positions, in order.

        Raises:
            RuntimeError: a non-bool mask; ``source`` of another dtype; fewer ``source``
                elements than true mask elements when the mask is known while tracing (a
                traced mask asking for more stops the run: ``IndexError``);
                ``ShapeError`` (a ``RuntimeError``): shapes that do not broadcast.
        """
        m = mask if _is_tensor(mask) else self._const(np.asarray(mask))
        src = source if _is_tensor(source) else self._wrap(self._lift(source))
        if m.dtype != "bool":
            raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask "
                               f"with dtype {m.dtype}")
        if src.dtype != self.dtype:
            raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes "
                               f"but got {self.dtype} and {src.dtype}")
        shape = ops.broadcast_shape("masked_scatter", self.shape, m.shape)
        known = known_values(m)
        need = int(np.broadcast_to(known, shape).sum()) if known is not None else 0
        if need > src.numel():
            raise RuntimeError(f"masked_scatter: Number of elements of source < number of "
                               f"ones in mask ({src.numel()} < {need}; shapes "
                               f"{list(self.shape)}, {list(m.shape)}, {list(src.shape)})")
        x, m = self.broadcast_to(shape), m.broadcast_to(shape)
        if src.numel() == 0:        # one unused element: a true mask element still stops
            src = src._wrap(ops.const(0, (1,), src.dtype))          # the run (index 1)
        with no_grad():
            flat = m.reshape(-1).float()
            at = (flat.cumsum(0) - 1.0).where(flat > 0, 0.0).int()
        picked = src.reshape(-1)._gather_flat(at).reshape(shape)
        return picked.where(m, x)

    def masked_scatter_(self, mask, source):
        """In-place :meth:`masked_scatter` (``mask`` must broadcast to this shape)."""
        return self._set_promoted(self.masked_scatter(mask, source))

    # -- flat reads, slice and index writes -------------------------------------------------
    def take(self, index):
        """Elements at the flat (row-major) positions ``index`` (an integer tensor of any
        shape, the result's), negative ones counted from the end (``torch.take``).

        Raises:
            RuntimeError: a non-integer index.
            IndexError: an index out of range: while tracing when its values are known
                (data), else when the program runs (the ``GATHER`` stops it).
        """
        index = index if _is_tensor(index) else self._const(np.asarray(index, np.int32))
        if index.dtype not in ("int32", "int64"):
            raise RuntimeError(f"take(): Expected a long tensor for index, but got "
                               f"{index.dtype}")
        n = self.numel()
        known = known_values(index)
        if known is not None and ((known < -n) | (known >= n)).any():
            bad = int(known[(known < -n) | (known >= n)].reshape(-1)[0])
            raise IndexError(f"out of range: tried to access index {bad} on a tensor of {n} "
                             f"elements.")
        return self.reshape(-1)._take_rows(index)

    def _index_arg(self, name: str, dim: int, index):
        """(dim, 1-D int tensor) of an ``index_*`` op after PyTorch's checks; indices known
        while tracing must lie in ``[0, n)`` (``IndexError``), traced ones out of range are
        mapped to ``n`` so that the ``SCATTER_ADD`` stops the run."""
        d = self._dim(dim)
        if not _is_tensor(index):
            raise TypeError(f"{name}(): index must be a Tensor, got {type(index).__name__}")
        if index.dtype not in ("int32", "int64"):
            raise IndexError(f"{name}(): Expected a long tensor for index, but got "
                             f"{index.dtype}")
        if index.ndim > 1:
            raise IndexError(f"{name}(): Index should have dimension 1 or 0 (got "
                             f"{index.ndim})")
        n = self.shape[d] if self.ndim else 1
        known = known_values(index)
        if known is not None and ((known < 0) | (known >= n)).any():
            bad = int(known[(known < 0) | (known >= n)].reshape(-1)[0])
            raise IndexError(f"{name}(): index {bad} is out of bounds for dimension {d} with "
                             f"size {n}")
        idx = index.reshape(-1)
        if known is None:
            with no_grad():
                f = idx.float()
                idx = self._wrap(ops.const(float(n), ())).where(
                    (f < 0).float() + (f >= n).float() > 0, f).int()
        return d, idx

    def index_copy(self, dim: int, index, source):
        """A copy with the slices ``index`` (1-D, in ``[0, n)``) of dim ``dim`` replaced by
        the slices of ``source`` (``torch.index_copy``): ``source`` rows placed by a
        ``SCATTER_ADD``, taken where an index hit. Gradients: ``source`` gets the upstream
        gradient at its rows, ``self`` where no index hit. A duplicate index adds its rows
        (PyTorch leaves the result unspecified).

        Raises:
            RuntimeError: ``source`` of another dtype or shape (this tensor's, with
                ``len(index)`` at ``dim``).
            IndexError: a non-integer index of rank > 1, or out of range (while tracing
                when known; when the program runs otherwise).
        """
        d, idx = self._index_arg("index_copy_", dim, index)
        if not _is_tensor(source) or source.dtype != self.dtype:
            raise RuntimeError(f"index_copy_(): self and source expected to have the same "
                               f"dtype, but got (self) {self.dtype} and (source) "
                               f"{getattr(source, 'dtype', type(source).__name__)}")
        want = list(self.shape)
        if self.ndim:
            want[d] = idx.shape[0]
        fits = list(source.shape) == want if self.ndim else \
            source.numel() == idx.shape[0] == 1
        if not fits:
            raise RuntimeError(f"index_copy_(): source of shape {list(source.shape)} does not "
                               f"fit self of shape {list(self.shape)} with {idx.shape[0]} "
                               f"indices along dim {d} (expected {want})")
        x = self.movedim(d, 0) if self.ndim else self.reshape(1)
        src = source.movedim(d, 0) if self.ndim else source.reshape(1)
        n = x.shape[0]
        placed = self._wrap(ops.scatter_add(src.node, idx.node, n))
        with no_grad():
            ones = ops.const(1.0, (idx.shape[0],))
            hit = self._wrap(ops.scatter_add(ones, idx.node, n)) > 0
        out = placed.where(hit.reshape((n,) + (1,) * (x.ndim - 1)), x)
        return out.movedim(0, d) if self.ndim else out.reshape(())

    def index_copy_(self, dim: int, index, source):
        """In-place :meth:`index_copy`."""
        return self._set_promoted(self.index_copy(dim, index, source))

    def index_put(self, indices, values, accumulate: bool = False):
        """A copy with ``values`` (broadcast) written at ``self[indices]``, ``indices`` a
        tuple of index tensors as ``x[i0, i1, ...]`` reads them (integer tensors, or a bool
        mask whose values are known while tracing), as ``torch.index_put``; with
        ``accumulate`` the values are added, duplicates included. One traced bool mask
        with a single value is a ``where`` (a fixed shape). A duplicate index without
        ``accumulate`` adds its values (PyTorch leaves the result unspecified).

        Raises:
            TypeError: ``indices`` not a tuple or list.
            RuntimeError: ``values`` of another dtype (PyTorch's error); a traced bool mask
                with more than one value (which elements it writes depends on its values).
            IndexError: too many indices, or out of range (see ``x[key]``).
        """
        if not isinstance(indices, (tuple, list)):
            raise TypeError(f"index_put(): argument 'indices' must be tuple of Tensors, not "
                            f"{type(indices).__name__}")
        v = values if _is_tensor(values) else self._wrap(self._lift(values))
        if _is_tensor(values) and values.dtype != self.dtype:
            raise RuntimeError(f"Index put requires the source and destination dtypes match, "
                               f"got {self.dtype} for the destination and {values.dtype} for "
                               f"the source.")
        key = []
        for k in indices:
            if k is None:
                key.append(slice(None))
            elif _is_tensor(k) and k.dtype == "bool":
                known = known_values(k)
                if known is None:
                    return self._put_traced_mask(indices, k, v, accumulate)
                key.extend(np.nonzero(known))
            else:
                key.append(k)
        key = tuple(key)
        if not accumulate:
            return self._put(key, v)
        grid = self._const(np.arange(self.numel(), dtype=np.float32).reshape(self.shape))
        flat = grid[key].int()
        vals = v.to(self.dtype).broadcast_to(flat.shape).reshape(-1)
        added = self._wrap(ops.scatter_add(vals.node, flat.reshape(-1).node, self.numel()))
        return self + added.reshape(self.shape)

    def _put_traced_mask(self, indices, mask, v, accumulate: bool):
        """``index_put`` with one traced bool mask over the leading dims and one value."""
        if len(indices) != 1 or v.numel() != 1 or mask.ndim > self.ndim or \
                tuple(mask.shape) != tuple(self.shape[:mask.ndim]):
            raise RuntimeError(f"index_put(): a traced bool mask (shape {list(mask.shape)}, "
                               f"traced at {user_site()}) selects a number of elements that "
                               f"depends on its values, which an ahead-of-time compiled "
                               f"program cannot have; here it works alone, over the leading "
                               f"dims, with one value (a where): use masked_fill/where or "
                               f"masked_scatter")
        m = mask.reshape(tuple(mask.shape) + (1,) * (self.ndim - mask.ndim))
        val = v.reshape(()).to(self.dtype)
        return (self + val.where(m, 0)) if accumulate else val.where(m, self)

    def index_put_(self, indices, values, accumulate: bool = False):
        """In-place :meth:`index_put`."""
        return self._set_promoted(self.index_put(indices, values, accumulate))

    def _scatter_into(self, name: str, key, src):
        """A copy with the basic-index view ``self[key]`` replaced by ``src``, whose shape
        must be the view's (``select_scatter``, ``slice_scatter``)."""
        view = self[key]
        s = src if _is_tensor(src) else self._wrap(self._lift(src))
        if tuple(s.shape) != tuple(view.shape):
            raise RuntimeError(f"{name}: expected src to have a size equal to the slice of "
                               f"self. src size = {list(s.shape)}, slice size = "
                               f"{list(view.shape)}")
        return self._put(key, s.to(self.dtype))

    def select_scatter(self, src, dim: int, index: int):
        """A copy with ``self.select(dim, index)`` replaced by ``src`` (of that shape)."""
        self.select(dim, index)                                   # its checks
        return self._scatter_into("select_scatter", (slice(None),) * self._dim(dim) +
                                  (int(index),), src)

    def slice_scatter(self, src, dim: int = 0, start=None, end=None, step: int = 1):
        """A copy with ``self[..., start:end:step, ...]`` (along ``dim``) replaced by
        ``src`` (of that shape)."""
        return self._scatter_into("slice_scatter", (slice(None),) * self._dim(dim) +
                                  (slice(start, end, step),), src)

    def diagonal_scatter(self, src, offset: int = 0, dim1: int = 0, dim2: int = 1):
        """A copy with ``self.diagonal(offset, dim1, dim2)`` replaced by ``src`` (of that
        shape): ``src`` placed on the flattened matrices with step ``m + 1`` (the inverse
        placement of :meth:`diagonal`) and selected by a ``where``."""
        diag = self.diagonal(offset, dim1, dim2)
        s = src if _is_tensor(src) else self._wrap(self._lift(src))
        if tuple(s.shape) != tuple(diag.shape):
            raise RuntimeError(f"diagonal_scatter: expected src to have a size equal to the "
                               f"slice of self. src size = {list(s.shape)}, slice size = "
                               f"{list(diag.shape)}")
        a, b = self._dim(dim1), self._dim(dim2)
        x = self.movedim((a, b), (-2, -1))
        n, m = x.shape[-2:]
        k = diag.shape[-1]
        if k == 0:
            return self.clone()
        lead = x.shape[:-2]
        flat = x.reshape(*lead, n * m)
        start = offset if offset >= 0 else -offset * m
        spec = tuple((0, dd, 1) for dd in lead) + ((start, start + (m + 1) * k, m + 1),)
        placed = ops.unslice(s.to(self.dtype).node, spec, flat.shape)
        inside = ops.unslice(ops.const(True, s.shape, "bool"), spec, flat.shape)
        out = self._wrap(ops.where(inside, placed, flat.node)).reshape(x.shape)
        return out.movedim((-2, -1), (a, b))

    def fill_diagonal_(self, fill_value, wrap: bool = False):
        """The main diagonal set to ``fill_value`` in place (``torch.fill_diagonal_``): of a
        2-D tensor (``min(rows, cols)`` elements; with ``wrap``, a tall matrix continues
        the diagonal every ``cols + 1`` rows, as PyTorch's storage walk does) or of an N-D
        tensor whose dims are all equal (``x[i, i, ..., i]``).

        Raises:
            RuntimeError: rank < 2, or an N-D tensor with unequal dims.
        """
        if self.ndim < 2:
            raise RuntimeError("dimensions must larger than 1")
        if self.ndim > 2 and len(set(self.shape)) != 1:
            raise RuntimeError("all dimensions of input must be of equal length")
        h, w = self.shape[:2]
        step = sum(int(np.prod(self.shape[i + 1:], dtype=np.int64)) for i in range(self.ndim))
        count = min(h, w)
        if wrap and self.ndim == 2 and h > w + 1:
            count = -(-self.numel() // step)
        mask = np.zeros(self.numel(), bool)
        mask[np.arange(count) * step] = True
        return self._set(self.masked_fill(self._const(mask.reshape(self.shape)),
                                          fill_value).node)

    def _put(self, key, value):
        """This tensor's value with ``[key]`` replaced by ``value`` (out of place)."""
        out = self._wrap(self.node)
        out[key] = value
        return out

    def __setitem__(self, key, value):
        """``x[key] = value`` (see the module docstring: out of place for traced tensors)."""
        v = value if _is_tensor(value) else self._wrap(self._lift(value))
        if _is_tensor(key) and key.dtype in ("int32", "int64"):
            key = (key,)
        ekey = _expand_key(key, self.ndim)
        if not any(_is_adv(k) for k in ekey):
            spec, out = _basic(self.shape, ekey)
            norm = ops.norm_slice(spec, self.shape)
            region = tuple(len(range(a, b, s)) for a, b, s in norm)
            vb = ops.reshape(ops.expand(v.node, out), region)
            placed = ops.unslice(vb, norm, self.shape)
            inside = ops.unslice(ops.const(True, region, "bool"), norm, self.shape)
            new = self._wrap(ops.where(inside, placed, self.node))
        else:
            if any(_is_tensor(k) for k in ekey):
                grid = self._const(np.arange(self.numel(), dtype=np.float32).reshape(self.shape))
                g, rest = grid._split_key(ekey)
                flat = g._advanced(rest).int()
            else:
                g = np.arange(self.numel(), dtype=np.int64).reshape(self.shape)
                basic = tuple(slice(None) if _is_adv(k) else k for k in ekey)
                rest = tuple(k if _is_adv(k) else slice(None) for k in ekey
                             if not isinstance(k, numbers.Integral))
                flat = self._const(g[basic][rest].astype(np.int32))
            vals = v.broadcast_to(flat.shape).reshape(-1)
            f = flat.reshape(-1)
            n = self.numel()
            summed = self._wrap(ops.scatter_add(vals.node, f.node, n)).reshape(self.shape)
            with no_grad():
                ones = ops.const(1.0, f.shape)
                count = self._wrap(ops.scatter_add(ones, f.node, n)).reshape(self.shape)
            new = summed.where(count > 0, self)
        self._set(ops.cast(new.node, self.dtype) if new.dtype != self.dtype else new.node)
