"""The numpy reference device (see :mod:`.interpreter`)."""
from __future__ import annotations

from ...graph.ir import Graph
from .interpreter import Interpreter


def compile(graph: Graph, **options) -> Interpreter:
    """Prepare ``graph`` for :meth:`Interpreter.run`. Options are accepted and ignored."""
    return Interpreter(graph)
