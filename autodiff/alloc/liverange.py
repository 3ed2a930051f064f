"""The planner's vocabulary: live ranges on a program-order time axis, allocations, a plan.

Time is an integer step of the program order (one step per instruction, see
:mod:`.liveness`). A buffer is live on the closed interval ``[start, end]``: it is written at
``start`` and read for the last time at ``end``. Two buffers *interfere* when their intervals
share a step; interfering buffers must not share an address (an instruction reads its
operands and writes its result in the same step, so they interfere).

Every byte figure of a plan counts a buffer at its size rounded up to the plan's alignment,
so offsets computed as sums of such sizes are aligned by construction.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Hashable


def align_up(nbytes: int, alignment: int) -> int:
    """``nbytes`` rounded up to a multiple of ``alignment`` (both in bytes, alignment >= 1)."""
    return -(-nbytes // alignment) * alignment


@dataclass(frozen=True)
class LiveRange:
    """One buffer's lifetime. Invariant: ``0 <= start <= end`` and ``size_bytes >= 0``.

    Attributes:
        buffer: the buffer's name (any hashable, unique within a plan).
        size_bytes: bytes the buffer needs (before alignment).
        start: step that writes it.
        end: last step that reads it (inclusive).
    """
    buffer: Hashable
    size_bytes: int
    start: int
    end: int

    def __post_init__(self):
        if not (0 <= self.start <= self.end) or self.size_bytes < 0:
            raise ValueError(f"bad live range {self}: need 0 <= start <= end, size >= 0")

    def interferes(self, other: "LiveRange") -> bool:
        """Whether both buffers are live at some common step."""
        return self.start <= other.end and other.start <= self.end


@dataclass(frozen=True)
class Allocation:
    """A buffer placed in the arena. Invariant: ``offset % alignment == 0`` of its plan.

    Attributes:
        range: the buffer's live range.
        offset: first byte in the arena.
        size: bytes reserved (``range.size_bytes`` rounded up to the plan's alignment).
    """
    range: LiveRange
    offset: int
    size: int

    @property
    def stop(self) -> int:
        """One past the last reserved byte."""
        return self.offset + self.size


@dataclass
class Plan:
    """An arena layout. Invariant: buffers that interfere occupy disjoint byte ranges, and
    ``lower_bound_bytes <= arena_bytes <= naive_bytes`` (checked by :func:`~.verify.verify`).

    Attributes:
        allocations: one per buffer, in the order the ranges were given.
        arena_bytes: bytes of the arena (max over allocations of ``offset + size``).
        lower_bound_bytes: peak of total live bytes over time; no layout can be smaller.
        naive_bytes: total bytes without any reuse (each buffer its own slot).
        alignment: every offset is a multiple of this (bytes).
        strategy: name of the packer whose layout was kept.
        aliases: buffer -> buffer whose slot it reuses in place (not in ``allocations``).
        tried: strategy name -> arena bytes it reached.
        buffers: buffer name -> procedural-IR Buffer, when planned from a program.
    """
    allocations: list[Allocation]
    arena_bytes: int
    lower_bound_bytes: int
    naive_bytes: int
    alignment: int = 1
    strategy: str = ""
    aliases: dict = field(default_factory=dict)
    tried: dict = field(default_factory=dict)
    buffers: dict = field(default_factory=dict)

    @property
    def offsets(self) -> dict:
        """buffer -> byte offset in the arena, in-place aliases included."""
        out = {a.range.buffer: a.offset for a in self.allocations}
        for buf, target in self.aliases.items():
            out[buf] = out[target]
        return out

    @property
    def ratio(self) -> float:
        """``arena_bytes / lower_bound_bytes`` (1.0 for an empty plan)."""
        return self.arena_bytes / self.lower_bound_bytes if self.lower_bound_bytes else 1.0

    @property
    def saved_pct(self) -> float:
        """Percent of ``naive_bytes`` the arena saves."""
        return 100.0 * (1 - self.arena_bytes / self.naive_bytes) if self.naive_bytes else 0.0

    def buffer_offsets(self) -> dict:
        """procedural-IR Buffer -> byte offset (what a device's executor takes)."""
        return {self.buffers[name]: off for name, off in self.offsets.items()}

    def stats(self) -> "MemoryStats":
        """The figures ``execute()`` reports under ``report.stats["memory"]``."""
        return MemoryStats({"buffers": len(self.allocations), "inplace": len(self.aliases),
                "naive_bytes": self.naive_bytes, "lower_bound_bytes": self.lower_bound_bytes,
                "arena_bytes": self.arena_bytes, "saved_pct": round(self.saved_pct, 2),
                "arena_over_lower_bound": round(self.ratio, 4), "strategy": self.strategy,
                "alignment": self.alignment}, self.summary())

    def summary(self) -> str:
        """One line: arena, lower bound, naive, ratio and saving."""
        return (f"arena {_mib(self.arena_bytes)} ({self.strategy}), lower bound "
                f"{_mib(self.lower_bound_bytes)}, naive {_mib(self.naive_bytes)}: "
                f"{self.ratio:.3f}x lower bound, {self.saved_pct:.1f}% saved vs naive")

    def __str__(self) -> str:
        head = f"memory plan: {self.summary()}"
        tried = ", ".join(f"{k} {v} B" for k, v in self.tried.items())
        rows = [head, f"  tried: {tried}" if tried else "",
                f"  {'buffer':<24} {'offset':>10} {'bytes':>10} {'live':>15}"]
        for a in sorted(self.allocations, key=lambda a: (a.offset, a.range.start)):
            r = a.range
            rows.append(f"  {str(r.buffer):<24} {a.offset:>10} {a.size:>10} "
                        f"{f'[{r.start}, {r.end}]':>15}")
        for buf, target in self.aliases.items():
            rows.append(f"  {str(buf):<24} {'in place of ' + str(target):>37}")
        return "\n".join(r for r in rows if r)


class MemoryStats(dict):
    """The plan's figures as a dict (bytes, percent, ratio); ``str()`` is one summary line."""

    def __init__(self, figures: dict, line: str):
        super().__init__(figures)
        self.line = line

    def __str__(self) -> str:
        return self.line


def _mib(n: int) -> str:
    return f"{n} B" if n < 1 << 20 else f"{n / (1 << 20):.2f} MiB"
