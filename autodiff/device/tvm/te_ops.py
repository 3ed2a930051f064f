"""Graph IR op -> TVM tensor expression: the table the Relax translation emits from.

``TE[op](node)`` is a function of the operands' ``te.Tensor`` s returning the node's
``te.Tensor``; :mod:`.translate` hands it to ``BlockBuilder.emit_te``, which makes one
PrimFunc per node (fused later by Relax ``FuseOps``/``FuseTIR``). Semantics follow the
numpy reference (:data:`autodiff.device.numpy.interpreter.KERNELS`):

* comparisons give float32 masks (0 or 1); ``WHERE`` picks ``a`` where the mask is nonzero;
  ``!=`` is ``1 - (a == b)`` (TIR's ``!=`` lowers to an ordered compare: NaN != NaN gave 0);
* NaN propagates as in numpy and torch: ``RELU``, ``MAX``, ``MIN`` and ``RMAX`` use
  :func:`nan_max` / :func:`nan_min` (TIR's ``max`` drops NaN);
* ``SUM``/``RMAX`` keep reduced dims as size 1; ``DOT`` is ``[..., M, K] @ [..., K, N]``;
* ``GATHER`` clamps indices to ``[0, N)`` so that a kernel never reads outside the table;
  :func:`gather_check` counts the out-of-range indices, which the host reads after the
  call to raise ``IndexError`` as the numpy device does;
* ``SCATTER_ADD`` is a reduction over every index position (no atomics, any target).

The matmul block is called ``"dot"``: :mod:`.schedule` finds matmul-like kernels by it.
"""
from __future__ import annotations

from tvm import te, tirx, topi

from ...graph.ir import Node, Op
from .philox import philox_te

DOT_BLOCK = "dot"


def _ew(fn, name):
    """Elementwise kernel from a scalar function of ``tirx`` expressions."""
    def make(n: Node):
        def build(*xs):
            return te.compute(xs[0].shape, lambda *i: fn(*[x(*i) for x in xs]), name=name)
        return build
    return make


def _f32(e):
    return e.astype("float32")


def _const(n: Node):
    def build():
        return te.compute(n.shape, lambda *i: tirx.const(n.arg, n.dtype), name="const")
    return build


def _fill(n: Node, value):
    """A node of an empty reduction: the identity, without a loop over nothing."""
    return lambda *xs: te.compute(n.shape, lambda *i: tirx.const(value, n.dtype), name="fill")


def _empty_input(n: Node) -> bool:
    return bool(n.size) and n.srcs[0].size == 0


def _sum(n: Node):
    axes = [int(a) for a in n.arg]
    if _empty_input(n):
        return _fill(n, 0)
    if not axes:
        return lambda x: te.compute(x.shape, lambda *i: x(*i), name="copy")
    return lambda x: topi.sum(x, axis=axes, keepdims=True)


def nan_max(a, b):
    """``max(a, b)``, NaN if either is NaN (as numpy's ``maximum`` and torch; TIR's ``max``
    lowers to LLVM ``maxnum``, which drops a NaN)."""
    return tirx.Select(tirx.isnan(a), a, tirx.Select(tirx.isnan(b), b, tirx.max(a, b)))


def nan_min(a, b):
    """``min(a, b)``, NaN if either is NaN."""
    return tirx.Select(tirx.isnan(a), a, tirx.Select(tirx.isnan(b), b, tirx.min(a, b)))


#: max-reduction propagating NaN, identity -inf (``topi.max`` drops NaN and starts from
#: the lowest finite float, so a row of -inf gave -3.4e38)
_MAX_REDUCER = te.comm_reducer(nan_max, lambda dtype: tirx.const(float("-inf"), dtype),
                               name="nan_max")


def _rmax(n: Node):
    axes = [int(a) for a in n.arg]
    if _empty_input(n):
        return _fill(n, float("-inf"))
    if not axes:
        return lambda x: te.compute(x.shape, lambda *i: x(*i), name="copy")

    def build(x):
        red = {a: te.reduce_axis((0, x.shape[a]), f"r{a}") for a in axes}

        def at(*i):
            return _MAX_REDUCER(x[tuple(red.get(d, i[d]) for d in range(len(i)))],
                                axis=list(red.values()))
        return te.compute(n.shape, at, name="rmax")
    return build


