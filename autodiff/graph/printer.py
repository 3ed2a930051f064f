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
    """The graph as text: ``%id: type = op operands [attribute]``, sub-graphs indented.

    ``for``/``while`` loops name their index ``i<depth>`` (``INDEX`` nodes print it); ``if``
    shows its branches, ``scan`` its body; ``-> %a %b`` lists a sub-graph's outputs. With
    ``sites=True`` each line ends with the user's ``file:line`` that traced it.
    """
    lines = [f"{title} {{"]
    names: dict[int, str] = {}

    def site(n: Node) -> str:
        return f"    # {n.site}" if sites else ""

    def outs(g: Graph, pad: str) -> None:
        if g.outputs:
            lines.append(f"{pad}-> " + " ".join(f"%{o.id}" for o in g.outputs))

    def emit(g: Graph, depth: int) -> None:
        pad = "  " * depth
        for n in g.nodes:
            a = n.arg
            if n.op is Op.FOR:
                r = a.range
                names[a.index] = f"i{depth - 1}"
                lines.append(f"{pad}for i{depth - 1} in range({r.start}, {r.stop}, {r.step}):"
                             + site(n))
                emit(a.body, depth + 1)
                continue
            if n.op is Op.WHILE:
                names[a.index] = f"i{depth - 1}"
                bound = "" if a.max_iterations is None else f" (at most {a.max_iterations})"
                lines.append(f"{pad}while i{depth - 1}{bound}:" + site(n))
                lines.append(f"{pad}  cond:")
                emit(a.cond, depth + 2)
                outs(a.cond, pad + "    ")
                lines.append(f"{pad}  body:")
                emit(a.body, depth + 2)
                continue
            if n.op is Op.IF:
                lines.append(f"{pad}%{n.id} = if %{n.srcs[0].id}:" + site(n))
                for name, sub in (("then", a.then), ("else", a.orelse)):
                    lines.append(f"{pad}  {name}:")
                    emit(sub, depth + 2)
                    outs(sub, pad + "    ")
                continue
            if n.op is Op.SCAN:
                names[a.key] = f"t{depth - 1}"
                flags = (" reverse" if a.reverse else "") + (" remat" if a.remat else "")
                ops = " ".join(f"%{s.id}" for s in n.srcs)
                lines.append(f"{pad}%{n.id} = scan t{depth - 1} < {a.length} carries "
                             f"{a.n_carry}{flags} {ops}:" + site(n))
                emit(a.body, depth + 1)
                outs(a.body, pad + "  ")
                continue
            ops = " ".join(f"%{s.id}" for s in n.srcs)
            lhs = "" if n.op is Op.RECEIVER else f"%{n.id}: {_type(n)} = "
            arg = _arg(n)
            if n.op is Op.INDEX:
                arg = f" {names.get(a.key, '?')}" + (f" * {a.step}" if a.step != 1 else "") \
                    + (f" + {a.start}" if a.start else "")
            line = f"{pad}{lhs}{n.op.name.lower()}{arg}{' ' + ops if ops else ''}"
            lines.append(line + site(n))

    emit(graph, 1)
    if graph.outputs:
        lines.append("  outputs: " + " ".join(f"%{n.id}" for n in graph.outputs))
    lines.append("}")
    return "\n".join(lines)
