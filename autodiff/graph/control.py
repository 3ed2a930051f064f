"""Control flow inside a traced program: the loop index, ``ir_if``, ``ir_while``, ``scan`` and
``checkpoint``, in JAX's sense (``fori_loop``'s index, ``lax.cond``, ``lax.while_loop``,
``lax.scan``, ``jax.checkpoint``) with PyTorch's spelling where PyTorch has one
(``torch.utils.checkpoint.checkpoint``).

Everything is traced once into graph IR nodes holding sub-graphs (``IF``, ``WHILE``,
``SCAN``; ``FOR`` gets an ``INDEX``), never unrolled. Sub-graphs read values of enclosing
graphs directly, as loop bodies do. A scan body reads variables through the enclosing
scope (the ``LOAD`` is placed before the node: the body cannot assign them), so a weight
used in every step is one value of the enclosing graph; branches read variables where
they are (a branch may update them).

Reverse mode (:mod:`.control_ad`): gradients flow through the branch taken and through
``scan`` as a rolled loop over saved per-step values; ``checkpoint`` recomputes instead of
saving. ``WHILE`` is not differentiable (as in JAX); use ``scan`` with a fixed length.
"""
from __future__ import annotations

import inspect
import itertools
import numbers
import weakref
from dataclasses import dataclass, field

import numpy as np

from ..errors import ShapeError
from . import grad_state, ops
from .ir import Graph, IfArg, IndexArg, Node, Op, ScanArg, WhileArg
from .trace import TRACER, Scope, user_site

_keys = itertools.count(1)


def new_key() -> int:
    """A fresh loop key (:class:`~.ir.IndexArg`)."""
    return next(_keys)


@dataclass(eq=False)
class BodyScope(Scope):
    """The scope of a sub-graph under construction. ``hoist``: variables not assigned in it
    are read in the enclosing scope (branches, scan bodies; not loop bodies, whose reads
    see the previous iteration's writes)."""
    hoist: bool = False


def _trace(fn, hoist: bool, loop: bool = False) -> tuple[BodyScope, object]:
    """Run ``fn()`` with a new scope open; the scope is closed (also on error)."""
    scope = BodyScope(Graph(), parent=TRACER.scope, hoist=hoist, loop=loop)
    TRACER.scope = scope
    try:
        out = fn()
    finally:
        TRACER.scope = scope.parent
    return scope, out


def _merge_assigned(scopes) -> None:
    """Later reads in the enclosing scope see what the sub-graphs assigned."""
    parent = TRACER.scope
    for s in scopes:
        for var in s.assigned:
            parent.current.pop(var, None)
            parent.assigned.add(var)


# -- values -------------------------------------------------------------------------------
def _tensor():
    from .tensor import Tensor
    return Tensor


def _wrap(node: Node):
    return _tensor()._wrap(node)


def _node(x, what: str) -> Node:
    """The graph node of a Tensor or a Python number (a constant)."""
    if isinstance(x, _tensor()):
        return x.node
    if isinstance(x, (bool, np.bool_)):
        return ops.const(float(x), ())
    if isinstance(x, (numbers.Number, np.number)):
        return ops.const(x, (), "int32" if isinstance(x, (numbers.Integral, np.integer))
                         and not isinstance(x, bool) else "float32")
    raise TypeError(f"{what}: expected tensors or numbers, got {type(x).__name__} "
                    f"(at {user_site()})")


def flatten(x) -> tuple[list, tuple]:
    """Leaves (tensors, numbers) and structure of a tuple/list/dict/None nest."""
    if x is None:
        return [], ("none",)
    if isinstance(x, (tuple, list)):
        leaves, defs = [], []
        for v in x:
            lv, d = flatten(v)
            leaves += lv
            defs.append(d)
        return leaves, (type(x).__name__, tuple(defs))
    if isinstance(x, dict):
        leaves, defs = [], []
        for k in x:
            lv, d = flatten(x[k])
            leaves += lv
            defs.append(d)
        return leaves, ("dict", tuple(x), tuple(defs))
    return [x], ("leaf",)


