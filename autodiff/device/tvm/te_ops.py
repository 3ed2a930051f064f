"""Graph IR op -> TVM tensor expression: the table the Relax translation emits from.

``TE[op](node)`` is a function of the operands' ``te.Tensor`` s returning the node's
``te.Tensor``; :mod:`.translate` hands it to ``BlockBuilder.emit_te``, which makes one
PrimFunc per node (fused later by Relax ``FuseOps``/``FuseTIR``). Semantics follow the
numpy reference (:data:`autodiff.device.numpy.interpreter.KERNELS`):

* dtypes are the device storage dtypes of :mod:`autodiff.graph.dtypes` (int64 as int32,
  bool, float16, bfloat16); ops on 16-bit floats compute in float32 and round once
  (:func:`build_te`); comparisons give bool, ``WHERE`` takes a bool mask;
* integer ``//``, ``%``, shifts and powers follow the reference's semantics: division by 0
  gives 0, shifts outside ``[0, 32)`` give 0 or the sign, negative powers give 0 unless the
  base is 1 or -1 (never a trap: LLVM's ``sdiv`` by 0 would raise SIGFPE);
* NaN propagates as in numpy and torch: ``RELU``, ``MAX``, ``MIN`` and ``RMAX`` use
  :func:`nan_max` / :func:`nan_min` (TIR's ``max`` drops NaN); ``!=`` is ``not (a == b)``
  (TIR's ``!=`` lowers to an ordered compare: NaN != NaN gave false);
* ``SUM``/``RMAX`` keep reduced dims as size 1; ``DOT`` is ``[..., M, K] @ [..., K, N]``;
* ``GATHER`` clamps indices to ``[0, N)`` so that a kernel never reads outside the table;
  :func:`gather_check` gives the count, smallest and largest of the out-of-range indices
  of a ``GATHER`` or ``SCATTER_ADD``, which the host reads after the call to raise
  :class:`~autodiff.errors.IndexOutOfRange` as the numpy device does;
* ``SCATTER_ADD`` is a reduction over every index position (no atomics, any target).

The matmul block is called ``"dot"``: :mod:`.schedule` finds matmul-like kernels by it.
"""
from __future__ import annotations

from tvm import te, tirx, topi

from ...graph import dtypes
from ...graph.ir import COMPARE, Node, Op
from ...graph.reference import ARITHMETIC
from .philox import philox_te

DOT_BLOCK = "dot"


def _ew(fn, name):
    """Elementwise kernel from a scalar function of ``tirx`` expressions."""
    def make(n: Node):
        def build(*xs):
            return te.compute(xs[0].shape, lambda *i: fn(*[x(*i) for x in xs]), name=name)
        return build
    return make


def storage(dtype: str) -> str:
    """TVM dtype of ``dtype``'s device storage (``int64`` -> ``int32``)."""
    return dtypes.storage(dtype).name


def _const(n: Node):
    def build():
        return te.compute(n.shape, lambda *i: tirx.const(n.arg, storage(n.dtype)),
                          name="const")
    return build


def _dt(e) -> str:
    """The dtype of a tensor or a TIR expression (an expression's ``ty`` in TVM 0.27, where
    ``dtype`` is missing on some)."""
    d = getattr(e, "dtype", None)
    return str(d) if d is not None else str(e.ty)


def _zero(x):
    return tirx.const(0, _dt(x))


def _is_int(x) -> bool:
    return _dt(x) in ("int32", "int64")


def _xor(p, q):
    """``p != q`` for bool expressions (TIR's ``!=`` on bool lowers to a float compare)."""
    return tirx.Or(tirx.And(p, tirx.Not(q)), tirx.And(tirx.Not(p), q))


def _floordiv(a, b):
    """Integer: floor semantics, 0 for b == 0, wrapping for b == -1. Float: numpy's
    ``npy_floor_divide`` (fmod based, as PyTorch's CPU kernel)."""
    if _is_int(a):
        safe = tirx.Select(tirx.Or(b == 0, b == -1), tirx.const(1, _dt(a)), b)
        return tirx.Select(b == 0, _zero(a),
                           tirx.Select(b == -1, _zero(a) - a, tirx.floordiv(a, safe)))
    zero, one = tirx.const(0.0, _dt(a)), tirx.const(1.0, _dt(a))
    m = _fmod(a, b)
    d = (a - m) / b
    d = tirx.Select(tirx.And(m != zero, _xor(b < zero, m < zero)), d - one, d)
    f = tirx.floor(d)
    f = tirx.Select(d - f > tirx.const(0.5, _dt(a)), f + one, f)
    return tirx.Select(b == zero, a / b, tirx.Select(d == zero, tirx.copysign(zero, a / b), f))


