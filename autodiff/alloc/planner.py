"""``pack``: run every packer on a set of live ranges and keep the smallest arena;
``plan_memory``: the same for a procedural program (liveness, in-place reuse, packing)."""
from __future__ import annotations

from typing import Callable, Sequence

from .best_fit import best_fit
from .greedy_by_size import greedy_by_size
from .inplace import merge_inplace
from .liverange import Allocation, LiveRange, Plan, align_up
from .liveness import liveness
from .lower_bound import lower_bound
from .target_fit import target_fit
from .verify import verify

#: name -> packer(ranges, alignment) -> offsets (or None: no layout found); all are run and
#: the smallest arena is kept.
STRATEGIES: dict[str, Callable[[Sequence[LiveRange], int], list[int]]] = {
    "greedy_by_size": greedy_by_size,
    "best_fit": best_fit,
    "target_fit": target_fit,
}


def pack(ranges: Sequence[LiveRange], alignment: int = 1, strategies: Sequence[str] | None = None,
         aliases: dict | None = None) -> Plan:
    """Assign every buffer a byte offset in one arena.

    Args:
        ranges: live ranges with unique ``buffer`` names.
        alignment: offsets are multiples of this many bytes (>= 1), e.g. OpenCL's
            ``CL_DEVICE_MEM_BASE_ADDR_ALIGN`` / 8.
        strategies: names from :data:`STRATEGIES` to try (default: all).
        aliases: buffer -> buffer whose slot it reuses in place, recorded in the plan.

    Returns:
        The :class:`Plan` with the smallest arena (first strategy wins ties; greedy by size
        if every strategy asked for gave up).

    Raises:
        ValueError: alignment < 1, duplicate buffer names, or an unknown strategy.
    """
    if alignment < 1:
        raise ValueError(f"alignment must be >= 1 byte, got {alignment}")
    ranges = list(ranges)
    if len({r.buffer for r in ranges}) != len(ranges):
        raise ValueError("buffer names in a plan must be unique")
    names = list(strategies or STRATEGIES)
    unknown = [s for s in names if s not in STRATEGIES]
    if unknown:
        raise ValueError(f"unknown strategies {unknown}; have {sorted(STRATEGIES)}")
    sizes = [align_up(r.size_bytes, alignment) for r in ranges]
    best, tried = None, {}
    for name in names:
        offsets = STRATEGIES[name](ranges, alignment)
        if offsets is None:
            continue
        arena = max((o + s for o, s in zip(offsets, sizes)), default=0)
        tried[name] = arena
        if best is None or arena < best[0]:
            best = (arena, name, offsets)
    if best is None:     # only strategies that may give up were asked, and all did
        offsets = greedy_by_size(ranges, alignment)
        best = (max((o + s for o, s in zip(offsets, sizes)), default=0), "greedy_by_size", offsets)
    arena, name, offsets = best
    return Plan([Allocation(r, o, s) for r, o, s in zip(ranges, offsets, sizes)], arena,
                lower_bound(ranges, alignment), sum(sizes), alignment, name,
                dict(aliases or {}), tried)


def plan_memory(program, alignment: int = 1, inplace: dict | None = None, members: bool = True,
                strategies: Sequence[str] | None = None, debug: bool = False) -> Plan:
    """Plan one arena for the temporaries and staging buffers of a procedural program.

    Args:
        program: a :class:`~autodiff.procedural.ir.Program` (lowered or fused).
        alignment: byte alignment of every offset (e.g. OpenCL's
            ``CL_DEVICE_MEM_BASE_ADDR_ALIGN`` / 8); sizes are rounded up to it.
        inplace: graph node id of a result -> id of the operand whose slot it may take
            (``Graph.inplace`` from :mod:`autodiff.opt.inplace`); honoured where safe, see
            :mod:`.inplace`.
        members: plan for op-by-op execution of fused groups (their internal buffers too).
        strategies: packers to try (default: all of :data:`STRATEGIES`).
        debug: run :func:`~.verify.verify` on the result.

    Returns:
        A :class:`Plan` over buffer names (``Plan.offsets``: name -> byte offset);
        ``naive_bytes`` counts every planned buffer (in-place results included) separately.

    Raises:
        ValueError: bad alignment; PlanError (with ``debug``): an unsafe plan.
    """
    live = liveness(program, members=members)
    ranges, aliases = live.ranges, {}
    if inplace:
        ranges, aliases = merge_inplace(live.ranges, live.steps, live.buffers, inplace)
    plan = pack(ranges, alignment, strategies, aliases)
    plan.naive_bytes = sum(align_up(r.size_bytes, alignment) for r in live.ranges)
    plan.buffers = live.buffers
    if debug:
        verify(plan)
    return plan
