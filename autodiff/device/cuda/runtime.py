"""Run a compiled CUDA program: one module, one arena allocation, one stream, and a host
loop that launches every segment of kernels as one captured CUDA graph.

Execution model (the OpenCL device's, :mod:`autodiff.device.opencl.runtime`, on CUDA):

* the module is loaded once; every :class:`~.program.Segment` (what runs between nested
  loops: kernels, and the device-side copies of Feeders and Receivers among them) is
  captured once from the stream into a CUDA graph and instantiated, so a loop iteration
  without a nested loop is one ``cuGraphLaunch``;
* Feeders are called at the start of their iteration (the host prepares iteration k+1
  while the GPU runs k); the value is copied into a pinned staging array (page-locked
  ``cuMemHostAlloc`` memory, reused), then by an asynchronous copy on the same stream,
  just before the graph launch, into the Feeder's device staging allocation; the graph
  copies it into the arena where the Feeder sits in the program (stream order keeps
  iteration k+1's copy behind iteration k's graph);
* a Receiver's values are copied by the graph into its device staging allocation where
  the Receiver sits, and after the graph launch by asynchronous copies into pinned ring
  slots followed by an event; callbacks run in order as their events complete, at the
  latest before :meth:`Executable.run` returns; at most :data:`RING` iterations are in
  flight;
* kernels that draw random numbers read the loop's iteration words from the arena; a
  one-thread kernel writes them (its arguments are the words) before a segment that
  draws, when the iteration changed;
* loop counters (loop indices in access expressions) and branches and while loops:
  :mod:`.control` (a branch decided on the device is part of its graph; one decided on
  the host, and a while loop, are host steps between graphs);
* a host callback (``CALLBACK``): the graph copies its operands into device staging
  where the program takes them; its end is a host boundary: the operands are read back
  into pinned memory (a stream synchronisation, after which the Receivers before it
  run), the function is called and its result copied from pinned memory into the arena
  on the stream, before the next graph launch;
* parameters live in the arena for the whole run and are copied back at the end, also
  on failure: a failing callback restores the parameters of its iteration's start from a
  periodic on-device checkpoint plus a replay of the iterations since, with the recorded
  Feeder values and the Receivers suppressed (see :class:`Executable`).
"""
from __future__ import annotations

import collections
import time
from dataclasses import dataclass

import numpy as np

from ...errors import CallbackError, FeederError, ReceiverError
from ...graph import dtypes
from ...graph.rng import iteration_words
from ..host import Progress, call_callback, call_receiver, check_feed, deferred_interrupts
from ..cstyle import philox
from ..opencl import control as cl_control
from ..opencl.runtime import CHECKPOINT, RECORD_BYTES, RING, STAGING_UNRECORDED
from . import control, driver
from .driver import call
from .launch import LaunchError
from .program import Call, Feed, Loop, Receive, Segment, Take, walk

#: iterations a Receiver may lag (staging ring depth) and iterations in flight: the
#: OpenCL device's figures (:data:`~autodiff.device.opencl.runtime.RING` and the others)
__all__ = ["Executable", "Staging", "RING", "CHECKPOINT", "RECORD_BYTES"]


def _ptr(a: np.ndarray) -> int:
    return int(a.ctypes.data)


class Pinned:
    """Page-locked host memory (``cuMemHostAlloc``) seen as numpy arrays; freed with the
    owner."""

    def __init__(self, cu):
        self.cu = cu
        self._blocks: list[int] = []

    def array(self, shape: tuple, dtype) -> np.ndarray:
        import ctypes
        nbytes = max(int(np.prod(shape)) * np.dtype(dtype).itemsize, 1)
        p = int(call(self.cu.cuMemHostAlloc, nbytes, 0))
        self._blocks.append(p)
        raw = (ctypes.c_byte * nbytes).from_address(p)
        n = int(np.prod(shape))
        return np.frombuffer(raw, dtype=dtype, count=n).reshape(shape)

    def free(self) -> None:
        for p in self._blocks:
            self.cu.cuMemFreeHost(p)
        self._blocks.clear()


