"""Target fit: best fit into a fixed arena size, starting at the lower bound.

A third strategy next to greedy-by-size and lifetime-ordered best fit. It tries to fit all
buffers, in order of first use, into an arena of exactly the lower bound, then of a few sizes
slightly above it, and keeps the first that works. Inside a gap each buffer sits next to the
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
    order = lifetime_order(ranges)
    for t in TARGETS:
        offsets = place(ranges, order, alignment, align_up(int(bound * t), alignment))
        if offsets is not None:
            return offsets
    return None
