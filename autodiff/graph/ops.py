"""Node constructors with shape inference: the only place graph IR nodes are traced.

Every function takes and returns :class:`~autodiff.graph.ir.Node` objects, emits the new
node into the current scope of the tracer and raises :class:`autodiff.ShapeError` (naming
the op, the shapes and the user's ``file:line``) when shapes do not fit. Broadcasting is
made explicit here: elementwise nodes always get operands of one shape.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import DimError, DTypeError, ShapeError
from . import dtypes
from .ir import BINARY, BITWISE, COMPARE, CallbackSpec, Node, Op, UNARY
from .trace import TRACER, user_site


def _emit(op: Op, srcs, shape, dtype="float32", arg=None) -> Node:
    """Gradients flow only through floating dtypes."""
    rg = TRACER.grad_enabled and dtypes.is_floating(dtype) and any(s.requires_grad
                                                                  for s in srcs)
    return TRACER.emit(Node(op, tuple(srcs), tuple(int(d) for d in shape), dtype, arg,
                            user_site(), rg))


def _norm_dim(d: int, ndim: int, op: str, shape) -> int:
    n = max(ndim, 1)
    if not -n <= d < n:
        raise DimError(op, [shape], user_site(), f"Dimension out of range (expected to be in "
                                                 f"range of [{-n}, {n - 1}], but got {d})")
    return d % n


# -- leaves ---------------------------------------------------------------------------
def const(value, shape=(), dtype="float32") -> Node:
    """A constant ``value`` of ``dtype`` filled to ``shape`` (``value`` becomes a Python
    bool, int, or float rounded to the dtype).

    Raises:
        OverflowError: an integer outside the int32 storage.
    """
    dtype = dtypes.name(dtype)
    value = dtypes.check_scalar(value, dtype, f"constant (traced at {user_site()})")
    return _emit(Op.CONST, (), shape, dtype, value)


#: added to every ``RAND`` seed (mod 2**32) when it is traced: a distributed run
#: (:func:`autodiff.distributed.seed_by_rank`) sets it to a multiple of the rank so that
#: device random draws differ per process; 0 (rank 0, one process): unchanged
SEED_OFFSET = [0]


def rand(shape, seed: int, stream: int = 0) -> Node:
    """float32 uniform samples in ``[0, 1)`` of ``shape``, new in every loop iteration.

    A counter-based draw (Philox-4x32-10, :mod:`autodiff.graph.rng`) keyed by ``(seed,
    stream)`` and countered by the loop indices and the element index, so every device
    produces the same numbers. Never requires grad. The key's seed is ``seed`` plus
    :data:`SEED_OFFSET` (mod 2**32).

    Raises:
        ValueError: ``seed`` or ``stream`` is not in ``[0, 2**32)``.
    """
    seed, stream = int(seed), int(stream)
    if not (0 <= seed < 2 ** 32 and 0 <= stream < 2 ** 32):
        raise ValueError(f"rand: seed and stream must be in [0, 2**32), got {seed}, {stream}")
    seed = (seed + SEED_OFFSET[0]) % 2 ** 32
    return TRACER.emit(Node(Op.RAND, (), tuple(int(d) for d in shape), "float32",
                            (seed, stream), user_site()))


# -- host boundary --------------------------------------------------------------------
def callback(fn, srcs, shape, dtype="float32", name: str = "callback", vjp=None,
             collective: str | None = None) -> Node:
    """A ``CALLBACK`` node: the host runs ``fn(*values of srcs)`` when the program reaches
    it and the device continues with the returned array of ``shape``/``dtype`` (see
    :class:`~autodiff.graph.ir.CallbackSpec` for ``vjp`` and ``collective``).

    The node requires grad when an operand does and ``vjp`` is given (floating results).

    Raises:
        TypeError: ``fn`` is not callable, or no operands.
    """
    if not callable(fn):
        raise TypeError(f"callback needs a callable, got {type(fn).__name__}")
    srcs = tuple(srcs)
    if not srcs:
        raise TypeError("callback needs at least one operand (a Feeder takes none)")
    dtype = dtypes.name(dtype)
    shape = tuple(int(d) for d in shape)
    spec = CallbackSpec(fn, name, shape, dtype, vjp, collective, tuple(s.dtype for s in srcs))
    rg = TRACER.grad_enabled and vjp is not None and dtypes.is_floating(dtype) and \
        any(s.requires_grad for s in srcs)
    return TRACER.emit(Node(Op.CALLBACK, srcs, shape, dtype, spec, user_site(), rg))


# -- movement -------------------------------------------------------------------------
def reshape(x: Node, shape) -> Node:
    """``x`` viewed as ``shape`` (one entry may be -1); sizes must agree."""
    shape = [int(d) for d in shape]
    if shape.count(-1) > 1:
        raise ShapeError("reshape", [x.shape, shape], user_site(), "more than one -1")
    known = math.prod(d for d in shape if d != -1)
    if -1 in shape:
        if known == 0 or x.size % known:
            raise ShapeError("reshape", [x.shape, shape], user_site(), "sizes differ")
        shape[shape.index(-1)] = x.size // known
    if math.prod(shape) != x.size or any(d < 0 for d in shape):
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
    for i, s in enumerate(shape):       # -1 keeps an existing dim's size, nothing else
        if s < -1 or (s == -1 and i < lead):
            where = "a leading, non-existing dimension" if s == -1 else "dimension"
            raise ShapeError("expand", [x.shape, shape], user_site(),
                             f"the expanded size of the tensor ({s}) isn't allowed in "
                             f"{where} {i}")
    shape = tuple(s if s != -1 else src[i - lead] for i, s in enumerate(shape))
    for i, d in enumerate(src):
        if d != 1 and d != shape[lead + i]:
            raise ShapeError("broadcast_to", [x.shape, shape], user_site())
    if lead:
        x = reshape(x, (1,) * lead + src)
    if tuple(shape) == x.shape:
        return x
    return _emit(Op.EXPAND, (x,), shape, x.dtype, shape)


def slice_(x: Node, spec) -> Node:
    """``x[start:stop:step]`` per dim, with Python's slice semantics (``None`` and negative
    bounds allowed); ``spec`` is one ``(start, stop, step)`` per dim. A negative step walks
    backwards (``flip``); the node's ``arg`` holds ``(first, first + step*size, step)``."""
    spec = tuple(spec)
    if len(spec) != len(x.shape):
        raise ShapeError("slice", [x.shape], user_site(), "one (start, stop, step) per dim")
    norm = norm_slice(spec, x.shape)
    if all(n == (0, d, 1) for n, d in zip(norm, x.shape)):
        return x
    out = [len(range(a, b, s)) for a, b, s in norm]
    return _emit(Op.SLICE, (x,), out, x.dtype, norm)