class Staging:
    """Pinned arrays that Feeder values are copied into and written to the arena from with
    asynchronous copies; reused, so the steady state allocates nothing.

    An array is *taken* per Feeder call and stays in use until the caller knows its copy
    completed and no replay needs it (a checkpoint, the end of the run):
    :meth:`release_all` returns every array to the free lists.

    Args:
        alloc: ``fn(shape, dtype) -> np.ndarray`` allocating a pinned array.
    """

    def __init__(self, alloc):
        self._alloc = alloc
        self._free: dict = collections.defaultdict(list)
        self._used: list = []

    @property
    def in_use(self) -> int:
        """Arrays taken and not yet released (their copies may still be in flight)."""
        return len(self._used)

    def take(self, shape: tuple, dtype) -> np.ndarray:
        """A free array of ``shape`` and ``dtype`` (allocated if none is free)."""
        key = (tuple(shape), np.dtype(dtype).str)
        free = self._free[key]
        a = free.pop() if free else self._alloc(tuple(shape), dtype)
        self._used.append((key, a))
        return a

    def release_all(self) -> None:
        """Every array taken is free again (call after a sync, outside a replay record)."""
        for key, a in self._used:
            self._free[key].append(a)
        self._used.clear()


@dataclass
class Pending:
    event: object
    recv: Receive
    arrays: list
    iters: tuple


