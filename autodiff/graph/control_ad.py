"""Reverse mode through control flow: ``IF``, ``SCAN`` and ``checkpoint`` regions.

Called by the sweep of :func:`.autograd.vjp` when it reaches a node holding sub-graphs.

* ``IF``: a backward ``IF`` on the same predicate; each branch differentiates its forward
  branch (JAX's ``cond`` transpose). Values of the forward branch the backward branch needs
  become extra results of the forward ``IF`` (the other branch returns zeros for them).
* ``SCAN``: a backward ``SCAN`` running the other way, a rolled loop: its carries are the
  carries' gradients plus one accumulator per value the body reads from outside (weights);
  it scans the outputs' gradients and the per-step values the forward body computed that
  the backward body needs (*residuals*): those become extra stacked outputs of the forward
  ``SCAN`` (views and constants are recomputed instead, the scanned inputs are read where
  they are). With ``remat`` the backward body recomputes the forward body from saved
  carries instead (``scan(checkpoint=k)``).
* ``checkpoint`` regions (:func:`.control.checkpoint`): the region's nodes are traced again
  after an ordering barrier (``AFTER``) on the incoming gradient, and differentiated there.

How residuals get across: while a backward body is traced, a *save context* per forward
control node being differentiated is open. Rules emit nodes that may read forward values
the new scope cannot see; :func:`fix_fresh` rewrites such operands: constants and views
are traced again where they are needed, anything else goes through the innermost context
owning the value (which exports it and returns what the backward scope reads instead),
repeatedly for nested sub-graphs.
"""
from __future__ import annotations

import functools
import weakref
from dataclasses import replace

from .ir import CONTROL, MOVEMENT, Graph, Node, Op, bodies, captures
from . import dtypes
from .ops import add, const
from .trace import TRACER

#: open save contexts, innermost last
_CTX: list = []
#: (node id, scope id) -> its copy in that scope
_CLONES: dict = {}


def _diff(n: Node) -> bool:
    return n.requires_grad and dtypes.is_floating(n.dtype)


def _zeros(n: Node, shape=None) -> Node:
    return const(0.0, n.shape if shape is None else shape)


@functools.lru_cache(maxsize=4096)
def _captures(n: Node) -> tuple:
    return tuple(captures(n))


def operands(n: Node) -> tuple:
    """What the sweep follows from ``n``: its operands, and for ``IF``/``SCAN`` the values
    their sub-graphs read from outside."""
    if n.op in (Op.IF, Op.SCAN):
        return n.srcs + _captures(n)
    return n.srcs


# -- readability and residuals ----------------------------------------------------------
def _readable(x: Node) -> bool:
    s = TRACER.scope
    while s is not None:
        if x.id in s.ids:
            return True
        s = s.parent
    return False


#: open scope -> how many nodes were placed at its start (recomputed constants, views)
_PREFIX: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _place_first(scope, node: Node) -> Node:
    """Put ``node`` (a leaf, or a view of nodes placed so) before every user in ``scope``."""
    k = _PREFIX.get(scope, 0)
    scope.graph.nodes.insert(k, node)
    scope.ids.add(node.id)
    _PREFIX[scope] = k + 1
    return node


def resolve(x: Node) -> Node:
    """``x`` itself if the current scope can read it, else a copy of it here (a constant,
    or a view of resolved operands), else what a save context exports for it (a result of
    the forward node, a saved stack's slice)."""
    if _readable(x):
        return x
    if x.op is Op.CONST or (x.op in MOVEMENT and any(x.id in c.owned for c in _CTX)):
        key = (x.id, id(TRACER.scope))
        r = _CLONES.get(key)
        if r is None or not _readable(r):
            srcs = tuple(resolve(s) for s in x.srcs)
            r = _CLONES[key] = _place_first(TRACER.scope, x.replace(srcs=srcs))
        return r
    for ctx in reversed(_CTX):
        if x.id in ctx.owned:
            return resolve(ctx.export(x))
    raise RuntimeError(f"backward(): {x!r} (traced at {x.site}) is not visible here and no "
                       "enclosing control flow saves it")


def fix_fresh(start: int, g: Node | None = None) -> Node | None:
    """Resolve the operands of the nodes traced into the current scope since index
    ``start`` (they were just made by a gradient rule), and ``g``. A no-op outside
    backward bodies. The nodes are fresh: nothing else refers to them yet."""
    if not _CTX:
        return g
    for m in TRACER.scope.graph.nodes[start:]:
        if not all(_readable(s) for s in m.srcs):
            object.__setattr__(m, "srcs", tuple(resolve(s) for s in m.srcs))
    return resolve(g) if g is not None else None


