"""Stage 2: graph passes that clean the traced program before lowering.

Each pass is a pure function ``Graph -> Graph`` in its own module (input nodes are never
modified; ``outputs`` keep their positions; effects keep their program order):

* ``simplify`` (:mod:`.simplify`): constant folding, unary folding, algebraic identities,
  view folding, written as pattern -> replacement rules applied to a fixed point.
* ``cse`` (:mod:`.cse`): repeated pure sub-expressions computed once.
* ``dot_layout`` (:mod:`.dot_layout`): a matrix product read only transposed (a weight
  gradient) computed transposed, so it is stored in the layout it is read in.
* ``prune`` (:mod:`.prune`): nodes no effect or output depends on removed.
* ``inplace`` (:mod:`.inplace`): elementwise nodes that may overwrite a dying operand
  marked in ``Graph.inplace`` for the memory planner.

:func:`optimize` runs them in that order (``execute()`` calls it).
"""
from __future__ import annotations

import sys
import time

from ..graph.ir import Graph
from ..graph.printer import format_graph
from .cse import cse
from .dot_layout import dot_layout
from .inplace import inplace
from .prune import prune
from .simplify import simplify

#: pass name -> function(graph, options) -> graph, in default order
PASSES = {
    "simplify": lambda g, o: simplify(g, fast_math=o["fast_math"],
                                      prefer_exp2=o["prefer_exp2"]),
    "cse": lambda g, o: cse(g),
    "dot_layout": lambda g, o: dot_layout(g),
    "prune": lambda g, o: prune(g),
    "inplace": lambda g, o: inplace(g),
}
ALIASES = {"repeat": "cse", "dce": "prune"}


def optimize(graph: Graph, report=None, fast_math: bool = False, passes=None,
             verbose: bool = False, prefer_exp2: bool = False, **options) -> Graph:
    """Run the graph passes.

    Args:
        graph: the traced program (not modified).
        report: an :class:`autodiff.Report` or None; ``report.nodes[name]`` gets the node
            count (:meth:`Graph.count`) after each pass, ``report.stats["opt_ms"]`` each
            pass's time in milliseconds.
        fast_math: allow rewrites that break IEEE 754 (see :mod:`.simplify`).
        passes: names of the passes to run, in order (default: all, in :data:`PASSES`
            order); ``"repeat"`` and ``"dce"`` are accepted for ``cse`` and ``prune``.
        verbose: print the node count after each pass and the optimized graph.
        prefer_exp2: rewrite ``exp``/``log`` to base 2 (for targets that prefer it).
        options: other stages' options, ignored.

    Returns:
        The optimized :class:`Graph`.

    Raises:
        ValueError: an unknown pass name.
    """
    names = list(PASSES) if passes is None else [ALIASES.get(p, p) for p in passes]
    unknown = [p for p in names if p not in PASSES]
    if unknown:
        raise ValueError(f"unknown graph pass(es) {unknown}; available: {list(PASSES)}")
    opts = {"fast_math": fast_math, "prefer_exp2": prefer_exp2}
    counts = {"traced": graph.count()}
    times = {}
    for name in names:
        t0 = time.perf_counter()
        graph = PASSES[name](graph, opts)
        times[name] = (time.perf_counter() - t0) * 1e3
        counts[name] = graph.count()
    if report is not None:
        report.nodes.setdefault("traced", counts["traced"])
        for name in names:
            report.nodes[name] = counts[name]
        report.stats["opt_ms"] = {k: round(v, 3) for k, v in times.items()}
    if verbose:
        print(format_counts(counts, times), file=sys.stdout)
        print(format_graph(graph, title="graph(opt)"), file=sys.stdout)
    return graph


def format_counts(counts: dict, times: dict | None = None) -> str:
    """Node counts before and after each pass, one line per pass::

        opt: traced 53 nodes
          simplify    38  (-15)   0.4 ms
    """
    items = list(counts.items())
    lines = [f"opt: {items[0][0]} {items[0][1]} nodes"]
    prev = items[0][1]
    for name, n in items[1:]:
        t = f"  {times[name]:7.2f} ms" if times and name in times else ""
        lines.append(f"  {name:<10} {n:6d}  ({n - prev:+d}){t}")
        prev = n
    return "\n".join(lines)


__all__ = ["optimize", "simplify", "cse", "dot_layout", "prune", "inplace", "PASSES", "format_counts"]