def _mod(a, b):
    """Integer: sign of ``b``, 0 for b == 0 or -1. Float: numpy's ``npy_remainder``."""
    if _is_int(a):
        safe = tirx.Select(tirx.Or(b == 0, b == -1), tirx.const(1, _dt(a)), b)
        return tirx.Select(tirx.Or(b == 0, b == -1), _zero(a), tirx.floormod(a, safe))
    zero = tirx.const(0.0, _dt(a))
    m = _fmod(a, b)
    adj = tirx.Select(m != zero, tirx.Select(_xor(b < zero, m < zero), m + b, m),
                      tirx.copysign(zero, b))
    return tirx.Select(b == zero, m, adj)


def _shl(a, b):
    ok = tirx.And(b >= 0, b < 32)
    return tirx.Select(ok, tirx.shift_left(a, tirx.Select(ok, b, _zero(b))), _zero(a))


def _shr(a, b):
    ok = tirx.And(b >= 0, b < 32)
    sign = tirx.Select(a < 0, tirx.const(-1, _dt(a)), _zero(a))
    return tirx.Select(ok, tirx.shift_right(a, tirx.Select(ok, b, _zero(b))), sign)


def _ipow_stages(a, b):
    """Integer ``a ** b`` as 61 elementwise stages of square-and-multiply (wrapping; TIR
    has no integer power, and an expression tree would repeat the squares); negative
    exponents as PyTorch: 0 unless the base is 1 or -1."""
    dt = a.dtype
    one, bone = tirx.const(1, dt), tirx.const(1, b.dtype)
    def step(r, x, k):
        def f(*i):
            bit = tirx.bitwise_and(tirx.shift_right(b(*i), tirx.const(k, b.dtype)), bone)
            return tirx.Select(bit != 0, r(*i) * x(*i), r(*i))
        return f

    def square(x):
        return lambda *i: x(*i) * x(*i)
    r = te.compute(a.shape, lambda *i: one, name="ipow_r")
    x = a
    for k in range(31):
        r = te.compute(a.shape, step(r, x, k), name="ipow_r")
        if k < 30:
            x = te.compute(a.shape, square(x), name="ipow_x")

    def out(*i):
        ai, bi = a(*i), b(*i)
        odd = tirx.bitwise_and(bi, bone) != 0
        neg = tirx.Select(ai == one, one, tirx.Select(
            ai == tirx.const(-1, dt), tirx.Select(odd, tirx.const(-1, dt), one), _zero(ai)))
        return tirx.Select(bi < 0, neg, r(*i))
    return te.compute(a.shape, out, name="ipow")


def _pow(n: Node):
    """``POW``: ``power`` on floats, :func:`_ipow_stages` on integers."""
    def build(a, b):
        if a.dtype in ("int32", "int64"):
            return _ipow_stages(a, b)
        return te.compute(a.shape, lambda *i: tirx.power(a(*i), b(*i)), name="pow")
    return build


def _fmod(a, b):
    """C's ``fmod`` (exact; libm's ``fmodf``: TIR's ``fmod`` has no LLVM lowering)."""
    return tirx.call_pure_extern("float32", "fmodf", a, b)


def _bool_or(f):
    """``f`` on numbers; logical or/and (``ADD``/``MUL``) on bool."""
    def g(a, b):
        if _dt(a) == "bool":
            return tirx.Or(a, b) if f is _add else tirx.And(a, b)
        return f(a, b)
    return g


def _add(a, b): return a + b
def _mul(a, b): return a * b


def _not(x):
    return tirx.Not(x) if _dt(x) == "bool" else tirx.bitwise_not(x)


def to_bf16(t):
    """A float32 tensor rounded to bfloat16 (to nearest even, NaN kept quiet) in integer
    code: TVM's own float32 -> bfloat16 cast is elided inside fused kernels (a
    ``float32(bfloat16(x))`` chain gave ``x``)."""
    u32 = "uint32"

    def f(*i):
        u = tirx.reinterpret(u32, t(*i))
        half = tirx.bitwise_and(tirx.shift_right(u, tirx.const(16, u32)), tirx.const(1, u32))
        r = tirx.bitwise_and(u + tirx.const(0x7FFF, u32) + half, tirx.const(0xFFFF0000, u32))
        r = tirx.Select(tirx.isnan(t(*i)), tirx.bitwise_or(u, tirx.const(0x00400000, u32)), r)
        return tirx.reinterpret("float32", r).astype("bfloat16")
    return te.compute(t.shape, f, name="to_bf16")