def _pop() -> None:
    _CTX.pop()
    if not _CTX:
        _CLONES.clear()


def _home(n: Node) -> Graph:
    """The graph holding node ``n`` (an open scope's, or a forward sub-graph's)."""
    s = TRACER.scope
    while s is not None:
        if n.id in s.ids:
            return s.graph
        s = s.parent
    for ctx in reversed(_CTX):
        if n.id in ctx.owned:
            return ctx.owned[n.id]
    raise RuntimeError(f"backward(): cannot find the graph of {n!r}")


def _append(graph: Graph, node: Node) -> None:
    """Append ``node`` to ``graph`` (an open scope's or a forward sub-graph)."""
    graph.nodes.append(node)
    s = TRACER.scope
    while s is not None:
        if s.graph is graph:
            s.ids.add(node.id)
        s = s.parent
    for ctx in _CTX:
        if any(g is graph for g in ctx.graphs):
            ctx.owned[node.id] = graph


class _IfSaves:
    """Exports values of a forward ``IF``'s branches as extra results."""

    def __init__(self, node: Node):
        self.node, self.home = node, _home(node)
        self.graphs = [node.arg.then, node.arg.orelse]
        self.owned = {m.id: g for g in self.graphs for m in g.nodes}
        self.memo: dict[int, Node] = {}

    def export(self, x: Node) -> Node:
        r = self.memo.get(x.id)
        if r is None:
            g = self.owned[x.id]
            other = self.graphs[1] if g is self.graphs[0] else self.graphs[0]
            k = len(g.outputs)
            g.outputs.append(x)
            z = Node(Op.CONST, (), x.shape, x.dtype, dtypes.check_scalar(0, x.dtype), x.site)
            other.nodes.insert(0, z)
            other.outputs.append(z)
            r = Node(Op.RESULT, (self.node,), x.shape, x.dtype, k, x.site)
            _append(self.home, r)
            self.memo[x.id] = r
        return r


class _ScanSaves:
    """Exports values of a forward ``SCAN``'s body to the backward body: a stacked output of
    the forward scan read slice by slice, or a recomputed constant or view."""

    def __init__(self, node: Node, n_carry: int):
        self.node, self.home = node, _home(node)
        self.graphs = [node.arg.body]
        self.owned = {m.id: node.arg.body for m in node.arg.body.nodes}
        self.memo: dict[int, Node] = {}
        self.nc = n_carry                   # carries of the backward scan
        self.scope = self.xs = None

    def open(self, scope, xs: list) -> None:
        self.scope, self.xs = scope, xs

    def export(self, x: Node) -> Node:
        r = self.memo.get(x.id)
        if r is not None:
            return r
        a = self.node.arg
        if x.op is Op.ARG and x.arg >= a.n_carry:
            stack = self.node.srcs[x.arg]              # a scanned input: read it in place
        else:
            outs = a.body.outputs
            j = next((j for j in range(a.n_carry, len(outs)) if outs[j] is x), None)
            if j is None:
                j = len(outs)
                outs.append(x)
            stack = Node(Op.RESULT, (self.node,), (a.length,) + x.shape, x.dtype, j, x.site)
            _append(self.home, stack)
        self.xs.append(stack)
        r = self.memo[x.id] = _place_first(self.scope, Node(
            Op.ARG, (), x.shape, x.dtype, self.nc + len(self.xs) - 1, x.site,
            x.requires_grad))                          # (differentiated again with remat)
        return r


# -- IF -----------------------------------------------------------------------------------
def _if_vjp(n: Node, gout: dict, wanted) -> list:
    from .autograd import vjp
    from .control import trace_if
    a = n.arg
    caps = [c for c in _captures(n) if _diff(c) and wanted(c)]
    leaves = [m for g in (a.then, a.orelse) for m in g.nodes
              if m.op in (Op.LOAD, Op.ASSIGN) and m.requires_grad]
    if not caps and not leaves:
        return []
    capids = {c.id for c in caps}
    ctx = _IfSaves(n)

    def branch(g: Graph):
        def run():
            seeds = [(g.outputs[k], gk) for k, gk in sorted(gout.items())
                     if g.outputs[k].requires_grad]
            inside = {m.id for m in g.nodes}
            res = {m.id: gm for m, gm in vjp(seeds, inside, lambda x: x.id in capids)}
            return [res[c.id] if c.id in res else _zeros(c) for c in caps + leaves]
        return run

    _CTX.append(ctx)
    try:
        results = trace_if(n.srcs[0], branch(a.then), branch(a.orelse), n.site)
    finally:
        _pop()
    return list(zip(caps + leaves, results))


