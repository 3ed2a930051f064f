"""Cut the graph IR into device functions and host events.

A graph (the top level or a loop body) becomes a list of steps in program order:

* :class:`Segment`: a contiguous run of the graph's nodes. Its ``FEEDER`` callbacks are
  called first (in order), then its compute nodes run as one Relax function on the device,
  then its ``RECEIVER`` callbacks get their values (in order). A new segment starts where a
  Feeder follows a Receiver, so every callback still sees program order.
* :class:`Loop`: a ``FOR`` node; the host runs its body's steps once per iteration.
* :class:`~.control.Branch` / :class:`~.control.WhileLoop`: an ``IF`` / ``WHILE`` node,
  decided by the host from a value the device computed (:mod:`.control`).
* :class:`~.control.Callback`: a ``CALLBACK`` node, a host function between segments.

Values cross functions through the host environment by node id (``("val", id)``); variables
(parameters, optimizer state) by ``("var", Variable)``: a segment reads a variable it
``LOAD`` s before assigning it, and returns every variable it ``ASSIGN`` s (the last
assignment wins, as in the IR's value semantics). A segment holding ``RAND`` also takes the
loop-index words (``("iters",)``); one holding ``GATHER`` or ``SCATTER_ADD`` also returns
``("check",)``: count, smallest and largest out-of-range index of each, in program order
(``int32[3 G]``).

A loop whose body is one segment (no nested loop, no Feeder after a Receiver) can run ``K``
iterations per device call (:mod:`.batch`); :attr:`Loop.steps_per_call` is that ``K``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...graph.ir import Graph, Node, Op, Variable, captures
from . import control

HOST = frozenset({Op.FEEDER, Op.RECEIVER, Op.FOR})
#: ops whose indices are checked on the device (:func:`.te_ops.gather_check`)
CHECKED = frozenset({Op.GATHER, Op.SCATTER_ADD})


@dataclass
class Segment:
    """One device function and the callbacks around it.

    Attributes:
        name: the Relax function's name.
        feeders: ``FEEDER`` nodes called before the function, in program order.
        nodes: compute nodes (``ASSIGN`` and ``LOAD`` included), in program order.
        receivers: ``RECEIVER`` nodes called after it, in program order.
        inputs: argument keys: ``("var", Variable)``, ``("val", node id)``, ``("iters",)``.
        outputs: result keys: ``("var", Variable)`` or ``("val", node id)``.
    """
    name: str
    feeders: list[Node] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    receivers: list[Node] = field(default_factory=list)
    inputs: list[tuple] = field(default_factory=list)
    outputs: list[tuple] = field(default_factory=list)


@dataclass
class Loop:
    """A ``FOR`` node: ``steps`` run once per element of ``node.arg.range``.

    Attributes:
        steps_per_call: iterations per device call (``K``); above 1 the body's single
            segment also has a ``K``-step function (:func:`.batch.batched_name`).
    """
    node: Node
    steps: list
    steps_per_call: int = 1


def loops(steps: list):
    """Every :class:`Loop` of a plan, nested ones included, outer first."""
    for s in steps:
        if isinstance(s, Loop):
            yield s
            yield from loops(s.steps)
        elif isinstance(s, control.STEPS):
            for blk in s.blocks():
                yield from loops(blk)


def batch_segment(loop: Loop) -> Segment | None:
    """The body's segment when ``loop`` can run several iterations per device call: the
    body is one segment with a device function (Feeders first, Receivers last, so the
    Feeders of later iterations can be called before the Receivers of earlier ones)."""
    if len(loop.steps) == 1 and isinstance(loop.steps[0], Segment) and loop.steps[0].outputs:
        return loop.steps[0]
    return None


def plan(graph: Graph) -> list:
    """Steps (:class:`Segment` / :class:`Loop`) for ``graph``, with inputs and outputs filled.

    Segments without compute nodes, or whose results nothing reads, get no outputs; the
    runtime skips their function call.
    """
    counter = iter(range(1 << 30))
    steps = _split(graph, counter)
    _wire(steps, {n.id for n in graph.outputs})
    return steps


def _split(graph: Graph, counter) -> list:
    steps: list = []
    seg = None
    for n in graph.nodes:
        if n.op is Op.FOR:
            seg = None
            steps.append(Loop(n, _split(n.arg.body, counter)))
            continue
        if n.op is Op.IF:
            seg = None
            steps.append(control.Branch(n, _split(n.arg.then, counter),
                                        _split(n.arg.orelse, counter)))
            continue
        if n.op is Op.WHILE:
            seg = None
            steps.append(control.WhileLoop(n, _split(n.arg.cond, counter),
                                           _split(n.arg.body, counter)))
            continue
        if n.op is Op.CALLBACK:
            seg = None
            steps.append(control.Callback(n))
            continue
        if seg is None or (n.op is Op.FEEDER and seg.receivers):
            seg = Segment(f"seg{next(counter)}")
            steps.append(seg)
        if n.op is Op.FEEDER:
            seg.feeders.append(n)
        elif n.op is Op.RECEIVER:
            seg.receivers.append(n)
        else:
            seg.nodes.append(n)
    return steps


def _reads(step) -> set[int]:
    """Node ids a step reads from outside itself (host env values)."""
    if isinstance(step, Loop):
        return {s.id for s in captures(step.node.arg.body)}
    if isinstance(step, control.STEPS):
        return {s.id for s in captures(step.node)} | {s.id for s in step.node.srcs}
    own = {n.id for n in step.nodes}
    out = {s.id for n in step.nodes for s in n.srcs if s.id not in own}
    out |= {s.id for r in step.receivers for s in r.srcs}
    return out


def _wire(steps: list, live_out: set[int]) -> None:
    """Fill inputs and outputs, walking backward with the set of ids read later."""
    live = set(live_out)
    for step in reversed(steps):
        if isinstance(step, Loop):
            body_live = {s.id for s in captures(step.node.arg.body)}
            _wire(step.steps, set())
            live |= body_live
            continue
        if isinstance(step, control.STEPS):
            outs = [{o.id for o in g.outputs} for g in
                    (step.node.arg.graphs() if step.blocks() else ())]   # Callback: none
            for blk, out in zip(step.blocks(), outs):
                _wire(blk, out)
            live |= _reads(step)
            continue
        _wire_segment(step, live)
        live |= _reads(step)


def _wire_segment(seg: Segment, live: set[int]) -> None:
    own = {n.id for n in seg.nodes}
    need = (live | {s.id for r in seg.receivers for s in r.srcs}) & own
    inputs: dict = {}
    assigned: dict[int, Variable] = {}
    for n in seg.nodes:
        for s in n.srcs:
            if s.id not in own:
                inputs.setdefault(("val", s.id), None)
        if n.op is Op.LOAD and n.arg.id not in assigned:
            inputs.setdefault(("var", n.arg), None)
        elif n.op is Op.ASSIGN:
            assigned[n.arg.id] = n.arg
        elif n.op is Op.RAND:
            inputs.setdefault(("iters",), None)
        elif n.op is Op.INDEX:
            inputs.setdefault(("index", n.arg), None)
    outputs = [("var", v) for v in assigned.values()]
    outputs += [("val", n.id) for n in seg.nodes if n.id in need]
    if any(n.op in CHECKED for n in seg.nodes):
        outputs.append(("check",))
    seg.inputs, seg.outputs = list(inputs), outputs