def _convert(x, dst: str):
    """``x`` cast to storage dtype ``dst``: to bool is ``!= 0``, to bfloat16 rounds through
    :func:`to_bf16`."""
    if dst == "bool":
        return te.compute(x.shape, lambda *i: x(*i) != _zero(x), name="to_bool")
    if dst == "bfloat16":
        return to_bf16(x if x.dtype == "float32" else topi.cast(x, "float32"))
    return topi.cast(x, dst)


def _cast(n: Node):
    dst = storage(n.dtype)
    return lambda x: _convert(x, dst)


def _zeros(n: Node):
    """The node's shape filled with 0: a sum or matmul over an empty extent (``topi.sum``
    left such an output uninitialised)."""
    return te.compute(n.shape, lambda *i: tirx.const(0, storage(n.dtype)),
                      name="empty_reduce")


def _sum(n: Node):
    axes = [int(a) for a in n.arg]
    if not axes:
        return lambda x: te.compute(x.shape, lambda *i: x(*i), name="copy")

    def build(x):
        if any(int(x.shape[a]) == 0 for a in axes):
            return _zeros(n)
        return topi.sum(x, axis=axes, keepdims=True)
    return build


def nan_max(a, b):
    """``max(a, b)``, NaN if either is NaN (as numpy's ``maximum`` and torch; TIR's ``max``
    lowers to LLVM ``maxnum``, which drops a NaN); plain ``max`` on integers and bool."""
    if _dt(a) not in ("float32", "float16", "bfloat16"):
        return tirx.max(a, b)
    return tirx.Select(tirx.isnan(a), a, tirx.Select(tirx.isnan(b), b, tirx.max(a, b)))


def nan_min(a, b):
    """``min(a, b)``, NaN if either is NaN."""
    if _dt(a) not in ("float32", "float16", "bfloat16"):
        return tirx.min(a, b)
    return tirx.Select(tirx.isnan(a), a, tirx.Select(tirx.isnan(b), b, tirx.min(a, b)))


#: max-reduction propagating NaN, identity -inf (``topi.max`` drops NaN and starts from
#: the lowest finite float, so a row of -inf gave -3.4e38)
_MAX_REDUCER = te.comm_reducer(nan_max, lambda dtype: tirx.const(float("-inf"), dtype),
                               name="nan_max")


def _rmax(n: Node):
    """Maximum over ``n.arg``: NaN-propagating for floats, ``topi.max`` for integers,
    ``topi.any`` for bool."""
    axes = [int(a) for a in n.arg]
    if not axes:
        return lambda x: te.compute(x.shape, lambda *i: x(*i), name="copy")
    if n.dtype == "bool":
        return lambda x: topi.any(x, axis=axes, keepdims=True)
    if not dtypes.is_floating(n.dtype):
        return lambda x: topi.max(x, axis=axes, keepdims=True)

    def build(x):
        red = {a: te.reduce_axis((0, x.shape[a]), f"r{a}") for a in axes}

        def at(*i):
            return _MAX_REDUCER(x[tuple(red.get(d, i[d]) for d in range(len(i)))],
                                axis=list(red.values()))
        return te.compute(n.shape, at, name="rmax")
    return build


def _dot(n: Node):
    def build(a, b):
        if int(a.shape[-1]) == 0:
            return _zeros(n)
        k = te.reduce_axis((0, a.shape[-1]), "k")
        return te.compute(n.shape, lambda *i: te.sum(
            a[(*i[:-1], k)] * b[(*i[:-2], k, i[-1])], axis=k), name=DOT_BLOCK)
    return build


def _slice(n: Node):
    starts = [int(a) for a, _, _ in n.arg]
    steps = [int(s) for _, _, s in n.arg]

    def build(x):
        return te.compute(n.shape, lambda *i: x[tuple(a + s * j for a, s, j in
                                                      zip(starts, steps, i))], name="slice")
    return build


def _pad(n: Node):
    before = [int(a) for a, _ in n.arg]
    after = [int(b) for _, b in n.arg]
    return lambda x: topi.nn.pad(x, before, after, pad_value=tirx.const(0, x.dtype))


def _window(n: Node):
    dim, size, step, dil = (int(a) for a in n.arg)

    def build(x):
        return te.compute(n.shape, lambda *i: x[(*i[:dim], i[dim] * step + i[-1] * dil,
                                                 *i[dim + 1:-1])], name="window")
    return build


