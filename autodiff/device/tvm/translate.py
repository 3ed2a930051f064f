"""Graph IR -> Relax ``IRModule``: one function per :class:`~.plan.Segment`.

Each segment becomes ``def segN(inputs...) -> R.Tuple(outputs...)`` built with
``relax.BlockBuilder``: every compute node is one ``emit_te`` of its tensor expression
(:data:`.te_ops.TE`), so before fusion the module holds one PrimFunc per node. ``LOAD``
reads the variable's current value in the function (its parameter, or the value of an
earlier ``ASSIGN`` in the same function); ``ASSIGN`` only rebinds it.
"""
from __future__ import annotations

from tvm import relax

from ...graph.ir import Graph, Node, Op
from .plan import Loop, Segment, plan
from .te_ops import TE


def segments(steps) -> list[Segment]:
    """Every segment of a plan, loop bodies included, in program order."""
    out = []
    for s in steps:
        out.extend(segments(s.steps) if isinstance(s, Loop) else [s])
    return out


def _ty(shape, dtype):
    return relax.TensorType(tuple(int(d) for d in shape), dtype)


def _param(key, nodes: dict[int, Node]):
    if key[0] == "var":
        v = key[1]
        return relax.Var(f"{v.name or 'var'}_{v.id}".replace(".", "_"), _ty(v.shape, v.dtype))
    if key[0] == "iters":
        return relax.Var("iters", _ty((2,), "uint32"))
    n = nodes[key[1]]
    return relax.Var(f"{n.op.name.lower()}_{n.id}", _ty(n.shape, n.dtype))


def _emit_segment(bb: relax.BlockBuilder, seg: Segment, nodes: dict[int, Node]) -> None:
    params = [_param(k, nodes) for k in seg.inputs]
    env = {k: p for k, p in zip(seg.inputs, params)}
    vals: dict[int, relax.Expr] = {k[1]: p for k, p in env.items() if k[0] == "val"}
    cur: dict[int, relax.Expr] = {k[1].id: p for k, p in env.items() if k[0] == "var"}
    with bb.function(seg.name, params):
        with bb.dataflow():
            for n in seg.nodes:
                if n.op is Op.LOAD:
                    vals[n.id] = cur[n.arg.id]
                elif n.op is Op.ASSIGN:
                    vals[n.id] = cur[n.arg.id] = vals[n.srcs[0].id]
                elif n.op is Op.RAND:
                    vals[n.id] = bb.emit_te(TE[n.op](n), env[("iters",)],
                                            primfunc_name_hint="rand")
                elif n.op in TE:
                    vals[n.id] = bb.emit_te(TE[n.op](n), *[vals[s.id] for s in n.srcs],
                                            primfunc_name_hint=n.op.name.lower())
                else:
                    raise NotImplementedError(f"tvm device: no translation for {n.op.name}")
            outs = [cur[k[1].id] if k[0] == "var" else vals[k[1]] for k in seg.outputs]
            result = bb.emit_output(relax.Tuple(outs))
        bb.emit_func_output(result)


def translate(graph: Graph) -> tuple[list, relax.BlockBuilder]:
    """The plan of ``graph`` and the Relax module of its segments.

    Returns
    -------
    steps : list
        :func:`.plan.plan` of ``graph``, inputs and outputs filled.
    mod : tvm.IRModule
        One Relax function per segment that has outputs (named ``segment.name``), calling
        one PrimFunc per compute node (unfused).

    Raises
    ------
    NotImplementedError
        An op without a translation (none in :class:`~autodiff.graph.ir.Op` today).
    """
    steps = plan(graph)
    nodes = {n.id: n for n in graph.walk()}
    bb = relax.BlockBuilder()
    for seg in segments(steps):
        if seg.outputs:
            _emit_segment(bb, seg, nodes)
    return steps, bb.get()
