"""The host loop: drive the compiled Relax VM through a plan of segments and loops.

Per segment: its Feeders' values (called in place, or ahead under ``prefetch``), one call
of its VM function on the current variable and value tensors, an
:class:`~autodiff.errors.IndexOutOfRange` if a ``GATHER``/``SCATTER_ADD`` index was out of
range, the results bound, then numpy copies to its Receivers. Variables live as device
tensors during ``run`` and are written back to ``store`` at the end, also when an error or
an interrupt stops the run.

Host callbacks follow the order contract of :mod:`autodiff.device.host`: with
``prefetch=0`` the Feeders of each segment are called right before it (program order);
with ``prefetch=n`` a loop whose body holds no nested loop calls its Feeders ``n``
iterations ahead (:class:`~autodiff.device.host.FeedAhead`).

A loop with ``steps_per_call`` ``K`` > 1 (:mod:`.batch`, ``K <= prefetch + 1``) runs in
batches of ``K`` iterations: one call of the ``K``-step function on Feeder values already
called, then each iteration's Receivers (after calling the Feeders ``prefetch`` iterations
ahead of it, as one call per iteration would); the rest of the range one iteration per
call. Errors keep the one-iteration semantics: when an index of iteration ``k`` of a batch
is out of range, the batch is redone one iteration per call from its start, Receivers
included, up to iteration ``k``, then the error is raised; when a Receiver fails (or an
interrupt comes) in iteration ``k``, the variables are recomputed up to the start of
iteration ``k`` without callbacks.

The outermost loop keeps ``(k, variables at the start of iteration k)`` as one binding,
updated as iterations complete: whatever stops the run (an interrupt included) leaves the
variables of one completed iteration (:attr:`Executable.progress` says which).
"""
from __future__ import annotations

import numpy as np
import tvm

from ...errors import IndexOutOfRange
from ...graph.rng import iteration_words
from ..host import (FeedAhead, Progress, call_feeder, call_receiver, check_memory,
                    deferred_interrupts, op_name, prefetch_option)
from . import control
from .batch import batched_name, stacked_inputs
from .plan import CHECKED, Loop, Segment, batch_segment


