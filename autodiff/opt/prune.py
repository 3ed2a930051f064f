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

Pure ops are assumed not to fail: a dead ``GATHER`` with an out-of-range index is removed
with its error.
"""
from __future__ import annotations

import networkx as nx

from ..graph import to_networkx
from ..graph.ir import ForArg, Graph, Node, Op

ROOTS = frozenset({Op.ASSIGN, Op.RECEIVER, Op.FEEDER})
_SINK = "observable"


def prune(graph: Graph) -> Graph:
    """The graph without nodes that no effect or output depends on.

    Args:
        graph: the program (not modified).

    Returns:
        A new :class:`Graph` holding the same node objects (minus the dead ones; a ``For``
        whose body shrank is copied), the same ``outputs`` and ``unused_feeders`` filled.

    Complexity: O(nodes + edges): one reverse reachability search (networkx) from every
    effect and output, then one filtering walk.
    """
    g = to_networkx(graph)
    g.add_node(_SINK)
    for n in graph.walk():
        if n.op in ROOTS:
            g.add_edge(n.id, _SINK)
    for o in graph.outputs:
        g.add_edge(o.id, _SINK)
    live = nx.ancestors(g, _SINK)

    def keep(gr: Graph) -> list[Node]:
        out = []
        for n in gr.nodes:
            if n.op is Op.FOR:
                body = keep(n.arg.body)
                if not body:
                    continue
                if len(body) != len(n.arg.body.nodes):
                    n = n.replace(arg=ForArg(n.arg.range, Graph(body)))
                out.append(n)
            elif n.id in live:
                out.append(n)
        return out

    outputs = {o.id for o in graph.outputs}
    unused = frozenset(n.id for n in graph.walk() if n.op is Op.FEEDER and n.id not in outputs
                       and not any(u in live for u in g.successors(n.id) if u != _SINK))
    return Graph(keep(graph), list(graph.outputs), unused_feeders=unused)