# -- SCAN ---------------------------------------------------------------------------------
def _scan_vjp(n: Node, gout: dict, wanted) -> list:
    from .autograd import vjp
    from .control import trace_scan
    a = n.arg
    body, nc = a.body, a.n_carry
    init, xs = list(n.srcs[:nc]), list(n.srcs[nc:])
    args = {}
    for m in body.nodes:
        if m.op is Op.ARG:
            args.setdefault(m.arg, m)
    outs = list(body.outputs)
    caps = [c for c in _captures(n) if _diff(c) and wanted(c)]
    dif = [k for k in range(nc) if k in args and args[k].requires_grad]
    need_init = {k for k in dif if _diff(init[k]) and wanted(init[k])}
    need_xs = [j for j in range(len(xs)) if _diff(xs[j]) and wanted(xs[j])
               and nc + j in args and args[nc + j].requires_grad]
    if not (caps or need_init or need_xs):
        return []
    seeds_y = [(k, g) for k, g in sorted(gout.items()) if k >= nc and outs[k].requires_grad]
    ct0 = [gout[k] if k in gout else _zeros(init[k]) for k in dif]
    acc0 = [_zeros(c) for c in caps]
    capids = {c.id for c in caps}
    nd, ncap = len(dif), len(caps)
    ctx = _ScanSaves(n, nd + ncap)

    def bwd(bargs):
        ct, acc, gy = bargs[:nd], bargs[nd:nd + ncap], bargs[nd + ncap:]
        seeds = [(outs[k], ct[i]) for i, k in enumerate(dif) if outs[k].requires_grad]
        seeds += [(outs[k], gy[i]) for i, (k, _) in enumerate(seeds_y)]
        if a.remat:                    # recompute the forward body from the saved carries
            mapping = {m.id: resolve(m) for m in body.nodes if m.op is Op.ARG}
            new = dict(mapping)
            clones = clone_nodes(body.nodes, new)
            seeds = [(new.get(o.id, o), g) for o, g in seeds]
            targets = {mapping[m.id].id for m in args.values()}
            res = {m.id: gm for m, gm in vjp(seeds, {c.id for c in clones},
                                              lambda x: x.id in capids or x.id in targets)}
            ga = {j: res.get(mapping[m.id].id) for j, m in args.items()}
        else:
            inside = {m.id for m in body.nodes}
            res = {m.id: gm for m, gm in vjp(seeds, inside, lambda x: x.id in capids)}
            ga = {j: res.get(m.id) for j, m in args.items()}
        new_ct = [ga[k] if ga.get(k) is not None else _zeros(init[k]) for k in dif]
        acc2 = [add(acc[i], res[c.id]) if c.id in res else acc[i] for i, c in enumerate(caps)]
        gx = [ga[nc + j] if ga.get(nc + j) is not None else _zeros(xs[j], xs[j].shape[1:])
              for j in need_xs]
        return new_ct + acc2, gx

    _CTX.append(ctx)
    try:
        res = trace_scan(bwd, ct0 + acc0, [g for _, g in seeds_y], a.length, not a.reverse,
                         n.site, on_open=ctx.open)
    finally:
        _pop()
    pairs = [(init[k], res[i]) for i, k in enumerate(dif) if k in need_init]
    pairs += [(c, res[nd + i]) for i, c in enumerate(caps)]
    pairs += [(xs[j], res[nd + ncap + i]) for i, j in enumerate(need_xs)]
    return pairs


#: op -> vjp(node, {result k: gradient}, wanted) -> [(operand or captured value, gradient)]
CONTROL_VJP = {Op.IF: _if_vjp, Op.SCAN: _scan_vjp}


