"""Reverse-mode AD on the graph IR: one gradient rule per op, kept together in ``GRADS``.

``GRADS[op]`` is a tuple with one rule per operand, ``rule(g, out, *srcs) -> Node``: the
gradient for that operand given the output gradient ``g`` (same shape as ``out``). A rule of
``None`` marks an operand that takes no gradient. The layout follows tinygrad's
``gradient.py`` table; the walk is micrograd's (reverse topological order, ``+=`` on fan-out).

Only floating values carry gradients (integer and bool nodes never require grad); a rule
may compute in a wider dtype (masks are bool, constants float32): the walk casts every
gradient to its operand's dtype, as PyTorch's autograd does.
"""
from __future__ import annotations

import itertools
import math
import weakref

import numpy as np

from . import dtypes
from .ir import BITWISE, Op, Node
from .ops import (LN2, add, binary, cast, const, div, dot, expand, gather,
                  mul, neg, permute, reduce, reshape, scale, scatter_add, slice_, sub,
                  swap_last, unary, unslice, where, window_fold)
from .trace import TRACER


def _cmp(op, a, b): return binary(op, a, b)
def _one(x): return const(1.0, x.shape, x.dtype)
def _zero(x): return const(0.0, x.shape, x.dtype)


def _unbroadcast_expand(g: Node, out: Node, x: Node) -> Node:
    axes = [i for i, (a, b) in enumerate(zip(x.shape, out.shape)) if a != b]
    return reduce(Op.SUM, g, axes)


def _max_mask(out: Node, x: Node) -> Node:
    """Ties share the gradient evenly, as ``torch.amax`` does."""
    hit = cast(_cmp(Op.CMPEQ, x, expand(out, x.shape)), x.dtype)
    axes = [i for i, (a, b) in enumerate(zip(x.shape, out.shape)) if a != b]
    return div(hit, expand(reduce(Op.SUM, hit, axes), x.shape))


def _pairwise_max(a, b, first: bool):
    """``torch.maximum``: the gradient goes to the larger operand, split evenly on ties."""
    win = _cmp(Op.CMPGT, a, b) if first else _cmp(Op.CMPLT, a, b)
    return add(win, scale(_cmp(Op.CMPEQ, a, b), 0.5))


def _pairwise_min(a, b, first: bool):
    win = _cmp(Op.CMPLT, a, b) if first else _cmp(Op.CMPGT, a, b)
    return add(win, scale(_cmp(Op.CMPEQ, a, b), 0.5))


def _slice_back(g, out, x):
    return unslice(g, out.arg, x.shape)


def _pad_back(g, out, x):
    return slice_(g, [(a, a + d, 1) for (a, _), d in zip(out.arg, x.shape)])


def _window_back(g, out, x):
    dim, size, step, dil = out.arg
    return window_fold(g, dim, x.shape[dim], size, step, dil)


def _concat_rule(i):
    def rule(g, out, *xs):
        start = sum(x.shape[out.arg] for x in xs[:i])
        spec = [(0, d, 1) for d in out.shape]
        spec[out.arg] = (start, start + xs[i].shape[out.arg], 1)
        return slice_(g, spec)
    return rule


def _pow_base(g, o, a, b):
    """``b * a**(b-1)``, and 0 where ``b == 0`` (PyTorch: ``x ** 0`` has gradient 0 even
    at ``x = 0``, where the formula gives ``0 * inf``)."""
    d = mul(b, binary(Op.POW, a, sub(b, _one(b))))
    return where(_cmp(Op.CMPEQ, b, const(0.0, b.shape)), const(0.0, g.shape), mul(g, d))


def _pow_exponent(g, o, a, b):
    """``a**b * log(a)``, and 0 where ``a == 0`` and ``b >= 0`` (PyTorch's convention for
    ``0 ** x``, where the formula gives ``0 * -inf``)."""
    zero = const(0.0, a.shape)
    mask = mul(_cmp(Op.CMPEQ, a, zero), _cmp(Op.CMPGE, b, zero))
    return where(mask, const(0.0, g.shape), mul(g, mul(o, unary(Op.LOG, a))))


def _float(x: Node) -> bool:
    return dtypes.is_floating(x.dtype)


def _no_derivative(name: str):
    def rule(g, out, *srcs):
        raise RuntimeError(f"derivative for {name} is not implemented (as in PyTorch)")
    return rule


