"""Run a rendered program: one ``cl.Program``, kept ``cl.Kernel`` s, one arena buffer, and a
host loop over prebuilt launches.

Execution model (on PoCL 3.1 a launch costs the host 1.3-1.7 us and any synchronisation
25-40 us, so nothing synchronises per kernel):

* every kernel is built once, before the first iteration; each launch is a prebuilt
  ``(kernel, global size, local size)`` whose only argument, the arena, is bound up front;
* a ``For`` runs on the host as a tight loop over those launches on one in-order queue,
  with no synchronisation per kernel;
* Feeders are called at the start of their iteration (so the Feeder of iteration k+1 runs
  while the device still computes k); the value is copied into a pinned staging array
  (:class:`Staging`, reused) and written to the arena with a non-blocking copy, enqueued
  where the Feeder sits;
* Receiver values are read with non-blocking copies into a staging ring; callbacks run in
  order as their copies complete, at the latest before :meth:`Executable.run` returns;
* kernels that draw random numbers (``Op.RAND``, :mod:`.philox`) read the loop's iteration
  words from the arena; a one-work-item kernel writes them when the iteration changed;
* parameters live in the arena for the whole run and are written back at the end. A
  failing callback restores the parameters of its iteration's start from a periodic
  checkpoint plus a replay of the iterations since (see :class:`Executable`).
"""
from __future__ import annotations

import collections
import hashlib
import os
import time
from dataclasses import dataclass, field

import numpy as np

from ...errors import FeederError, ReceiverError
from ...graph.rng import iteration_words
from ...graph import dtypes
from ..host import check_feed

#: iterations a Receiver may lag behind the host loop (staging ring depth), and iterations
#: in flight on the device
RING = 8

#: iterations between two checkpoints of the loop-written parameters (failure recovery)
CHECKPOINT = 64

#: bound on the Feeder values kept on the host for a replay (bytes)
RECORD_BYTES = 64 << 20


class KernelBuildError(RuntimeError):
    """The OpenCL compiler rejected the generated program.

    Attributes:
        path: file holding the generated source.
        log: the build log.
    """

    def __init__(self, path: str, log: str):
        self.path, self.log = path, log
        super().__init__(f"OpenCL program build failed; generated source: {path}\n{log}")


class ArenaOutOfMemory(MemoryError):
    """The arena does not fit the device; raised before the loop starts.

    Attributes:
        needed: arena bytes.
        available: the device's largest allocation (bytes).
    """

    def __init__(self, needed: int, available: int, device: str):
        self.needed, self.available = needed, available
        super().__init__(f"arena of {needed} bytes does not fit {device}: at most "
                         f"{available} bytes per allocation (PoCL: raise POCL_MEMORY_LIMIT)")


def check_arena(nbytes: int, device) -> None:
    """Raise :class:`ArenaOutOfMemory` unless an arena of ``nbytes`` fits ``device`` (one
    allocation: at most ``max_mem_alloc_size`` and ``global_mem_size``)."""
    available = min(device.max_mem_alloc_size, device.global_mem_size)
    if nbytes > available:
        raise ArenaOutOfMemory(nbytes, available, device.name.strip())


