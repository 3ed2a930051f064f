"""Tracing state: the program being built, its scopes, and where user code traced each node.

One :class:`Tracer` exists per process (``TRACER``). It holds the graph of the program being
traced; :func:`autodiff.execute` takes it with :meth:`Tracer.finish` and leaves a fresh one,
so nothing leaks from one program to the next.
"""
from __future__ import annotations

import contextlib
import os
import sys
import weakref
from dataclasses import dataclass, field

from .ir import ForArg, Graph, Node, Op, Variable

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_site() -> str:
    """``file:line`` of the innermost stack frame outside the autodiff package."""
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_PKG_DIR):
        f = f.f_back
    if f is None:
        return "?"
    path = f.f_code.co_filename
    try:
        rel = os.path.relpath(path)
        path = rel if not rel.startswith("..") else path
    except ValueError:
        pass
    return f"{path}:{f.f_lineno}"


@dataclass(eq=False)
class Scope:
    """One graph under construction: the top level or a ``For`` body."""
    graph: Graph
    parent: "Scope | None" = None
    current: dict = field(default_factory=dict)   # Variable -> latest Node in this scope
    ids: set = field(default_factory=set)          # ids of nodes emitted here
    assigned: set = field(default_factory=set)     # Variables assigned here (or nested)


class Tracer:
    """Builds the graph IR as user code runs."""

    def __init__(self) -> None:
        self.root = Scope(Graph())
        self.scope = self.root
        self.generation = 0
        self.grad_enabled = True
        self.outputs: "weakref.WeakSet" = weakref.WeakSet()  # top-level tensors
        self.last = None   # artifacts of the last execute(), for printers

    # -- emission -------------------------------------------------------------------
    def emit(self, node: Node) -> Node:
        self.scope.graph.nodes.append(node)
        self.scope.ids.add(node.id)
        return node

    def in_scope(self, scope: Scope) -> bool:
        """Whether values of ``scope`` are readable now (it is open on the scope stack)."""
        s = self.scope
        while s is not None:
            if s is scope:
                return True
            s = s.parent
        return False

    def read(self, var: Variable, requires_grad: bool) -> Node:
        """The node holding ``var``'s value at this point of the program."""
        node = self.scope.current.get(var)
        if node is None and getattr(self.scope, "hoist", False):
            # an ir_if branch or scan body (graph/control.py): the enclosing scope's value
            inner, self.scope = self.scope, self.scope.parent
            try:
                node = self.read(var, requires_grad)
            finally:
                self.scope = inner
            inner.current[var] = node
        elif node is None:
            node = self.emit(Node(Op.LOAD, (), var.shape, var.dtype, var, user_site(),
                                  requires_grad))
            self.scope.current[var] = node
        return node

    def assign(self, var: Variable, value: Node, requires_grad: bool) -> Node:
        node = self.emit(Node(Op.ASSIGN, (value,), var.shape, var.dtype, var, user_site(),
                              requires_grad))
        self.scope.current[var] = node
        self.scope.assigned.add(var)
        return node

    # -- loops ----------------------------------------------------------------------
    def open_loop(self) -> Scope:
        self.scope = Scope(Graph(), parent=self.scope)
        return self.scope

    def close_loop(self, body: Scope, rng: range, site: str) -> Node:
        assert self.scope is body
        parent = body.parent
        self.scope = parent
        node = self.emit(Node(Op.FOR, (), (), "float32", ForArg(rng, body.graph), site))
        for var in body.assigned:            # later reads see the loop's final value
            parent.current.pop(var, None)
            parent.assigned.add(var)
        return node

    # -- programs -------------------------------------------------------------------
    def finish(self) -> Graph:
        """Take the traced program (outputs: top-level tensors still referenced) and reset."""
        if self.scope is not self.root:
            raise RuntimeError("execute() called inside ir_for(): finish the loop body first")
        graph = self.root.graph
        graph.outputs = [t._node for t in list(self.outputs)
                         if t._var is None and t._node is not None and t._scope is self.root]
        self.root = Scope(Graph())
        self.scope = self.root
        self.generation += 1
        self.outputs = weakref.WeakSet()
        return graph

    def reset(self) -> None:
        """Drop whatever is being traced (used by tests and after errors)."""
        self.root = Scope(Graph())
        self.scope = self.root
        self.generation += 1
        self.outputs = weakref.WeakSet()
        self.grad_enabled = True


TRACER = Tracer()


@contextlib.contextmanager
def no_grad():
    """Context manager: ops traced inside do not record gradients (like ``torch.no_grad``)."""
    prev = TRACER.grad_enabled
    TRACER.grad_enabled = False
    try:
        yield
    finally:
        TRACER.grad_enabled = prev