class Executable:
    """A compiled program ready to :meth:`run` on one GPU.

    Failure recovery (a Feeder or Receiver callback raising), as on the OpenCL device:
    every :attr:`checkpoint_every` iterations of an outermost loop with callbacks, once the
    Receivers of the earlier iterations have returned, the parameters the loops write are
    copied on the device into a checkpoint allocation; the Feeder values since then stay in
    their staging arrays. When a callback of iteration ``s`` fails, the checkpoint is
    copied back and iterations ``checkpoint .. s-1`` run again with the recorded Feeder
    values and the Receivers suppressed: the parameters end bit-identical to their values
    at the start of iteration ``s``.

    Attributes:
        device: the :class:`~.driver.Device`.
        vals: graph node id -> numpy array for the program's outputs (after ``run``).
        stages: printable stages (``procedural``, ``fused``, ``alloc``, ``cuda``).
        stats: compile and run figures.
        checkpoint_every: iterations between checkpoints.

    Raises:
        LaunchError: a kernel's block exceeds what the loaded function allows.
        CUDAOutOfMemory: the arena does not fit the GPU.
    """

    def __init__(self, device, rendered, binary):
        cu = self.cu = driver.bindings()
        self.device, self.rendered = device, rendered
        self.steps, self.params, self.outputs = rendered.steps, rendered.params, rendered.outputs
        self.stages, self.stats = rendered.stages, rendered.stats
        self.vals: dict = {}
        t = time.perf_counter()
        dev = call(cu.cuDeviceGet, device.ordinal)
        self._ctx = call(cu.cuDevicePrimaryCtxRetain, dev)
        call(cu.cuCtxSetCurrent, self._ctx)
        image = np.frombuffer(binary.image + b"\0", np.uint8)
        self._module = call(cu.cuModuleLoadData, _ptr(image))
        self._fn = {}
        attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
        for name, la in rendered.kernels.items():
            fn = call(cu.cuModuleGetFunction, self._module, name.encode())
            most = int(call(cu.cuFuncGetAttribute, attr, fn))
            if la.geometry.threads > most:
                raise LaunchError(f"cuda: kernel {name} launches {la.geometry.threads} "
                                  f"threads per block; its code allows {most}")
            self._fn[name] = fn
        self._set_words = call(cu.cuModuleGetFunction, self._module, philox.SET_KERNEL.encode())
        self._set_counters = None
        if rendered.counters:
            self._set_counters = call(cu.cuModuleGetFunction, self._module,
                                      rendered.counters.encode())
        self.arena_bytes = rendered.arena_bytes
        self._arena = int(call(cu.cuMemAlloc, max(self.arena_bytes, 4)))
        self._stream = call(cu.cuStreamCreate, int(cu.CUstream_flags.CU_STREAM_NON_BLOCKING))
        # every kernel's one argument: the arena pointer (an array of pointers to values)
        self._arg = np.array([self._arena], np.uint64)
        self._params = np.array([_ptr(self._arg)], np.uint64)
        written = rendered.written
        self._written = written
        self._ckpt = None
        if written[1] and any(lp.recovers for lp in _loops(self.steps)):
            self._ckpt = int(call(cu.cuMemAlloc, written[1]))
        self._pinned = Pinned(cu)
        self._staging = Staging(self._pinned.array)
        self._graphs = []
        self._staged = []               # device staging of Feeders and Receivers
        for seg in _segments(self.steps):
            for x in seg.feeds:
                x.staging = self._alloc(x.nbytes)
            for r in seg.receives + seg.takes:
                r.staging = [self._alloc(int(np.prod(shape)) * np.dtype(dtype).itemsize)
                             for _, shape, dtype in r.parts]
            seg.graph = self._capture(seg)
        feed_bytes = sum(int(np.prod(f.shape)) * np.dtype(f.dtype).itemsize
                         for lp in _loops(self.steps) for f in _feeds(lp.body))
        self.checkpoint_every = max(1, min(CHECKPOINT, RECORD_BYTES // max(feed_bytes, 1)))
        self.stats["load_s"] = time.perf_counter() - t
        self.stats["graphs"] = len(self._graphs)

    # -- device operations ------------------------------------------------------------------
    def _alloc(self, nbytes: int) -> int:
        p = int(call(self.cu.cuMemAlloc, max(nbytes, 4)))
        self._staged.append(p)
        return p

    def _launch(self, la) -> None:
        g = la.geometry
        call(self.cu.cuLaunchKernel, self._fn[la.name], *g.grid, *g.block, 0, self._stream,
             _ptr(self._params), 0)

    def _launch_args(self, fn, values: list) -> None:
        """Launch one-thread kernel ``fn`` with arguments ``values`` (1-element numpy
        arrays: the driver copies them at launch)."""
        params = np.array([_ptr(v) for v in values], np.uint64)
        call(self.cu.cuLaunchKernel, fn, 1, 1, 1, 1, 1, 1, 0, self._stream, _ptr(params), 0)

    def _copy(self, dst: int, src: int, nbytes: int) -> None:
        """Device -> device copy on the stream."""
        call(self.cu.cuMemcpyDtoDAsync, dst, src, nbytes, self._stream)

    def _capture(self, seg: Segment):
        """Record ``seg`` from the stream into a CUDA graph, instantiated: its launches, and
        the device-side copies of its Feeders (staging -> arena) and Receivers (arena ->
        staging) in program order."""
        cu = self.cu
        mode = cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        call(cu.cuStreamBeginCapture, self._stream, mode)
        copy = cu.cuMemcpyDtoDAsync
        try:
            for x in seg.items:
                if type(x) is Feed:
                    call(copy, self._arena + x.offset, x.staging, x.nbytes, self._stream)
                elif type(x) in (Receive, Take):
                    for (off, shape, dtype), dst in zip(x.parts, x.staging):
                        n = int(np.prod(shape)) * np.dtype(dtype).itemsize
                        call(copy, dst, self._arena + off, n, self._stream)
                else:
                    self._launch(x)
        finally:
            graph = call(cu.cuStreamEndCapture, self._stream)
        exe = call(cu.cuGraphInstantiate, graph, 0)
        call(cu.cuGraphDestroy, graph)
        self._graphs.append(exe)
        return exe

    def _write(self, offset: int, a: np.ndarray, base: int | None = None) -> None:
        """Host ``a`` -> device ``base`` (default: the arena) + ``offset`` bytes."""
        dst = (self._arena if base is None else base) + offset
        call(self.cu.cuMemcpyHtoDAsync, dst, _ptr(a), a.nbytes, self._stream)

    def _read(self, a: np.ndarray, offset: int, base: int | None = None) -> None:
        """Device ``base`` (default: the arena) + ``offset`` bytes -> host ``a``."""
        src = (self._arena if base is None else base) + offset
        call(self.cu.cuMemcpyDtoHAsync, _ptr(a), src, a.nbytes, self._stream)

    def _event(self):
        cu = self.cu
        ev = call(cu.cuEventCreate, int(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING))
        call(cu.cuEventRecord, ev, self._stream)
        return ev

    def _done(self, ev) -> bool:
        err, = self.cu.cuEventQuery(ev)
        if err == self.cu.CUresult.CUDA_ERROR_NOT_READY:
            return False
        if int(err) != 0:
            raise driver.error("cuEventQuery", err.name)
        return True

    def _wait(self, ev) -> None:
        call(self.cu.cuEventSynchronize, ev)
        self.cu.cuEventDestroy(ev)

    def _finish(self) -> None:
        call(self.cu.cuStreamSynchronize, self._stream)

    # -- the run ----------------------------------------------------------------------------
    def run(self, store: dict) -> None:
        """Copy variables in, run, copy variables and outputs back (also on error).

        Raises:
            FeederError, ReceiverError: a host callback failed; ``store`` then holds the
                values at the start of the failing iteration of the outermost loop.
            IndexError: a Gather/ScatterAdd index was out of range.
            CUDAError: a driver call failed (e.g. a kernel faulted).
        """
        self.progress = Progress()          # first: a stop before the loop names nothing
        call(self.cu.cuCtxSetCurrent, self._ctx)
        t0 = time.perf_counter()
        keep = [np.ascontiguousarray(store[var]) for var, _ in self.params]
        for (var, off), a in zip(self.params, keep):
            self._write(off, a)
        from ..cstyle.codegen import FLAG
        self._flag = FLAG * 4
        head = np.zeros(4, np.int32)        # error flag, iteration words (0, 0), spare
        self._write(self._flag, head)
        self._pending: collections.deque = collections.deque()
        self._iters: list = []
        self._words = self._dev_words = (0, 0)
        self._dev_counters = None           # loop counters last written to the arena
        self._record: list | None = None
        self._replay: collections.deque | None = None
        self._first = None
        self._t0 = t0
        t_loops = cpu_loops = None
        try:
            self._exec(self.steps)
            self._drain()
            self._finish()
            t_loops = time.perf_counter()   # the last iteration done, before the read-back
            cpu_loops = time.process_time()
        finally:
            self._finish()
            self._record = None
            self._staging.release_all()
            for var, off in self.params:
                out = np.empty(var.shape, dtypes.storage(var.dtype))
                self._read(out, off)
                self._finish()
                store[var] = out
        for node_id, (off, shape, dtype) in self.outputs.items():
            out = np.empty(shape, dtype)
            self._read(out, off)
            self.vals[node_id] = out
        flag = np.zeros(1, np.int32)
        self._read(flag, self._flag)
        self._finish()
        self.stats["run_s"] = time.perf_counter() - t0
        if self._first is not None:
            self.stats["first_iteration_s"] = self._first
            t1, rest, c1 = self._iter0
            if rest > 0:                    # the loops' throughput: no read-back in it
                self.stats["steady_iteration_ms"] = (t_loops - t1) / rest * 1e3
                self.stats["steady_cpu_ms"] = (cpu_loops - c1) / rest * 1e3   # all threads
        if flag[0]:
            raise IndexError("gather/scatter_add: an index was out of range [0, rows)")

    def _exec(self, steps) -> None:
        for st in steps:
            if type(st) is Loop:
                self._loop(st)
                continue
            if type(st) in control.STEPS:           # If / While decided on the host
                st.run(self)
                continue
            if type(st) is Call:
                self._call(st)
                continue
            for f in st.feeds:
                if f.pending is None:           # not called at its iteration's start
                    self._call_feed(f)
                self._write(0, f.pending, f.staging)
                f.pending = None
            if st.feeds:
                self._release_staged()
            if st.rand and self._words != self._dev_words:
                self._write_words()
            if st.counters and cl_control.counters_now(self) != self._dev_counters:
                control.write_counters(self)
            call(self.cu.cuGraphLaunch, st.graph, self._stream)
            if self._replay is None:            # a replay suppresses Receivers
                for r in st.receives:
                    self._receive(r)

    def _loop(self, lp: Loop, start: int = 0, stop: int | None = None) -> None:
        """Run iterations ``start .. stop-1`` of ``lp``. An outermost loop with callbacks
        checkpoints, and when a callback fails or an interrupt (Ctrl-C, or a callback
        raising ``KeyboardInterrupt``) stops it, restores the parameters of the start of
        the iteration it stops in (:meth:`_stopped`). An outermost loop without callbacks
        runs no user code: Ctrl-C is deferred to the end of each iteration's launches,
        and the iterations launched then complete."""
        guard = lp.recovers and self._replay is None
        top = not self._iters and self._replay is None
        if guard:
            self._drain()                   # the Receivers before the loop first
        depth = len(self._iters)
        self._iters.append(0)
        if top:
            self.progress.enter(lp.site)
        stop = len(lp.range) if stop is None else stop
        every, base, launched = self.checkpoint_every, start, start
        marks: collections.deque = collections.deque()
        try:
            for k in range(start, stop):
                if len(marks) >= RING:          # at most RING iterations in flight
                    self._wait(marks.popleft())
                self._iters[depth] = k
                self._words = iteration_words(self._iters)
                if top:
                    self.progress.done(self._completed(k))
                started = False
                try:
                    if guard and k % every == 0:
                        self._checkpoint()
                        base = k
                    if self._replay is None:
                        self._poll()
                    for f in lp.feeds:
                        self._call_feed(f)
                    started = True
                    if top and not guard:       # no user code in it: launch it whole
                        with deferred_interrupts():
                            self._exec(lp.body)
                            marks.append(self._event())
                            launched = k + 1
                    else:
                        self._exec(lp.body)
                        marks.append(self._event())
                    if self._first is None:     # one sync: first iteration done
                        self._wait(marks.pop())
                        self._first = time.perf_counter() - self._t0
                        self._iter0 = (time.perf_counter(), stop - start - 1,
                                       time.process_time())
                    if guard and k == stop - 1:
                        self._drain()
                except (FeederError, ReceiverError, CallbackError, KeyboardInterrupt) as e:
                    if guard:
                        self._stopped(lp, base, k, started, e)
                    elif top and isinstance(e, KeyboardInterrupt):
                        with deferred_interrupts():
                            self._finish()      # the iterations launched complete
                            self.progress.stopped(launched)
                    raise
            if top:
                self.progress.finished(stop)
        finally:
            for ev in marks:
                self.cu.cuEventDestroy(ev)
            del self._iters[depth:]
            self._words = iteration_words(self._iters)
            if guard:
                self._record = None
            if top:
                self.progress.leave()

    def _completed(self, k: int) -> int:
        """Iterations of the outermost loop complete when iteration ``k`` is the next:
        those before ``k`` whose Receivers have all returned."""
        return min(k, self._pending[0].iters[0]) if self._pending else k

    def _stopped(self, lp: Loop, base: int, k: int, started: bool, e: BaseException) -> None:
        """The recovering loop ``lp`` stops in iteration ``k`` (checkpoint ``base``): put
        back the parameters of the start of the iteration it stops in -- a callback
        error's own, or for an interrupt the first not completed (:meth:`_completed`) --
        from the checkpoint and the Feeder record, with Ctrl-C deferred meanwhile. (Other
        errors, a driver error above all, propagate untouched: a sync would raise again.)"""
        if isinstance(e, (FeederError, ReceiverError, CallbackError)):
            target = e.iteration[0] if e.iteration else k
            with deferred_interrupts():
                if started or isinstance(e, ReceiverError):
                    self._recover(lp, base, target)
                else:
                    self._finish()
                self.progress.stopped(target)
            return
        target = self._completed(k)
        with deferred_interrupts():
            self._recover(lp, base, target)
            self.progress.stopped(target)

    def _checkpoint(self) -> None:
        """Let the Receivers of earlier iterations return, then copy the loop-written
        parameters into the checkpoint and start a new Feeder record."""
        self._drain()
        self._finish()
        self._record = []
        self._staging.release_all()
        if self._ckpt is not None:
            off, nb = self._written
            call(self.cu.cuMemcpyDtoDAsync, self._ckpt, self._arena + off, nb, self._stream)

    def _recover(self, lp: Loop, base: int, s: int) -> None:
        """Restore the checkpoint of iteration ``base`` and rerun ``base .. s-1`` from the
        Feeder record: the parameters of the start of iteration ``s``."""
        self._pending.clear()
        self._finish()
        if self._ckpt is not None:
            off, nb = self._written
            call(self.cu.cuMemcpyDtoDAsync, self._arena + off, self._ckpt, nb, self._stream)
        record, self._record = self._record or [], None
        self._replay = collections.deque(record)
        for f in _feeds(lp.body):
            f.pending = None
        self._iters = []
        try:
            self._loop(lp, base, s)
        finally:
            self._replay = None
            self._finish()
        self._iters = []

    def _write_words(self) -> None:
        """Launch the one-thread kernel writing the current Philox iteration words."""
        c2, c3 = self._words
        self._launch_args(self._set_words, [np.array([self._arena], np.uint64),
                                            np.array([c2], np.uint32),
                                            np.array([c3], np.uint32)])
        self._dev_words = self._words

    # -- feeders ----------------------------------------------------------------------------
    def _call_feed(self, f: Feed) -> None:
        if self._replay is not None:
            f.pending = self._replay.popleft()
            return
        it = tuple(self._iters)
        if it:
            self.progress.fed(it[0])
        try:
            v = f.spec.fn()
        except Exception as e:
            self._drain()       # earlier Receivers run first (their error comes first)
            raise FeederError(f.spec.name, it,
                              f"callback raised {type(e).__name__}: {e}") from e
        try:
            check_feed(f.spec, v, it)
        except FeederError:
            self._drain()
            raise
        f.pending = self._stage(v, f.shape, f.dtype)

    def _stage(self, v, shape: tuple, dtype) -> np.ndarray:
        """``v`` in a pinned staging array, recorded for a replay (outside any recorded
        loop the array is returned to the pool by :meth:`_release_staged`)."""
        a = self._staging.take(shape, dtype)
        np.copyto(a, v)
        if self._record is not None:
            self._record.append(a)
        return a

    def _release_staged(self) -> None:
        """After a staged value's write was enqueued, outside any recorded loop: once more
        than :data:`STAGING_UNRECORDED` arrays are in use and every staged Feeder value has
        been written (none is waiting in ``pending`` for its step), a sync completes the
        writes and the arrays return to the pool. Not from :meth:`_stage`: there the new
        array's write is not enqueued yet (nor those of Feeders called at the iteration's
        start for later steps), and an array back in the pool before its write went out
        with the next value staged in it (the OpenCL device's twin of this rule)."""
        if self._record is None and self._staging.in_use > STAGING_UNRECORDED and \
                all(f.pending is None for f in _feeds(self.steps)):
            self._finish()
            self._staging.release_all()

    # -- host callbacks ---------------------------------------------------------------------
    def _call(self, c: Call) -> None:
        """End of a host callback: its operands read back (a synchronisation; the earlier
        Receivers run first), ``fn`` called, the result written to the arena. A replay
        writes the recorded result instead of calling ``fn`` again."""
        if self._replay is not None:
            self._write(c.offset, self._replay.popleft())
            return
        if not c.pinned:
            c.pinned = [self._pinned.array(shape, dtype) for _, shape, dtype in c.take.parts]
        for staging, a in zip(c.take.staging, c.pinned):
            self._read(a, 0, staging)
        self._finish()
        self._drain()
        v = call_callback(c.spec, tuple(self._iters), c.pinned)
        self._write(c.offset, self._stage(v, c.shape, c.dtype))
        self._release_staged()

    # -- receivers --------------------------------------------------------------------------
    def _receive(self, r: Receive) -> None:
        slot = r.count % RING
        if len(r.ring) <= slot:
            r.ring.append([self._pinned.array(shape, dtype) for _, shape, dtype in r.parts])
        while len(self._pending) >= RING - 1:
            self._finish_one(wait=True)
        arrays = r.ring[slot]
        for staging, a in zip(r.staging, arrays):
            self._read(a, 0, staging)
        r.count += 1
        self._pending.append(Pending(self._event(), r, arrays, tuple(self._iters)))

    def _poll(self) -> None:
        while self._pending and (self._pending[0].event is None or
                                 self._done(self._pending[0].event)):
            self._finish_one(wait=False)

    def _drain(self) -> None:
        while self._pending:
            self._finish_one(wait=True)

    def _finish_one(self, wait: bool) -> None:
        """The oldest read: its Receiver called, the item removed only once that returned
        (a Receiver raising leaves its iteration incomplete: :meth:`_completed`)."""
        p = self._pending[0]
        if p.event is not None:
            if wait:
                self._wait(p.event)
            else:
                self.cu.cuEventDestroy(p.event)
            p.event = None
        call_receiver(p.recv.spec, p.iters, p.arrays)
        self._pending.popleft()

    def close(self) -> None:
        """Free the graphs, the module, the device and pinned memory (also on garbage
        collection)."""
        cu = getattr(self, "cu", None)
        if cu is None or getattr(self, "_closed", False):
            return
        self._closed = True
        try:
            for g in getattr(self, "_graphs", []):
                cu.cuGraphExecDestroy(g)
            for p in [getattr(self, "_arena", None), getattr(self, "_ckpt", None),
                      *getattr(self, "_staged", [])]:
                if p:
                    cu.cuMemFree(p)
            if getattr(self, "_pinned", None) is not None:
                self._pinned.free()
            if getattr(self, "_module", None) is not None:
                cu.cuModuleUnload(self._module)
        except Exception:       # interpreter shutdown: the driver may be gone
            pass

    __del__ = close


def _loops(steps):
    return (s for s in walk(steps) if type(s) is Loop)


def _feeds(steps):
    return (f for s in walk(steps) if type(s) is Segment for f in s.feeds)


def _segments(steps):
    return (s for s in walk(steps) if type(s) is Segment)
