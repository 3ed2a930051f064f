"""Liveness of a procedural program's buffers, as live ranges on a program-order time axis.

Every statement that is not a ``For`` is one step of the time axis, in program order; a
``For`` covers the steps of its body (loop bodies are numbered once, like the IR holds them).
Liveness is the classic backward data-flow over the control flow of that program: steps
follow each other, and the end of a loop body flows both to the loop's first step (the back
edge) and past the loop (a loop that runs zero times is skipped). A buffer is *occupied* at
a step where it is written or live (read at that step or later without an intervening
write), and its live range is the hull of those steps. Hence, for a loop:

* a buffer read in the body before it is written there (loop-carried) is live across the
  whole loop, and so is one defined before the loop and read inside it (to the loop's end);
* a buffer written and then read within one iteration lives only within that span of the
  body;
* a buffer written in the loop and read after it lives from its write to that read.

A write ends a value's life (backwards) only when it writes the whole buffer: a ``Copy``,
``Gather``, ``ScatterAdd`` or ``FeederWrite``, or a kernel whose index space has as many
points as the buffer has elements (kernel outputs are race-free, so such an index is
one-to-one). After a partial write the rest of the buffer is still the older value, so the
buffer stays live back to its previous whole write (or the program's start).

Branches and while loops are control flow too. An ``If`` is a step reading its condition,
then either branch, then a join step that reads the condition again (a device may evaluate
it in every kernel of the branch taken, so it lives through both); a write in one branch
kills nothing on the other path. A ``While`` runs its condition block, a step reading the
predicate, then the body and back, or leaves after that step.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..procedural.ir import (Buffer, BufferKind, Copy, DotProduct, Elementwise, FeederWrite,
                             For, FusedKernel, Gather, If, Program, Reduce, ScatterAdd, Stmt,
                             While)
from .liverange import LiveRange

#: buffer kinds that go into the arena: intermediates and host staging buffers
PLANNED = frozenset({BufferKind.TEMP, BufferKind.FEEDER, BufferKind.RECEIVER})


@dataclass
class Liveness:
    """Live ranges of one program.

    Attributes:
        ranges: one :class:`LiveRange` per planned buffer (named by ``Buffer.name``), in the
            program's buffer order; sizes in bytes.
        buffers: buffer name -> :class:`~autodiff.procedural.ir.Buffer` (planned ones).
        steps: the statement run at each step (``steps[t]``).
        loops: ``(loop, first step, last step)`` for every ``For`` with a non-empty body.
    """
    ranges: list[LiveRange]
    buffers: dict[str, Buffer]
    steps: list[Stmt]
    loops: list[tuple[For, int, int]] = field(default_factory=list)

    def range_of(self, name: str) -> LiveRange:
        """The live range of buffer ``name``. Raises KeyError if it is not planned."""
        for r in self.ranges:
            if r.buffer == name:
                return r
        raise KeyError(name)


def liveness(program: Program, members: bool = True,
             kinds: frozenset = PLANNED) -> Liveness:
    """Live ranges of the ``kinds`` buffers of ``program``.

    Args:
        program: a procedural (or fused) program.
        members: count each member of a :class:`FusedKernel` as its own step (as a device
            that runs the group op by op needs, group-internal buffers included); else a
            fused group is one step and its internal buffers are not planned.
        kinds: the buffer kinds to plan (default: temps, feeder and receiver staging).

    Returns:
        A :class:`Liveness`.

    Complexity: O(steps x buffers / word size) per data-flow pass; passes = loop nesting
    depth + 2.
    """
    steps, loops, succ, order = _control_flow(program.body, members)
    touched = [(s.reads(), s.writes()) for s in steps]
    planned = [b for b in program.buffers if b.kind in kinds]
    index = {id(b): i for i, b in enumerate(planned)}
    for reads, writes in touched:   # fused groups' internal buffers may be missing from
        for b in reads + writes:    # program.buffers
            if b.kind in kinds and id(b) not in index:
                index[id(b)] = len(planned)
                planned.append(b)
    # one bit per planned buffer; loop heads and tails (nodes >= len(steps)) touch nothing
    use, write, kill = ([0] * len(succ) for _ in range(3))
    for t, (s, (reads, writes)) in enumerate(zip(steps, touched)):
        for b in reads:
            if id(b) in index:
                use[t] |= 1 << index[id(b)]
        for b in writes:
            if id(b) in index:
                write[t] |= 1 << index[id(b)]
                if writes_whole(s, b):
                    kill[t] |= 1 << index[id(b)]
    if not steps or not planned:
        return Liveness([], {b.name: b for b in planned}, steps, loops)
    live_in = _dataflow(use, kill, succ, order)
    occupied = _bit_matrix([live_in[t] | write[t] for t in range(len(steps))], len(planned))
    seen = occupied.any(axis=0)
    first = occupied.argmax(axis=0)
    last = len(steps) - 1 - occupied[::-1].argmax(axis=0)
    ranges = [LiveRange(b.name, b.nbytes, int(first[j]), int(last[j]))
              for j, b in enumerate(planned) if seen[j]]
    return Liveness(ranges, {b.name: b for b in planned}, steps, loops)


def writes_whole(stmt: Stmt, buffer: Buffer) -> bool:
    """Whether ``stmt`` overwrites every element of ``buffer`` (which it writes)."""
    if isinstance(stmt, (Copy, Gather, ScatterAdd, FeederWrite)):
        return True
    if isinstance(stmt, FusedKernel):
        return writes_whole(stmt.kernel, buffer)
    if isinstance(stmt, (Elementwise, DotProduct)):
        points = math.prod(stmt.shape)
    elif isinstance(stmt, Reduce):
        points = math.prod(d for i, d in enumerate(stmt.shape) if i not in stmt.axes)
    else:
        return False
    return points == buffer.size and sum(o.buffer is buffer for o in stmt.outs) == 1


@dataclass(eq=False)
class Use(Stmt):
    """A step of the time axis that only reads ``buffers`` (an ``If``'s condition, a
    ``While``'s predicate); not a statement of the program."""
    buffers: tuple
    kind = "Use"

    def reads(self):
        return list(self.buffers)


def _control_flow(stmts, members: bool):
    """Steps, loop spans, and the control-flow successors of every node.

    Nodes ``0 .. len(steps) - 1`` are the steps; each ``For`` adds two more nodes, a head
    (before its first iteration and between iterations) and a tail (after each iteration):
    ``head -> body -> tail``, ``tail -> head`` (next iteration), ``tail -> after the loop``,
    and ``head -> tail`` when the loop runs zero times. An ``If`` is a :class:`Use` step of
    its condition, both branches from there, and a :class:`Use` join step; a ``While`` is a
    head, its condition block, a :class:`Use` test step, then its body back to the head or
    the tail after the loop.

    Returns:
        ``(steps, loops, succ, order)``: ``succ[node]`` lists successor nodes, ``order`` all
        nodes in program order.
    """
    steps: list[Stmt] = []
    loops: list[tuple[For, int, int]] = []
    edges: list[tuple[int, int]] = []
    order: list[int] = []
    pseudo: list[int] = []      # pseudo nodes are numbered -1, -2, ... until the end

    def node(t: int, prev) -> int:
        for p in (prev if isinstance(prev, list) else [prev]):
            if p is not None:
                edges.append((p, t))
        order.append(t)
        return t

    def step(s: Stmt, prev) -> int:
        steps.append(s)
        return node(len(steps) - 1, prev)

    def pair() -> tuple[int, int]:
        pseudo.extend((0, 0))
        return -len(pseudo) + 1, -len(pseudo)

    def walk(stmts, prev):
        for s in stmts:
            if isinstance(s, For):
                head, tail = pair()
                first = len(steps)
                end = walk(s.body, node(head, prev))
                if len(steps) > first:
                    loops.append((s, first, len(steps) - 1))
                if len(s.range) == 0 and end != head:
                    edges.append((head, tail))
                prev = node(tail, end)
                edges.append((tail, head))
            elif isinstance(s, If):
                test = step(Use((s.cond,)), prev)
                ends = [walk(s.then, test), walk(s.orelse, test)]
                prev = step(Use((s.cond,)), ends)
            elif isinstance(s, While):
                head, tail = pair()
                first = len(steps)
                test = step(Use((s.pred,)), walk(s.cond, node(head, prev)))
                end = walk(s.body, test)
                loops.append((s, first, len(steps) - 1))
                edges.append((end, head))
                prev = node(tail, test)
            elif members and isinstance(s, FusedKernel):
                prev = walk(s.members, prev)
            else:
                prev = step(s, prev)
        return prev

    walk(stmts, None)
    n = len(steps)
    fix = lambda t: t if t >= 0 else n - 1 - t     # noqa: E731  pseudo -k -> n + k - 1
    succ: list[list[int]] = [[] for _ in range(n + len(pseudo))]
    for a, b in edges:
        succ[fix(a)].append(fix(b))
    return steps, loops, succ, [fix(t) for t in order]


def _dataflow(use: list[int], kill: list[int], succ: list[list[int]], order) -> list[int]:
    """Backward liveness to a fixed point: ``in = use | (out & ~kill)``, ``out = OR in[succ]``.

    Sets are Python ints used as bit sets (bit j: buffer j); nodes are visited in reverse
    program ``order``, so straight-line code converges in one pass and each loop level adds
    one.
    """
    live_in = list(use)
    changed = True
    while changed:
        changed = False
        for t in reversed(order):
            out = 0
            for u in succ[t]:
                out |= live_in[u]
            new = use[t] | (out & ~kill[t])
            if new != live_in[t]:
                live_in[t] = new
                changed = True
    return live_in


def _bit_matrix(rows: list[int], width: int) -> np.ndarray:
    """Bit sets as a [len(rows), width] bool matrix (bit j of row i at [i, j])."""
    nbytes = max(1, -(-width // 8))
    raw = np.frombuffer(b"".join(r.to_bytes(nbytes, "little") for r in rows), np.uint8)
    bits = np.unpackbits(raw.reshape(len(rows), nbytes), axis=1, bitorder="little")
    return bits[:, :width].astype(bool)