def _gather(n: Node):
    def build(table, idx):
        rows = table.shape[0]
        k = len(idx.shape)

        def at(*i):
            r = tirx.max(tirx.min(idx[i[:k]], rows.astype("int32") - 1), 0)
            return table[(r, *i[k:])]
        return te.compute(n.shape, at, name="gather")
    return build


_INT_MAX, _INT_MIN = 2 ** 31 - 1, -(2 ** 31)


def gather_check(n: Node):
    """TE for ``int32[3]``: ``(count, low, high)`` of the indices of the ``GATHER`` or
    ``SCATTER_ADD`` node ``n`` outside ``[0, N)`` (``N``: table rows, or the scatter's
    rows), the value a ``GATHER`` ignores (``arg``) excepted; ``low``/``high`` are the
    smallest and largest of them (int32 max/min when there are none)."""
    rows = int(n.srcs[0].shape[0]) if n.op is Op.GATHER else int(n.arg)
    ign = n.arg[1] if n.op is Op.GATHER and n.arg is not None else None
    i32 = lambda v: tirx.const(v, "int32")      # noqa: E731

    def bad(v):
        out = tirx.Or(v < 0, v >= rows)
        return out if ign is None else tirx.And(out, v != ign)

    def build(idx):
        if not idx.shape:
            v = idx[()]
            return te.compute((3,), lambda j: tirx.Select(
                bad(v), tirx.Select(j == 0, i32(1), v),
                tirx.Select(j == 0, i32(0), tirx.Select(j == 1, i32(_INT_MAX), i32(_INT_MIN)))),
                name="gather_check")
        if any(int(d) == 0 for d in idx.shape):
            return te.compute((3,), lambda j: tirx.Select(
                j == 0, i32(0), tirx.Select(j == 1, i32(_INT_MAX), i32(_INT_MIN))),
                name="gather_check")

        def reduction(combine, take, other):
            axes = [te.reduce_axis((0, d), f"c{a}") for a, d in enumerate(idx.shape)]
            return te.compute((1,), lambda _: combine(
                tirx.Select(bad(idx[tuple(axes)]), take(idx[tuple(axes)]), other),
                axis=axes), name="gather_check")
        count = reduction(te.sum, lambda v: i32(1), i32(0))
        low = reduction(te.min, lambda v: v, i32(_INT_MAX))
        high = reduction(te.max, lambda v: v, i32(_INT_MIN))
        return topi.concatenate([count, low, high], 0)
    return build


def _scatter_add(n: Node):
    def build(upd, idx):
        axes = [te.reduce_axis((0, d), f"j{a}") for a, d in enumerate(idx.shape)]
        k = len(idx.shape)

        def at(row, *rest):
            hit = idx[tuple(axes)] == row.astype("int32")
            return te.sum(tirx.Select(hit, upd[(*axes, *rest)], tirx.const(0, upd.dtype)),
                          axis=axes)
        if k == 0:
            return te.compute(n.shape, lambda row, *rest: tirx.Select(
                idx[()] == row.astype("int32"), upd[rest], tirx.const(0, upd.dtype)),
                name="scatter_add")
        return te.compute(n.shape, at, name="scatter_add")
    return build


def _rand(n: Node):
    seed, stream = n.arg
    return lambda iters: philox_te(seed, stream, iters, n.shape)


_ONE = tirx.const(1.0, "float32")
_ZERO = tirx.const(0.0, "float32")


def _expm1(x):
    """``exp(x) - 1`` without cancellation near 0 (Kahan: ``(u - 1) * x / log(u)``)."""
    u = tirx.exp(x)
    um1 = u - _ONE
    r = tirx.Select(um1 == -_ONE, -_ONE, um1 * x / tirx.log(u))
    return tirx.Select(u == _ONE, x, tirx.Select(tirx.isinf(u), u, r))


