"""Stage 1: tracing front end, graph IR, reverse-mode AD."""
from __future__ import annotations

import networkx as nx

from .ir import Graph, Node, Op, Variable, bodies, captures
from .control import checkpoint, ir_if, ir_while, scan
from .loop import Feeder, Receiver, ir_for
from .tensor import Tensor
from .trace import TRACER, no_grad

__all__ = ["Graph", "Node", "Op", "Variable", "captures", "Feeder", "Receiver", "ir_for",
           "ir_if", "ir_while", "scan", "checkpoint",
           "Tensor", "no_grad", "to_networkx"]


def to_networkx(graph: Graph | None = None) -> "nx.DiGraph":
    """The graph IR as a ``networkx.DiGraph`` (node key: node id; attributes ``node``,
    ``op``, ``shape``, ``depth`` = sub-graph nesting). Edges run operand -> user, and from
    the outputs of a sub-graph (branch results, scan outputs) to its control node.
    Defaults to the program being traced."""
    graph = graph if graph is not None else TRACER.root.graph
    g = nx.DiGraph()

    def add(gr: Graph, depth: int) -> None:
        for n in gr.nodes:
            g.add_node(n.id, node=n, op=n.op.name, shape=n.shape, depth=depth)
            for s in n.srcs:
                g.add_edge(s.id, n.id)
            for sub in bodies(n):               # sub-graph outputs feed their node
                add(sub, depth + 1)
                for o in sub.outputs:
                    g.add_edge(o.id, n.id)

    add(graph, 0)
    return g
