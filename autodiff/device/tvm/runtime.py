"""The host loop: drive the compiled Relax VM through a plan of segments and loops.

Per segment: call its Feeders (checked with ``check_feed``), call its VM function once on
the current variable and value tensors, raise ``IndexError`` if a ``GATHER`` index was out
of range, bind the results, then hand numpy copies to its Receivers. Variables live as
device tensors during ``run`` and are written back to ``store`` at the end, also when an
error stops the run; an error inside iteration ``k`` first restores the variables to their
values at the start of iteration ``k``.

A loop with ``steps_per_call`` ``K`` > 1 (:mod:`.batch`) runs in batches of ``K``
iterations: the ``K`` iterations' Feeders, one call of the ``K``-step function, the ``K``
iterations' Receivers; the rest of the range (fewer than ``K``) one iteration per call.
Errors keep the one-iteration semantics: when a Feeder fails in iteration ``k`` of a batch,
or a ``GATHER`` index of iteration ``k`` is out of range, the batch is redone one iteration
per call from its start with the values already fed (Receivers included) up to iteration
``k``, then the error is raised; when a Receiver fails in iteration ``k``, the variables
are recomputed up to the start of iteration ``k`` without callbacks. Feeders of the
batch's later iterations have then been called already.
"""
from __future__ import annotations

import numpy as np
import tvm

from ...errors import FeederError
from ...graph.ir import Op
from ...graph.rng import iteration_words
from ..host import call_feeder, call_receiver, check_memory
from .batch import batched_name, stacked_inputs
from .plan import Loop, Segment, batch_segment


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

    Raises
    ------
    DeviceOutOfMemory
        A value of the program is larger than the memory available (checked here, before
        anything is allocated).
    """

    def __init__(self, steps, vm, device, outputs, stages, library=None):
        check_memory((n for s in _segments(steps) for n in s.nodes + s.feeders), "tvm")
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
        n = len(loop.node.arg.range)
        k, size = 0, loop.steps_per_call
        if size > 1:
            seg = batch_segment(loop)
            while k + size <= n:
                self._batch(seg, size, k, vars_, env)
                k += size
        for k in range(k, n):
            self.iters[-1] = k
            snapshot = dict(vars_)
            try:
                self._run(loop.steps, vars_, env)
            except BaseException:
                vars_.clear()
                vars_.update(snapshot)
                raise
        self.iters.pop()

    def _segment(self, seg: Segment, vars_, env, fed: dict | None = None,
                 receive: bool = True) -> None:
        """One call of ``seg``; ``fed`` gives its Feeder values instead of calling the
        Feeders; ``receive=False`` skips the Receivers."""
        for n in seg.feeders:
            v = fed[n.id] if fed is not None else self._feed(n)
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
            if seg.outputs[-1] == ("check",):
                _raise_bad_index(seg, res[len(seg.outputs) - 1].numpy()[None], self.iters)
            for key, t in zip(seg.outputs, res):
                if key[0] == "var":
                    vars_[key[1]] = t
                elif key[0] == "val":
                    env[key[1]] = t
        if receive:
            for r in seg.receivers:
                self._receive(r, [env[s.id] for s in r.srcs])

    def _batch(self, seg: Segment, size: int, start: int, vars_, env) -> None:
        """Iterations ``start .. start + size - 1`` of the innermost loop, one call."""
        snapshot = dict(vars_)
        fed: list[dict] = []
        try:
            for j in range(size):
                self.iters[-1] = start + j
                fed.append({})
                for n in seg.feeders:
                    fed[-1][n.id] = self._feed(n)
        except FeederError:
            self._redo(seg, fed[:-1], start, snapshot, vars_, env, receive=True)
            self.iters[-1] = start + len(fed) - 1
            raise
        stacked = stacked_inputs(seg)
        args = []
        for key in seg.inputs:
            if key[0] == "var":
                args.append(vars_[key[1]])
            elif key not in stacked:
                args.append(env[key[1]])
            elif key[0] == "val":
                args.append(self._tensor(np.stack([f[key[1]] for f in fed])))
            else:
                words = [iteration_words(self.iters[:-1] + [start + j]) for j in range(size)]
                args.append(self._tensor(np.array(words, np.uint32)))
        res = self._fn(batched_name(seg, size))(*args)
        rows = {key: t.numpy() for key, t in zip(seg.outputs, res) if key[0] != "var"}
        if ("check",) in rows:
            bad = np.flatnonzero(rows[("check",)].any(axis=1))
            if bad.size:          # redo the iterations before the failing one, then raise
                j = int(bad[0])
                self._redo(seg, fed[:j], start, snapshot, vars_, env, receive=True)
                self.iters[-1] = start + j
                _raise_bad_index(seg, rows[("check",)][j:j + 1], self.iters)
        for key, t in zip(seg.outputs, res):
            if key[0] == "var":
                vars_[key[1]] = t
        for j in range(size):
            self.iters[-1] = start + j
            try:
                for r in seg.receivers:
                    self._receive(r, [rows[("val", s.id)][j, ...] if ("val", s.id) in rows
                                      else fed[j][s.id] if s.id in fed[j] else env[s.id]
                                      for s in r.srcs])
            except BaseException:
                self._redo(seg, fed[:j], start, snapshot, vars_, env, receive=False)
                self.iters[-1] = start + j
                raise

    def _redo(self, seg: Segment, fed: list, start: int, snapshot: dict, vars_, env,
              receive: bool) -> None:
        """From the variables in ``snapshot``, run iterations ``start, start + 1, ...`` one
        call each with the Feeder values ``fed`` (and the Receivers if ``receive``). An
        error in iteration ``k`` leaves the variables as at its start and propagates."""
        vars_.clear()
        vars_.update(snapshot)
        for j, values in enumerate(fed):
            self.iters[-1] = start + j
            before = dict(vars_)
            try:
                self._segment(seg, vars_, env, fed=values, receive=receive)
            except BaseException:
                vars_.clear()
                vars_.update(before)
                raise

    def _feed(self, n) -> np.ndarray:
        return call_feeder(n.arg, tuple(self.iters))

    def _receive(self, n, args) -> None:
        call_receiver(n.arg, tuple(self.iters),
                      [a if isinstance(a, np.ndarray) else a.numpy() for a in args])


def _raise_bad_index(seg: Segment, counts: np.ndarray, iters: list) -> None:
    """Raise ``IndexError`` naming the first ``GATHER`` of ``seg`` with an out-of-range
    index in the first row of ``counts`` (``int32[rows, G]``) that has one."""
    bad = np.argwhere(counts)
    if not bad.size:
        return
    row, g = (int(i) for i in bad[0])
    node = [n for n in seg.nodes if n.op is Op.GATHER][g]
    where = f" in iteration {iters[0] if len(iters) == 1 else list(iters)}" if iters else ""
    raise IndexError(f"gather: {int(counts[row, g])} index(es) out of range "
                     f"[0, {node.srcs[0].shape[0]}){where} (traced at {node.site})")


def _segments(steps):
    for s in steps:
        if isinstance(s, Loop):
            yield from _segments(s.steps)
        else:
            yield s


def _used_ids(steps) -> set[int]:
    """Node ids some segment passes to the device (Feeder values needing a transfer)."""
    used = set()
    for s in steps:
        if isinstance(s, Loop):
            used |= _used_ids(s.steps)
        elif s.outputs:
            used |= {k[1] for k in s.inputs if k[0] == "val"}
    return used

