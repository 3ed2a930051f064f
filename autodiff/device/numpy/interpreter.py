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
from ...graph.ir import CONTROL, Graph, Node, Op
from ...graph.reference import KERNELS, kernel
from ...graph.rng import philox_uniform
from ..host import (FeedAhead, Progress, call_callback, call_feeder, call_receiver,
                    check_indices, check_memory, deferred_interrupts, prefetch_option,
                    safe_indices)
from . import control


class Interpreter:
    """A compiled graph: ``run(store)`` executes it against variable values in ``store``.

    ``store`` maps :class:`~autodiff.graph.ir.Variable` -> numpy array and is updated in
    place by ``ASSIGN`` nodes. If the run stops inside the outermost loop (a failing
    callback, an out-of-range index, an interrupt anywhere), ``store`` holds the values at
    the start of the iteration it stopped in before the error propagates
    (:attr:`progress` tells which). Host callbacks follow the order contract of
    :mod:`autodiff.device.host` with ``prefetch`` (Feeders called ahead by
    :class:`~autodiff.device.host.FeedAhead`).

    Raises:
        DeviceOutOfMemory: (at construction) a value larger than the memory available.
    """

    def __init__(self, graph: Graph, prefetch: int | None = None):
        check_memory(graph.walk(), "numpy")
        self.graph = graph
        self.prefetch = prefetch_option(prefetch)
        self.steps = self._compile(graph)
        self.vals: dict[int, np.ndarray] = {}
        self.iters: list[int] = []
        self.progress = Progress()
        self._feeds: dict | None = None      # Feeder values of this iteration (called ahead)
        self.index: dict[int, int] = {}      # loop key -> iteration (control.py)
        self.results: dict[int, list] = {}   # IF/SCAN node id -> its results

    def _compile(self, graph):
        return [self._step(n) for n in graph.nodes]

    def _step(self, n: Node):
        if n.op is Op.FOR:
            body = n.arg.body.nodes
            feeders = None if any(m.op in CONTROL for m in body) else \
                [(m.id, m.arg) for m in body if m.op is Op.FEEDER]
            return ("for", n, self._compile(n.arg.body), feeders)
        step = control.compile_step(self, n)
        if step is not None:
            return step
        if n.op in (Op.GATHER, Op.SCATTER_ADD):
            return ("checked", n, kernel(n), tuple(s.id for s in n.srcs))
        if n.op in KERNELS:
            return ("op", n, kernel(n), tuple(s.id for s in n.srcs), dtypes.storage(n.dtype))
        return (n.op.name.lower(), n)

    def run(self, store: dict) -> None:
        self.vals = {}
        self.iters = []
        self.progress = Progress()
        self._feeds = None
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
            elif kind == "callback":
                vals[n.id] = call_callback(n.arg, tuple(self.iters),
                                           [vals[s.id] for s in n.srcs])
            elif kind == "checked":          # GATHER, SCATTER_ADD: indices checked
                args = [vals[i] for i in step[3]]
                rows = args[0].shape[0] if n.op is Op.GATHER else n.arg
                check_indices(args[1], rows, n, tuple(self.iters))
                vals[n.id] = step[2](args[0], safe_indices(args[1], n))
            elif kind == "for":
                self._loop(n, step[2], step[3], store)
            elif kind in control.KINDS:
                control.run(self, step, store)
            else:
                raise NotImplementedError(f"numpy device: no kernel for {n.op.name}")

    def _loop(self, n: Node, body, feeders, store) -> None:
        """Run the loop. The outermost loop keeps ``(k, values at the start of iteration
        k)`` as one pair, so whatever stops it (an interrupt included) restores a
        consistent state; a body without nested loops gets its Feeders called ahead."""
        top = not self.iters
        length = len(n.arg.range)
        if top:
            self.progress.enter(n.site)
        outer = self.iters[0] if self.iters else None
        self.iters.append(0)
        ahead = None
        if feeders is not None and self.prefetch > 0:
            ahead = FeedAhead(feeders, length, self.prefetch, tuple(self.iters[:-1]),
                              self.progress, (lambda j: j) if top else (lambda j: outer))
        saved = self._feeds
        snap = (0, dict(store))
        try:
            for k in range(length):
                if top:
                    snap = (k, dict(store))         # one binding: never torn
                    self.progress.done(k)
                self.iters[-1] = k
                self.index[n.arg.index] = k
                self._feeds = ahead.take(k) if ahead is not None else None
                self._run(body, store)
            if top:
                # the final values are the state to keep from here on: an interrupt while
                # the end is recorded (the iterations' Feeder calls dropped) keeps them
                snap = (length, dict(store))
                self.progress.finished(length)
        except BaseException:
            if top:
                with deferred_interrupts():
                    store.update(snap[1])
                    self.progress.stopped(snap[0])
            raise
        finally:
            self.iters.pop()
            self._feeds = saved
            if top:
                self.progress.leave()

    def _feed(self, n: Node) -> np.ndarray:
        if self._feeds is not None and n.id in self._feeds:
            return self._feeds[n.id]
        if self.iters:
            self.progress.fed(self.iters[0])
        return call_feeder(n.arg, tuple(self.iters))

    def _receive(self, n: Node, args) -> None:
        call_receiver(n.arg, tuple(self.iters), args)