GRADS: dict = {
    Op.NEG: (lambda g, o, x: neg(g),),
    Op.EXP: (lambda g, o, x: mul(g, o),),
    Op.LOG: (lambda g, o, x: div(g, x),),
    Op.EXP2: (lambda g, o, x: mul(g, scale(o, LN2)),),
    Op.LOG2: (lambda g, o, x: div(g, scale(x, LN2)),),
    Op.SQRT: (lambda g, o, x: div(g, scale(o, 2.0)),),
    Op.RSQRT: (lambda g, o, x: mul(g, scale(div(o, x), -0.5)),),
    Op.RECIP: (lambda g, o, x: neg(mul(g, mul(o, o))),),
    Op.SIN: (lambda g, o, x: mul(g, unary(Op.COS, x)),),
    Op.COS: (lambda g, o, x: neg(mul(g, unary(Op.SIN, x))),),
    Op.TANH: (lambda g, o, x: mul(g, sub(_one(o), mul(o, o))),),
    Op.SIGMOID: (lambda g, o, x: mul(g, mul(o, sub(_one(o), o))),),
    # from the result, as torch's threshold_backward(grad, result, 0): the input is then
    # dead after the forward (a fused forward stores no mask beside the result), a NaN
    # passes its gradient through and an infinite gradient at x <= 0 gives 0, not NaN
    Op.RELU: (lambda g, o, x: where(_cmp(Op.CMPLE, o, _zero(o)), _zero(g), g),),
    Op.ABS: (lambda g, o, x: mul(g, unary(Op.SIGN, x)),),
    Op.ERF: (lambda g, o, x: mul(g, scale(unary(Op.EXP, neg(mul(x, x))), 2 / math.sqrt(math.pi))),),
    Op.SIGN: (None,),
    Op.ATAN: (lambda g, o, x: div(g, add(_one(x), mul(x, x))),),
    Op.LOG1P: (lambda g, o, x: div(g, add(_one(x), x)),),
    Op.EXPM1: (lambda g, o, x: mul(g, add(o, _one(o))),),
    Op.CAST: (lambda g, o, x: cast(g, x.dtype) if _float(x) else None,),
    Op.ADD: (lambda g, o, a, b: g, lambda g, o, a, b: g),
    Op.SUB: (lambda g, o, a, b: g, lambda g, o, a, b: neg(g)),
    Op.MUL: (lambda g, o, a, b: mul(g, b), lambda g, o, a, b: mul(g, a)),
    Op.DIV: (lambda g, o, a, b: div(g, b), lambda g, o, a, b: neg(div(mul(g, o), b))),
    Op.POW: (_pow_base, _pow_exponent),
    Op.MAX: (lambda g, o, a, b: mul(g, _pairwise_max(a, b, True)),
             lambda g, o, a, b: mul(g, _pairwise_max(a, b, False))),
    Op.MIN: (lambda g, o, a, b: mul(g, _pairwise_min(a, b, True)),
             lambda g, o, a, b: mul(g, _pairwise_min(a, b, False))),
    Op.WHERE: (None,
               lambda g, o, m, a, b: where(m, g, _zero(g)),
               lambda g, o, m, a, b: where(m, _zero(g), g)),
    Op.FLOORDIV: (_no_derivative("floor_divide"), _no_derivative("floor_divide")),
    Op.MOD: (lambda g, o, a, b: g,
             lambda g, o, a, b: neg(mul(g, binary(Op.FLOORDIV, a, b)))),
    Op.DOT: (lambda g, o, a, b: dot(g, swap_last(b)), lambda g, o, a, b: dot(swap_last(a), g)),
    Op.SUM: (lambda g, o, x: expand(g, x.shape),),
    Op.RMAX: (lambda g, o, x: mul(expand(g, x.shape), _max_mask(o, x)),),
    Op.RESHAPE: (lambda g, o, x: reshape(g, x.shape),),
    Op.PERMUTE: (lambda g, o, x: permute(g, tuple(int(i) for i in np.argsort(o.arg))),),
    Op.EXPAND: (lambda g, o, x: _unbroadcast_expand(g, o, x),),
    Op.SLICE: (_slice_back,),
    Op.PAD: (_pad_back,),
    Op.WINDOW: (_window_back,),
    Op.GATHER: (lambda g, o, t, i: scatter_add(g, i, t.shape[0]), None),
    Op.SCATTER_ADD: (lambda g, o, u, i: gather(g, i), None),
}


class _PerOperand:
    """Rules of a variadic op (``CONCAT``): ``make(i)`` is the rule for operand ``i``."""

    def __init__(self, make) -> None:
        self.make = make

    def __iter__(self):
        return map(self.make, itertools.count())