def source_dir() -> str:
    """Directory where generated sources are written (under the user's cache dir)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "autodiff", "opencl")
    os.makedirs(path, exist_ok=True)
    return path


def build(ctx, device, src: str, names: list[str]):
    """Build ``src`` as one program and create each kernel once.

    Returns:
        ``(cl.Program, {name: cl.Kernel}, source path)``.

    Raises:
        KernelBuildError: with the generated source path and the build log.
    """
    import pyopencl as cl
    path = os.path.join(source_dir(), hashlib.sha1(src.encode()).hexdigest()[:16] + ".cl")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(src)
    try:
        prg = cl.Program(ctx, src).build(devices=[device])
    except cl.Error as e:
        raise KernelBuildError(path, str(e)) from None
    kernels = {}
    for n in names:
        k = cl.Kernel(prg, n)
        kernels[n] = k
    return prg, kernels, path


#: Feeder staging arrays in use outside a recorded loop before a sync frees them
STAGING_UNRECORDED = 4 * RING


class Staging:
    """Pinned host arrays that Feeder values are copied into and written to the arena from
    with non-blocking copies; reused, so the steady state allocates nothing.

    An array is *taken* per Feeder call and stays in use until the caller knows its copy
    has completed and no replay needs it (a checkpoint, the end of the run):
    :meth:`release_all` then returns every array to the free lists. Pinned memory is a
    ``CL_MEM_ALLOC_HOST_PTR`` buffer mapped once (the pattern GPU vendors recommend for
    fast, truly asynchronous host-to-device copies); on a CPU device it is plain host
    memory.
    """

    def __init__(self, ctx, queue):
        self.ctx, self.queue = ctx, queue
        self._free: dict = collections.defaultdict(list)
        self._used: list = []
        self._keep: list = []          # the cl.Buffers behind the mapped arrays

    @property
    def in_use(self) -> int:
        """Arrays taken and not yet released (their copies may still be in flight)."""
        return len(self._used)

    def take(self, shape: tuple, dtype) -> np.ndarray:
        """A free pinned array of ``shape`` and ``dtype`` (allocated if none is free)."""
        key = (tuple(shape), np.dtype(dtype).str)
        free = self._free[key]
        a = free.pop() if free else self._pinned(shape, dtype)
        self._used.append((key, a))
        return a

    def release_all(self) -> None:
        """Every array taken is free again (call after a sync, outside a replay record)."""
        for key, a in self._used:
            self._free[key].append(a)
        self._used.clear()

    def _pinned(self, shape, dtype) -> np.ndarray:
        import pyopencl as cl
        nbytes = max(int(np.prod(shape)) * np.dtype(dtype).itemsize, 1)
        mf = cl.mem_flags
        buf = cl.Buffer(self.ctx, mf.READ_WRITE | mf.ALLOC_HOST_PTR, nbytes)
        a, ev = cl.enqueue_map_buffer(self.queue, buf, cl.map_flags.READ | cl.map_flags.WRITE,
                                      0, tuple(shape), dtype)
        ev.wait()
        self._keep.append(buf)
        return a


# -- steps --------------------------------------------------------------------------------
@dataclass(eq=False)
class Launch:
    name: str
    global_size: tuple
    local_size: tuple
    kernel: object = None
    rand: bool = False        # draws random numbers: needs the current iteration words


@dataclass
class Feed:
    """Host -> arena: ``spec.fn()`` copied into a pinned staging array, written at
    ``offset``."""
    spec: object
    offset: int           # bytes
    shape: tuple
    dtype: str
    pending: object = None  # staging array filled for the current iteration


@dataclass
class Receive:
    """Arena -> host: non-blocking reads of ``parts`` = [(offset bytes, shape, dtype)]."""
    spec: object
    parts: list
    ring: list = field(default_factory=list)
    count: int = 0


@dataclass
class Loop:
    range: range
    body: list
    feeds: list                       # the Feeds directly in the body, in program order
    recovers: bool = False            # outermost loop with host callbacks: checkpointed


@dataclass
class Pending:
    event: object
    recv: Receive
    arrays: list
    iters: tuple


class Executable:
    """A compiled program ready to :meth:`run`.

    Failure recovery (a Feeder or Receiver callback raising): every
    :attr:`checkpoint_every` iterations of an outermost loop with callbacks, once the
    Receivers of the earlier iterations have returned, the parameters the loops write are
    copied on the device into a checkpoint buffer; the Feeder values of the iterations
    since then stay on the host (they are the staging arrays of the non-blocking writes
    anyway). When a callback of iteration ``s`` fails, the checkpoint is copied back and
    iterations ``checkpoint .. s-1`` run again with the recorded Feeder values and the
    Receivers suppressed. The kernels are deterministic, so the parameters end
    bit-identical to their values at the start of iteration ``s`` (the numpy device's
    semantics). The steady state pays one device copy and one synchronisation per
    checkpoint instead of a parameter snapshot per iteration.

    Attributes:
        vals: graph node id -> numpy array for the program's outputs (after ``run``).
        stages: printable stages (``procedural``, ``fused``, ``memory``, ``opencl``).
        stats: compile figures (kernel count, times in seconds).
        checkpoint_every: iterations between checkpoints: :data:`CHECKPOINT`, fewer when
            the recorded Feeder values would exceed :data:`RECORD_BYTES`.
    """

    def __init__(self, ctx, device, queue, arena, arena_bytes: int, steps: list,
                 params: list, outputs: dict, flag_offset: int, stages: dict, stats: dict,
                 written: tuple = (0, 0), set_words=None):
        import pyopencl as cl
        self.ctx, self.device, self.queue = ctx, device, queue
        self.arena, self.arena_bytes = arena, arena_bytes
        self.steps, self.params, self.outputs = steps, params, outputs
        self.flag_offset = flag_offset
        self.stages, self.stats = stages, stats
        self.vals: dict = {}
        self._prof = None
        self._written = written          # (byte offset, bytes) of the loop-written params
        self._ckpt = None
        if written[1] and any(lp.recovers for lp in _loops(steps)):
            self._ckpt = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, written[1])
        self._set_words = set_words      # kernel writing the Philox iteration words
        if set_words is not None:
            set_words.set_scalar_arg_dtypes([None, np.uint32, np.uint32])
        feed_bytes = sum(int(np.prod(f.shape)) * np.dtype(f.dtype).itemsize
                         for lp in _loops(steps) for f in _feeds(lp.body))
        self.checkpoint_every = max(1, min(CHECKPOINT, RECORD_BYTES // max(feed_bytes, 1)))
        self._staging = Staging(ctx, queue)

    # -- the run ----------------------------------------------------------------------------
    def run(self, store: dict) -> None:
        """Copy variables in, run, copy variables and outputs back (also on error).

        Raises:
            FeederError, ReceiverError: a host callback failed; ``store`` then holds the
                values at the start of the failing iteration of the outermost loop.
            IndexError: a Gather/ScatterAdd index was out of range.
        """
        import pyopencl as cl
        q = self.queue
        t0 = time.perf_counter()
        for var, off in self.params:
            cl.enqueue_copy(q, self.arena, np.ascontiguousarray(store[var]), dst_offset=off,
                            is_blocking=False)
        head = np.zeros(4, np.int32)       # error flag, iteration words (0, 0), spare
        cl.enqueue_copy(q, self.arena, head, dst_offset=self.flag_offset, is_blocking=False)
        self._pending: collections.deque = collections.deque()
        self._iters: list = []
        self._words = self._dev_words = (0, 0)
        self._record: list | None = None    # Feeder staging arrays since the checkpoint
        self._replay: collections.deque | None = None
        self._events: list = []             # Feeder writes not known to be complete
        self._first = None
        self._t0 = t0
        if self.queue.properties & cl.command_queue_properties.PROFILING_ENABLE:
            self._prof = []
        try:
            self._exec(self.steps)
            self._drain()
        finally:
            q.finish()
            self._events, self._record = [], None
            self._staging.release_all()
            for var, off in self.params:
                out = np.empty(var.shape, dtypes.storage(var.dtype))
                cl.enqueue_copy(q, out, self.arena, src_offset=off, is_blocking=True)
                store[var] = out
        for node_id, (off, shape, dtype) in self.outputs.items():
            out = np.empty(shape, dtype)
            cl.enqueue_copy(q, out, self.arena, src_offset=off, is_blocking=True)
            self.vals[node_id] = out
        flag = np.zeros(1, np.int32)
        cl.enqueue_copy(q, flag, self.arena, src_offset=self.flag_offset, is_blocking=True)
        self.stats["run_s"] = time.perf_counter() - t0
        if self._first is not None:
            self.stats["first_iteration_s"] = self._first
            t1, rest = self._iter0
            if rest > 0:
                self.stats["steady_iteration_ms"] = (time.perf_counter() - t1) / rest * 1e3
        if self._prof is not None:
            self.stats["kernel_us"] = _profile(self._prof)
            self._prof = None
        if flag[0]:
            raise IndexError("gather/scatter_add: an index was out of range [0, rows)")

    def _exec(self, steps) -> None:
        import pyopencl as cl
        enqueue = cl.enqueue_nd_range_kernel
        q = self.queue
        prof = self._prof
        for st in steps:
            if type(st) is Launch:
                if st.rand and self._words != self._dev_words:
                    self._write_words()
                ev = enqueue(q, st.kernel, st.global_size, st.local_size)
                if prof is not None:
                    prof.append((st.name, ev))
            elif type(st) is Loop:
                self._loop(st)
            elif type(st) is Feed:
                if st.pending is None:          # not called at its iteration's start
                    self._call_feed(st)
                self._write_feed(st)
            elif self._replay is None:          # a replay suppresses Receivers
                self._receive(st)

    def _loop(self, lp: Loop, start: int = 0, stop: int | None = None) -> None:
        """Run iterations ``start .. stop-1`` of ``lp`` (all by default); an outermost loop
        with callbacks checkpoints, and on a callback failure restores the parameters of
        the failing iteration's start before the error propagates."""
        import pyopencl as cl
        q = self.queue
        guard = lp.recovers and self._replay is None
        depth = len(self._iters)
        self._iters.append(0)
        if guard:
            self._drain()           # earlier Receivers: their errors precede this loop
        stop = len(lp.range) if stop is None else stop
        every, base = self.checkpoint_every, start
        marks: collections.deque = collections.deque()
        for k in range(start, stop):
            if len(marks) >= RING:          # at most RING iterations in flight: deep PoCL
                marks.popleft().wait()      # queues slow every command down
            self._iters[depth] = k
            self._words = iteration_words(self._iters)
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
                self._exec(lp.body)
                marks.append(cl.enqueue_marker(q))
                if self._first is None:     # one sync: first iteration done (lazy JIT)
                    marks[-1].wait()
                    self._first = time.perf_counter() - self._t0
                    self._iter0 = (time.perf_counter(), stop - start - 1)
                if guard and k == stop - 1:
                    self._drain()           # failures must still find the checkpoint
            except (FeederError, ReceiverError) as e:
                if guard:
                    if started or isinstance(e, ReceiverError):
                        self._recover(lp, base, e.iteration[0] if e.iteration else k)
                    else:                   # nothing of iteration k was enqueued
                        q.finish()
                raise
        del self._iters[depth:]
        self._words = iteration_words(self._iters)
        if guard:
            self._record = None

    def _checkpoint(self) -> None:
        """Let the Receivers of earlier iterations return, then copy the loop-written
        parameters into the checkpoint buffer and start a new Feeder record."""
        import pyopencl as cl
        self._drain()
        self.queue.finish()                 # every recorded write is complete
        self._events = []
        self._record = []
        self._staging.release_all()
        if self._ckpt is not None:
            off, nb = self._written
            cl.enqueue_copy(self.queue, self._ckpt, self.arena, byte_count=nb,
                            src_offset=off, dst_offset=0)

    def _recover(self, lp: Loop, base: int, s: int) -> None:
        """Put back the parameters of the start of iteration ``s`` of the outermost loop
        ``lp``: restore the checkpoint of iteration ``base``, rerun ``base .. s-1`` from
        the Feeder record."""
        import pyopencl as cl
        q = self.queue
        self._pending.clear()
        q.finish()
        if self._ckpt is not None:
            off, nb = self._written
            cl.enqueue_copy(q, self.arena, self._ckpt, byte_count=nb, src_offset=0,
                            dst_offset=off)
        record, self._record = self._record or [], None
        self._replay = collections.deque(record)
        for f in _feeds(lp.body):
            f.pending = None
        self._iters = []
        try:
            self._loop(lp, base, s)
        finally:
            self._replay = None
            q.finish()
        self._iters = []

    def _write_words(self) -> None:
        """Enqueue the write of the current Philox iteration words into the arena."""
        import pyopencl as cl
        k = self._set_words
        k.set_args(self.arena, *self._words)
        cl.enqueue_nd_range_kernel(self.queue, k, (1,), (1,))
        self._dev_words = self._words

    # -- feeders ------------------------------------------------------------------------------
    def _call_feed(self, f: Feed) -> None:
        if self._replay is not None:
            f.pending = self._replay.popleft()
            return
        it = tuple(self._iters)
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
        a = self._staging.take(f.shape, f.dtype)
        np.copyto(a, v)
        f.pending = a
        if self._record is not None:
            self._record.append(a)
        elif self._staging.in_use > STAGING_UNRECORDED:     # a Feeder outside any loop
            self.queue.finish()
            self._staging.release_all()

    def _write_feed(self, f: Feed) -> None:
        import pyopencl as cl
        # keep the event: dropping a pyopencl NannyEvent blocks until the copy is done
        self._events.append(cl.enqueue_copy(self.queue, self.arena, f.pending,
                                            dst_offset=f.offset, is_blocking=False))
        f.pending = None

    # -- receivers ------------------------------------------------------------------------------
    def _receive(self, r: Receive) -> None:
        import pyopencl as cl
        slot = r.count % RING
        if len(r.ring) <= slot:
            r.ring.append([np.empty(shape, dtype) for _, shape, dtype in r.parts])
        self._throttle()
        arrays = r.ring[slot]
        ev = None
        for (off, _, _), a in zip(r.parts, arrays):
            ev = cl.enqueue_copy(self.queue, a, self.arena, src_offset=off, is_blocking=False)
        r.count += 1
        self._pending.append(Pending(ev, r, arrays, tuple(self._iters)))

    def _throttle(self) -> None:
        """Keep fewer than RING receiver reads in flight (staging slots)."""
        while len(self._pending) >= RING - 1:
            self._finish_one(wait=True)

    def _poll(self) -> None:
        import pyopencl as cl
        done = cl.command_execution_status.COMPLETE
        while self._pending and self._pending[0].event.command_execution_status == done:
            self._finish_one(wait=False)

    def _drain(self) -> None:
        while self._pending:
            self._finish_one(wait=True)

    def _finish_one(self, wait: bool) -> None:
        p = self._pending.popleft()
        if wait:
            p.event.wait()
        try:
            dts = p.recv.spec.dtypes or (None,) * len(p.arrays)
            p.recv.spec.fn(*[a.copy() if dt is None else a.astype(dtypes.host(dt))
                             for a, dt in zip(p.arrays, dts)])
        except Exception as e:
            raise ReceiverError(p.recv.spec.name, p.iters,
                                f"callback raised {type(e).__name__}: {e}") from e


