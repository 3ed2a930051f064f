"""The host loop: drive the compiled Relax VM through a plan of segments and loops.

Per segment: call its Feeders (checked with ``check_feed``), call its VM function once on
the current variable and value tensors, bind the results, then hand numpy copies to its
Receivers. Variables live as device tensors during ``run`` and are written back to
``store`` at the end, also when an error stops the run; an error inside iteration ``k``
first restores the variables to their values at the start of iteration ``k``.
"""
from __future__ import annotations

import numpy as np
import tvm

from ...graph.rng import iteration_words
from ..host import call_feeder, call_receiver
from .plan import Loop, Segment


class Executable:
    """A compiled program: ``run(store)`` executes it; ``vals`` holds the outputs after it.

    Parameters
    ----------
    steps : list
        The plan (:class:`~.plan.Segment` / :class:`~.plan.Loop`).
    vm : tvm.relax.VirtualMachine
        The VM holding one function per segment with outputs.
    device : tvm.runtime.Device
        Where tensors live.
    outputs : list of int
        Node ids of the program's outputs.
    stages : dict
        ``print_graph`` stages (``"tvm"``: the Relax module as TVMScript).
    """

    def __init__(self, steps, vm, device, outputs, stages, library=None):
        self.steps, self.vm, self.device = steps, vm, device
        self.outputs, self.stages, self.library = list(outputs), stages, library
        self.vals: dict[int, np.ndarray] = {}
        self.iters: list[int] = []
        self._fns = {}
        self._used = _used_ids(steps)

    def _fn(self, name):
        if name not in self._fns:
            self._fns[name] = self.vm[name]
        return self._fns[name]

    def _tensor(self, a: np.ndarray):
        a = np.asarray(a)      # np.ascontiguousarray would make a 0-d array 1-d
        return tvm.runtime.tensor(a if a.flags.c_contiguous else a.copy(order="C"), self.device)

    def run(self, store: dict) -> None:
        """Run the program; ``store`` (Variable -> numpy array) is updated in place."""
        self.vals, self.iters = {}, []
        vars_ = {v: self._tensor(store[v]) for v in store}
        env: dict = {}
        try:
            self._run(self.steps, vars_, env)
        finally:
            for v, t in vars_.items():
                store[v] = t.numpy()
        self.vals = {i: (env[i].numpy() if not isinstance(env[i], np.ndarray) else env[i])
                     for i in self.outputs}

    def _run(self, steps, vars_, env) -> None:
        for step in steps:
            if isinstance(step, Loop):
                self._loop(step, vars_, env)
            else:
                self._segment(step, vars_, env)

    def _loop(self, loop: Loop, vars_, env) -> None:
        self.iters.append(0)
        for k, _ in enumerate(loop.node.arg.range):
            self.iters[-1] = k
            snapshot = dict(vars_)
            try:
                self._run(loop.steps, vars_, env)
            except BaseException:
                vars_.clear()
                vars_.update(snapshot)
                raise
        self.iters.pop()

    def _segment(self, seg: Segment, vars_, env) -> None:
        for n in seg.feeders:
            v = self._feed(n)
            env[n.id] = self._tensor(v) if n.id in self._used else v
        if seg.outputs:
            args = []
            for key in seg.inputs:
                if key[0] == "var":
                    args.append(vars_[key[1]])
                elif key[0] == "val":
                    args.append(env[key[1]])
                else:
                    args.append(self._tensor(np.array(iteration_words(self.iters), np.uint32)))
            res = self._fn(seg.name)(*args)
            for key, t in zip(seg.outputs, res):
                if key[0] == "var":
                    vars_[key[1]] = t
                else:
                    env[key[1]] = t
        for r in seg.receivers:
            self._receive(r, [env[s.id] for s in r.srcs])

    def _feed(self, n) -> np.ndarray:
        return call_feeder(n.arg, tuple(self.iters))

    def _receive(self, n, args) -> None:
        call_receiver(n.arg, tuple(self.iters),
                      [a if isinstance(a, np.ndarray) else a.numpy() for a in args])


def _used_ids(steps) -> set[int]:
    """Node ids some segment passes to the device (Feeder values needing a transfer)."""
    used = set()
    for s in steps:
        if isinstance(s, Loop):
            used |= _used_ids(s.steps)
        elif s.outputs:
            used |= {k[1] for k in s.inputs if k[0] == "val"}
    return used