GRADS[Op.CONCAT] = _PerOperand(_concat_rule)
for _op in (Op.CMPLT, Op.CMPLE, Op.CMPGT, Op.CMPGE, Op.CMPEQ, Op.CMPNE, *BITWISE):
    GRADS[_op] = (None,) if _op is Op.NOT else (None, None)


GRADS[Op.AFTER] = (lambda g, o, x, anchor: g, None)


class _CallbackRule:
    """``CALLBACK``: the gradients of all operands come from one call of the node's
    ``CallbackSpec.vjp(g, out, *srcs)`` (traced once per node and output gradient)."""

    def __init__(self) -> None:
        self.last: tuple = (None, None, ())

    def __iter__(self):
        return map(self.rule, itertools.count())

    def rule(self, i: int):
        def grad(g, out, *srcs):
            vjp = out.arg.vjp
            if vjp is None:
                raise RuntimeError(f"derivative for host callback '{out.arg.name}' is not "
                                   "implemented (give it a vjp)")
            if self.last[0] != out.id or self.last[1] is not g:
                gs = tuple(vjp(g, out, *srcs))
                if len(gs) != len(srcs):
                    raise RuntimeError(f"vjp of host callback '{out.arg.name}' returned "
                                       f"{len(gs)} gradients for {len(srcs)} operands")
                self.last = (out.id, g, gs)
            return self.last[2][i]
        return grad


GRADS[Op.CALLBACK] = _CallbackRule()

#: functions queued by :func:`queue_callback` during the current ``backward()`` (a stack:
#: one list per ``backward()`` being traced)
_QUEUED: list[list] = []

#: gradient hooks of traced values (``Tensor.register_hook``, ``retain_grad``): node ->
#: ``{key: fn}``, ``fn(g: Node) -> Node`` called in insertion order on the node's summed
#: gradient when a reverse sweep reaches it, each on the previous one's result; the
#: :data:`RETAIN` entry is called last, its result ignored (PyTorch runs ``retain_grad``'s
#: hook after the others). Weak: a node nothing references takes its hooks with it.
TENSOR_HOOKS: "weakref.WeakKeyDictionary[Node, dict]" = weakref.WeakKeyDictionary()
RETAIN = "retain_grad"


def _hooked(n: Node, g: Node) -> Node:
    """``g``, the gradient of ``n``, through ``n``'s hooks (:data:`TENSOR_HOOKS`)."""
    hooks = TENSOR_HOOKS.get(n)
    if not hooks:
        return g
    from . import control_ad
    for key, fn in list(hooks.items()):
        if key != RETAIN:
            start = len(TRACER.scope.graph.nodes)
            g = control_ad.fix_fresh(start, fn(g))
    if RETAIN in hooks:
        hooks[RETAIN](g)
    return g


#: leaves of a backward sweep: variables' values, and a scan body's carries and slices
LEAVES = frozenset({Op.LOAD, Op.ASSIGN, Op.ARG})


def backward(root: Node, seed: Node, on_leaf) -> None:
    """Trace the backward pass of ``root`` into the current scope.

    Args:
        root: the node to differentiate (any shape).
        seed: its gradient, same shape as ``root``.
        on_leaf: ``on_leaf(node, grad)`` is called once per variable that requires grad
            (``node``: one of its ``LOAD``/``ASSIGN`` nodes), with the gradient summed over
            all of its nodes (a variable read, updated in place under ``no_grad`` and read
            again has two).

    Only nodes of the current scope take part: a value computed in an enclosing scope (read
    by a loop body) is a constant for this backward pass. Complexity: O(nodes + edges).
    """
    ids = TRACER.scope.ids
    if root.id not in ids:
        raise RuntimeError("backward(): the tensor was not computed in the current scope")
    queued: list = []
    _QUEUED.append(queued)
    try:
        leaves: dict = {}              # variable -> (first node, summed gradient)
        for n, g in vjp([(root, seed)], ids, lambda n: False):
            if n.op in (Op.LOAD, Op.ASSIGN):
                first = leaves.get(n.arg)
                leaves[n.arg] = (n, g) if first is None else (first[0], add(first[1], g))
        for n, g in leaves.values():   # once per variable, as PyTorch's AccumulateGrad
            on_leaf(n, g)
        while queued:                  # finalizers, in order (one may queue another)
            queued.pop(0)()
    finally:
        _QUEUED.pop()