def _dot(n: Node):
    if n.size and n.srcs[0].shape[-1] == 0:
        return _fill(n, 0.0)

    def build(a, b):
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


def gather_check(n: Node):
    """TE for ``int32[1]``: how many indices of the ``GATHER`` node ``n`` lie outside
    ``[0, N)`` (``N`` = table rows), from the index tensor alone."""
    rows = int(n.srcs[0].shape[0])
    if n.srcs[1].size == 0:                      # no index: nothing out of range
        return lambda idx: te.compute((1,), lambda _: tirx.const(0, "int32"),
                                      name="gather_check")

    def build(idx):
        def bad(*i):
            v = idx[i]
            return tirx.Select(tirx.Or(v < 0, v >= rows), tirx.const(1, "int32"),
                               tirx.const(0, "int32"))
        if not idx.shape:
            return te.compute((1,), lambda _: bad(), name="gather_check")
        axes = [te.reduce_axis((0, d), f"c{a}") for a, d in enumerate(idx.shape)]
        return te.compute((1,), lambda _: te.sum(bad(*axes), axis=axes), name="gather_check")
    return build


def _scatter_add(n: Node):
    if _empty_input(n):
        return _fill(n, 0.0)

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


def _eq(a, b):
    """``a == b`` as 1.0/0.0, false for NaN even where TIR's simplifier would fold
    ``x == x`` to true (the ``isnan`` test ``x != x``)."""
    nan = tirx.Or(tirx.isnan(a), tirx.isnan(b)) if "float" in str(a.ty) else None
    eq = _f32(a == b)
    return eq if nan is None else tirx.Select(nan, _ZERO, eq)


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
    Op.SIGMOID: lambda n: topi.sigmoid, Op.RELU: _ew(lambda x: nan_max(x, _ZERO), "relu"),
    Op.ABS: lambda n: topi.abs, Op.ERF: lambda n: topi.erf, Op.SIGN: lambda n: topi.sign,
    Op.CAST: lambda n: lambda x: topi.cast(x, n.dtype),
    Op.ATAN: lambda n: topi.atan, Op.LOG1P: _ew(tirx.log1p, "log1p"),
    Op.EXPM1: _ew(_expm1, "expm1"),
    Op.ADD: _ew(lambda a, b: a + b, "add"), Op.SUB: _ew(lambda a, b: a - b, "sub"),
    Op.MUL: _ew(lambda a, b: a * b, "mul"), Op.DIV: _ew(lambda a, b: a / b, "div"),
    Op.POW: _ew(tirx.power, "pow"), Op.MAX: _ew(nan_max, "max"), Op.MIN: _ew(nan_min, "min"),
    Op.CMPLT: _ew(lambda a, b: _f32(a < b), "lt"), Op.CMPLE: _ew(lambda a, b: _f32(a <= b), "le"),
    Op.CMPGT: _ew(lambda a, b: _f32(a > b), "gt"), Op.CMPGE: _ew(lambda a, b: _f32(a >= b), "ge"),
    Op.CMPEQ: _ew(lambda a, b: _eq(a, b), "eq"), Op.CMPNE: _ew(lambda a, b: _ONE - _eq(a, b), "ne"),
    Op.WHERE: _ew(lambda m, a, b: tirx.Select(m != _ZERO, a, b), "where"),
    Op.DOT: _dot, Op.SUM: _sum, Op.RMAX: _rmax,
    Op.RESHAPE: lambda n: lambda x: topi.reshape(x, list(n.arg)),
    Op.PERMUTE: lambda n: lambda x: topi.transpose(x, list(n.arg)),
    Op.EXPAND: lambda n: lambda x: topi.broadcast_to(x, list(n.arg)),
    Op.SLICE: _slice, Op.PAD: _pad, Op.WINDOW: _window,
    Op.CONCAT: lambda n: lambda *xs: topi.concatenate(list(xs), int(n.arg)),
    Op.GATHER: _gather, Op.SCATTER_ADD: _scatter_add, Op.RAND: _rand,
}
