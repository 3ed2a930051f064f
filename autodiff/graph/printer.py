"""Text form of the graph IR, one line per node, loop bodies indented (jaxpr-like)."""
from __future__ import annotations

from .ir import Graph, Node, Op

_SHORT = {"float32": "f32", "int32": "i32"}


def _type(n: Node) -> str:
    return f"{_SHORT.get(n.dtype, n.dtype)}[{','.join(map(str, n.shape))}]"


def _arg(n: Node) -> str:
    a = n.arg
    if n.op in (Op.LOAD, Op.ASSIGN):
        return f" {a.name or 'v' + str(a.id)}"
    if n.op in (Op.FEEDER, Op.RECEIVER):
        return f" {a.name}"
    if n.op is Op.CONST:
        return f" {a:g}" if isinstance(a, float) else f" {a}"
    if n.op is Op.SLICE:
        return " [" + ", ".join(f"{x}:{y}" for x, y, _ in a) + "]"
    if a is None:
        return ""
    return f" {a}"


def format_graph(graph: Graph, sites: bool = False, title: str = "graph") -> str:
    """The graph as text: ``%id: type = op operands [attribute]``, ``For`` bodies indented.

    With ``sites=True`` each line ends with the user's ``file:line`` that traced it.
    """
    lines = [f"{title} {{"]

    def emit(g: Graph, depth: int) -> None:
        pad = "  " * depth
        for n in g.nodes:
            if n.op is Op.FOR:
                r = n.arg.range
                lines.append(f"{pad}for i{depth - 1} in range({r.start}, {r.stop}, {r.step}):"
                             + (f"    # {n.site}" if sites else ""))
                emit(n.arg.body, depth + 1)
                continue
            ops = " ".join(f"%{s.id}" for s in n.srcs)
            lhs = "" if n.op is Op.RECEIVER else f"%{n.id}: {_type(n)} = "
            line = f"{pad}{lhs}{n.op.name.lower()}{_arg(n)}{' ' + ops if ops else ''}"
            lines.append(line + (f"    # {n.site}" if sites else ""))

    emit(graph, 1)
    if graph.outputs:
        lines.append("  outputs: " + " ".join(f"%{n.id}" for n in graph.outputs))
    lines.append("}")
    return "\n".join(lines)
