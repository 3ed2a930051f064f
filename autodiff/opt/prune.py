"""Pass ``prune`` (dependency pruning): drop every node no observable effect depends on.

Observable are: ``ASSIGN`` (an in-place update of a variable, loop-carried or read by the
user after ``execute()``), ``RECEIVER`` (a host callback), ``FEEDER`` (a host callback: see
below), and the graph's ``outputs`` (tensors the user reads after ``execute()``). A node is
kept when one of those reads it, directly or through other kept nodes; a ``For`` node is
kept when its pruned body still holds an effect. Pruning a body first means values from
before the loop that only dead body nodes read die too.

Feeder rule: a ``FEEDER`` is never removed, because its callback runs (its side effects
and how often it is called are the user's). When nothing reads its value, its id goes into
``Graph.unused_feeders``: a device may skip transferring that data to the device. The
numpy reference device ignores the table and still reads the array.

Control flow: an ``IF`` or ``WHILE`` holding an effect is kept (its predicate too), and so
is one whose results are read; a kept node keeps the sub-graph outputs its results need
and every effect inside; its sub-graphs are pruned like the graph.

Pure ops are assumed not to fail: a dead ``GATHER`` with an out-of-range index is removed
with its error.
"""
from __future__ import annotations

import networkx as nx

from ..graph import to_networkx
from ..graph.ir import CONTROL, Graph, Node, Op, bodies, with_bodies

ROOTS = frozenset({Op.ASSIGN, Op.RECEIVER, Op.FEEDER})
_SINK = "observable"


def prune(graph: Graph) -> Graph:
    """The graph without nodes that no effect or output depends on.

    Args:
        graph: the program (not modified).

    Returns:
        A new :class:`Graph` holding the same node objects (minus the dead ones; a control
        node whose sub-graphs shrank is copied), the same ``outputs`` and
        ``unused_feeders`` filled.

    Complexity: O(nodes + edges): one reverse reachability search (networkx) from every
    effect and output, then one filtering walk.
    """
    g = to_networkx(graph)
    g.add_node(_SINK)
    for n in graph.walk():
        if n.op in ROOTS or (n.op in (Op.IF, Op.WHILE) and _has_effects(n)):
            g.add_edge(n.id, _SINK)
    for o in graph.outputs:
        g.add_edge(o.id, _SINK)
    live = nx.ancestors(g, _SINK)

    def keep(gr: Graph) -> list[Node]:
        out = []
        for n in gr.nodes:
            if n.op in CONTROL:
                if n.op is not Op.FOR and n.id not in live:
                    continue
                subs = [Graph(keep(sub), [rename.get(o.id, o) for o in sub.outputs])
                        for sub in bodies(n)]
                if n.op is Op.FOR and not subs[0].nodes:
                    continue
                new = with_bodies(n, subs) if any(
                    _differs(a, b) for a, b in zip(subs, bodies(n))) else n
                out.append(_renamed(n, new, rename))
            elif n.id in live:
                out.append(_renamed(n, n, rename))
        return out

    rename: dict[int, Node] = {}
    nodes = keep(graph)
    outputs = {o.id for o in graph.outputs}
    unused = frozenset(n.id for n in graph.walk() if n.op is Op.FEEDER and n.id not in outputs
                       and not any(u in live for u in g.successors(n.id) if u != _SINK))
    return Graph(nodes, [rename.get(o.id, o) for o in graph.outputs], unused_feeders=unused)


def _differs(a: Graph, b: Graph) -> bool:
    return (len(a.nodes) != len(b.nodes) or any(x is not y for x, y in zip(a.nodes, b.nodes))
            or any(x is not y for x, y in zip(a.outputs, b.outputs)))


def _has_effects(n: Node) -> bool:
    return any(m.op in ROOTS for sub in bodies(n) for m in sub.walk())


def _renamed(old: Node, n: Node, rename: dict) -> Node:
    """``n`` with operands renamed (``RESULT`` s of a copied control node); records
    ``old -> result`` in ``rename``."""
    if n.srcs and any(s.id in rename for s in n.srcs):
        n = n.replace(srcs=tuple(rename.get(s.id, s) for s in n.srcs))
    if n is not old:
        rename[old.id] = n
    return n