def queue_callback(fn) -> None:
    """Run ``fn()`` once the ``backward()`` being traced has accumulated every gradient
    (PyTorch's ``Variable._execution_engine.queue_callback``; what a gradient hook uses to
    finish its work, e.g. :class:`autodiff.distributed.DistributedDataParallel`'s
    all-reduce of partly filled buckets).

    Raises:
        RuntimeError: no ``backward()`` is being traced.
    """
    if not _QUEUED:
        raise RuntimeError("queue_callback() can only be called during backward()")
    _QUEUED[-1].append(fn)


def vjp(seeds, inside, wanted) -> list[tuple[Node, Node]]:
    """The reverse sweep: gradients of ``seeds`` (``(node, gradient)`` pairs) through the
    nodes whose ids are in ``inside``, traced into the current scope.

    Nodes holding sub-graphs (``IF``, ``SCAN``) and :func:`~.control.checkpoint` regions
    are differentiated as a whole by :mod:`.control_ad`.

    Args:
        seeds: where the gradients start.
        inside: ids of the nodes the sweep goes through (one graph's nodes).
        wanted: ``wanted(node)`` for a node outside ``inside``: whether its gradient is
            needed (a value a sub-graph reads from its enclosing graph).

    Returns:
        ``(node, summed gradient)`` for the leaves reached (``LOAD``/``ASSIGN``/``ARG``
        nodes; variables assigned inside a branch too) and the wanted nodes outside
        ``inside``, in the order the sweep reached them (descending id).
    """
    from . import control_ad
    grads: dict[int, Node] = {}
    out: dict[int, tuple[Node, Node]] = {}
    order, seen, stack = [], set(), []

    def reach(s: Node) -> None:
        if s.requires_grad and s.id in inside and s.id not in seen:
            seen.add(s.id)
            stack.append(s)

    def give(s: Node, g: Node) -> None:
        if s.id in seen:
            grads[s.id] = add(grads[s.id], g) if s.id in grads else g
        elif s.id not in inside and (s.op in (Op.LOAD, Op.ASSIGN) or wanted(s)):
            out[s.id] = (s, add(out[s.id][1], g)) if s.id in out else (s, g)

    for n, g in seeds:
        reach(n)
        give(n, g)
    while stack:
        n = stack.pop()
        order.append(n)
        if n.op not in LEAVES:
            for s in control_ad.operands(n):
                reach(s)
    order.sort(key=lambda n: n.id, reverse=True)
    regions = control_ad.regions_in(inside)
    pending: dict[int, dict] = {}             # control node id -> {result k: gradient}
    inner = lambda x: x.id in inside or wanted(x)   # noqa: E731
    for n in order:
        if n.id in regions:
            done = regions.pop(n.id)
            if done is not None:
                for m in done.nodes:
                    regions[m.id] = None
                gouts = {m.id: _hooked(m, grads.pop(m.id)) for m in done.nodes
                         if m.id in grads}
                start = len(TRACER.scope.graph.nodes)
                for s, gs in control_ad.checkpoint_vjp(done, gouts, inner):
                    give(s, control_ad.fix_fresh(start, gs))
            grads.pop(n.id, None)
            continue
        if n.op in control_ad.CONTROL_VJP:
            gout = pending.pop(n.id, None)
            if gout:
                start = len(TRACER.scope.graph.nodes)
                for s, gs in control_ad.CONTROL_VJP[n.op](n, gout, inner):
                    give(s, control_ad.fix_fresh(start, gs))
            continue
        g = grads.pop(n.id, None)
        if g is None:
            continue
        g = _hooked(n, g)
        if n.op in LEAVES:
            out[n.id] = (n, g)
            continue
        if n.op is Op.RESULT:
            ctl = pending.setdefault(n.srcs[0].id, {})
            ctl[n.arg] = add(ctl[n.arg], g) if n.arg in ctl else g
            continue
        rules = GRADS.get(n.op)
        if rules is None:
            raise NotImplementedError(f"no gradient rule for {n.op.name}")
        for s, rule in zip(n.srcs, rules):
            if rule is None or not s.requires_grad or (s.id not in seen and (
                    s.id in inside or not wanted(s))):
                continue
            start = len(TRACER.scope.graph.nodes)
            gs = rule(g, n, *n.srcs)
            if gs is None:
                continue
            if gs.dtype != s.dtype:
                gs = cast(gs, s.dtype)
            give(s, control_ad.fix_fresh(start, gs))
    return list(out.values())
