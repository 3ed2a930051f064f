"""Node constructors with shape inference: the only place graph IR nodes are traced.

Every function takes and returns :class:`~autodiff.graph.ir.Node` objects, emits the new
node into the current scope of the tracer and raises :class:`autodiff.ShapeError` (naming
the op, the shapes and the user's ``file:line``) when shapes do not fit. Broadcasting is
made explicit here: elementwise nodes always get operands of one shape.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError
from .ir import BINARY, Node, Op, UNARY
from .trace import TRACER, user_site


def _emit(op: Op, srcs, shape, dtype="float32", arg=None) -> Node:
    rg = TRACER.grad_enabled and any(s.requires_grad for s in srcs)
    return TRACER.emit(Node(op, tuple(srcs), tuple(int(d) for d in shape), dtype, arg,
                            user_site(), rg))


def _norm_dim(d: int, ndim: int, op: str, shape) -> int:
    if not -ndim <= d < max(ndim, 1):
        raise ShapeError(op, [shape], user_site(), f"dim {d} out of range for rank {ndim}")
    return d % max(ndim, 1)


# -- leaves ---------------------------------------------------------------------------
def const(value, shape=(), dtype="float32") -> Node:
    """A constant ``value`` filled to ``shape``."""
    value = int(value) if dtype == "int32" else float(value)
    return _emit(Op.CONST, (), shape, dtype, value)


def rand(shape, seed: int, stream: int = 0) -> Node:
    """float32 uniform samples in ``[0, 1)`` of ``shape``, new in every loop iteration.

    A counter-based draw (Philox-4x32-10, :mod:`autodiff.graph.rng`) keyed by ``(seed,
    stream)`` and countered by the loop indices and the element index, so every device
    produces the same numbers. Never requires grad.

    Raises:
        ValueError: ``seed`` or ``stream`` is not in ``[0, 2**32)``.
    """
    seed, stream = int(seed), int(stream)
    if not (0 <= seed < 2 ** 32 and 0 <= stream < 2 ** 32):
        raise ValueError(f"rand: seed and stream must be in [0, 2**32), got {seed}, {stream}")
    return TRACER.emit(Node(Op.RAND, (), tuple(int(d) for d in shape), "float32",
                            (seed, stream), user_site()))


# -- movement -------------------------------------------------------------------------
def reshape(x: Node, shape) -> Node:
    """``x`` viewed as ``shape`` (one entry may be -1); sizes must agree."""
    shape = [int(d) for d in shape]
    if shape.count(-1) > 1:
        raise ShapeError("reshape", [x.shape, shape], user_site(), "more than one -1")
    known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
    if -1 in shape:
        if known == 0 or x.size % known:
            raise ShapeError("reshape", [x.shape, shape], user_site(), "sizes differ")
        shape[shape.index(-1)] = x.size // known
    if int(np.prod(shape, dtype=np.int64)) != x.size or any(d < 0 for d in shape):
        raise ShapeError("reshape", [x.shape, shape], user_site(), "sizes differ")
    if tuple(shape) == x.shape:
        return x
    return _emit(Op.RESHAPE, (x,), shape, x.dtype, tuple(shape))


def permute(x: Node, perm) -> Node:
    """Axes of ``x`` reordered: result dim ``i`` is ``x`` dim ``perm[i]``."""
    perm = tuple(_norm_dim(p, len(x.shape), "permute", x.shape) for p in perm)
    if sorted(perm) != list(range(len(x.shape))):
        raise ShapeError("permute", [x.shape], user_site(), f"bad permutation {perm}")
    if perm == tuple(range(len(perm))):
        return x
    return _emit(Op.PERMUTE, (x,), [x.shape[p] for p in perm], x.dtype, perm)


def expand(x: Node, shape) -> Node:
    """``x`` broadcast to ``shape`` (numpy rules: leading dims added, size-1 dims grow)."""
    shape = tuple(int(d) for d in shape)
    if len(shape) < len(x.shape):
        raise ShapeError("broadcast_to", [x.shape, shape], user_site(), "target has fewer dims")
    lead = len(shape) - len(x.shape)
    src = tuple(x.shape)
    shape = tuple(s if s != -1 else (src[i - lead] if i >= lead else 1)
                  for i, s in enumerate(shape))
    for i, d in enumerate(src):
        if d != 1 and d != shape[lead + i]:
            raise ShapeError("broadcast_to", [x.shape, shape], user_site())
    if lead:
        x = reshape(x, (1,) * lead + src)
    if tuple(shape) == x.shape:
        return x
    return _emit(Op.EXPAND, (x,), shape, x.dtype, shape)


def slice_(x: Node, spec) -> Node:
    """``x[start:stop]`` per dim; ``spec`` is a tuple of ``(start, stop, 1)`` (step 1 only)."""
    spec = tuple(spec)
    if len(spec) != len(x.shape):
        raise ShapeError("slice", [x.shape], user_site(), "one (start, stop, step) per dim")
    out, norm = [], []
    for (a, b, step), d in zip(spec, x.shape):
        if step != 1:
            raise ShapeError("slice", [x.shape], user_site(), f"step {step} is not supported")
        a, b, _ = slice(a, b).indices(d)
        b = max(a, b)
        norm.append((a, b, 1))
        out.append(b - a)
    if all(n == (0, d, 1) for n, d in zip(norm, x.shape)):
        return x
    return _emit(Op.SLICE, (x,), out, x.dtype, tuple(norm))


def pad(x: Node, pads) -> Node:
    """``x`` with ``(before, after)`` zeros added on each dim."""
    pads = tuple((int(a), int(b)) for a, b in pads)
    if len(pads) != len(x.shape) or any(a < 0 or b < 0 for a, b in pads):
        raise ShapeError("pad", [x.shape], user_site(), f"bad padding {pads}")
    if all(p == (0, 0) for p in pads):
        return x
    return _emit(Op.PAD, (x,), [d + a + b for d, (a, b) in zip(x.shape, pads)], x.dtype, pads)


def concat(xs, dim: int) -> Node:
    """``xs`` joined along ``dim``; other dims must agree."""
    xs = list(xs)
    if not xs:
        raise ShapeError("concat", [], user_site(), "no tensors")
    nd = len(xs[0].shape)
    dim = _norm_dim(dim, nd, "concat", xs[0].shape)
    for x in xs:
        if len(x.shape) != nd or any(a != b for i, (a, b) in enumerate(zip(x.shape, xs[0].shape))
                                     if i != dim):
            raise ShapeError("concat", [x.shape for x in xs], user_site(),
                             f"sizes must agree except in dim {dim}")
    if len(xs) == 1:
        return xs[0]
    shape = list(xs[0].shape)
    shape[dim] = sum(x.shape[dim] for x in xs)
    return _emit(Op.CONCAT, xs, shape, xs[0].dtype, dim)


# -- elementwise ----------------------------------------------------------------------
def broadcast_shape(op: str, *shapes) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        raise ShapeError(op, shapes, user_site(), "cannot broadcast") from None


def elementwise(op: Op, *srcs: Node) -> Node:
    """``op`` applied elementwise; operands are broadcast explicitly first."""
    name = op.name.lower()
    if op is Op.WHERE:
        name = "where"
    if any(s.dtype != "float32" for s in srcs) and op is not Op.CAST:
        raise TypeError(f"{name}: operands must be float32, got "
                        f"{[s.dtype for s in srcs]} (traced at {user_site()})")
    shape = broadcast_shape(name, *[s.shape for s in srcs])
    srcs = [expand(s, shape) for s in srcs]
    return _emit(op, srcs, shape, "float32")


def unary(op: Op, x: Node) -> Node:
    assert op in UNARY and op is not Op.CAST
    return elementwise(op, x)


def binary(op: Op, a: Node, b: Node) -> Node:
    assert op in BINARY
    return elementwise(op, a, b)


def cast(x: Node, dtype: str) -> Node:
    """``x`` converted to ``dtype`` (``"float32"`` or ``"int32"``; float -> int truncates)."""
    if dtype == x.dtype:
        return x
    return TRACER.emit(Node(Op.CAST, (x,), x.shape, dtype, dtype, user_site(),
                            TRACER.grad_enabled and x.requires_grad and dtype == "float32"))


def where(mask: Node, a: Node, b: Node) -> Node:
    """``a`` where ``mask`` is nonzero, else ``b`` (all broadcast together)."""
    return elementwise(Op.WHERE, mask, a, b)


# -- reductions and contraction -------------------------------------------------------
def reduce(op: Op, x: Node, axes) -> Node:
    """``SUM`` or ``RMAX`` over ``axes``; reduced dims stay as size 1.

    Raises:
        IndexError: ``RMAX`` over a dim of size 0 (as torch's ``amax``); a ``SUM`` over
            one is 0.
    """
    nd = len(x.shape)
    axes = tuple(sorted({_norm_dim(a, nd, op.name.lower(), x.shape) for a in axes}))
    if not axes or nd == 0:
        return x
    empty = [a for a in axes if x.shape[a] == 0]
    if op is Op.RMAX and empty:           # torch: a max over nothing is an error
        raise IndexError(f"amax: expected reduction dim {empty[0]} of {list(x.shape)} to "
                         f"have non-zero size (traced at {user_site()})")
    return _emit(op, (x,), [1 if i in axes else d for i, d in enumerate(x.shape)], x.dtype, axes)


def dot(a: Node, b: Node) -> Node:
    """Matrix product ``a @ b`` for ``a [..., M, K]`` and ``b [..., K, N]``.

    1-D operands follow numpy (a vector is promoted to a matrix, then the added dim is
    removed); batch dims broadcast.
    """
    if len(a.shape) == 0 or len(b.shape) == 0:
        raise ShapeError("matmul", [a.shape, b.shape], user_site(),
                         "operands must have >= 1 dim")
    squeeze = []
    if len(a.shape) == 1:
        a = reshape(a, (1,) + a.shape)
        squeeze.append(-2)
    if len(b.shape) == 1:
        b = reshape(b, b.shape + (1,))
        squeeze.append(-1)
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError("matmul", [a.shape, b.shape], user_site(),
                         f"inner dims {a.shape[-1]} and {b.shape[-2]} differ")
    batch = broadcast_shape("matmul", a.shape[:-2], b.shape[:-2])
    a = expand(a, batch + a.shape[-2:])
    b = expand(b, batch + b.shape[-2:])
    out = _emit(Op.DOT, (a, b), batch + (a.shape[-2], b.shape[-1]), "float32")
    if squeeze:
        shape = list(out.shape)
        for d in sorted(squeeze):
            shape.pop(len(shape) + d if d == -1 else len(shape) - 2)
        out = reshape(out, shape)
    return out


# -- indexing -------------------------------------------------------------------------
def gather(table: Node, idx: Node, arg=None) -> Node:
    """Rows of ``table [N, ...]`` picked by ``idx`` (int32, any shape): ``[*idx.shape, ...]``.

    An index outside ``[0, N)`` stops the run (``IndexError``). ``arg``: None, or
    ``(name, ignore)``: errors name ``name`` (what the user called) and indices equal to
    ``ignore`` are allowed (they read row 0).
    """
    if idx.dtype != "int32" or len(table.shape) < 1:
        raise ShapeError("gather", [table.shape, idx.shape], user_site(),
                         "needs a table with >= 1 dim and int32 indices")
    return _emit(Op.GATHER, (table, idx), idx.shape + table.shape[1:], table.dtype, arg)


def scatter_add(updates: Node, idx: Node, n: int) -> Node:
    """``out[N, ...] = 0; out[idx[i]] += updates[i]`` (the gradient of :func:`gather`)."""
    if updates.shape[:len(idx.shape)] != idx.shape:
        raise ShapeError("scatter_add", [updates.shape, idx.shape], user_site())
    return _emit(Op.SCATTER_ADD, (updates, idx), (n,) + updates.shape[len(idx.shape):],
                 updates.dtype, int(n))


# -- helpers used by gradient rules and modules ---------------------------------------
def add(a, b): return binary(Op.ADD, a, b)
def sub(a, b): return binary(Op.SUB, a, b)
def mul(a, b): return binary(Op.MUL, a, b)
def div(a, b): return binary(Op.DIV, a, b)
def neg(a): return unary(Op.NEG, a)


def scale(a: Node, c: float) -> Node:
    """``a * c`` for a Python number ``c``."""
    return mul(a, const(c, a.shape))


def swap_last(a: Node) -> Node:
    """``a`` with its last two dims swapped."""
    n = len(a.shape)
    return permute(a, tuple(range(n - 2)) + (n - 1, n - 2))


def sum_to(g: Node, shape) -> Node:
    """Sum ``g`` over the dims that were broadcast to get from ``shape`` to ``g.shape``."""
    shape = tuple(shape)
    lead = len(g.shape) - len(shape)
    axes = [i for i in range(len(g.shape))
            if i < lead or (shape[i - lead] == 1 and g.shape[i] != 1)]
    return reshape(reduce(Op.SUM, g, axes), shape)


LN2 = math.log(2.0)