def unflatten(tree: tuple, leaves: list):
    """The inverse of :func:`flatten`."""
    it = iter(leaves)

    def build(d):
        kind = d[0]
        if kind == "none":
            return None
        if kind == "leaf":
            return next(it)
        if kind == "dict":
            return {k: build(s) for k, s in zip(d[1], d[2])}
        parts = [build(s) for s in d[1]]
        return tuple(parts) if kind == "tuple" else parts
    return build(tree)


def _describe(tree: tuple) -> str:
    kind = tree[0]
    if kind == "none":
        return "None"
    if kind == "leaf":
        return "Tensor"
    if kind == "dict":
        return "{" + ", ".join(f"{k!r}: {_describe(s)}" for k, s in zip(tree[1], tree[2])) + "}"
    inner = ", ".join(_describe(s) for s in tree[1])
    return f"({inner}{',' if len(tree[1]) == 1 else ''})" if kind == "tuple" else f"[{inner}]"


def _kind(n: Node) -> str:
    return f"{list(n.shape)} {n.dtype}"


def _pred(pred, what: str, site: str) -> Node:
    p = pred.node
    if p.size != 1:
        raise ShapeError(what, [p.shape], site, "the predicate must be a single value "
                                               "(a 0-d tensor)")
    return ops.reshape(p, ()) if p.shape != () else p


# -- the loop index -----------------------------------------------------------------------
def wants_index(fn) -> bool:
    """Whether ``fn`` takes a positional argument without default (it then gets the index)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    for p in params:
        if p.kind is p.VAR_POSITIONAL:
            return True
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty:
            return True
    return False


def loop_index(key: int, start: int = 0, step: int = 1, count: int | None = None):
    """An int32 0-d tensor: the index of the loop ``key`` (``start + step * k`` in its
    iteration ``k``, at most ``count`` iterations), traced as an ``INDEX`` node in the
    current scope."""
    return _wrap(TRACER.emit(Node(Op.INDEX, (), (), "int32",
                                  IndexArg(key, start, step, count), user_site())))


def call_body(fn, key: int, rng: range | None = None, count: int | None = None):
    """``fn(i)`` with the loop index if ``fn`` takes one, else ``fn()``; returns whether
    the index was passed. ``rng``: the loop's range (else the index counts from 0, at most
    ``count`` times)."""
    if wants_index(fn):
        if rng is not None:
            fn(loop_index(key, rng.start, rng.step, len(rng)))
        else:
            fn(loop_index(key, 0, 1, count))
        return True
    fn()
    return False


# -- ir_if --------------------------------------------------------------------------------
def trace_if(pred: Node, then_fn, else_fn, site: str) -> list[Node]:
    """Trace an ``IF`` node from functions returning lists of nodes (or None); returns its
    ``RESULT`` nodes. The branches' outputs must agree in number, shape and dtype."""
    ends = []

    def traced(fn):
        def run():
            out = list(fn() or [])
            ends.append(grad_state.branch_ends(TRACER.scope))
            return out
        return run

    t_scope, t_out = _trace(traced(then_fn), hoist=False)
    if else_fn is not None:
        e_scope, e_out = _trace(traced(else_fn), hoist=False)
    else:
        e_scope, e_out = BodyScope(Graph(), parent=TRACER.scope), []
        ends.append({})
    if len(t_out) != len(e_out):
        raise TypeError(f"ir_if: the then-branch returns {len(t_out)} values and the "
                        f"else-branch {len(e_out)} (at {site})")
    grads = grad_state.merge_branches([t_scope, e_scope], ends)    # .grad set in a branch
    t_out = t_out + [n for _, (n, _) in grads]
    e_out = e_out + [n for _, (_, n) in grads]
    for k, (a, b) in enumerate(zip(t_out, e_out)):
        if a.shape != b.shape:
            raise ShapeError("ir_if", [a.shape, b.shape], site,
                             f"result {k}: the then-branch returns {_kind(a)} (traced at "
                             f"{a.site}), the else-branch {_kind(b)} (traced at {b.site})")
        if a.dtype != b.dtype:
            raise TypeError(f"ir_if: result {k}: the then-branch returns {_kind(a)} (traced "
                            f"at {a.site}), the else-branch {_kind(b)} (traced at {b.site}) "
                            f"(at {site})")
    if not (t_scope.graph.nodes or e_scope.graph.nodes or t_out):
        return []
    t_scope.graph.outputs, e_scope.graph.outputs = t_out, e_out
    rg = [TRACER.grad_enabled and (a.requires_grad or b.requires_grad)
          for a, b in zip(t_out, e_out)]
    node = TRACER.emit(Node(Op.IF, (pred,), (), "float32",
                            IfArg(t_scope.graph, e_scope.graph), site, any(rg)))
    _merge_assigned([t_scope, e_scope])
    results = [TRACER.emit(Node(Op.RESULT, (node,), a.shape, a.dtype, k, site, r))
               for k, (a, r) in enumerate(zip(t_out, rg))]
    for (t, _), r in zip(grads, results[len(results) - len(grads):]):
        t.grad = _wrap(r)
    return results[:len(results) - len(grads)]


