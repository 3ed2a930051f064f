"""Target fit: best fit into a fixed arena size, starting at the lower bound.

A third strategy next to greedy-by-size and lifetime-ordered best fit. It tries to fit all
buffers, in order of first use (then, if that fails, by decreasing breadth, then longest
life first), into an arena of exactly the lower bound, then of a few sizes slightly above it, and keeps the first
that works. Inside a gap each buffer sits next to the
neighbour that lives longer (arena edges live for ever), so holes merge when buffers die: on
a chain where each buffer dies as the next is made this alternates bottom/top and reaches the
lower bound exactly, which the two classic packers do not.
"""
from __future__ import annotations

from typing import Sequence

from .best_fit import lifetime_order, place
from .liverange import LiveRange, align_up
from .lower_bound import lower_bound

#: arena sizes tried, as multiples of the lower bound
TARGETS = (1.0, 1.005, 1.01, 1.02, 1.05)


def target_fit(ranges: Sequence[LiveRange], alignment: int = 1) -> list[int] | None:
    """Offsets fitting the smallest target arena in :data:`TARGETS` x lower bound.

    Args:
        ranges: the buffers' live ranges.
        alignment: offset alignment in bytes (sizes are rounded up to it).

    Returns:
        Byte offsets, one per range, or ``None`` if no target size could be met (the other
        strategies then decide).
    """
    bound = lower_bound(ranges, alignment)
    orders = [lifetime_order(ranges), breadth_order(ranges, alignment),
              sorted(range(len(ranges)), key=lambda i: (ranges[i].start - ranges[i].end,
                                                        -ranges[i].size_bytes))]
    for t in TARGETS:
        for order in orders:
            offsets = place(ranges, order, alignment, align_up(int(bound * t), alignment))
            if offsets is not None:
                return offsets
    return None


def breadth_order(ranges: Sequence[LiveRange], alignment: int = 1) -> list[int]:
    """Buffers by decreasing *breadth*, the most bytes live at any step of their life
    (Pisarchyk & Lee 2020, "greedy by breadth"), then size: the buffers of the busiest
    steps are placed first, the tight spots of the arena fixed before the loose ones."""
    if not ranges:
        return []
    end = max(r.end for r in ranges) + 2
    delta = [0] * end
    for r in ranges:
        n = align_up(r.size_bytes, alignment)
        delta[r.start] += n
        delta[r.end + 1] -= n
    live, acc = [], 0
    for d in delta:
        acc += d
        live.append(acc)
    breadth = _range_max(live)
    return sorted(range(len(ranges)), key=lambda i: (-breadth(ranges[i].start, ranges[i].end),
                                                     -ranges[i].size_bytes, ranges[i].start))


def _range_max(values: list[int]):
    """``f(lo, hi)``: max of ``values[lo..hi]`` in O(1) after O(n log n) (a sparse table)."""
    table = [list(values)]
    k = 1
    while 2 * k <= len(values):
        prev = table[-1]
        table.append([max(prev[i], prev[i + k]) for i in range(len(values) - 2 * k + 1)])
        k *= 2

    def f(lo: int, hi: int) -> int:
        j = (hi - lo + 1).bit_length() - 1
        return max(table[j][lo], table[j][hi - (1 << j) + 1])
    return f
