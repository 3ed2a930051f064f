"""Reference device: interprets the graph IR directly with numpy.

Every later backend and pass is checked against it. What each op computes is defined once,
in :mod:`autodiff.graph.reference`; values are held in the device storage dtypes of
:mod:`autodiff.graph.dtypes` (int64 as int32, float16/bfloat16 as themselves). The graph is compiled once into a list
of steps (one closure per node, ``For`` nodes nesting their bodies); running it walks the
steps. Values are never modified in place, so views (``EXPAND``) are shared safely.
"""
from __future__ import annotations

import numpy as np

from ...graph import dtypes
from ...graph.ir import Graph, Node, Op
from ...graph.reference import KERNELS, kernel
from ...graph.rng import philox_uniform
from ..host import call_feeder, call_receiver, check_memory
from . import control


class Interpreter:
    """A compiled graph: ``run(store)`` executes it against variable values in ``store``.

    ``store`` maps :class:`~autodiff.graph.ir.Variable` -> numpy array and is updated in
    place by ``ASSIGN`` nodes. If an iteration fails, ``store`` is restored to its values at
    the start of that iteration before the error propagates.

    Raises:
        DeviceOutOfMemory: (at construction) a value larger than the memory available.
    """

    def __init__(self, graph: Graph):
        check_memory(graph.walk(), "numpy")
        self.graph = graph
        self.steps = self._compile(graph)
        self.vals: dict[int, np.ndarray] = {}
        self.iters: list[int] = []
        self.index: dict[int, int] = {}      # loop key -> iteration (control.py)
        self.results: dict[int, list] = {}   # IF/SCAN node id -> its results

    def _compile(self, graph: Graph):
        return [self._step(n) for n in graph.nodes]

    def _step(self, n: Node):
        if n.op is Op.FOR:
            return ("for", n, self._compile(n.arg.body))
        step = control.compile_step(self, n)
        if step is not None:
            return step
        if n.op in KERNELS:
            return ("op", n, kernel(n), tuple(s.id for s in n.srcs), dtypes.storage(n.dtype))
        return (n.op.name.lower(), n)

    def run(self, store: dict) -> None:
        self.vals = {}
        self.iters = []
        self._run(self.steps, store)

    def _run(self, steps, store) -> None:
        vals = self.vals
        for step in steps:
            kind, n = step[0], step[1]
            if kind == "op":
                r = step[2](*[vals[i] for i in step[3]])
                if r.dtype != step[4]:
                    r = r.astype(step[4])
                vals[n.id] = r
            elif kind == "const":
                vals[n.id] = np.full(n.shape, n.arg, dtype=dtypes.storage(n.dtype))
            elif kind == "load":
                vals[n.id] = store[n.arg]
            elif kind == "assign":
                vals[n.id] = store[n.arg] = vals[n.srcs[0].id]
            elif kind == "feeder":
                vals[n.id] = self._feed(n)
            elif kind == "rand":
                vals[n.id] = philox_uniform(*n.arg, self.iters, n.shape)
            elif kind == "receiver":
                self._receive(n, [vals[s.id] for s in n.srcs])
            elif kind == "for":
                self._loop(n, step[2], store)
            elif kind in control.KINDS:
                control.run(self, step, store)
            else:
                raise NotImplementedError(f"numpy device: no kernel for {n.op.name}")

    def _loop(self, n: Node, body, store) -> None:
        self.iters.append(0)
        for k, _ in enumerate(n.arg.range):
            self.iters[-1] = k
            self.index[n.arg.index] = k
            snapshot = dict(store)
            try:
                self._run(body, store)
            except BaseException:
                store.clear()
                store.update(snapshot)
                raise
        self.iters.pop()

    def _feed(self, n: Node) -> np.ndarray:
        return call_feeder(n.arg, tuple(self.iters))

    def _receive(self, n: Node, args) -> None:
        call_receiver(n.arg, tuple(self.iters), args)