def ir_if(pred, then_fn, else_fn=None):
    """``then_fn()`` if ``pred`` is nonzero, else ``else_fn()``, decided on the device
    (``jax.lax.cond``).

    Both branches are traced once, into one ``IF`` node; only the branch taken runs, its
    Feeders and Receivers included. Variables (parameters, optimizer state, any tensor made
    from data) assigned in a branch keep their value when the other branch runs; later code
    sees the merged value. Values the branches return must agree in structure (tensors,
    numbers, tuples/lists/dicts of them), shape and dtype; ``ir_if`` returns them.
    Gradients flow through the branch taken. A Python ``bool`` (or number) ``pred`` simply
    calls one branch.

    Args:
        pred: a single-value tensor (bool, or a number: nonzero is true) computed on the
            device, e.g. ``i % 100 == 0`` or ``loss.isfinite()``.
        then_fn: function of no arguments.
        else_fn: function of no arguments, or None (nothing runs otherwise; what
            ``then_fn`` returns is then ignored, so ``lambda: v.add_(1)`` is fine).

    Returns:
        What the branches return (None without ``else_fn``).

    Raises:
        ShapeError: ``pred`` holds more than one value; the branches return different
            shapes (the message names both lines that traced them).
        TypeError: different structures or dtypes.
    """
    site = user_site()
    if not isinstance(pred, _tensor()):
        if isinstance(pred, (bool, numbers.Number, np.bool_, np.number)):
            return then_fn() if pred else (else_fn() if else_fn is not None else None)
        raise TypeError(f"ir_if: pred must be a tensor or a Python bool, got "
                        f"{type(pred).__name__} (at {site})")
    p = _pred(pred, "ir_if", site)
    trees = {}

    def branch(fn, name):
        def run():
            out = fn()
            leaves, tree = flatten(out if else_fn is not None else None)
            trees[name] = tree
            return [_node(x, "ir_if") for x in leaves]
        return run

    def check():
        if else_fn is not None and trees["then"] != trees["else"]:
            raise TypeError(f"ir_if: the branches return different structures: "
                            f"{_describe(trees['then'])} and {_describe(trees['else'])} "
                            f"(at {site})")

    def then_run():
        return branch(then_fn, "then")()

    def else_run():
        out = branch(else_fn, "else")()
        check()
        return out

    results = trace_if(p, then_run, else_run if else_fn is not None else None, site)
    return unflatten(trees["then"], [_wrap(r) for r in results])


