"""``plot(plan, path)``: the packing as a picture, time across and address up (matplotlib's
Agg canvas, no pyplot state).

Each buffer is a rectangle spanning its live steps and its bytes, labelled with its name when
the label fits; a dashed line marks the lower bound and a solid one the arena's top.
"""
from __future__ import annotations

import os

from .liverange import Plan


def plot(plan: Plan, path: str | os.PathLike, title: str | None = None,
         max_labels: int = 400) -> None:
    """Write a PNG of ``plan`` to ``path``.

    Args:
        plan: a memory plan.
        path: output file (PNG).
        title: figure title (default: the plan's summary line).
        max_labels: label at most this many of the largest buffers.

    Raises:
        OSError: ``path`` cannot be written.
    """
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import PatchCollection
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    fig = Figure(figsize=(14, 7), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    allocs = [a for a in plan.allocations if a.size > 0]
    t_end = max((a.range.end + 1 for a in allocs), default=1)
    cmap = colormaps["tab20"]
    rects = [Rectangle((a.range.start, a.offset), a.range.end + 1 - a.range.start, a.size)
             for a in allocs]
    ax.add_collection(PatchCollection(rects, facecolor=[cmap(i % 20) for i in range(len(rects))],
                                      edgecolor="black", linewidth=0.3, alpha=0.85))
    for a in sorted(allocs, key=lambda a: -a.size * (a.range.end + 1 - a.range.start))[:max_labels]:
        w, h = a.range.end + 1 - a.range.start, a.size
        if w >= 0.03 * t_end and h >= 0.012 * max(plan.arena_bytes, 1):
            ax.text(a.range.start + w / 2, a.offset + h / 2, str(a.range.buffer),
                    ha="center", va="center", fontsize=5, clip_on=True)
    ax.axhline(plan.arena_bytes, color="black", linewidth=1,
               label=f"arena {plan.arena_bytes} B ({plan.strategy})")
    ax.axhline(plan.lower_bound_bytes, color="red", linestyle="--", linewidth=1.2, zorder=3,
               label=f"lower bound {plan.lower_bound_bytes} B")
    ax.set_xlim(0, t_end)
    ax.set_ylim(0, max(plan.arena_bytes, 1) * 1.05)
    ax.set_xlabel("program step")
    ax.set_ylabel("arena offset (bytes)")
    ax.set_title(title or plan.summary(), fontsize=9)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png")
