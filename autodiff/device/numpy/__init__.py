"""The numpy reference device (see :mod:`.interpreter`).

``compile(graph, ir="graph")`` interprets the graph IR directly (the reference);
``ir="procedural"`` lowers it to the procedural IR, fuses it (``fuse=True``) and runs that
with :mod:`.procedural`. The default comes from the environment variable ``AUTODIFF_IR``
(``graph`` when unset), so a whole test suite can be run through the procedural path with
``AUTODIFF_IR=procedural python -m pytest``.
"""
from __future__ import annotations

import os

from ...graph.ir import Graph
from .interpreter import Interpreter


def compile(graph: Graph, ir: str | None = None, **options):
    """Prepare ``graph`` for ``run(store)``.

    Parameters
    ----------
    graph : Graph
        The (optimized) graph IR.
    ir : {"graph", "procedural"}, optional
        Which IR to execute; default ``$AUTODIFF_IR`` or ``"graph"``.
    options
        For ``ir="procedural"``: ``fuse`` (default True), ``offsets`` (temp buffer -> arena
        byte offset), ``by_member``, ``report``. Others are ignored.

    Raises
    ------
    ValueError
        Unknown ``ir``.
    """
    ir = ir or os.environ.get("AUTODIFF_IR", "graph")
    if ir == "graph":
        return Interpreter(graph, options.get("prefetch"))
    if ir == "procedural":
        from .procedural import compile_procedural
        return compile_procedural(graph, **options)
    raise ValueError(f"numpy device: unknown ir {ir!r}; use 'graph' or 'procedural'")
