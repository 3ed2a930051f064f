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

import numpy as np

from . import dtypes
from .ir import BITWISE, Op, Node
from .ops import (LN2, add, binary, cast, const, div, dot, expand, gather,
                  mul, neg, pad, permute, reduce, reshape, scale, scatter_add, slice_, sub,
                  swap_last, unary, where)
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
    return pad(g, [(a, d - b) for (a, b, _), d in zip(out.arg, x.shape)])


def _pad_back(g, out, x):
    return slice_(g, [(a, a + d, 1) for (a, _), d in zip(out.arg, x.shape)])


def _concat_rule(i):
    def rule(g, out, *xs):
        start = sum(x.shape[out.arg] for x in xs[:i])
        spec = [(0, d, 1) for d in out.shape]
        spec[out.arg] = (start, start + xs[i].shape[out.arg], 1)
        return slice_(g, spec)
    return rule


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
    Op.RELU: (lambda g, o, x: mul(g, _cmp(Op.CMPGT, x, const(0.0, x.shape))),),
    Op.ABS: (lambda g, o, x: mul(g, unary(Op.SIGN, x)),),
    Op.ERF: (lambda g, o, x: mul(g, scale(unary(Op.EXP, neg(mul(x, x))), 2 / math.sqrt(math.pi))),),
    Op.SIGN: (None,),
    Op.CAST: (lambda g, o, x: cast(g, x.dtype) if _float(x) else None,),
    Op.ADD: (lambda g, o, a, b: g, lambda g, o, a, b: g),
    Op.SUB: (lambda g, o, a, b: g, lambda g, o, a, b: neg(g)),
    Op.MUL: (lambda g, o, a, b: mul(g, b), lambda g, o, a, b: mul(g, a)),
    Op.DIV: (lambda g, o, a, b: div(g, b), lambda g, o, a, b: neg(div(mul(g, o), b))),
    Op.POW: (lambda g, o, a, b: mul(g, mul(b, binary(Op.POW, a, sub(b, _one(b))))),
             lambda g, o, a, b: mul(g, mul(o, unary(Op.LOG, a)))),
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


def backward(root: Node, seed: Node, on_leaf) -> None:
    """Trace the backward pass of ``root`` into the current scope.

    Args:
        root: the node to differentiate (any shape).
        seed: its gradient, same shape as ``root``.
        on_leaf: ``on_leaf(node, grad)`` is called once per ``LOAD``/``ASSIGN`` node that
            requires grad (a variable's value), with the summed gradient.

    Only nodes of the current scope take part: a value computed in an enclosing scope (read
    by a loop body) is a constant for this backward pass. Complexity: O(nodes + edges).
    """
    ids = TRACER.scope.ids
    if root.id not in ids:
        raise RuntimeError("backward(): the tensor was not computed in the current scope")
    # Node ids increase in creation order and operands are created before users, so
    # descending id order is a reverse topological order.
    order, seen, stack = [], {root.id}, [root]
    while stack:
        n = stack.pop()
        order.append(n)
        if n.op in (Op.LOAD, Op.ASSIGN):
            continue
        for s in n.srcs:
            if s.requires_grad and s.id in ids and s.id not in seen:
                seen.add(s.id)
                stack.append(s)
    order.sort(key=lambda n: n.id, reverse=True)
    grads = {root.id: seed}
    for n in order:
        g = grads.pop(n.id, None)
        if g is None:
            continue
        if n.op in (Op.LOAD, Op.ASSIGN):
            on_leaf(n, g)
            continue
        rules = GRADS.get(n.op)
        if rules is None:
            raise NotImplementedError(f"no gradient rule for {n.op.name}")
        for s, rule in zip(n.srcs, rules):
            if rule is None or not s.requires_grad or s.id not in seen:
                continue
            gs = rule(g, n, *n.srcs)
            if gs is None:
                continue
            if gs.dtype != s.dtype:
                gs = cast(gs, s.dtype)
            grads[s.id] = add(grads[s.id], gs) if s.id in grads else gs
