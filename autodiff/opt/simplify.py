"""Pass ``simplify``: constant folding, unary folding, algebraic identities, view folding.

Every rule is one ``(pattern, replacement)`` entry of a :class:`~.rewrite.PatternMatcher`,
applied bottom-up over the graph and repeated to a fixed point (at most ``max_sweeps``
sweeps). Rules are grouped by what they may change:

* ``CONST_FOLD``, ``UNARY``, ``ALGEBRA``, ``RANGES``, ``VIEWS`` run always (``RANGES``:
  comparisons decided by the value ranges of loop indices, integer casts that round-trip). They are exact under IEEE
  754 (NaN, infinities and the sign of zero included), except that a folded constant is the
  correctly rounded value where the device might accumulate (``sum``/``dot`` of constants
  becomes ``c * n``; the device's own sum may differ in the last bits).
* ``FAST_MATH`` runs only with ``fast_math=True``; each rule says what it breaks:
  ``x + 0 -> x`` (``-0 + 0`` is ``+0``), ``0 - x -> -x`` (sign of zero), ``x * 0 -> 0`` and
  ``x - x -> 0`` (NaN, infinities), ``x / c -> x * (1/c)`` for any ``c`` (rounding; the
  default rule only takes powers of two, where it is exact), ``recip(recip(x)) -> x``
  (overflow of ``1/x``, rounding), ``(x * c1) * c2 -> x * (c1 * c2)`` (rounding, overflow).
* ``EXP2`` runs only with ``prefer_exp2=True`` (targets whose native exponential is base 2):
  ``exp(x) -> exp2(x * log2(e))``, ``log(x) -> log2(x) * ln(2)`` (last-bit rounding).

Constants are scalar fills (``CONST`` nodes): folding only ever produces a uniform fill, so
no array constants appear. Values are computed with the reference semantics of
:mod:`autodiff.graph.reference` in each node's dtype (bool and integer constants fold too;
sums and products of constants fold for float32 only).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..graph import dtypes
from ..graph.ir import ELEMENTWISE, Graph, Node, Op
from ..graph.reference import kernel
from .rewrite import Pat, PatternMatcher, const, cvar, rebuild, same_value, var

LOG2E = float(np.float32(math.log2(math.e)))
LN2 = float(np.float32(math.log(2.0)))


def _f32(x) -> float:
    with np.errstate(all="ignore"):
        return float(np.float32(x))


def _const(like: Node, value, shape=None, dtype=None) -> Node:
    """A ``CONST`` node filled with ``value`` (as its dtype's Python type), traced at
    ``like``'s site."""
    dtype = like.dtype if dtype is None else dtype
    return Node(Op.CONST, (), like.shape if shape is None else tuple(shape), dtype,
                dtypes.check_scalar(value, dtype), like.site)


def _new(like: Node, op: Op, srcs, arg=None) -> Node:
    """A node of ``like``'s shape and dtype computing ``op`` on ``srcs``."""
    return like.replace(op=op, srcs=tuple(srcs), arg=arg)


def _reduced_count(n: Node, x: Node) -> int:
    return x.size // n.size if n.size else 0


# -- constant folding -------------------------------------------------------------------
def _fold_elementwise(ctx, n: Node) -> Node:
    with np.errstate(all="ignore"):
        args = [np.full((1,), s.arg, dtype=dtypes.storage(s.dtype)) for s in n.srcs]
        r = kernel(n)(*args).reshape(-1)[:1]
    if dtypes.is_floating(n.dtype):
        r = r.astype(np.float32)
    return _const(n, r[0].item())


def _fold_sum(ctx, n: Node, c: Node):
    if n.dtype != "float32":
        return None
    k = _reduced_count(n, c)
    return _const(n, _f32(float(c.arg) * k) if k else 0.0)


def _fold_dot(ctx, n: Node, a: Node, b: Node):
    if n.dtype != "float32":
        return None
    k = a.shape[-1]
    return _const(n, _f32(_f32(float(a.arg) * float(b.arg)) * k) if k else 0.0)


def _fold_concat(ctx, n: Node):
    v = n.srcs[0].arg
    return _const(n, v) if all(same_value(s.arg, v) for s in n.srcs) else None


_VIEWS = frozenset({Op.RESHAPE, Op.PERMUTE, Op.EXPAND, Op.SLICE, Op.WINDOW})
_C = Pat(Op.CONST)

CONST_FOLD = PatternMatcher([
    (Pat(ELEMENTWISE, srcs=_C, name="n"), _fold_elementwise),
    (Pat(_VIEWS, srcs=(_C,), name="n"), lambda ctx, n: _const(n, n.srcs[0].arg)),
    (Pat(Op.PAD, srcs=(cvar("c", lambda c: same_value(c.arg, 0.0)),), name="n"),
     lambda ctx, n, c: _const(n, c.arg)),
    (Pat(Op.CONCAT, srcs=_C, name="n"), _fold_concat),
    (Pat(Op.SUM, srcs=(cvar("c"),), name="n"), _fold_sum),
    (Pat(Op.RMAX, srcs=(cvar("c"),), name="n"),
     lambda ctx, n, c: _const(n, c.arg) if _reduced_count(n, c) else None),
    (Pat(Op.DOT, srcs=(cvar("a"), cvar("b")), name="n"), _fold_dot),
])

# -- unary folding (exact) ----------------------------------------------------------------
UNARY = PatternMatcher([
    (Pat(Op.NEG, srcs=(Pat(Op.NEG, srcs=(var("x"),)),)), lambda ctx, x: x),
])


# -- algebraic identities (exact under IEEE 754) ----------------------------------------
def _exact_reciprocal(c: float) -> float | None:
    """``1/c`` when it is exact in float32 (``c = ±2**k``, ``1/c`` normal), else None."""
    if not math.isfinite(c) or c == 0 or abs(math.frexp(c)[0]) != 0.5:
        return None
    r = 1.0 / c
    return r if 2.0 ** -126 <= abs(r) <= 2.0 ** 127 else None


def _div_by_pow2(ctx, n: Node, x: Node, c: Node):
    if n.dtype != "float32":        # 1/c may not be a normal float16/bfloat16
        return None
    r = _exact_reciprocal(float(c.arg))
    return None if r is None else _new(n, Op.MUL, (x, _const(c, r)))


def _where_const(ctx, m: Node, a: Node, b: Node):
    return a if float(m.arg) != 0 else b      # NaN counts as nonzero, as in the device


def _all_size_one(n: Node) -> bool:
    return all(n.srcs[0].shape[a] == 1 for a in n.arg)


_ONE, _MINUS_ONE, _PZERO, _NZERO = const(1.0), const(-1.0), const(0.0), const(-0.0)

ALGEBRA = PatternMatcher([
    (Pat(Op.MUL, srcs=(var("x"), _ONE), commutative=True), lambda ctx, x: x),
    (Pat(Op.MUL, srcs=(var("x"), _MINUS_ONE), commutative=True, name="n"),
     lambda ctx, n, x: _new(n, Op.NEG, (x,))),
    (Pat(Op.MUL, srcs=(Pat(Op.NEG, srcs=(var("x"),)), cvar("c")), commutative=True, name="n"),
     lambda ctx, n, x, c: _new(n, Op.MUL, (x, _const(c, -c.arg)))),
    (Pat(Op.DIV, srcs=(var("x"), cvar("c")), name="n"), _div_by_pow2),
    (Pat(Op.SUB, srcs=(var("x"), _PZERO)), lambda ctx, x: x),
    (Pat(Op.ADD, srcs=(var("x"), _NZERO), commutative=True), lambda ctx, x: x),
    (Pat(Op.SUB, srcs=(var("x"), Pat(Op.NEG, srcs=(var("y"),))), name="n"),
     lambda ctx, n, x, y: _new(n, Op.ADD, (x, y))),
    (Pat(Op.ADD, srcs=(var("x"), Pat(Op.NEG, srcs=(var("y"),))), commutative=True, name="n"),
     lambda ctx, n, x, y: _new(n, Op.SUB, (x, y))),
    (Pat(Op.POW, srcs=(var("x"), _ONE)), lambda ctx, x: x),
    (Pat(Op.POW, srcs=(var("x"), _PZERO), name="n"), lambda ctx, n, x: _const(n, 1.0)),
    (Pat(Op.POW, srcs=(var("x"), _NZERO), name="n"), lambda ctx, n, x: _const(n, 1.0)),
    (Pat(frozenset({Op.MAX, Op.MIN}), srcs=(var("x"), var("x"))), lambda ctx, x: x),
    (Pat(Op.WHERE, srcs=(var("m"), var("x"), var("x"))), lambda ctx, m, x: x),
    (Pat(Op.WHERE, srcs=(cvar("m"), var("a"), var("b"))), _where_const),
    (Pat(frozenset({Op.SUM, Op.RMAX}), srcs=(var("x"),), pred=_all_size_one),
     lambda ctx, x: x),
])


# -- value ranges of loop indices (exact) ------------------------------------------------
_EXACT = 2 ** 24           # integers of at most this magnitude are exact in float32


@lru_cache(maxsize=1 << 16)
def value_range(n: Node) -> tuple[float, float] | None:
    """Smallest and largest value ``n`` can take, where it follows from loop indices and
    constants (``INDEX``, ``CONST``, casts, ``+ - *``, ``//`` and ``%`` by a positive
    constant, ``where``, views), else None.
    Values are integers of at most ``2**24`` in magnitude (exact in float32).

    An explicit post-order walk that visits each node once: a chain deeper than Python's
    recursion limit, or a node reached by many paths (``z + z`` repeated), costs its size."""
    ranges: dict[int, tuple | None] = {}
    stack = [n]
    while stack:
        m = stack[-1]
        if m.id in ranges:
            stack.pop()
            continue
        need = [s for s in _range_operands(m) if s.id not in ranges]
        if need:
            stack.extend(need)
            continue
        stack.pop()
        ranges[m.id] = _range(m, [ranges[s.id] for s in _range_operands(m)])
    return ranges[n.id]


def _range_operands(n: Node) -> tuple:
    """The operands whose ranges :func:`_range` needs for ``n``."""
    op = n.op
    if op in _VIEWS or op is Op.CAST:
        return n.srcs[:1]
    if op in (Op.ADD, Op.SUB, Op.MUL, Op.MOD, Op.FLOORDIV):
        return n.srcs[:2]
    if op is Op.WHERE:
        return n.srcs[1:3]
    return ()


def _range(n: Node, srcs: list) -> tuple[float, float] | None:
    """:func:`value_range` of ``n`` given those of its :func:`_range_operands` ``srcs``."""
    op = n.op
    if op is Op.INDEX:
        r = n.arg.bounds()
    elif op is Op.CONST:
        v = float(n.arg)
        r = (v, v) if math.isfinite(v) and v == int(v) else None
    elif op in _VIEWS or op is Op.CAST:
        r = srcs[0]
    elif op in (Op.ADD, Op.SUB, Op.MUL):
        a, b = srcs
        if a is None or b is None:
            return None
        if op is Op.ADD:
            r = (a[0] + b[0], a[1] + b[1])
        elif op is Op.SUB:
            r = (a[0] - b[1], a[1] - b[0])
        else:
            p = [x * y for x in a for y in b]
            r = (min(p), max(p))
    elif op is Op.WHERE:
        a, b = srcs
        r = None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
    elif op in (Op.MOD, Op.FLOORDIV):
        a, c = srcs
        if c is None or c[0] != c[1] or c[0] <= 0 or (a is None and "int" not in n.dtype):
            return None
        c = c[0]
        if op is Op.FLOORDIV:
            r = None if a is None else (a[0] // c, a[1] // c)
        else:
            r = a if a is not None and 0 <= a[0] and a[1] < c else (0, c - 1)
    else:
        return None
    return r if r is not None and max(abs(r[0]), abs(r[1])) <= _EXACT else None


_DECIDE = {Op.CMPLT: lambda a, b: (a[1] < b[0], a[0] >= b[1]),
           Op.CMPLE: lambda a, b: (a[1] <= b[0], a[0] > b[1]),
           Op.CMPGT: lambda a, b: (a[0] > b[1], a[1] <= b[0]),
           Op.CMPGE: lambda a, b: (a[0] >= b[1], a[1] < b[0]),
           Op.CMPEQ: lambda a, b: (a[0] == a[1] == b[0] == b[1], a[1] < b[0] or b[1] < a[0]),
           Op.CMPNE: lambda a, b: (a[1] < b[0] or b[1] < a[0], a[0] == a[1] == b[0] == b[1])}


def _decided(ctx, n: Node, a: Node, b: Node):
    """A comparison the operands' ranges decide: always true or always false."""
    ra, rb = value_range(a), value_range(b)
    if ra is None or rb is None:
        return None
    true, false = _DECIDE[n.op](ra, rb)
    return _const(n, 1.0 if n.dtype == "float32" else True) if true else \
        _const(n, 0.0 if n.dtype == "float32" else False) if false else None


def _cast_back(ctx, n: Node, x: Node):
    """An integer cast to float and back, exact over its range."""
    exact = n.srcs[0].dtype in ("float32", "int32")
    return x if exact and x.dtype == n.dtype and value_range(x) is not None else None


RANGES = PatternMatcher([
    (Pat(frozenset(_DECIDE), srcs=(var("a"), var("b")), name="n"), _decided),
    (Pat(Op.CAST, srcs=(Pat(Op.CAST, srcs=(var("x"),)),), name="n"), _cast_back),
])


# -- movement-op folding (views of views, identity views) -------------------------------
def _permute(ctx, n: Node, x: Node):
    perm = n.arg
    if perm == tuple(range(len(perm))):
        return x
    if x.op is Op.PERMUTE:
        inner = x.arg
        return _new(n, Op.PERMUTE, (x.srcs[0],), tuple(inner[q] for q in perm))
    moved = [p for p in perm if x.shape[p] != 1]
    if moved == sorted(moved):                 # only size-1 dims move: a reshape
        return _new(n, Op.RESHAPE, (x,), n.shape)
    return None


def _slice_of_slice(ctx, n: Node, y: Node):
    """Element ``j`` of the outer slice is ``a2 + s2*j`` of the inner one, which is
    element ``a1 + s1*(a2 + s2*j)`` of ``x``."""
    x = y.srcs[0]
    spec = tuple((a1 + s1 * a2, a1 + s1 * a2 + s1 * s2 * m, s1 * s2)
                 for (a1, _, s1), (a2, _, s2), m in zip(y.arg, n.arg, n.shape))
    return _new(n, Op.SLICE, (x,), spec)


_same_shape = lambda n: n.shape == n.srcs[0].shape     # noqa: E731
_unit_slice = lambda n: _same_shape(n) and all(s == 1 for _, _, s in n.arg)   # noqa: E731

VIEWS = PatternMatcher([
    (Pat(frozenset({Op.RESHAPE, Op.EXPAND}), srcs=(var("x"),), pred=_same_shape),
     lambda ctx, x: x),
    (Pat(Op.RESHAPE, srcs=(Pat(Op.RESHAPE, srcs=(var("x"),)),), name="n"),
     lambda ctx, n, x: _new(n, Op.RESHAPE, (x,), n.arg)),
    (Pat(Op.EXPAND, srcs=(Pat(Op.EXPAND, srcs=(var("x"),)),), name="n"),
     lambda ctx, n, x: _new(n, Op.EXPAND, (x,), n.arg)),
    (Pat(Op.PERMUTE, srcs=(var("x"),), name="n"), _permute),
    (Pat(Op.SLICE, srcs=(var("x"),), pred=_unit_slice), lambda ctx, x: x),
    (Pat(Op.SLICE, srcs=(Pat(Op.SLICE, name="y"),), name="n"), _slice_of_slice),
    (Pat(Op.PAD, srcs=(var("x"),), pred=_same_shape), lambda ctx, x: x),
])


# -- rules that break IEEE 754 (fast_math=True only) ------------------------------------
def _div_any(ctx, n: Node, x: Node, c: Node):
    with np.errstate(all="ignore"):
        r = float(np.float32(1.0) / np.float32(c.arg))
    if not math.isfinite(r) or r == 0:
        return None
    return _new(n, Op.MUL, (x, _const(c, r)))


def _mul_mul(ctx, n: Node, x: Node, c1: Node, c2: Node):
    return _new(n, Op.MUL, (x, _const(c1, _f32(float(c1.arg) * float(c2.arg)))))


FAST_MATH = PatternMatcher([
    (Pat(Op.ADD, srcs=(var("x"), _PZERO), commutative=True), lambda ctx, x: x),
    (Pat(Op.SUB, srcs=(_PZERO, var("x")), name="n"), lambda ctx, n, x: _new(n, Op.NEG, (x,))),
    (Pat(Op.MUL, srcs=(var("x"), Pat(Op.CONST, pred=lambda c: c.arg == 0)), commutative=True,
         name="n"), lambda ctx, n, x: _const(n, 0.0)),
    (Pat(Op.SUB, srcs=(var("x"), var("x")), name="n"), lambda ctx, n, x: _const(n, 0.0)),
    (Pat(Op.DIV, srcs=(var("x"), cvar("c")), name="n"), _div_any),
    (Pat(Op.RECIP, srcs=(Pat(Op.RECIP, srcs=(var("x"),)),)), lambda ctx, x: x),
    (Pat(Op.MUL, srcs=(Pat(Op.MUL, srcs=(var("x"), cvar("c1")), commutative=True), cvar("c2")),
         commutative=True, name="n"), _mul_mul),
])

# -- target preferences -------------------------------------------------------------------
EXP2 = PatternMatcher([
    (Pat(Op.EXP, srcs=(var("x"),), name="n"),
     lambda ctx, n, x: _new(n, Op.EXP2, (_new(n, Op.MUL, (x, _const(n, LOG2E))),))),
    (Pat(Op.LOG, srcs=(var("x"),), name="n"),
     lambda ctx, n, x: _new(n, Op.MUL, (_new(n, Op.LOG2, (x,)), _const(n, LN2)))),
])


@lru_cache(maxsize=None)
def rules(fast_math: bool = False, prefer_exp2: bool = False) -> PatternMatcher:
    """The rule table for these options (constant folding first)."""
    pm = CONST_FOLD + UNARY + ALGEBRA + RANGES + VIEWS
    if fast_math:
        pm = pm + FAST_MATH
    if prefer_exp2:
        pm = pm + EXP2
    return pm


@dataclass
class _Counter:
    fired: int = 0


def simplify(graph: Graph, fast_math: bool = False, prefer_exp2: bool = False,
             max_sweeps: int = 8) -> Graph:
    """The graph with the simplification rules applied to a fixed point.

    Args:
        graph: the program (not modified).
        fast_math: also apply the rules that break IEEE 754 (``FAST_MATH``).
        prefer_exp2: rewrite ``exp``/``log`` to base 2 (``EXP2``).
        max_sweeps: bound on whole-graph sweeps; a sweep in which no rule fires ends early
            (rules see rewritten operands, so one sweep usually reaches the fixed point).

    Returns:
        A new :class:`Graph`; replaced nodes are dropped, their operands stay (the ``prune``
        pass removes what became dead). ``outputs`` keep their positions.

    Complexity: O(sweeps * (nodes + edges) * rules per op), each rule a pattern of a few
    nodes: linear in graph size.
    """
    pm = rules(fast_math, prefer_exp2)
    count = _Counter()

    def visit(n: Node) -> Node:
        r = pm.rewrite(n)
        if r is None or r is n:
            return n
        count.fired += 1
        return r

    for _ in range(max_sweeps):
        count.fired = 0
        graph = rebuild(graph, visit)
        if not count.fired:
            break
    return graph