# -- ir_while -----------------------------------------------------------------------------
def ir_while(cond_fn, body, max_iterations: int | None = None) -> None:
    """Run ``body()`` while ``cond_fn()`` is nonzero, deciding on the device before every
    iteration (``jax.lax.while_loop`` with state in variables, as ``ir_for``).

    ``cond_fn`` returns a single-value tensor (bool, or a number: nonzero is true) computed
    from variables, e.g. ``loss_var > 0.1`` where the body assigns ``loss_var``. ``body``
    (and ``cond_fn``) get the iteration count (an int32 0-d tensor, from 0) if they take an
    argument. Traced once, never unrolled; not differentiable (use ``scan``).

    Args:
        cond_fn: function returning the predicate; it must not assign variables or call
            host callbacks.
        body: the loop body, like ``ir_for``'s.
        max_iterations: stop after this many iterations even if the condition holds
            (None: no bound).

    Raises:
        TypeError: ``cond_fn`` returns no tensor, or has effects; bad ``max_iterations``.
        ShapeError: the predicate holds more than one value.
    """
    site = user_site()
    if max_iterations is not None and (not isinstance(max_iterations, numbers.Integral)
                                       or max_iterations < 0):
        raise TypeError(f"ir_while: max_iterations must be a non-negative int or None, got "
                        f"{max_iterations!r} (at {site})")
    key = new_key()

    def cond():
        p = cond_fn(loop_index(key, 0, 1, max_iterations)) if wants_index(cond_fn) \
            else cond_fn()
        if not isinstance(p, _tensor()):
            raise TypeError(f"ir_while: cond_fn must return a tensor computed on the device, "
                            f"got {type(p).__name__} (at {site})")
        return _pred(p, "ir_while", site)

    c_scope, p = _trace(cond, hoist=False)
    for n in c_scope.graph.walk():
        if n.op in _IMPURE:
            raise TypeError(f"ir_while: the condition must not have effects, but it traces "
                            f"{n.op.name.lower()} at {n.site} (at {site})")
    c_scope.graph.outputs = [p]
    def run_body():
        call_body(body, key, count=max_iterations)
        grad_state.close_loop(TRACER.scope)

    b_scope, _ = _trace(run_body, hoist=False, loop=True)
    TRACER.emit(Node(Op.WHILE, (), (), "float32",
                     WhileArg(c_scope.graph, b_scope.graph,
                              None if max_iterations is None else int(max_iterations), key),
                     site))
    _merge_assigned([c_scope, b_scope])


# -- scan ---------------------------------------------------------------------------------
_IMPURE = frozenset({Op.ASSIGN, Op.FEEDER, Op.RECEIVER, Op.CALLBACK, Op.FOR, Op.WHILE})