def norm_slice(spec, shape) -> tuple:
    """Python-style ``(start, stop, step)`` per dim as ``(first, first + step*size, step)``
    (``(0, 0, 1)`` for an empty slice): the form ``SLICE`` nodes hold."""
    norm = []
    for (a, b, step), d in zip(spec, shape):
        if step == 0:
            raise ValueError("slice step cannot be zero")
        r = range(*slice(a, b, step).indices(d))
        m = len(r)
        norm.append((r.start, r.start + step * m, step) if m else (0, 0, 1))
    return tuple(norm)


def unslice(g: Node, spec, shape) -> Node:
    """The inverse placement of :func:`slice_` (its gradient): ``g`` (the slice's shape)
    written at the positions the normalized slice ``spec`` of a ``shape`` tensor reads,
    zeros elsewhere. Views only: a step ``s > 1`` pads each element with ``s - 1`` zeros
    (reshape + pad), a negative step flips first."""
    for d, ((a, _, s), n) in enumerate(zip(spec, shape)):
        m = g.shape[d]
        if m == 0 or (s == 1 and g.shape[d] == n):
            if m == 0:
                return const(0.0 if g.dtype == "float32" else 0, shape, g.dtype)
            continue
        if s < 0:
            g = slice_(g, [(None, None, -1) if i == d else (None, None, 1)
                           for i in range(len(g.shape))])
            a, s = a + s * (m - 1), -s
        if s > 1:
            lead, tail = g.shape[:d + 1], g.shape[d + 1:]
            g = reshape(g, lead + (1,) + tail)
            g = pad(g, [(0, s - 1) if i == d + 1 else (0, 0) for i in range(len(g.shape))])
            g = reshape(g, g.shape[:d] + (m * s,) + tail)
        keep = min(g.shape[d], n - a)
        g = slice_(g, [(0, keep, 1) if i == d else (None, None, 1) for i in range(len(g.shape))])
        g = pad(g, [(a, n - a - keep) if i == d else (0, 0) for i in range(len(g.shape))])
    return g


