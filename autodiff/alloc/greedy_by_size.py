"""Greedy by size: Pisarchyk & Lee 2020, "Efficient Memory Management for Deep Neural Net
Inference" (the TFLite arena planner).

Buffers are taken in decreasing size (earlier first use on ties); each goes into the smallest
gap, among buffers already placed that interfere with it, that holds it, else on top of them.
Large buffers fix the layout's skeleton and small ones fill the holes.
"""
from __future__ import annotations

from typing import Sequence

from .best_fit import place
from .liverange import LiveRange


def greedy_by_size(ranges: Sequence[LiveRange], alignment: int = 1) -> list[int]:
    """Greedy-by-size offsets.

    Args:
        ranges: the buffers' live ranges.
        alignment: offset alignment in bytes (sizes are rounded up to it).

    Returns:
        Byte offsets, one per range.
    """
    order = sorted(range(len(ranges)),
                   key=lambda i: (-ranges[i].size_bytes, ranges[i].start, -ranges[i].end))
    return place(ranges, order, alignment)