def trace_scan(body, init: list[Node], xs: list[Node], length: int, reverse: bool, site: str,
               remat: bool = False, on_open=None) -> list[Node]:
    """Trace a ``SCAN`` node; ``body(args) -> (carries, ys)`` works on lists of nodes
    (``args``: the ``ARG`` nodes, carries then slices). Returns its ``RESULT`` nodes.

    ``on_open(scope, xs)`` is called with the body's scope and the (growing) list of
    scanned inputs before ``body`` runs (reverse mode adds saved values there). A carry
    that becomes differentiable in the body makes the body be traced again with that
    carry differentiable (a fixed point, as JAX's).
    """
    nc = len(init)
    rg = [TRACER.grad_enabled and n.requires_grad for n in init]
    xs = list(xs)
    while True:
        def run():
            args = [TRACER.emit(Node(Op.ARG, (), n.shape, n.dtype, k, n.site, r))
                    for k, (n, r) in enumerate(zip(init, rg))]
            args += [TRACER.emit(Node(Op.ARG, (), x.shape[1:], x.dtype, nc + j, x.site,
                                      TRACER.grad_enabled and x.requires_grad))
                     for j, x in enumerate(xs)]
            if on_open is not None:
                on_open(TRACER.scope, xs)
            return body(args)
        scope, (c_out, y_out) = _trace(run, hoist=True)
        c_out, y_out = list(c_out), list(y_out)
        grow = [k for k in range(nc) if c_out[k].requires_grad and not rg[k]]
        if not grow or on_open is not None:
            break
        for k in grow:
            rg[k] = True
    for k, (a, b) in enumerate(zip(init, c_out)):
        if a.shape != b.shape or a.dtype != b.dtype:
            raise ShapeError("scan", [a.shape, b.shape], site,
                             f"carry {k} changes from {_kind(a)} (traced at {a.site}) to "
                             f"{_kind(b)} (traced at {b.site})")
    for n in scope.graph.walk():
        if n.op in _IMPURE:
            raise TypeError(f"scan: the body must be pure (no variable updates, host "
                            f"callbacks or loops), but it traces {n.op.name.lower()} at "
                            f"{n.site} (at {site})")
    scope.graph.outputs = c_out + y_out
    out_rg = [TRACER.grad_enabled and n.requires_grad for n in c_out + y_out]
    node = TRACER.emit(Node(Op.SCAN, tuple(init) + tuple(xs), (), "float32",
                            ScanArg(scope.graph, int(length), nc, bool(reverse), new_key(),
                                    remat), site, any(out_rg)))
    shapes = [n.shape for n in c_out] + [(int(length),) + n.shape for n in y_out]
    return [TRACER.emit(Node(Op.RESULT, (node,), s, n.dtype, k, site, r))
            for k, (s, n, r) in enumerate(zip(shapes, c_out + y_out, out_rg))]


def scan(f, init, xs=None, length: int | None = None, reverse: bool = False,
         checkpoint: int | None = None):
    """``jax.lax.scan``: loop ``f(carry, x) -> (carry, y)`` over the leading dim of ``xs``.

    Traced once into a ``SCAN`` node (a rolled loop, never unrolled). ``backward()``
    through it is itself a rolled loop, backwards over the per-step values the forward
    saved (a stack of ``length`` entries each, placed in the memory arena by the planner).

    Args:
        f: ``f(carry, x) -> (new_carry, y)``; must be pure (no variable updates or host
            callbacks). ``carry``, ``x`` and ``y`` are tensors, numbers, or tuples/lists/
            dicts of them.
        init: the initial carry; every new carry must keep its structure, shapes, dtypes.
        xs: tensors (or a nest of them) sharing a leading dim ``T``: ``f`` gets ``xs[t]``;
            None with ``length``: ``f`` gets ``x=None``.
        length: ``T`` when ``xs`` is None (else it must agree).
        reverse: run ``t = T-1 .. 0`` (``ys`` are still indexed by ``t``).
        checkpoint: keep only every ``checkpoint``-th carry for the backward pass and
            recompute the steps in between (memory ``T/k`` carries plus ``k`` steps of
            saved values, for one more forward pass of compute).

    Returns:
        ``(final carry, ys)``, ``ys`` the ``y``s stacked along a new leading dim ``T``.

    Raises:
        ShapeError: a carry changes shape (naming where it was made and where it changed),
            or the inputs disagree on ``T``.
        TypeError: ``f`` returns no pair, changes the carry's structure, or has effects.
    """
    site = user_site()
    xs_nodes = [_node(x, "scan xs") for x in flatten(xs)[0]]
    for x in xs_nodes:
        if not x.shape:
            raise ShapeError("scan", [x.shape], site, "scanned inputs need a leading dim")
    lengths = {x.shape[0] for x in xs_nodes}
    if length is not None:
        lengths.add(int(length))
    if len(lengths) != 1:
        raise ShapeError("scan", [x.shape for x in xs_nodes], site,
                         "the scanned inputs (and length) disagree on the number of steps"
                         if lengths else "no xs: give length")
    T = lengths.pop()
    if checkpoint is not None:
        k = int(checkpoint)
        if k < 1:
            raise ValueError(f"scan: checkpoint must be a positive int, got {checkpoint!r}")
        if 1 < k < T:
            from .control_ad import scan_checkpointed
            return scan_checkpointed(f, init, xs, T, reverse, k, site)
    return _scan(f, init, xs, T, reverse, site, False)