def pad(x: Node, pads) -> Node:
    """``x`` with ``(before, after)`` zeros added on each dim."""
    pads = tuple((int(a), int(b)) for a, b in pads)
    if len(pads) != len(x.shape) or any(a < 0 or b < 0 for a, b in pads):
        raise ShapeError("pad", [x.shape], user_site(), f"bad padding {pads}")
    if all(p == (0, 0) for p in pads):
        return x
    return _emit(Op.PAD, (x,), [d + a + b for d, (a, b) in zip(x.shape, pads)], x.dtype, pads)


def concat(xs, dim: int) -> Node:
    """``xs`` joined along ``dim``; other dims must agree; dtypes are promoted together
    (as ``torch.cat``)."""
    xs = list(xs)
    if not xs:
        raise ShapeError("concat", [], user_site(), "no tensors")
    dt = xs[0].dtype
    for x in xs[1:]:
        dt = dtypes.promote_types(dt, x.dtype).name
    xs = [cast(x, dt) for x in xs]
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


def window(x: Node, dim: int, size: int, step: int = 1, dilation: int = 1) -> Node:
    """Sliding windows of ``x`` along ``dim`` (``Tensor.unfold`` with a dilation).

    ``out[..., o, ..., k] = x[..., o*step + k*dilation, ...]``: ``dim`` becomes the window
    count ``(L - dilation*(size-1) - 1) // step + 1`` and the window index ``k`` a new last
    dim of ``size``. A view (index arithmetic, nothing copied), the implicit im2col of a
    convolution.

    Raises:
        ShapeError: ``size``, ``step`` or ``dilation`` below 1, or a window longer than the
            dim.
    """
    nd = len(x.shape)
    if nd == 0:
        raise ShapeError("unfold", [x.shape], user_site(), "needs a tensor with >= 1 dim")
    dim = _norm_dim(dim, nd, "unfold", x.shape)
    size, step, dilation = int(size), int(step), int(dilation)
    if size < 1 or step < 1 or dilation < 1:
        raise ShapeError("unfold", [x.shape], user_site(),
                         f"size {size}, step {step} and dilation {dilation} must be >= 1")
    span = dilation * (size - 1) + 1
    if span > x.shape[dim]:
        raise ShapeError("unfold", [x.shape], user_site(),
                         f"maximum size for dim {dim} is {x.shape[dim]} but the window "
                         f"spans {span}")
    shape = list(x.shape)
    shape[dim] = (x.shape[dim] - span) // step + 1
    return _emit(Op.WINDOW, (x,), shape + [size], x.dtype, (dim, size, step, dilation))


def window_fold(g: Node, dim: int, length: int, size: int, step: int = 1,
                dilation: int = 1) -> Node:
    """The adjoint of :func:`window`: ``out[..., o*step + k*dilation, ...] += g[..., o, ..., k]``
    over a dim of ``length`` (``col2im`` along one dim; the gradient of ``WINDOW`` and the
    scatter of a transposed convolution).

    ``g [..., O, ..., size]`` -> ``[..., length, ...]``. Built as a sum of ``size`` strided
    placements of ``g[..., k]`` (``step - 1`` zeros between window starts, then an offset of
    ``k * dilation``): views and adds only, one elementwise kernel after lowering.

    Raises:
        ShapeError: ``g``'s last dim is not ``size``, or windows reach past ``length``.
    """
    nd = len(g.shape)
    dim = _norm_dim(dim, nd - 1, "window_fold", g.shape)
    n_out = g.shape[dim]
    if nd < 2 or g.shape[-1] != size or (n_out and (n_out - 1) * step
                                         + (size - 1) * dilation >= length):
        raise ShapeError("window_fold", [g.shape], user_site(),
                         f"{n_out} windows of {size} (step {step}, dilation {dilation}) do "
                         f"not fit a dim of {length}")
    n = n_out * step
    if step > 1:                                     # interior zeros: [O, 1] -> [O, step]
        s = list(g.shape)
        s.insert(dim + 1, 1)
        pads = [(0, 0)] * len(s)
        pads[dim + 1] = (0, step - 1)
        s2 = list(g.shape)
        s2[dim] = n
        g = reshape(pad(reshape(g, s), pads), s2)
    total = None
    for k in range(size):
        spec = [(0, d, 1) for d in g.shape]
        spec[-1] = (k, k + 1, 1)
        gk = reshape(slice_(g, spec), g.shape[:-1])
        off = k * dilation
        keep = min(n, length - off)
        if keep < n:
            spec = [(0, d, 1) for d in gk.shape]
            spec[dim] = (0, keep, 1)
            gk = slice_(gk, spec)
        pads = [(0, 0)] * len(gk.shape)
        pads[dim] = (off, length - off - keep)
        gk = pad(gk, pads)
        total = gk if total is None else add(total, gk)
    return total


