"""Tracing state: the program being built, its scopes, and where user code traced each node;
and which running ``execute()`` owns each variable.

One :class:`Tracer` exists per thread (``TRACER`` is the calling thread's: two threads trace
two programs independently). It holds the graph of the program being traced;
:func:`autodiff.execute` takes it with :meth:`Tracer.finish` and leaves a fresh one, so
nothing leaks from one program to the next.

While ``execute()`` runs a program it owns the program's variables (:data:`OWNERS`): their
host values are from before the run, so reading one on the running thread (in a Feeder or
Receiver callback: ``.numpy()``, ``state_dict()``, a nested ``execute()``) raises, and
another thread's read, write or ``execute()`` waits until the run has written its values
back.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import os
import sys
import threading
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
    try:
        cwd = os.getcwd()
    except OSError:             # the working directory was removed
        cwd = None
    return f"{_shown(f.f_code.co_filename, cwd)}:{f.f_lineno}"


@functools.lru_cache(maxsize=256)
def _shown(path: str, cwd: str | None) -> str:
    """``path`` relative to ``cwd`` when it lies below it, else as it is (computed once
    per file and directory: every traced node asks)."""
    if cwd is None:
        return path
    try:
        rel = os.path.relpath(path, cwd)
        return rel if not rel.startswith("..") else path
    except ValueError:
        return path


@dataclass(eq=False)
class Scope:
    """One graph under construction: the top level or a ``For`` body."""
    graph: Graph
    parent: "Scope | None" = None
    current: dict = field(default_factory=dict)   # Variable -> latest Node in this scope
    ids: set = field(default_factory=set)          # ids of nodes emitted here
    assigned: set = field(default_factory=set)     # Variables assigned here (or nested)
    loop: bool = False                             # a loop body (``ir_for``, ``ir_while``)
    grads: dict = field(default_factory=dict)      # first ``.grad`` writes: grad_state
    carries: dict = field(default_factory=dict)    # gradients carried by this loop: grad_state


_generations = itertools.count()


class Tracer:
    """Builds the graph IR as user code runs (one per thread)."""

    def __init__(self) -> None:
        self.root = Scope(Graph())
        self.scope = self.root
        self.generation = next(_generations)      # unique across threads
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
        self.scope = Scope(Graph(), parent=self.scope, loop=True)
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
    def live_outputs(self) -> list:
        """The top-level tensors still referenced that hold a traced value, in trace order
        (node id). A WeakSet iterates in memory order, which would make the program's
        outputs, and so its generated source and every compile cache key, differ from run
        to run."""
        return sorted((t for t in list(self.outputs)
                       if t._var is None and t._node is not None and t._scope is self.root),
                      key=lambda t: t._node.id)

    def finish(self) -> Graph:
        """Take the traced program (outputs: top-level tensors still referenced) and reset."""
        if self.scope is not self.root:
            raise RuntimeError("execute() called inside ir_for(): finish the loop body first")
        graph = self.root.graph
        graph.outputs = [t._node for t in self.live_outputs()]
        self.root = Scope(Graph())
        self.scope = self.root
        self.generation = next(_generations)
        self.outputs = weakref.WeakSet()
        return graph

    def reset(self) -> None:
        """Drop whatever is being traced (used by tests and after errors)."""
        self.root = Scope(Graph())
        self.scope = self.root
        self.generation = next(_generations)
        self.outputs = weakref.WeakSet()
        self.grad_enabled = True


class _PerThread(threading.local):
    def __init__(self) -> None:
        self.tracer = Tracer()


_local = _PerThread()


class _ThreadTracer:
    """``TRACER``: every attribute is the calling thread's :class:`Tracer`'s."""
    __slots__ = ()

    def __getattr__(self, name):
        return getattr(_local.tracer, name)

    def __setattr__(self, name, value) -> None:
        setattr(_local.tracer, name, value)


TRACER = _ThreadTracer()


class Ownership:
    """Which running ``execute()`` owns each variable (by ``Variable.id``).

    A run owns the variables of its program from before it reads their values until it
    has written them back. :meth:`acquire` waits while another thread's run owns one of
    them and raises for one owned by a run on the calling thread (a nested ``execute()``
    from a callback); :meth:`check` does the same for a host read or write of one variable.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._owner: dict[int, tuple] = {}        # variable id -> (run token, thread)

    def acquire(self, variables, token) -> None:
        """Own ``variables`` for the run ``token`` (all at once, never some of them)."""
        me = threading.get_ident()
        with self._cond:
            while True:
                held = [v for v in variables if v.id in self._owner]
                mine = [v for v in held if self._owner[v.id][1] == me]
                if mine:
                    raise RuntimeError(
                        f"{_names(mine)} owned by the execute() running on this thread (this "
                        "is one of its callbacks): its host values are from before that run. "
                        "Hand the tensors to a Receiver of the running program to see their "
                        "values, or run the other program after execute() returns")
                if not held:
                    break
                self._cond.wait()
            for v in variables:
                self._owner[v.id] = (token, me)

    def release(self, token) -> None:
        """Give up every variable the run ``token`` owns (also after a partial acquire)."""
        with self._cond:
            for k in [k for k, (t, _) in self._owner.items() if t is token]:
                del self._owner[k]
            self._cond.notify_all()

    def check(self, var, write: bool = False) -> None:
        """Before the host reads (or writes) ``var``'s value: raise if a run on this thread
        owns it, wait while another thread's run does."""
        if var.id not in self._owner:          # the common case, without the lock
            return
        me = threading.get_ident()
        with self._cond:
            while var.id in self._owner:
                if self._owner[var.id][1] == me:
                    what = "written" if write else "read"
                    raise RuntimeError(
                        f"{_names([var])} is being {what} in a callback of the execute() "
                        "running on this thread, which owns it: its host value is from before "
                        "the run (and the run writes it back at the end). To see current "
                        "values, hand the tensors to a Receiver (e.g. ad.Receiver(fn, "
                        "list(model.parameters()))); read or write them after execute() "
                        "returns")
                self._cond.wait()


def _names(variables) -> str:
    names = [f"variable '{v.name}'" if v.name else f"variable {v.id} {list(v.shape)}"
             for v in variables[:3]]
    return ", ".join(names) + (" and others are" if len(variables) > 3 else
                               " is" if len(variables) == 1 else " are")


#: the process-wide variable ownership of running ``execute()`` calls
OWNERS = Ownership()


@contextlib.contextmanager
def no_grad():
    """Context manager: ops traced inside do not record gradients (like ``torch.no_grad``)."""
    prev = TRACER.grad_enabled
    TRACER.grad_enabled = False
    try:
        yield
    finally:
        TRACER.grad_enabled = prev
