"""Reduce+Elw: a reduction with its elementwise producer (prologue) and consumers (epilogue).

* Prologue: an elementwise kernel whose result only this reduction reads is inlined into
  the reduction's source expression (``sum((a - b) ** 2)`` is one kernel); chains of such
  producers are followed.
* Epilogue: elementwise kernels reading the reduction's result over the kept (unreduced)
  space: ``mean = sum * 1/n``, layer-norm statistics, the bias update of SGD.

Following tinygrad, a kernel holds at most one reduction: reductions never join a group.
"""
from __future__ import annotations

from ..procedural.ir import BufferKind, Elementwise, Reduce, loads
from .group import Schedule, grow

NAME = "Reduce+Elw"
MAX_PROLOGUE = 8


def _prologue(sched: Schedule, r: Reduce) -> list:
    """Elementwise producers only ``r`` (or another prologue member) reads, program order."""
    chosen: list = []
    frontier = [r]
    while frontier and len(chosen) < MAX_PROLOGUE:
        s = frontier.pop()
        vals = [r.src] if s is r else s.values()
        for v in vals:
            for ld in loads(v):
                b = ld.buffer
                if b.kind is not BufferKind.TEMP:
                    continue
                ws = sched.writers_of(b)
                if len(ws) != 1 or not isinstance(ws[0], Elementwise) or \
                        not sched.free(ws[0]) or ws[0] in chosen or len(ws[0].outs) != 1:
                    continue
                group_ids = {id(x) for x in chosen} | {id(r), id(s), id(ws[0])}
                if any(id(x) not in group_ids for x in sched.readers_of(b)):
                    continue
                chosen.append(ws[0])
                frontier.append(ws[0])
    return sorted(chosen, key=lambda x: sched.rank[id(x)])


def fuse_reduce_elw(stmts: list) -> list:
    """One statement list (not its ``For`` bodies) with Reduce+Elw groups formed."""
    sched = Schedule(stmts)
    for s in list(stmts):
        if isinstance(s, Reduce) and sched.free(s):
            grow(sched, s, _prologue(sched, s), NAME)
    return sched.statements()
