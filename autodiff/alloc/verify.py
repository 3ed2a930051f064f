"""``verify(plan)``: proof that a memory plan is safe, by a sweep over time.

Buffers are visited in order of first use. The live ones are kept in a list sorted by
address; because the live set is pairwise disjoint (or we would have stopped), a new buffer
overlaps some live buffer iff it overlaps its address-order predecessor or successor, so each
insertion checks two neighbours. Buffers leave the list once the sweep passes their last use.
"""
from __future__ import annotations

import bisect
import heapq

from .liverange import Plan, align_up
from .lower_bound import lower_bound


class PlanError(ValueError):
    """A memory plan is unsafe or inconsistent; the message names the buffers involved."""


def verify(plan: Plan) -> None:
    """Check that ``plan`` is a valid arena layout.

    Checks: every offset is a multiple of ``plan.alignment``; every buffer's reserved size
    covers its bytes rounded up to the alignment; every buffer lies in
    ``[0, plan.arena_bytes)``; no two buffers whose live ranges share a step share a byte;
    ``lower_bound_bytes`` is the true peak of live bytes and ``arena_bytes`` is not below it;
    aliases point at allocated buffers.

    Args:
        plan: the plan to check.

    Raises:
        PlanError: on the first violation found.

    Complexity: O(n log n) comparisons for n buffers (list insertions/deletions move
    O(n) pointers each, with a tiny constant).
    """
    al = plan.alignment
    for a in plan.allocations:
        r = a.range
        if a.offset % al:
            raise PlanError(f"{r.buffer}: offset {a.offset} not a multiple of alignment {al}")
        if a.size < align_up(r.size_bytes, al):
            raise PlanError(f"{r.buffer}: reserves {a.size} B, needs {r.size_bytes} B")
        if a.offset < 0 or a.stop > plan.arena_bytes:
            raise PlanError(f"{r.buffer}: bytes [{a.offset}, {a.stop}) outside the arena "
                            f"of {plan.arena_bytes} B")
    _sweep(plan)
    bound = lower_bound([a.range for a in plan.allocations], al)
    if bound != plan.lower_bound_bytes:
        raise PlanError(f"lower bound recorded as {plan.lower_bound_bytes} B, is {bound} B")
    if plan.arena_bytes < bound:
        raise PlanError(f"arena {plan.arena_bytes} B below the lower bound {bound} B")
    buffers = {a.range.buffer for a in plan.allocations}
    for buf, target in plan.aliases.items():
        if target not in buffers:
            raise PlanError(f"{buf} is in place of {target}, which has no allocation")


def _sweep(plan: Plan) -> None:
    allocs = sorted((a for a in plan.allocations if a.size > 0), key=lambda a: a.range.start)
    live: list[tuple[int, int, int]] = []     # (offset, stop, index), sorted by address
    expiry: list[tuple[int, int, int, int]] = []   # heap of (end, offset, stop, index)
    for i, a in enumerate(allocs):
        while expiry and expiry[0][0] < a.range.start:
            _, lo, hi, j = heapq.heappop(expiry)
            del live[bisect.bisect_left(live, (lo, hi, j))]
        key = (a.offset, a.stop, i)
        pos = bisect.bisect_left(live, key)
        for nb in (live[pos - 1] if pos else None, live[pos] if pos < len(live) else None):
            if nb is not None and nb[0] < a.stop and a.offset < nb[1]:
                b = allocs[nb[2]]
                raise PlanError(f"{a.range.buffer} {_show(a)} and {b.range.buffer} {_show(b)} "
                                "are live at the same time and share bytes")
        live.insert(pos, key)
        heapq.heappush(expiry, (a.range.end, a.offset, a.stop, i))


def _show(a) -> str:
    return f"(bytes [{a.offset}, {a.stop}), steps [{a.range.start}, {a.range.end}])"
