"""Movement: views of a tensor (reshape, permute, expand, slice, flip, concatenation).

Every op here is index arithmetic: lowering turns it into an access expression over the
producer's buffer, never a copy (a strided slice is ``start + step*i``, a diagonal a slice
of the flattened matrix with step ``n + 1``, a repeat an expand between reshapes).
"""
from __future__ import annotations

import numbers
import operator

from ...errors import DimError, ShapeError
from .. import ops
from ..trace import TRACER, user_site
from .creation import shape_args
from .dims import norm_dim, norm_dims


def _ints(args) -> tuple[int, ...]:
    """``f(0, 1)``, ``f((0, 1))``, ``f([0, 1])`` and ``f(0)`` all give ``(0, 1)`` / ``(0,)``."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    return tuple(int(a) for a in args)


def _at_least_1d(x, op: str, why: str) -> None:
    """Raise PyTorch's error for ``op`` of a 0-d tensor (a :class:`ShapeError`: a
    ``RuntimeError`` naming the op, the shape and the user's ``file:line``)."""
    if x.ndim == 0:
        raise ShapeError(op, [x.shape], user_site(), why)


class MovementMixin:
    def _dim(self, d) -> int:
        return norm_dim(d, self.ndim, self.shape)

    # -- shape ---------------------------------------------------------------------------
    def _view(self, out, back):
        """``out`` marked as a view of this tensor (``Tensor._viewed``), ``back(b, v)``
        giving ``b`` (this tensor's value in the shape ``out`` was taken from) with the
        viewed part replaced by ``v``. Shape changes of this tensor in place since then
        (``t_()``, ``unsqueeze_()``...) are undone for ``back`` and redone after."""
        stamp = len(self.__dict__.get("_relayouts", ()))

        def write(v):
            later = self.__dict__.get("_relayouts", [])[stamp:]
            b = self
            for _, undo in reversed(later):
                b = undo(b)
            new = back(b, v)
            for redo, _ in later:
                new = redo(new)
            return new
        return self._viewed(out, write)

    def reshape(self, *shape):
        """The same elements in row-major order viewed as ``shape`` (one entry may be -1).
        Not a view for in-place updates: PyTorch's ``reshape`` is one only for a
        contiguous tensor, and tensors here carry no strides to tell (:meth:`view` is)."""
        return self._wrap(ops.reshape(self.node, shape_args(shape)))

    def view(self, *shape):
        """:meth:`reshape` as a view: an in-place update of the result reaches this tensor."""
        return self._reshaped_view(self.reshape(*shape))

    def _reshaped_view(self, out):
        return self._view(out, lambda b, v: v.reshape(b.shape))

    def view_as(self, other):
        return self.view(other.shape)

    def reshape_as(self, other):
        return self.reshape(other.shape)

    def flatten(self, start_dim: int = 0, end_dim: int = -1):
        """Dims ``start_dim..end_dim`` (inclusive) merged into one; a 0-d tensor becomes 1-D."""
        if self.ndim == 0:
            return self.reshape(1)
        a, b = self._dim(start_dim), self._dim(end_dim)
        if a > b:
            raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
        s = self.shape
        n = 1
        for d in s[a:b + 1]:
            n *= d
        return self.reshape(*s[:a], n, *s[b + 1:])

    def unflatten(self, dim: int, sizes):
        """Dim ``dim`` split into ``sizes`` (one entry may be -1).

        Raises:
            ShapeError: a 0-d tensor, or ``sizes`` not multiplying to the dim's size (a
                ``RuntimeError``, as in PyTorch).
            DimError: ``dim`` out of range."""
        _at_least_1d(self, "unflatten", f"Dimension specified as {dim} but tensor has no "
                     "dimensions")
        d = self._dim(dim)
        sizes = [int(x) for x in sizes]
        if -1 in sizes:
            known = 1
            for x in sizes:
                known *= x if x != -1 else 1
            sizes[sizes.index(-1)] = self.shape[d] // known if known else 0
        n = 1
        for x in sizes:
            n *= x
        if n != self.shape[d]:
            raise ShapeError("unflatten", [self.shape, sizes], user_site(),
                             f"sizes multiply to {n}, dim {d} has {self.shape[d]}")
        return self._reshaped_view(self.reshape(*self.shape[:d], *sizes, *self.shape[d + 1:]))

    def permute(self, *dims):
        """Dims reordered: result dim ``i`` is dim ``dims[i]``."""
        dims = _ints(dims)
        if len(dims) != self.ndim:
            raise RuntimeError(f"permute(): number of dims {len(dims)} does not match the "
                               f"tensor's {self.ndim}")
        perm = [self._dim(d) for d in dims]
        if len(set(perm)) != len(perm):
            raise RuntimeError("permute(): duplicate dims are not allowed.")
        inverse = [perm.index(i) for i in range(len(perm))]
        return self._view(self._wrap(ops.permute(self.node, perm)),
                          lambda b, v: v.permute(*inverse))

    def transpose(self, dim0: int, dim1: int):
        """Dims ``dim0`` and ``dim1`` swapped."""
        perm = list(range(self.ndim))
        a, b = self._dim(dim0), self._dim(dim1)
        if self.ndim == 0:
            return self
        perm[a], perm[b] = perm[b], perm[a]
        return self.permute(*perm)

    swapaxes = swapdims = transpose

    def movedim(self, source, destination):
        """Dims ``source`` moved to positions ``destination`` (ints or sequences), the
        other dims keeping their order."""
        src = [source] if isinstance(source, numbers.Integral) else list(source)
        dst = [destination] if isinstance(destination, numbers.Integral) else list(destination)
        if len(src) != len(dst):
            raise RuntimeError("movedim: source and destination must have the same length")
        src = [self._dim(d) for d in src]
        dst = [self._dim(d) for d in dst]
        if len(set(src)) != len(src) or len(set(dst)) != len(dst):
            raise RuntimeError("movedim: repeated dim")
        if self.ndim == 0:          # dims -1 and 0 of a 0-d tensor: itself, as in PyTorch
            return self
        perm = [None] * self.ndim
        for s, d in zip(src, dst):
            perm[d] = s
        rest = iter(d for d in range(self.ndim) if d not in src)
        perm = [p if p is not None else next(rest) for p in perm]
        return self.permute(*perm) if self.ndim else self

    moveaxis = movedim

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim))) if self.ndim else self

    @property
    def mT(self):
        return self.transpose(-2, -1)

    def t(self):
        """Transpose of a tensor of at most 2 dims (``torch.t``)."""
        if self.ndim > 2:
            raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                               f"{self.ndim}D")
        return self.T

    def broadcast_to(self, *shape):
        """Size-1 dims grown and leading dims added to reach ``shape`` (-1 keeps a size)."""
        return self._wrap(ops.expand(self.node, shape_args(shape)))

    expand = broadcast_to

    def expand_as(self, other):
        return self.broadcast_to(other.shape)

    def unsqueeze(self, dim: int):
        """A size-1 dim inserted at ``dim`` (in ``[-ndim-1, ndim]``)."""
        d = norm_dim(dim, self.ndim + 1)
        s = list(self.shape)
        s.insert(d, 1)
        return self._reshaped_view(self.reshape(*s))

    def squeeze(self, dim=None):
        """Size-1 dims removed (all, or those of ``dim``, an int or tuple: a listed dim whose
        size is not 1 stays, as in PyTorch)."""
        if dim is None:
            dims = range(self.ndim)
        elif isinstance(dim, (tuple, list)) and not dim:
            dims = ()
        else:
            dims = norm_dims(dim, self.ndim, self.shape)
        return self._reshaped_view(
            self.reshape(*[d for i, d in enumerate(self.shape) if not (i in dims and d == 1)]))

    # -- in-place shape changes ------------------------------------------------------------
    def _relayout_(self, name: str, redo, undo):
        """This tensor becomes ``redo(self)`` (another shape; ``undo`` maps it back), as
        PyTorch's in-place view ops: a view of another tensor stays one, and views taken
        from this tensor before still write back where they viewed.

        Raises:
            RuntimeError: a tensor made from data (a variable: its shape is fixed here).
        """
        if self._var is not None:
            raise RuntimeError(f"{name}(): autodiff cannot change the shape of a tensor made "
                               f"from data (shape {list(self.shape)}) in place; use "
                               f"x = x.{name[:-1]}(...) (traced at {user_site()})")
        new = redo(self)
        self._node, self._scope = new.node, TRACER.scope
        self._generation, self.requires_grad = TRACER.generation, new.requires_grad
        self.__dict__.setdefault("_relayouts", []).append((redo, undo))
        view = self.__dict__.get("_view_of")
        if view is not None:
            base, back = view
            self.__dict__["_view_of"] = (base, lambda v: back(undo(v)))
        return self

    def t_(self):
        """In-place :meth:`t` (traced tensors only, see :meth:`_relayout_`)."""
        self.t()                                            # its checks
        return self._relayout_("t_", lambda x: x.t(), lambda x: x.t())

    def transpose_(self, dim0: int, dim1: int):
        """In-place :meth:`transpose` (traced tensors only, see :meth:`_relayout_`)."""
        a, b = self._dim(dim0), self._dim(dim1)
        swap = lambda x: x.transpose(a, b)                  # noqa: E731
        return self._relayout_("transpose_", swap, swap)

    swapaxes_ = swapdims_ = transpose_

    def unsqueeze_(self, dim: int):
        """In-place :meth:`unsqueeze` (traced tensors only, see :meth:`_relayout_`)."""
        shape, d = self.shape, norm_dim(dim, self.ndim + 1)
        return self._relayout_("unsqueeze_", lambda x: x.unsqueeze(d),
                               lambda x: x.reshape(shape))

    def squeeze_(self, dim=None):
        """In-place :meth:`squeeze` (traced tensors only, see :meth:`_relayout_`)."""
        shape, out = self.shape, self.squeeze(dim).shape
        return self._relayout_("squeeze_", lambda x: x.reshape(out),
                               lambda x: x.reshape(shape))

    def contiguous(self):
        return self

    def clone(self, *, memory_format=None):
        """A copy: the same value, not a view (an in-place update of it leaves this tensor
        alone); the gradient flows through it as in PyTorch."""
        return self._wrap(self.node)

    def diff(self, n: int = 1, dim: int = -1, prepend=None, append=None):
        """``x[i + 1] - x[i]`` along ``dim``, ``n`` times, after ``prepend``/``append`` are
        concatenated along it (``torch.diff``).

        Raises:
            ShapeError: a 0-d tensor (a ``RuntimeError``, as in PyTorch).
            DimError: ``dim`` out of range."""
        _at_least_1d(self, "diff", "diff expects input to be at least one-dimensional")
        d = self._dim(dim)
        x = self
        if prepend is not None or append is not None:
            parts = [p if hasattr(p, "node") else self._wrap(self._lift(p))
                     for p in (prepend, self, append) if p is not None]
            x = parts[0].cat(*parts[1:], dim=d)
        for _ in range(n):
            m = x.shape[d]
            x = x.narrow(d, 1, m - 1) - x.narrow(d, 0, m - 1) if m > 0 else x
        return x

    # -- slicing -------------------------------------------------------------------------
    def _slice_dim(self, dim: int, start, stop, step: int = 1):
        spec = [(None, None, 1)] * self.ndim
        spec[self._dim(dim)] = (start, stop, step)
        return self._wrap(ops.slice_(self.node, spec))

    def index(self, dim: int, start: int, stop: int):
        """Elements ``start:stop`` of dim ``dim`` (the original project's ``index``)."""
        return self._slice_dim(dim, start, stop)

    def select(self, dim: int, index: int):
        """The slice ``index`` of dim ``dim``, without that dim (``x[..., index, ...]``, a
        view; ``index`` may be negative).

        Raises:
            IndexError: a 0-d tensor, or ``index`` out of range.
        """
        if self.ndim == 0:
            raise IndexError("select() cannot be applied to a 0-dim tensor.")
        d = self._dim(dim)
        i, n = operator.index(index), self.shape[d]
        if not -n <= i < n:
            raise IndexError(f"select(): index {i} out of range for tensor of size "
                             f"{list(self.shape)} at dimension {d}")
        return self[(slice(None),) * d + (i,)]

    def ravel(self):
        """The elements as a 1-D tensor, row-major (``reshape(-1)``; not a view, as
        :meth:`reshape`)."""
        return self.reshape(-1)

    def rot90(self, k: int = 1, dims=(0, 1)):
        """Rotated by ``k`` quarter turns in the plane of ``dims``, from the first dim
        toward the second (``torch.rot90``): flips and a transpose (views).

        Raises:
            RuntimeError: ``dims`` not two different dims, or a tensor of rank < 2.
        """
        dims = tuple(dims)
        if len(dims) != 2:
            raise RuntimeError(f"expected total rotation dims == 2, but got dims = {len(dims)}")
        if self.ndim < 2:
            raise RuntimeError(f"expected total dims >= 2, but got total dims = {self.ndim}")
        a, b = self._dim(dims[0]), self._dim(dims[1])
        if a == b:
            raise RuntimeError(f"expected rotation dims to be different, but got dim0 = {a} "
                               f"and dim1 = {b}")
        k %= 4
        if k == 1:
            return self.flip(b).transpose(a, b)
        if k == 2:
            return self.flip(a, b)
        if k == 3:
            return self.flip(a).transpose(a, b)
        return self.clone()

    def narrow(self, dim: int, start: int, length: int):
        """Elements ``start .. start+length-1`` of dim ``dim`` (``start`` may be negative).

        Raises:
            ShapeError: a 0-d tensor (a ``RuntimeError``, as in PyTorch).
            IndexError: ``dim`` or ``start`` out of range.
            RuntimeError: ``length`` negative or past the dim's end."""
        _at_least_1d(self, "narrow", "narrow() cannot be applied to a 0-dim tensor.")
        d = self._dim(dim)
        n = self.shape[d]
        if not -n <= start <= n:
            raise IndexError(f"narrow(): start {start} out of range for dim {d} of size {n}")
        start = start % n if n and start < 0 else start
        if length < 0 or start + length > n:
            raise RuntimeError(f"narrow(): start ({start}) + length ({length}) exceeds dimension "
                               f"size ({n})")
        key = (slice(None),) * d + (slice(start, start + length),)
        return self._view(self._slice_dim(d, start, start + length),
                          lambda b, v: b._put(key, v))

    def flip(self, *dims):
        """The order of elements reversed along each of ``dims`` (a view: ``n-1-i``)."""
        dims = norm_dims(_ints(dims), self.ndim) if _ints(dims) else ()
        spec = [(None, None, -1 if i in dims else 1) for i in range(self.ndim)]
        return self._wrap(ops.slice_(self.node, spec))

    def fliplr(self):
        return self.flip(1)

    def flipud(self):
        return self.flip(0)

    def roll(self, shifts, dims=None):
        """Elements shifted by ``shifts`` along ``dims``, wrapping around (two slices joined);
        ``dims=None`` rolls the flattened tensor.

        Raises:
            DimError: a dim out of range, or any dim of a 0-d tensor (an ``IndexError``, as
                in PyTorch).
            RuntimeError: ``shifts`` and ``dims`` of different lengths."""
        if dims is None:
            s = shifts if isinstance(shifts, numbers.Integral) else _only(shifts)
            return self.flatten().roll(s, 0).reshape(self.shape)
        shifts = (shifts,) if isinstance(shifts, numbers.Integral) else tuple(shifts)
        dims = (dims,) if isinstance(dims, numbers.Integral) else tuple(dims)
        if len(shifts) != len(dims):
            raise RuntimeError(f"roll: shifts ({len(shifts)}) and dims ({len(dims)}) differ in "
                               "length")
        if self.ndim == 0:          # PyTorch's IndexError (other ops let a 0-d take -1, 0)
            raise DimError("roll", [self.shape], user_site(),
                           f"Dimension specified as {dims[0]} but tensor has no dimensions")
        out = self
        for s, d in zip(shifts, dims):
            d = self._dim(d)
            n = self.shape[d]
            if n == 0 or s % n == 0:
                continue
            s %= n
            out = out._slice_dim(d, n - s, n).cat(out._slice_dim(d, 0, n - s), dim=d)
        return out

    # -- repetition ----------------------------------------------------------------------
    def repeat(self, *sizes):
        """The tensor tiled ``sizes[i]`` times along dim ``i`` (extra leading sizes add dims):
        ``[r, d]`` expanded and merged, element ``i`` of the result is ``i % d``."""
        sizes = _ints(sizes)
        if len(sizes) < self.ndim:
            raise RuntimeError("repeat(): number of repeat dims can not be smaller than the "
                               "number of tensor dims")
        x = self.reshape((1,) * (len(sizes) - self.ndim) + self.shape)
        inter, big, out = [], [], []
        for r, d in zip(sizes, x.shape):
            inter += [1, d]
            big += [r, d]
            out.append(r * d)
        return x.reshape(inter).expand(big).reshape(out)

    def tile(self, *dims):
        """``repeat`` with ``dims`` padded with leading 1s to the tensor's rank."""
        dims = _ints(dims)
        return self.repeat(*((1,) * (self.ndim - len(dims)) + dims))

    def repeat_interleave(self, repeats, dim=None, *, output_size=None):
        """Each element repeated ``repeats`` times along ``dim`` (flattened if None):
        an int (expand between reshapes) or one static count per element (an index
        gather with constant indices)."""
        x = self.flatten() if dim is None else self
        d = 0 if dim is None else x._dim(dim)
        if isinstance(repeats, numbers.Integral):
            r = int(repeats)
            s = x.shape
            return x.unsqueeze(d + 1).expand(*s[:d + 1], r, *s[d + 1:]) \
                .reshape(*s[:d], s[d] * r, *s[d + 1:])
        import numpy as np
        counts = np.asarray(repeats.numpy() if hasattr(repeats, "numpy") else repeats).reshape(-1)
        if counts.size == 1:
            return x.repeat_interleave(int(counts[0]), d)
        if counts.size != x.shape[d] or (counts < 0).any():
            raise RuntimeError(f"repeat_interleave: repeats must have the same size as input "
                               f"along dim ({x.shape[d]}), got {counts.size}")
        idx = np.repeat(np.arange(x.shape[d]), counts).astype(np.int32)
        return x.index_select(d, self._const(idx))

    # -- splitting and joining --------------------------------------------------------------
    def split(self, split_size_or_sections, dim: int = 0):
        """Pieces of ``split_size`` along ``dim`` (the last may be smaller), or of the listed
        sizes; a tuple of views.

        Raises:
            ShapeError: a 0-d tensor (a ``RuntimeError``, as in PyTorch).
            DimError: ``dim`` out of range.
            RuntimeError: a split size of 0 for a non-empty dim, sizes not summing to it."""
        _at_least_1d(self, "split", "split expects at least a 1-dimensional tensor")
        d = self._dim(dim)
        n = self.shape[d]
        if isinstance(split_size_or_sections, numbers.Integral):
            s = int(split_size_or_sections)
            if s <= 0 and n:
                raise RuntimeError(f"split_size can only be 0 if dimension size is 0, got {s}")
            sizes = [min(s, n - i) for i in range(0, n, s)] if s and n else [0]
        else:
            sizes = [int(x) for x in split_size_or_sections]
            if sum(sizes) != n:
                raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n}"
                                   f" (input tensor's size at dimension {d}), but got "
                                   f"split_sizes={sizes}")
        out, at = [], 0
        for s in sizes:
            out.append(self._slice_dim(d, at, at + s))
            at += s
        return tuple(out)

    def tensor_split(self, indices_or_sections, dim: int = 0):
        """Views along ``dim`` (``torch.tensor_split``): ``n`` sections (an int: the first
        ``size % n`` one longer), or the pieces between the listed indices (each piece
        ``x[start:stop]`` with Python's slice rules: negative and too large indices are
        allowed, pieces may be empty). A tensor argument is read as an int (0-d) or a list
        (1-D) and must be known while tracing (data).

        Raises:
            RuntimeError: ``n`` below 1; a 0-d tensor; a traced tensor argument (a
                piece's size would depend on its values); a tensor argument of another
                dtype or rank.
        """
        if self.ndim == 0:
            raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got "
                               "a tensor with 0 dims")
        d = self._dim(dim)
        n = self.shape[d]
        arg = indices_or_sections
        if hasattr(arg, "node"):
            from .scan import known_values
            if arg.dtype not in ("int32", "int64") or arg.ndim > 1:
                raise RuntimeError(f"tensor_split expected tensor_indices_or_sections to be a "
                                   f"zero-dimensional or one-dimensional tensor of dtype long, "
                                   f"but got a {arg.ndim}-D {arg.dtype} tensor")
            known = known_values(arg)
            if known is None:
                raise RuntimeError(f"tensor_split(): the indices are a traced tensor; the "
                                   f"pieces' sizes would depend on its values, and an "
                                   f"ahead-of-time compiled program needs static shapes "
                                   f"(pass a list of ints; traced at {user_site()})")
            arg = int(known) if known.ndim == 0 else [int(v) for v in known]
        if isinstance(arg, numbers.Integral):
            k = int(arg)
            if k <= 0:
                raise RuntimeError(f"number of sections must be larger than 0, got {k}")
            q, r = divmod(n, k)
            bounds, at = [], 0
            for i in range(k):
                bounds.append((at, at + q + (i < r)))
                at += q + (i < r)
        else:
            cuts = [int(v) for v in arg]
            bounds = list(zip([0] + cuts, cuts + [n]))
        out = []
        for a, b in bounds:
            a, b, _ = slice(a, b).indices(n)
            b = max(a, b)
            key = (slice(None),) * d + (slice(a, b),)
            out.append(self._view(self._slice_dim(d, a, b), (lambda key: lambda base, v:
                                                             base._put(key, v))(key)))
        return tuple(out)

    def chunk(self, chunks: int, dim: int = 0):
        """At most ``chunks`` pieces of ``ceil(n / chunks)`` along ``dim`` (``torch.chunk``).

        Raises:
            ShapeError: a 0-d tensor (a ``RuntimeError``, as in PyTorch).
            RuntimeError: ``chunks`` below 1.
            DimError: ``dim`` out of range."""
        _at_least_1d(self, "chunk", "chunk expects at least a 1-dimensional tensor")
        if chunks <= 0:
            raise RuntimeError("chunk expects `chunks` to be greater than 0")
        n = self.shape[self._dim(dim)]
        return self.split(max(-(-n // chunks), 1) if n else 1, dim) if n else \
            tuple(self._slice_dim(dim, 0, 0) for _ in range(chunks))

    def unbind(self, dim: int = 0):
        """The slices along ``dim``, each without that dim."""
        d = self._dim(dim)
        return tuple(p.squeeze(d) for p in self.split(1, d)) if self.shape[d] else ()

    def cat(self, *others, dim: int = 0):
        """``self`` and ``others`` joined along ``dim`` (``torch.cat``)."""
        xs = [self, *others]
        if any(x.ndim != 1 for x in xs):       # PyTorch skips 1-D empty tensors in cat
            xs = [x for x in xs if not (x.ndim == 1 and x.shape[0] == 0)] or xs[:1]
        return self._wrap(ops.concat([self._lift(x) for x in xs], dim))

    def stack(self, *others, dim: int = 0):
        """``self`` and ``others`` (one shape) joined along a new dim (``torch.stack``)."""
        shapes = {tuple(o.shape) for o in (self,) + others}
        if len(shapes) > 1:
            raise ShapeError("stack", [o.shape for o in (self,) + others], user_site(),
                             "stack expects each tensor to be equal size")
        d = norm_dim(dim, self.ndim + 1)
        return self.unsqueeze(d).cat(*[o.unsqueeze(d) for o in others], dim=d)

    # -- diagonals -------------------------------------------------------------------------
    def diagonal(self, offset: int = 0, dim1: int = 0, dim2: int = 1):
        """The diagonal ``offset`` of the matrices over ``dim1`` x ``dim2``, as the last dim:
        the flattened matrix sliced with step ``m + 1`` (a view)."""
        a, b = self._dim(dim1), self._dim(dim2)
        if a == b:
            raise RuntimeError("diagonal dimensions cannot be identical")
        x = self.movedim((a, b), (-2, -1))
        n, m = x.shape[-2], x.shape[-1]
        k = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
        start = offset if offset >= 0 else -offset * m
        flat = x.reshape(*x.shape[:-2], n * m)
        if k == 0:
            return flat._slice_dim(-1, 0, 0)
        return flat._slice_dim(-1, start, start + (m + 1) * (k - 1) + 1, m + 1)

    def diag_embed(self, offset: int = 0, dim1: int = -2, dim2: int = -1):
        """Matrices whose diagonal ``offset`` (over the new dims ``dim1``, ``dim2``) holds
        the last dim, zeros elsewhere: the inverse placement of :meth:`diagonal` (views)."""
        k = self.shape[-1] if self.ndim else 1
        x = self if self.ndim else self.reshape(1)
        n = k + abs(offset)
        start = offset if offset >= 0 else -offset * n
        spec = [(0, d, 1) for d in x.shape[:-1]] + [(start, start + (n + 1) * k, n + 1)]
        flat = self._wrap(ops.unslice(x.node, spec, x.shape[:-1] + (n * n,)))
        out = flat.reshape(*x.shape[:-1], n, n)
        nd = out.ndim
        a, b = norm_dim(dim1, nd), norm_dim(dim2, nd)
        if a == b:
            raise RuntimeError("diagonal dimensions cannot be identical")
        return out.movedim((nd - 2, nd - 1), (a, b))

    def diag(self, diagonal: int = 0):
        """A 1-D tensor as the ``diagonal`` of a square matrix, or the ``diagonal`` of a
        2-D tensor as a 1-D one (``torch.diag``)."""
        if self.ndim == 1:
            return self.diag_embed(diagonal)
        if self.ndim == 2:
            return self.diagonal(diagonal)
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {self.ndim}D")


def _only(seq) -> int:
    seq = tuple(seq)
    if len(seq) != 1:
        raise RuntimeError("roll: without dims, shifts must be a single int")
    return int(seq[0])