# -- elementwise ----------------------------------------------------------------------
def broadcast_shape(op: str, *shapes) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        raise ShapeError(op, shapes, user_site(), "cannot broadcast") from None


#: elementwise op -> the kind of its dtype rule (see :func:`result_dtype`)
_FLOAT_OPS = frozenset({Op.EXP, Op.LOG, Op.EXP2, Op.LOG2, Op.SQRT, Op.RSQRT, Op.RECIP, Op.SIN,
                        Op.COS, Op.TANH, Op.SIGMOID, Op.ERF, Op.ATAN, Op.LOG1P, Op.EXPM1})
_NO_BOOL = frozenset({Op.NEG, Op.ABS, Op.RELU, Op.SUB, Op.POW, Op.FLOORDIV, Op.MOD, Op.SHL,
                      Op.SHR})


def _dtype_error(op: Op, dts, why: str) -> DTypeError:
    return DTypeError(f"{op.name.lower()}: {why}, got {[str(d) for d in dts]} "
                      f"(traced at {user_site()})")


def result_dtype(op: Op, *dts: str) -> tuple[str, str]:
    """``(operand dtype, result dtype)`` of elementwise ``op`` on operands of ``dts``.

    Operands are first promoted together (:func:`~.dtypes.promote_types`; ``WHERE``'s
    mask is not). Then, as in PyTorch: comparisons give bool; ``DIV`` and the
    transcendental ops (exp, log, sqrt, sin, sigmoid, ...) compute integer and bool
    operands in float32; bitwise ops take integers and bool only (shifts: integers);
    ``NEG``, ``ABS``, ``RELU``, ``SUB``, ``POW``, ``FLOORDIV``, ``MOD`` reject bool.

    Raises:
        DTypeError: a combination PyTorch rejects too.
    """
    if op is Op.WHERE:
        if dts[0] != "bool":
            raise _dtype_error(op, dts, "the condition must be a bool tensor")
        dts = dts[1:]
    common = dts[0]
    for d in dts[1:]:
        common = dtypes.promote_types(common, d).name
    if op in _NO_BOOL and common == "bool":
        raise _dtype_error(op, dts, "not supported on bool tensors (use ~, ^ or "
                                    "logical_not for logic)")
    if op in BITWISE and dtypes.is_floating(common):
        raise _dtype_error(op, dts, "needs integer or bool tensors")
    if op in _FLOAT_OPS or op is Op.DIV:
        common = common if dtypes.is_floating(common) else "float32"
    return common, ("bool" if op in COMPARE else common)


def elementwise(op: Op, *srcs: Node) -> Node:
    """``op`` applied elementwise; operands are broadcast explicitly first and cast to the
    operand dtype of :func:`result_dtype` (``CAST`` nodes)."""
    name = op.name.lower()
    assert op is not Op.CAST
    operand, out = result_dtype(op, *[s.dtype for s in srcs])
    shape = broadcast_shape(name, *[s.shape for s in srcs])
    first = 1 if op is Op.WHERE else 0
    srcs = [s if i < first else cast(s, operand) for i, s in enumerate(srcs)]
    srcs = [expand(s, shape) for s in srcs]
    return _emit(op, srcs, shape, out)


def unary(op: Op, x: Node) -> Node:
    assert op in UNARY and op is not Op.CAST
    return elementwise(op, x)


def binary(op: Op, a: Node, b: Node) -> Node:
    assert op in BINARY
    return elementwise(op, a, b)