def _scan(f, init, xs, T: int, reverse: bool, site: str, remat: bool):
    """:func:`scan` on nests of tensors, ``T`` steps (``remat``: see :class:`~.ir.ScanArg`)."""
    init_leaves, init_tree = flatten(init)
    init_nodes = [_node(x, "scan init") for x in init_leaves]
    xs_leaves, xs_tree = flatten(xs)
    xs_nodes = [_node(x, "scan xs") for x in xs_leaves]
    trees = {}

    def body(args):
        carry = unflatten(init_tree, [_wrap(a) for a in args[:len(init_nodes)]])
        x = unflatten(xs_tree, [_wrap(a) for a in args[len(init_nodes):]])
        out = f(carry, x)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise TypeError(f"scan: f must return a pair (carry, y), got "
                            f"{type(out).__name__} (at {site})")
        c_leaves, c_tree = flatten(out[0])
        if c_tree != init_tree:
            raise TypeError(f"scan: f returns a carry of structure {_describe(c_tree)} for an "
                            f"initial carry of structure {_describe(init_tree)} (at {site})")
        y_leaves, trees["y"] = flatten(out[1])
        return ([_node(c, "scan carry") for c in c_leaves],
                [_node(y, "scan output") for y in y_leaves])

    res = trace_scan(body, init_nodes, xs_nodes, T, reverse, site, remat)
    nc = len(init_nodes)
    return (unflatten(init_tree, [_wrap(r) for r in res[:nc]]),
            unflatten(trees["y"], [_wrap(r) for r in res[nc:]]))


# -- checkpoint ---------------------------------------------------------------------------
@dataclass(eq=False)
class Region:
    """Nodes traced by one :func:`checkpoint` call (in the graph that traced them)."""
    nodes: list[Node]
    ids: frozenset = field(default_factory=frozenset)


#: graph -> its checkpointed regions (weak: dropped with the graph)
REGIONS: "weakref.WeakKeyDictionary[Graph, list[Region]]" = weakref.WeakKeyDictionary()


def checkpoint(function, *args, use_reentrant: bool | None = None,
               preserve_rng_state: bool = True, **kwargs):
    """``function(*args, **kwargs)`` whose activations the backward pass recomputes instead
    of keeping (``torch.utils.checkpoint.checkpoint``).

    The forward runs as traced; when ``backward()`` reaches the outputs, the nodes
    ``function`` traced are traced again (the same ops; random draws repeat exactly) after
    the incoming gradient is ready, and differentiated there. Values ``function`` reads
    from outside (its inputs, parameters) are kept; everything it computes in between is
    freed after the forward. ``use_reentrant`` and ``preserve_rng_state`` are accepted for
    PyTorch compatibility (the behaviour is that of ``use_reentrant=False`` with the RNG
    state preserved).

    Returns:
        What ``function`` returns.
    """
    graph = TRACER.scope.graph
    start = len(graph.nodes)
    out = function(*args, **kwargs)
    if TRACER.scope.graph is not graph:
        return out
    nodes = [n for n in graph.nodes[start:] if n.op is not Op.LOAD]
    for n in nodes:
        if n.op in _IMPURE or (n.op is Op.IF and any(
                m.op in _IMPURE for g in n.arg.graphs() for m in g.walk())):
            raise TypeError(f"checkpoint: the function must be pure (no variable updates, "
                            f"host callbacks or loops), but it traces {n.op.name.lower()} at "
                            f"{n.site} (at {user_site()})")
    if nodes:
        REGIONS.setdefault(graph, []).append(Region(nodes, frozenset(n.id for n in nodes)))
    return out