TE = {
    Op.CONST: _const,
    Op.NEG: lambda n: topi.negative, Op.EXP: lambda n: topi.exp, Op.LOG: lambda n: topi.log,
    Op.EXP2: _ew(tirx.exp2, "exp2"), Op.LOG2: lambda n: topi.log2,
    Op.SQRT: lambda n: topi.sqrt, Op.RSQRT: lambda n: topi.rsqrt,
    Op.RECIP: _ew(lambda x: _ONE / x, "reciprocal"),
    Op.SIN: lambda n: topi.sin, Op.COS: lambda n: topi.cos, Op.TANH: lambda n: topi.tanh,
    Op.SIGMOID: lambda n: topi.sigmoid, Op.RELU: _ew(lambda x: nan_max(x, _zero(x)), "relu"),
    Op.ABS: lambda n: topi.abs, Op.ERF: lambda n: topi.erf,
    Op.SIGN: _ew(lambda x: x if _dt(x) == "bool" else
                 tirx.Select(x > _zero(x), tirx.const(1, _dt(x)),
                             tirx.Select(x < _zero(x), tirx.const(-1, _dt(x)), _zero(x))),
                 "sign"),
    Op.CAST: _cast,
    Op.ATAN: lambda n: topi.atan, Op.LOG1P: _ew(tirx.log1p, "log1p"),
    Op.EXPM1: _ew(_expm1, "expm1"),
    Op.ADD: _ew(_bool_or(_add), "add"), Op.SUB: _ew(lambda a, b: a - b, "sub"),
    Op.MUL: _ew(_bool_or(_mul), "mul"), Op.DIV: _ew(lambda a, b: a / b, "div"),
    Op.POW: _pow, Op.MAX: _ew(nan_max, "max"), Op.MIN: _ew(nan_min, "min"),
    Op.CMPLT: _ew(lambda a, b: a < b, "lt"), Op.CMPLE: _ew(lambda a, b: a <= b, "le"),
    Op.CMPGT: _ew(lambda a, b: a > b, "gt"), Op.CMPGE: _ew(lambda a, b: a >= b, "ge"),
    Op.CMPEQ: _ew(lambda a, b: a == b, "eq"), Op.CMPNE: _ew(lambda a, b: tirx.Not(a == b), "ne"),
    Op.WHERE: _ew(lambda m, a, b: tirx.Select(m, a, b), "where"),
    Op.FLOORDIV: _ew(_floordiv, "floordiv"), Op.MOD: _ew(_mod, "mod"),
    Op.AND: _ew(lambda a, b: tirx.And(a, b) if _dt(a) == "bool" else tirx.bitwise_and(a, b),
                "and"),
    Op.OR: _ew(lambda a, b: tirx.Or(a, b) if _dt(a) == "bool" else tirx.bitwise_or(a, b),
               "or"),
    Op.XOR: _ew(lambda a, b: _xor(a, b) if _dt(a) == "bool" else tirx.bitwise_xor(a, b),
                "xor"),
    Op.NOT: _ew(_not, "not"), Op.SHL: _ew(_shl, "shl"), Op.SHR: _ew(_shr, "shr"),
    Op.DOT: _dot, Op.SUM: _sum, Op.RMAX: _rmax,
    Op.RESHAPE: lambda n: lambda x: topi.reshape(x, list(n.arg)),
    Op.PERMUTE: lambda n: lambda x: topi.transpose(x, list(n.arg)),
    Op.EXPAND: lambda n: lambda x: topi.broadcast_to(x, list(n.arg)),
    Op.SLICE: _slice, Op.PAD: _pad, Op.WINDOW: _window,
    Op.CONCAT: lambda n: lambda *xs: topi.concatenate(list(xs), int(n.arg)),
    Op.GATHER: _gather, Op.SCATTER_ADD: _scatter_add, Op.RAND: _rand,
}


#: ops on bool operands computed on int32 (see :func:`build_te`)
_BOOL_AS_INT = COMPARE | {Op.MAX, Op.MIN}


def build_te(n: Node):
    """``TE[n.op](n)`` with 16-bit floats computed in float32: arithmetic on float16 or
    bfloat16 operands widens them first and rounds the result to ``n``'s storage dtype
    once (to nearest even), like the numpy reference."""
    build = TE[n.op](n)
    if n.op not in ARITHMETIC or n.op is Op.CAST:
        return build
    out = storage(n.dtype)

    def wrapped(*xs):
        if n.op in _BOOL_AS_INT and any(x.dtype == "bool" for x in xs):
            # TVM 0.27's LLVM codegen compares bools as floats: compare them as int32
            r = build(*[topi.cast(x, "int32") if x.dtype == "bool" else x for x in xs])
            return r if r.dtype == out else topi.cast(r, out)
        if not any(x.dtype in ("float16", "bfloat16") for x in xs):
            return build(*xs)
        r = build(*[topi.cast(x, "float32") if x.dtype in ("float16", "bfloat16") else x
                    for x in xs])
        return r if r.dtype == out else _convert(r, out)
    return wrapped


assert COMPARE <= TE.keys()
