"""Graph IR -> Relax ``IRModule``: one function per :class:`~.plan.Segment`.

Each segment becomes ``def segN(inputs...) -> R.Tuple(outputs...)`` built with
``relax.BlockBuilder``: every compute node is one ``emit_te`` of its tensor expression
(:data:`.te_ops.TE`), so before fusion the module holds one PrimFunc per node. ``LOAD``
reads the variable's current value in the function (its parameter, or the value of an
earlier ``ASSIGN`` in the same function); ``ASSIGN`` only rebinds it. A segment holding
``GATHER`` or ``SCATTER_ADD`` also returns their out-of-range indices (:func:`.te_ops.gather_check`). A
loop running ``K`` iterations per call gets a second function, ``K`` unrolled copies of the
first (:mod:`.batch`).
"""
from __future__ import annotations

from tvm import relax, topi

from ...graph.ir import Graph, Node, Op
from .batch import choose_steps_per_call, emit_batched
from .plan import CHECKED, Loop, Segment, batch_segment, loops, plan
from .te_ops import TE, build_te, gather_check, storage


def segments(steps) -> list[Segment]:
    """Every segment of a plan, loop bodies included, in program order."""
    out = []
    for s in steps:
        out.extend(segments(s.steps) if isinstance(s, Loop) else [s])
    return out


def _ty(shape, dtype):
    """Relax tensor type of a value of ``dtype`` (its device storage dtype: int64 is
    int32 here)."""
    return relax.TensorType(tuple(int(d) for d in shape), storage(dtype))


def _param(key, nodes: dict[int, Node], lead: tuple = ()):
    """The Relax parameter for input ``key``; ``lead`` dims are prepended (stacked
    per-iteration inputs of a batched function)."""
    if key[0] == "var":
        v = key[1]
        return relax.Var(f"{v.name or 'var'}_{v.id}".replace(".", "_"), _ty(v.shape, v.dtype))
    if key[0] == "iters":
        return relax.Var("iters", relax.TensorType(lead + (2,), "uint32"))
    n = nodes[key[1]]
    return relax.Var(f"{n.op.name.lower()}_{n.id}", _ty(lead + tuple(n.shape), n.dtype))


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
                    vals[n.id] = bb.emit_te(build_te(n), *[vals[s.id] for s in n.srcs],
                                            primfunc_name_hint=n.op.name.lower())
                else:
                    raise NotImplementedError(f"tvm device: no translation for {n.op.name}")
            checks = [bb.emit_te(gather_check(n), vals[n.srcs[1].id],
                                 primfunc_name_hint="gather_check")
                      for n in seg.nodes if n.op in CHECKED]
            if len(checks) > 1:
                checks = [bb.emit_te(lambda *c: topi.concatenate(list(c), 0), *checks,
                                     primfunc_name_hint="gather_checks")]
            outs = [cur[k[1].id] if k[0] == "var" else checks[0] if k[0] == "check"
                    else vals[k[1]] for k in seg.outputs]
            result = bb.emit_output(relax.Tuple(outs))
        bb.emit_func_output(result)


def translate(graph: Graph, steps_per_call: int | None = 1,
              prefetch: int | None = None) -> tuple[list, relax.BlockBuilder]:
    """The plan of ``graph`` and the Relax module of its segments.

    Parameters
    ----------
    graph : Graph
        The program.
    steps_per_call : int or None
        Loop iterations per device call where a loop allows it (:func:`.plan.batch_segment`);
        None picks per loop (:func:`.batch.choose_steps_per_call`).
    prefetch : int or None
        ``execute()``'s ``prefetch`` (caps ``K`` at ``prefetch + 1``).

    Returns
    -------
    steps : list
        :func:`.plan.plan` of ``graph``, inputs and outputs filled, each
        :attr:`.plan.Loop.steps_per_call` set.
    mod : tvm.IRModule
        One Relax function per segment that has outputs (named ``segment.name``), calling
        one PrimFunc per compute node (unfused), and one ``K``-step function (unrolled)
        per loop with ``steps_per_call`` ``K`` above 1.

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
    for loop in loops(steps):
        seg = batch_segment(loop)
        if seg is not None:
            loop.steps_per_call = choose_steps_per_call(loop, seg, steps_per_call, prefetch)
            if loop.steps_per_call > 1:
                emit_batched(bb, seg, loop.steps_per_call,
                             lambda key, lead=(): _param(key, nodes, lead))
    return steps, bb.get()