def _loops(steps):
    for s in steps:
        if type(s) is Loop:
            yield s
            yield from _loops(s.body)


def _feeds(steps):
    for s in steps:
        if type(s) is Feed:
            yield s
        elif type(s) is Loop:
            yield from _feeds(s.body)


def run_sources(sources: list, arena: np.ndarray, spec: str | None = None,
                repeat: int = 1) -> tuple[np.ndarray, float]:
    """Build ``sources`` as one program and launch each ``repeat`` times, in order, on a copy
    of ``arena`` (float32, laid out by the caller with ``kernels.SLACK`` floats at both ends).

    For tests and kernel benchmarks. Returns ``(arena after the run, seconds per repeat
    of all launches)``, the first (JIT-compiling) round excluded from the timing.
    """
    import pyopencl as cl
    from . import render
    from .device import context
    ctx, dev = context(spec)
    _, kern, _ = build(ctx, dev, render.program(sources), [s.name for s in sources])
    q = cl.CommandQueue(ctx, dev)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR,
                    hostbuf=np.ascontiguousarray(arena, np.float32))
    for s in sources:
        kern[s.name].set_arg(0, buf)
    dt = 0.0
    for r in range(repeat + 1 if repeat > 1 else 1):
        if r == 1:
            q.finish()
            t = time.perf_counter()
        for s in sources:
            cl.enqueue_nd_range_kernel(q, kern[s.name], s.global_size, s.local_size)
    q.finish()
    if repeat > 1:
        dt = (time.perf_counter() - t) / repeat
    out = np.empty_like(arena, dtype=np.float32)
    cl.enqueue_copy(q, out, buf, is_blocking=True)
    return out, dt


def _profile(events) -> dict:
    """kernel name -> (launches, mean device microseconds) from profiling events."""
    acc: dict = {}
    for name, ev in events:
        n, t = acc.get(name, (0, 0.0))
        acc[name] = (n + 1, t + (ev.profile.end - ev.profile.start) * 1e-3)
    return {k: (n, round(t / n, 2)) for k, (n, t) in acc.items()}