class Executable:
    """A compiled program: ``run(store)`` executes it; ``vals`` holds the outputs after it.

    Parameters
    ----------
    steps : list
        The plan (:class:`~.plan.Segment` / :class:`~.plan.Loop`).
    vm : tvm.relax.VirtualMachine or None
        The VM holding one function per segment with outputs (None: no device work).
    device : tvm.runtime.Device
        Where tensors live.
    outputs : list of int
        Node ids of the program's outputs.
    stages : dict
        ``print_graph`` stages (``"tvm"``: the Relax module as TVMScript).
    prefetch : int or None
        ``execute()``'s order contract (:func:`~autodiff.device.host.prefetch_option`).

    Raises
    ------
    DeviceOutOfMemory
        A value of the program is larger than the memory available (checked here, before
        anything is allocated).
    """

    def __init__(self, steps, vm, device, outputs, stages, library=None, prefetch=None):
        check_memory((n for s in _segments(steps) for n in s.nodes + s.feeders), "tvm")
        self.steps, self.vm, self.device = steps, vm, device
        self.outputs, self.stages, self.library = list(outputs), stages, library
        self.prefetch = prefetch_option(prefetch)
        self.vals: dict[int, np.ndarray] = {}
        self.iters: list[int] = []
        self.index: dict = {}       # loop key -> iteration (INDEX inputs, control.py)
        self.progress = Progress()
        self._fns = {}
        self._used = _used_ids(steps)
        self._snap = None        # (k, variables at the start of iteration k), outermost loop
        self._ahead = None       # FeedAhead of the innermost loop running
        self._fed = None         # Feeder values of the current iteration (called ahead)

    def _fn(self, name):
        if name not in self._fns:
            self._fns[name] = self.vm[name]
        return self._fns[name]

    def _tensor(self, a: np.ndarray):
        a = np.asarray(a)      # np.ascontiguousarray would make a 0-d array 1-d
        return tvm.runtime.tensor(a if a.flags.c_contiguous else a.copy(order="C"), self.device)

    def run(self, store: dict) -> None:
        """Run the program; ``store`` (Variable -> numpy array) is updated in place.

        Raises
        ------
        FeederError, ReceiverError, IndexOutOfRange, KeyboardInterrupt
            The run stopped; ``store`` holds the variables after the completed iterations
            of the outermost loop (:attr:`progress`).
        """
        self.vals, self.iters = {}, []
        self.progress, self._snap, self._ahead, self._fed = Progress(), None, None, None
        vars_ = {v: self._tensor(store[v]) for v in store}
        env: dict = {}
        try:
            self._run(self.steps, vars_, env)
        finally:
            with deferred_interrupts():     # lowering's temporaries (transient) stay here
                values = {v: t.numpy() for v, t in vars_.items() if not v.transient}
                store.update(values)
        self.vals = {i: (env[i].numpy() if not isinstance(env[i], np.ndarray) else env[i])
                     for i in self.outputs}

    def _run(self, steps, vars_, env) -> None:
        for step in steps:
            if isinstance(step, Loop):
                self._loop(step, vars_, env)
            elif isinstance(step, control.STEPS):      # IF, WHILE (control.py)
                step.run(self, vars_, env)
            else:
                self._segment(step, vars_, env)

    def _commit(self, k: int, vars_) -> None:
        """The outermost loop's variables are those at the start of iteration ``k``."""
        self._snap = (k, dict(vars_))
        self.progress.done(k)

    def _loop(self, loop: Loop, vars_, env) -> None:
        top = not self.iters
        n = len(loop.node.arg.range)
        if top:
            self.progress.enter(loop.node.site)
        outer = self.iters[0] if self.iters else None
        self.iters.append(0)
        ahead = None
        if self.prefetch > 0 and all(isinstance(s, (Segment, control.Callback))
                                     for s in loop.steps):
            feeders = [(f.id, f.arg) for s in loop.steps if isinstance(s, Segment)
                       for f in s.feeders]
            ahead = FeedAhead(feeders, n, self.prefetch, tuple(self.iters[:-1]),
                              self.progress, (lambda j: j) if top else (lambda j: outer))
        saved = (self._ahead, self._fed)
        self._ahead = ahead
        size = loop.steps_per_call
        seg = batch_segment(loop) if ahead is not None and 1 < size <= self.prefetch + 1 \
            else None
        if top:
            self._commit(0, vars_)
        try:
            k = 0
            while k < n:
                if top:
                    self._commit(k, vars_)
                if seg is not None and k + size <= n and self._fed_through(k, size):
                    self._batch(seg, size, k, vars_, env, top)
                    k += size
                    continue
                self.iters[-1] = k
                self._fed = ahead.take(k) if ahead is not None else None
                self.index[loop.node.arg.index] = k
                self._run(loop.steps, vars_, env)
                k += 1
            if top:
                self._commit(n, vars_)
                self.progress.finished(n)
        except BaseException:
            if top:
                with deferred_interrupts():
                    k, snap = self._snap
                    vars_.update(snap)
                    self.progress.stopped(k)
            raise
        finally:
            self.iters.pop()
            self._ahead, self._fed = saved
            if top:
                self.progress.leave()
                self._snap = None

    def _fed_through(self, k: int, size: int) -> bool:
        """Whether the Feeders of iterations ``k .. k + size - 1`` returned values (called
        as the order rule allows before iteration ``k``)."""
        self._ahead.fill(k + self.prefetch)
        return all(j in self._ahead.values for j in range(k, k + size))

    def _segment(self, seg: Segment, vars_, env, fed: dict | None = None,
                 receive: bool = True) -> None:
        """One call of ``seg``; ``fed`` gives its Feeder values instead of calling the
        Feeders; ``receive=False`` skips the Receivers."""
        for n in seg.feeders:
            if fed is not None:
                v = fed[n.id]
            elif self._fed is not None:
                v = self._fed[n.id]
            else:
                v = self._feed(n)
            env[n.id] = self._tensor(v) if n.id in self._used else v
        if seg.outputs:
            args = []
            for key in seg.inputs:
                if key[0] == "var":
                    args.append(vars_[key[1]])
                elif key[0] == "val":
                    args.append(env[key[1]])
                elif key[0] == "index":
                    args.append(self._tensor(control.index_value(key, self.index)))
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

    def _batch(self, seg: Segment, size: int, start: int, vars_, env, top: bool) -> None:
        """Iterations ``start .. start + size - 1`` of the innermost loop in one call (their
        Feeders were called already), then their Receivers."""
        ahead = self._ahead
        begin = dict(vars_)
        fed = [ahead.values[j] for j in range(start, start + size)]
        stacked = stacked_inputs(seg)
        args = []
        for key in seg.inputs:
            if key[0] == "var":
                args.append(vars_[key[1]])
            elif key not in stacked:
                args.append(env[key[1]])
            elif key[0] == "val":
                args.append(self._tensor(np.stack([f[key[1]] for f in fed])))
            elif key[0] == "index":
                args.append(self._tensor(control.index_rows(key, start, size)))
            else:
                words = [iteration_words(self.iters[:-1] + [start + j]) for j in range(size)]
                args.append(self._tensor(np.array(words, np.uint32)))
        res = self._fn(batched_name(seg, size))(*args)
        rows = {key: t.numpy() for key, t in zip(seg.outputs, res) if key[0] != "var"}
        if ("check",) in rows:
            bad = np.flatnonzero(rows[("check",)].reshape(size, -1, 3)[:, :, 0].any(axis=1))
            if bad.size:          # redo the iterations before the failing one, then raise
                j = int(bad[0])
                self._redo(seg, fed[:j], start, begin, vars_, env, True, top)
                self.iters[-1] = start + j
                _raise_bad_index(seg, rows[("check",)][j:j + 1], self.iters)
        for key, t in zip(seg.outputs, res):
            if key[0] == "var":
                vars_[key[1]] = t
        for j in range(size):
            self.iters[-1] = start + j
            try:
                ahead.fill(start + j + self.prefetch)       # the order rule
                for r in seg.receivers:
                    self._receive(r, [rows[("val", s.id)][j, ...] if ("val", s.id) in rows
                                      else fed[j][s.id] if s.id in fed[j] else env[s.id]
                                      for s in r.srcs])
            except BaseException:
                with deferred_interrupts():
                    self._redo(seg, fed[:j], start, begin, vars_, env, False, top)
                self.iters[-1] = start + j
                raise
            ahead.values.pop(start + j)

    def _redo(self, seg: Segment, fed: list, start: int, begin: dict, vars_, env,
              receive: bool, top: bool) -> None:
        """From the variables ``begin`` (those at the start of iteration ``start``), run
        iterations ``start, start + 1, ...`` one call each with the Feeder values ``fed``
        (and the Receivers if ``receive``, after the Feeders the order rule calls first).
        In the outermost loop each completed iteration is committed."""
        vars_.update(begin)
        for j, values in enumerate(fed):
            self.iters[-1] = start + j
            for key in seg.inputs:      # the loop's indices (all stacked: innermost loop)
                if key[0] == "index":
                    self.index[key[1].key] = start + j
            if receive:
                self._ahead.fill(start + j + self.prefetch)
            self._segment(seg, vars_, env, fed=values, receive=receive)
            self._ahead.values.pop(start + j, None)
            if top:
                self._commit(start + j + 1, vars_)

    def _feed(self, n) -> np.ndarray:
        if self.iters:
            self.progress.fed(self.iters[0])
        return call_feeder(n.arg, tuple(self.iters))

    def _receive(self, n, args) -> None:
        call_receiver(n.arg, tuple(self.iters),
                      [a if isinstance(a, np.ndarray) else a.numpy() for a in args])


