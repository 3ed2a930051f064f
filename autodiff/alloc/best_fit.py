"""Lifetime-ordered best fit, and the placement step every packer here shares.

``place`` takes buffers one at a time in a given order and puts each into the smallest gap
between already-placed buffers it interferes with (a buffer that does not interfere in time
takes no room), or on top of them when no gap fits. With the buffers in order of first use
this is the lifetime-ordered best fit of XLA's heap simulator; in decreasing size order it is
the greedy-by-size planner of TFLite (:mod:`.greedy_by_size`).

Given a ``capacity``, the space between the placed buffers and the capacity is a gap too, and
a buffer goes to the end of its gap next to the neighbour that is live longer (the arena's
edges are live for ever), so that space freed later joins larger holes (:mod:`.target_fit`).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .liverange import LiveRange, align_up

_NONE = np.iinfo(np.int64).max


def place(ranges: Sequence[LiveRange], order: Sequence[int], alignment: int = 1,
          capacity: int | None = None) -> list[int] | None:
    """Best-fit offsets for ``ranges`` placed in ``order``.

    Args:
        ranges: the buffers' live ranges.
        order: a permutation of ``range(len(ranges))``: placement order.
        alignment: offsets are multiples of this (bytes, >= 1); sizes are rounded up to it.
        capacity: if given (a multiple of ``alignment``), the arena size to fit into.

    Returns:
        Byte offsets, one per range (in the order of ``ranges``); ``None`` if a buffer does
        not fit into ``capacity``.

    Complexity: O(n^2) elementwise work for n buffers, vectorised with numpy per buffer.
    """
    n = len(ranges)
    start = np.array([r.start for r in ranges], np.int64)
    end = np.array([r.end for r in ranges], np.int64)
    size = np.array([align_up(r.size_bytes, alignment) for r in ranges], np.int64)
    offset = np.zeros(n, np.int64)
    # placed buffers, in placement order
    p_start, p_end, p_lo, p_hi = (np.zeros(n, np.int64) for _ in range(4))
    k = 0
    for i in order:
        if size[i] == 0:
            continue
        live = (p_start[:k] <= end[i]) & (p_end[:k] >= start[i])
        lo, hi, last = p_lo[:k][live], p_hi[:k][live], p_end[:k][live]
        if capacity is None:
            best = _bottom_fit(lo, hi, size[i])
        else:
            best = _capped_fit(lo, hi, last, size[i], capacity)
            if best is None:
                return None
        offset[i] = best
        p_start[k], p_end[k], p_lo[k], p_hi[k] = start[i], end[i], best, best + size[i]
        k += 1
    return offset.tolist()


def _gaps(lo, hi):
    """Address order of the intervals, and the free space ``[below, lo)`` under each."""
    by_addr = np.argsort(lo, kind="stable")
    top = np.maximum.accumulate(hi[by_addr])
    below = np.concatenate(([0], top[:-1]))
    return by_addr, below, top


def _bottom_fit(lo, hi, size) -> int:
    if not len(lo):
        return 0
    by_addr, below, top = _gaps(lo, hi)
    room = lo[by_addr] - below
    gap = np.where(room >= size, room, _NONE)
    j = int(np.argmin(gap))
    return int(below[j]) if gap[j] != _NONE else int(top[-1])


def _capped_fit(lo, hi, last, size, capacity) -> int | None:
    forever = _NONE
    if not len(lo):
        return 0 if size <= capacity else None
    by_addr, below, top = _gaps(lo, hi)
    # gaps: under each interval, then from the top of all to the capacity
    gap_lo = np.concatenate((below, top[-1:]))
    gap_hi = np.concatenate((lo[by_addr], [capacity]))
    room = gap_hi - gap_lo
    gap = np.where(room >= size, room, _NONE)
    j = int(np.argmin(gap))
    if gap[j] == _NONE:
        return None
    ends = last[by_addr]
    # neighbour below: the interval reaching highest among those before j (edge if none)
    below_end = forever if j == 0 else int(ends[int(np.argmax(hi[by_addr][:j]))])
    above_end = forever if j == len(lo) else int(ends[j])
    return int(gap_hi[j] - size) if above_end > below_end else int(gap_lo[j])


def best_fit(ranges: Sequence[LiveRange], alignment: int = 1) -> list[int]:
    """Lifetime-ordered best fit: buffers in order of first use (larger first on ties).

    Args:
        ranges: the buffers' live ranges.
        alignment: offset alignment in bytes.

    Returns:
        Byte offsets, one per range.
    """
    return place(ranges, lifetime_order(ranges), alignment)


def lifetime_order(ranges: Sequence[LiveRange]) -> list[int]:
    """Indices of ``ranges`` by first use, larger and longer-lived first on ties."""
    return sorted(range(len(ranges)),
                  key=lambda i: (ranges[i].start, -ranges[i].size_bytes, -ranges[i].end))