# -- cloning (recomputation) --------------------------------------------------------------
def clone_nodes(nodes, mapping: dict, emit=None, keys: dict | None = None) -> list[Node]:
    """Copies of ``nodes`` (fresh ids; sub-graphs of control nodes copied too, with fresh
    loop keys), operands renamed by ``mapping`` (old id -> node; extended with the copies),
    traced into the current scope (or given to ``emit``). Nodes already in ``mapping`` are
    not copied."""
    from .control import new_key
    emit = emit or TRACER.emit
    keys = {} if keys is None else keys
    out = []
    for m in nodes:
        if m.id in mapping:                 # given: not copied
            continue
        srcs = tuple(mapping.get(s.id, s) for s in m.srcs)
        arg = m.arg
        if m.op in CONTROL:
            for name in ("index", "key"):
                old = getattr(arg, name, None)
                if old is not None:
                    keys[old] = new_key()
                    arg = replace(arg, **{name: keys[old]})
            graphs = []
            for g in bodies(m):
                ng = Graph()
                clone_nodes(g.nodes, mapping, lambda x, ng=ng: (ng.nodes.append(x), x)[1],
                            keys)
                ng.outputs = [mapping.get(o.id, o) for o in g.outputs]
                graphs.append(ng)
            arg = arg.with_graphs(graphs)
        elif m.op is Op.INDEX and arg.key in keys:
            arg = replace(arg, key=keys[arg.key])
        c = emit(m.replace(srcs=srcs, arg=arg))
        mapping[m.id] = c
        out.append(c)
    return out


# -- checkpoint regions -------------------------------------------------------------------
def regions_in(inside) -> dict:
    """node id -> its :class:`~.control.Region`, for the regions of the graph whose node
    ids are ``inside``."""
    from .control import REGIONS
    found = {}
    for regions in list(REGIONS.values()):
        for r in regions:
            if r.nodes and r.nodes[0].id in inside:
                for m in r.nodes:
                    found[m.id] = r
    return found


def checkpoint_vjp(region, gouts: dict, wanted) -> list:
    """Recompute ``region`` after the latest incoming gradient and differentiate the copy."""
    from .autograd import vjp
    if not gouts:
        return []
    anchor = max(gouts.values(), key=lambda g: g.id)
    caps: dict[int, Node] = {}
    for m in region.nodes:
        for s in operands(m) if m.op in CONTROL else m.srcs:
            if s.id not in region.ids:
                caps.setdefault(s.id, s)
    mapping, back = {}, {}
    for c in caps.values():
        if c.op is Op.CONST:
            continue
        b = TRACER.emit(Node(Op.AFTER, (c, anchor), c.shape, c.dtype, None, c.site,
                             c.requires_grad))
        mapping[c.id], back[b.id] = b, c
    clones = clone_nodes(region.nodes, mapping)
    seeds = [(mapping[i], g) for i, g in gouts.items()]
    res = vjp(seeds, {c.id for c in clones}, lambda x: x.id in back)
    return [(back.get(m.id, m), g) for m, g in res]


# -- scan(checkpoint=k) -------------------------------------------------------------------
def scan_checkpointed(f, init, xs, T: int, reverse: bool, k: int, site: str):
    """``scan(f, init, xs, checkpoint=k)``: an outer scan over ``T // k`` segments whose body
    is an inner scan of ``k`` steps; the outer scan's backward recomputes each segment from
    its saved initial carry (memory: ``T / k`` carries plus ``k`` steps of residuals), and
    a plain scan takes the ``T % k`` remaining steps."""
    from .control import _scan, flatten, unflatten
    S, r = divmod(T, k)
    leaves, tree = flatten(xs)
    lo = r if reverse else 0
    main = [x[lo:lo + S * k].reshape(S, k, *x.shape[1:]) for x in leaves]
    tail = [x[0:r] if reverse else x[S * k:T] for x in leaves]

    def segment(carry, xk):
        return _scan(f, carry, xk, k, reverse, site, False)

    carry, ys_main = _scan(segment, init, unflatten(tree, main) if leaves else None, S,
                           reverse, site, True)
    yl, ytree = flatten(ys_main)
    yl = [y.reshape(S * k, *y.shape[2:]) for y in yl]
    if r:
        carry, ys_tail = _scan(f, carry, unflatten(tree, tail) if leaves else None, r,
                               reverse, site, False)
        tl = flatten(ys_tail)[0]
        from .tensor import concat
        yl = [concat([b, a] if reverse else [a, b], 0) for a, b in zip(yl, tl)]
    return carry, unflatten(ytree, yl)


__all__ = ["operands", "resolve", "fix_fresh", "clone_nodes", "CONTROL_VJP", "regions_in",
           "checkpoint_vjp", "scan_checkpointed"]