def _raise_bad_index(seg: Segment, checks: np.ndarray, iters: list) -> None:
    """Raise :class:`~autodiff.errors.IndexOutOfRange` for the first index-checked node of
    ``seg`` with an out-of-range index in the first row of ``checks`` (``int32[rows,
    3 G]``: count, smallest, largest per node) that has one."""
    table = checks.reshape(checks.shape[0], -1, 3)
    bad = np.argwhere(table[:, :, 0])
    if not bad.size:
        return
    row, g = (int(i) for i in bad[0])
    node = [n for n in seg.nodes if n.op in CHECKED][g]
    rows = node.srcs[0].shape[0] if node.op.name == "GATHER" else node.arg
    count, low, high = (int(x) for x in table[row, g])
    raise IndexOutOfRange(op_name(node), node.site, tuple(iters), rows, count, low, high)


def _segments(steps):
    for s in steps:
        if isinstance(s, Loop):
            yield from _segments(s.steps)
        elif isinstance(s, control.STEPS):
            for blk in s.blocks():
                yield from _segments(blk)
        else:
            yield s


def _used_ids(steps) -> set[int]:
    """Node ids some segment passes to the device (Feeder values needing a transfer)."""
    used = set()
    for s in steps:
        if isinstance(s, Loop):
            used |= _used_ids(s.steps)
        elif isinstance(s, control.STEPS):
            for blk in s.blocks():
                used |= _used_ids(blk)
        elif s.outputs:
            used |= {k[1] for k in s.inputs if k[0] == "val"}
    return used

