"""``.grad`` as program state: what PyTorch's eager semantics give across loop iterations
and branches, for a body that is traced once.

In PyTorch ``p.grad`` is state: ``backward()`` adds into whatever the previous iteration
left there, unless something zeroed it. A loop body here is traced once, so the value
``p.grad`` holds when the body's tracing starts (its *entry* value) stands for what every
iteration finds. Two rules keep the traced program equal to the eager one:

* **Loops** (``ir_for``, ``ir_while``): when ``backward()`` adds into the entry value
  (nothing in the body has set ``p.grad`` yet), the gradient is *carried*: it lives in a
  variable that the body reads there and, if the body leaves another value, assigns at the
  end of the iteration (JAX's loop carry, made for the one piece of state PyTorch keeps
  outside variables). Gradient accumulation written as in PyTorch (``backward()`` every
  iteration, ``ir_if((i + 1) % k == 0, step_and_zero_grad)``) is then the same program. A
  body that leaves ``None`` (``zero_grad()`` at its end) needs no carry: the read becomes
  a zero constant and the variable is dropped.
* **Branches** (``ir_if``): ``.grad`` set in a branch is that branch's; after the ``IF``,
  ``p.grad`` is the branch result (``None`` counts as zeros when the other branch has a
  value), never the last-traced branch's Python value.

Scopes log each tensor's first ``.grad`` write (:attr:`~.trace.Scope.grads`: ``id`` ->
``(tensor, value before it)``), which is how "nothing in the body has set it yet" and the
branches' values are known.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import ops
from .ir import Node, Op, Variable
from .trace import TRACER


@dataclass(eq=False)
class Carry:
    """A gradient carried by loop ``scope``: ``var`` holds it between iterations."""
    tensor: object
    var: Variable
    fresh: bool                                   # var starts at zeros, assigned nowhere else
    loads: list = field(default_factory=list)     # the body's LOAD nodes of var


def note_write(t) -> None:
    """``t.grad`` is about to be set: log its value before the first write in this scope."""
    s = TRACER.scope
    if s.parent is not None:
        s.grads.setdefault(id(t), (t, t._grad))


def _written_since_loop(t):
    """The innermost loop scope enclosing the current one (None at the top level) and
    whether ``t.grad`` was set in it (or in a scope nested in it) so far."""
    s = TRACER.scope
    while s is not None:
        if id(t) in s.grads:
            return s, True
        if s.loop:
            return s, False
        s = s.parent
    return None, False


def base(t) -> Node | None:
    """The node ``backward()`` adds a new gradient of ``t`` to (None: it sets ``t.grad``)."""
    loop, written = _written_since_loop(t)
    if loop is not None and not written:
        return _carried(loop, t)
    g = t._grad
    if g is None:
        return None
    if g._var is not None:
        return TRACER.read(g._var, False)
    if g._generation == TRACER.generation and TRACER.in_scope(g._scope):
        return g._node
    return None                   # a gradient of a finished program or a closed loop body


def _carried(loop, t) -> Node:
    c = loop.carries.get(id(t))
    if c is None:
        inner, TRACER.scope = TRACER.scope, loop.parent
        try:
            init = base(t)                     # the value the loop starts from
            var = Variable(np.zeros(t.shape, str(t.dtype.name)),
                           f"{t.name or 'tensor'}.grad")
            if init is not None:
                TRACER.assign(var, init, False)
        finally:
            TRACER.scope = inner
        c = loop.carries[id(t)] = Carry(t, var, fresh=init is None)
    node = TRACER.read(c.var, False)
    if node.op is Op.LOAD and node not in c.loads:
        c.loads.append(node)
    return node


def close_loop(loop) -> None:
    """End of a loop body's tracing (``loop`` still current): assign each carried gradient
    the value the body leaves; afterwards ``t.grad`` reads the carry variable."""
    from .tensor import Tensor
    for c in loop.carries.values():
        end = c.tensor._grad
        if end is None and c.fresh:
            for n in c.loads:              # zeros at every iteration: no variable needed
                object.__setattr__(n, "op", Op.CONST)
                object.__setattr__(n, "arg", 0.0 if n.dtype.startswith(("float", "bf"))
                                   else 0)
            continue
        value = (ops.const(0, c.var.shape, c.var.dtype) if end is None
                 else TRACER.read(end._var, False) if end._var is not None else end._node)
        TRACER.assign(c.var, value, False)
        if end is not None:
            c.tensor._grad = Tensor._of_var(c.var)
    parent = loop.parent
    for k, v in loop.grads.items():
        parent.grads.setdefault(k, v)


def branch_ends(scope) -> dict:
    """End of a branch's tracing: the ``.grad`` values it leaves (``id`` -> value), each
    tensor put back to its value before the branch for the other branch's tracing."""
    ends = {}
    for k, (t, before) in scope.grads.items():
        ends[k] = t._grad
        t._grad = before
    return ends


def merge_branches(scopes, ends) -> list:
    """After both branches: ``[(tensor, node per branch)]`` for every tensor whose
    ``.grad`` the branches leave different; tensors they leave equal get that value. Nodes
    are emitted in the branch scopes (zeros for ``None``, a copy for a value from outside)."""
    tensors = {}
    for s in scopes:
        for k, (t, before) in s.grads.items():
            tensors.setdefault(k, (t, before))
    out = []
    for k, (t, before) in tensors.items():
        vals = [e.get(k, before) for e in ends]
        if all(v is vals[0] for v in vals):
            t.grad = vals[0]
            continue
        out.append((t, [_node_in(s, v, t) for s, v in zip(scopes, vals)]))
    return out


def _node_in(scope, v, t) -> Node:
    inner, TRACER.scope = TRACER.scope, scope
    try:
        if v is None:
            return ops.const(0, t.shape, t.dtype.name)
        if v._var is not None:
            return TRACER.read(v._var, False)
        n = v._node
        if n.id in scope.ids:
            return n
        return TRACER.emit(n.replace(op=Op.RESHAPE, srcs=(n,), arg=n.shape,
                                     requires_grad=False))
    finally:
        TRACER.scope = inner
