"""Stage 1: tracing front end, graph IR, reverse-mode AD."""
from __future__ import annotations

import networkx as nx

from .ir import Graph, Node, Op, Variable, captures
from .loop import Feeder, Receiver, ir_for
from .tensor import Tensor
from .trace import TRACER, no_grad

__all__ = ["Graph", "Node", "Op", "Variable", "captures", "Feeder", "Receiver", "ir_for",
           "Tensor", "no_grad", "to_networkx"]


def to_networkx(graph: Graph | None = None) -> "nx.DiGraph":
    """The graph IR as a ``networkx.DiGraph`` (node key: node id; attributes ``node``,
    ``op``, ``shape``, ``depth`` = loop nesting). Edges run operand -> user. Defaults to the
    program being traced."""
    graph = graph if graph is not None else TRACER.root.graph
    g = nx.DiGraph()

    def add(gr: Graph, depth: int) -> None:
        for n in gr.nodes:
            g.add_node(n.id, node=n, op=n.op.name, shape=n.shape, depth=depth)
            for s in n.srcs:
                g.add_edge(s.id, n.id)
            if n.op is Op.FOR:
                add(n.arg.body, depth + 1)

    add(graph, 0)
    return g
