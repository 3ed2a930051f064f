"""The no-fragmentation lower bound: the peak of total live bytes over program order.

No layout can beat it, because at its peak step all those buffers are live at once and need
disjoint bytes. XLA's heap simulator reports the same figure next to its result.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .liverange import LiveRange, align_up


def live_bytes(ranges: Sequence[LiveRange], alignment: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Total live bytes as a step function of time.

    Args:
        ranges: the buffers' live ranges.
        alignment: count each buffer at its size rounded up to this (bytes).

    Returns:
        ``(times, total)``: int64 arrays of equal length; ``total[i]`` bytes are live on the
        steps ``times[i] <= t < times[i + 1]`` (and none from ``times[-1]`` on).
    """
    if not ranges:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    size = np.array([align_up(r.size_bytes, alignment) for r in ranges], np.int64)
    start = np.array([r.start for r in ranges], np.int64)
    stop = np.array([r.end + 1 for r in ranges], np.int64)
    times, inverse = np.unique(np.concatenate([start, stop]), return_inverse=True)
    delta = np.zeros(len(times), np.int64)
    np.add.at(delta, inverse, np.concatenate([size, -size]))
    return times, np.cumsum(delta)


def lower_bound(ranges: Sequence[LiveRange], alignment: int = 1) -> int:
    """Peak total live bytes (sizes rounded up to ``alignment``); 0 for no ranges.

    Complexity: O(n log n) for n ranges.
    """
    _, total = live_bytes(ranges, alignment)
    return int(total.max()) if len(total) else 0
