"""Text listing of a procedural program (``print_graph(stage="procedural")`` / ``"fused"``).

One line per kernel: its kind, its index space, then one ``buffer[index] = value`` per output;
loads read ``buffer[index]`` with the access expression in the original project's form
(``t7[((Y * 255) + X)]``). ``For`` bodies and the members of fused groups are indented under
their header (``DP+Elw``, ``Reduce+Elw``, ``ElwFuse``).
"""
from __future__ import annotations

from ..graph.ir import Op
from .access import render
from .ir import (Acc, Apply, Const, Copy, DotProduct, Elementwise, FeederWrite, For,
                 FusedKernel, Gather, If, IndexValue, Load, Local, Program, Rand, ReceiverRead,
                 Reduce, ScatterAdd, Select, Stmt, Value, While)


def format_value(v: Value) -> str:
    """A value expression as text: ``add(t7[((Y * 255) + X)], bias[X])``."""
    if isinstance(v, Load):
        return f"{v.buffer.name}[{render(v.index)}]"
    if isinstance(v, Const):
        return f"{v.value:g}" if isinstance(v.value, float) else str(v.value)
    if isinstance(v, Acc):
        return "acc"
    if isinstance(v, Local):
        return f"%{v.buffer.name}"
    if isinstance(v, Rand):
        return f"rand({v.key}, {render(v.index)})"
    if isinstance(v, IndexValue):
        return f"index({render(v.expr)})"
    if isinstance(v, Select):
        return f"({render(v.cond)} ? {format_value(v.a)} : {format_value(v.b)})"
    if isinstance(v, Apply):
        name = v.op.name.lower() + (f"<{v.arg}>" if v.op is Op.CAST else "")
        return f"{name}({', '.join(format_value(a) for a in v.args)})"
    raise TypeError(f"not a value: {v!r}")


def _space(shape, vars) -> str:
    return "[" + ", ".join(f"{v.name}<{d}" for v, d in zip(vars, shape)) + "]"


def format_stmt(s: Stmt, pad: str = "") -> list[str]:
    """Lines for one statement (several for kernels with many outputs and fused groups)."""
    outs = [f"{pad}    {o.buffer.name}[{render(o.index)}] = {format_value(o.value)}"
            for o in getattr(s, "outs", ()) or ()]
    if isinstance(s, FusedKernel):
        lines = [f"{pad}{s.name}"]
        for m in s.members:
            lines += format_stmt(m, pad + "    ")
        return lines
    if isinstance(s, Elementwise):
        return [f"{pad}Elw {_space(s.shape, s.vars)}"] + outs
    if isinstance(s, DotProduct):
        return [f"{pad}DP {_space(s.shape, s.vars)} sum {s.k.name}<{s.k.extent} of "
                f"{format_value(s.a)} * {format_value(s.b)}"] + outs
    if isinstance(s, Reduce):
        red = ", ".join(f"{v.name}<{v.extent}" for v in s.reduced)
        return [f"{pad}Reduce {s.op.name.lower()} {_space(s.shape, s.vars)} over {red} of "
                f"{format_value(s.src)}"] + outs
    if isinstance(s, Copy):
        return [f"{pad}Copy {s.src.name} -> {s.dst.name} [{s.src.size}]"]
    if isinstance(s, Gather):
        return [f"{pad}Gather {s.out.name} = {s.table.name}[{s.idx.name}]"]
    if isinstance(s, ScatterAdd):
        return [f"{pad}ScatterAdd {s.out.name}[{s.idx.name}] += {s.updates.name}"]
    if isinstance(s, FeederWrite):
        return [f"{pad}Feeder {s.spec.name} -> {s.buffer.name} {list(s.buffer.shape)}"]
    if isinstance(s, ReceiverRead):
        return [f"{pad}Receiver {s.spec.name} <- {', '.join(b.name for b in s.buffers)}"]
    if isinstance(s, For):
        r = s.range
        lines = [f"{pad}for {s.var} < {len(r)}:  # range({r.start}, {r.stop}, {r.step})"]
        for b in s.body:
            lines += format_stmt(b, pad + "    ")
        return lines
    if isinstance(s, If):
        lines = [f"{pad}if {s.cond.name}[0]:"]
        for b in s.then:
            lines += format_stmt(b, pad + "    ")
        if s.orelse:
            lines.append(f"{pad}else:")
            for b in s.orelse:
                lines += format_stmt(b, pad + "    ")
        return lines
    if isinstance(s, While):
        bound = "" if s.max_iterations is None else f" (at most {s.max_iterations})"
        lines = [f"{pad}while {s.var}{bound}:"]
        for b in s.cond:
            lines += format_stmt(b, pad + "    ")
        lines.append(f"{pad}    break unless {s.pred.name}[0]")
        for b in s.body:
            lines += format_stmt(b, pad + "    ")
        return lines
    raise TypeError(f"not a statement: {s!r}")


def format_program(p: Program) -> str:
    """The whole program: buffers by kind, then the statements."""
    lines = [f"{p.title} {{"]
    kinds: dict[str, list[str]] = {}
    for b in p.buffers:
        kinds.setdefault(b.kind.value, []).append(
            f"{b.name}{list(b.shape)}" + ("" if b.dtype == "float32" else f":{b.dtype}"))
    for k, names in kinds.items():
        lines.append(f"  {k}: {' '.join(names)}")
    for s in p.body:
        lines += format_stmt(s, "  ")
    n = len(p.kernels())
    lines.append(f"  # {n} kernel{'s' if n != 1 else ''}")
    lines.append("}")
    return "\n".join(lines)