def cast(x: Node, dtype) -> Node:
    """``x`` converted to ``dtype``: float -> int truncates toward zero, anything -> bool is
    ``!= 0``, float32 -> float16/bfloat16 rounds to nearest even. Differentiable between
    floating dtypes only (the gradient is cast back)."""
    dtype = dtypes.name(dtype)
    if dtype == x.dtype:
        return x
    return TRACER.emit(Node(Op.CAST, (x,), x.shape, dtype, dtype, user_site(),
                            TRACER.grad_enabled and x.requires_grad
                            and dtypes.is_floating(dtype)))


def where(mask: Node, a: Node, b: Node) -> Node:
    """``a`` where ``mask`` (bool) is true, else ``b`` (all broadcast together; ``a`` and
    ``b`` promoted to one dtype)."""
    return elementwise(Op.WHERE, mask, a, b)


# -- reductions and contraction -------------------------------------------------------
def reduce(op: Op, x: Node, axes) -> Node:
    """``SUM`` or ``RMAX`` over ``axes``; reduced dims stay as size 1. The result has
    ``x``'s dtype (the front end sums integers and bool as int64, like PyTorch); float16
    and bfloat16 accumulate in float32 and round once.

    Raises:
        DTypeError: ``SUM`` of bool (cast it to an integer first).
        IndexError: ``RMAX`` over a dim of size 0 (as torch's ``amax``); a ``SUM`` over
            one is 0.
    """
    if op is Op.SUM and x.dtype == "bool":
        raise _dtype_error(op, [x.dtype], "sum of bool needs a cast to an integer dtype")
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
    removed); batch dims broadcast. A batch against one matrix (``a [..., M, K]``, ``b [K,
    N]``) is folded into the rows, as ``torch.matmul`` does: one ``[prod(...) * M, K] @ [K,
    N]`` DOT between two reshapes. Operands are promoted to one dtype (bool is rejected,
    as in PyTorch); float16/bfloat16 accumulate in float32, integers in int32.
    """
    dt = dtypes.promote_types(a.dtype, b.dtype).name
    if dt == "bool":
        raise _dtype_error(Op.DOT, [a.dtype, b.dtype], "not supported on bool tensors")
    a, b = cast(a, dt), cast(b, dt)
    if len(a.shape) == 0 or len(b.shape) == 0:
        raise ShapeError("matmul", [a.shape, b.shape], user_site(),
                         "operands must have >= 1 dim")
    if len(a.shape) > 2 and len(b.shape) == 2 and a.shape[-1] == b.shape[0]:
        # a batch against one matrix (``x @ W.T`` on [..., in]): fold the batch into the
        # rows, as torch.matmul does -- one 2-D product, and a weight gradient that is one
        # product over all rows rather than a batched product summed over the batch
        lead = a.shape[:-1]
        flat = dot(reshape(a, (math.prod(lead), a.shape[-1])), b)
        return reshape(flat, lead + (b.shape[-1],))
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
    out = _emit(Op.DOT, (a, b), batch + (a.shape[-2], b.shape[-1]), dt)
    if squeeze:
        shape = list(out.shape)
        for d in sorted(squeeze):
            shape.pop(len(shape) + d if d == -1 else len(shape) - 2)
        out = reshape(out, shape)
    return out


# -- indexing -------------------------------------------------------------------------
def gather(table: Node, idx: Node, arg=None) -> Node:
    """Rows of ``table [N, ...]`` picked by ``idx`` (int32 or int64, any shape):
    ``[*idx.shape, ...]``.

    An index outside ``[0, N)`` stops the run (``IndexError``). ``arg``: None, or
    ``(name, ignore)``: errors name ``name`` (what the user called) and indices equal to
    ``ignore`` are allowed (they read row 0).
    """
    if not dtypes.is_integral(idx.dtype) or len(table.shape) < 1:
        raise ShapeError("gather", [table.shape, idx.shape], user_site(),
                         f"needs a table with >= 1 dim and int32/int64 indices, got "
                         f"{idx.dtype} indices")
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
    """``a * c`` for a Python number ``c`` (in ``a``'s dtype if floating, else float32)."""
    return mul(a, const(c, a.shape, a.dtype if dtypes.is_floating(a.dtype) else "float32"))


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
