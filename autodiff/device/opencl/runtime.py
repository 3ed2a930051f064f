"""Run a rendered program: one ``cl.Program``, kept ``cl.Kernel`` s, one arena buffer, and a
host loop over prebuilt launches.

Execution model (on PoCL 3.1 a launch costs the host 1.3-1.7 us and any synchronisation
25-40 us, so nothing synchronises per kernel):

* every kernel is built once, before the first iteration; each launch is a prebuilt
  ``(kernel, global size, local size)`` whose only argument, the arena, is bound up front;
* a ``For`` runs on the host as a tight loop over those launches on one in-order queue,
  with no synchronisation per kernel (up to :data:`RING` iterations in flight); a light
  body that is one one-work-item chain with its Feeders and Receivers through rings
  (:class:`RingFeed`, :class:`RingReceive`) runs as blocks of up to :data:`RING`
  iterations per launch (:data:`RECEIVER_RING` in a body without Feeders;
  :attr:`Loop.block`);
* host callbacks follow the order contract of :mod:`autodiff.device.host`
  (``prefetch``): under ``prefetch=n`` the Feeders of iteration ``k`` are called at its
  start, just after the Receivers of iterations ``<= k - n - 1`` ran, so they overlap the
  device computing the iterations before; under ``prefetch=0`` a Feeder runs at its place,
  after every earlier Receiver returned (a synchronisation). A Feeder's value is copied
  into a pinned staging array (:class:`Staging`, reused) and written to the arena with a
  non-blocking copy, enqueued where the Feeder sits;
* Receiver values are read with non-blocking copies into staging arrays; callbacks run in
  order when the order rule calls for them (or as the copies complete, in a loop without
  Feeders), at the latest before :meth:`Executable.run` returns;
* index-checked kernels (Gather, ScatterAdd) record the first out-of-range index in the
  arena's error record, read back with the Receivers and at each iteration's end;
* kernels that draw random numbers (``Op.RAND``, :mod:`.philox`) read the loop's iteration
  words from the arena; a one-work-item kernel writes them when the iteration changed;
* parameters live in the arena for the whole run and are written back at the end. A run
  that stops (failing callback, index error, interrupt) restores the parameters of the
  iteration it stops in from a periodic checkpoint plus a replay of the iterations since
  (see :class:`Executable`).

The host logic that is not OpenCL's (the order rule, the stop bookkeeping and the errors)
lives in :mod:`autodiff.device.host`, for reuse by other devices that drive a queue the
same way (steps :class:`Launch`, :class:`Loop`, :class:`Feed`, :class:`Receive`).
"""
from __future__ import annotations

import collections
import hashlib
import math
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from ...errors import FeederError, IndexOutOfRange, ReceiverError
from ...graph.ir import Op
from ...graph.rng import FOLD, iteration_words
from ...graph import dtypes
from ..host import (Progress, check_feed, deferred_interrupts, op_name, prefetch_option)
from ..cstyle import codegen, philox
from . import callback, control
from .chain import ONCE, is_cpu

#: steps that run themselves (``run(exe)``)
HOST_STEPS = control.STEPS + callback.STEPS

#: iterations a Receiver may lag behind the host loop (staging ring depth), and iterations
#: in flight on the device
RING = 8

#: the slots of a Receiver's ring in a loop body without Feeders (:mod:`.rings`), and so
#: the iterations of each of its blocks (:attr:`Loop.block`): nothing but the host waits
#: on those values, and each block costs PoCL a launch and a ring read (~30 us of host
#: time on one thread): W1, one thread, 8 -> 32 slots: 0.039-0.041 -> 0.035-0.038 ms per
#: step (BENCHMARKS.md)
RECEIVER_RING = 32

#: iterations between two checkpoints of the loop-written parameters (failure recovery)
CHECKPOINT = 64

#: bound on the Feeder values kept on the host for a replay (bytes)
RECORD_BYTES = 64 << 20


def checkpoint_every(feed_bytes: int, prefetch: int, ring: int = RING) -> int:
    """Iterations between two checkpoints of a run whose loops' Feeders take ``feed_bytes``
    bytes per iteration and whose deepest Receiver ring has ``ring`` slots:
    :data:`CHECKPOINT`, fewer where the recorded Feeder values would pass
    :data:`RECORD_BYTES`, but at least the most iterations a Receiver lags behind the host
    loop -- ``prefetch + 1``, and two blocks of that ring plus one -- and, for a ring
    deeper than :data:`RING`, whole blocks of it (a checkpoint starts a block)."""
    every = max(1, min(CHECKPOINT, RECORD_BYTES // max(feed_bytes, 1)), prefetch + 1,
                2 * ring + 1)
    return every if ring <= RING else -(-every // ring) * ring


def _transfers(raw=None):
    """``(write, read)``: ``write(queue, arena, host_array, byte_offset)`` and
    ``read(queue, host_array, arena, byte_offset)``, non-blocking copies returning their
    event, for the per-iteration Feeder writes and Receiver reads. They call pyopencl's
    bindings (``raw``, default ``pyopencl._cl``) themselves, not ``enqueue_copy``, which
    inspects its arguments on every call (3.4 against 7.8 us a call, PoCL 3.1);
    ``enqueue_copy`` where a binding is missing."""
    import pyopencl as cl
    raw = getattr(cl, "_cl", None) if raw is None else raw
    w = getattr(raw, "_enqueue_write_buffer", None)
    r = getattr(raw, "_enqueue_read_buffer", None)
    write = (lambda q, buf, a, at: w(q, buf, a, at, None, False)) if w else \
        (lambda q, buf, a, at: cl.enqueue_copy(q, buf, a, dst_offset=at, is_blocking=False))
    read = (lambda q, a, buf, at: r(q, buf, a, at, None, False)) if r else \
        (lambda q, a, buf, at: cl.enqueue_copy(q, a, buf, src_offset=at, is_blocking=False))
    return write, read


def set_int_args(kernel, first: int, values) -> None:
    """Set arguments ``first, first + 1, ...`` of ``kernel`` to the int32 ``values``.

    Through pyopencl's binding for an argument given as bytes (``_set_arg_buf``, 0.5 us an
    argument) where it has one: ``set_arg`` tries each kind of argument in turn (a memory
    object, a sampler, SVM...) and each miss throws a C++ exception, 8-9 us an integer
    (pyopencl 2026.1): the main job's 356 launch kernels took 30 ms of the compile's end."""
    put = getattr(kernel, "_set_arg_buf", None) or kernel.set_arg
    for i, v in enumerate(values, first):
        put(i, np.int32(v))


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


#: bytes of a transparent huge page (x86-64 and arm64 with 4 KiB base pages)
HUGE_PAGE = 2 << 20

#: smallest arena (bytes) put on huge pages: below it the arena's 4 KiB pages fit the
#: data TLB's reach along with everything else a step touches, and each huge page the
#: kernel backs on first touch is 2 MiB of memory however little of it is used
HUGE_ARENA = 4 << 20


def huge_page_array(nbytes: int) -> np.ndarray | None:
    """A zeroed ``uint8`` array of ``nbytes`` rounded up to :data:`HUGE_PAGE`, 2 MiB
    aligned, in an anonymous mapping advised for transparent huge pages
    (``madvise(MADV_HUGEPAGE)``: Linux backs it with 2 MiB pages on first touch when its
    THP mode is ``always`` or ``madvise``). None where ``mmap`` has no ``MADV_HUGEPAGE``
    (not Linux) or the advice is refused. The array keeps its mapping alive."""
    import mmap
    if not hasattr(mmap, "MADV_HUGEPAGE"):
        return None
    n = -(-max(nbytes, 1) // HUGE_PAGE) * HUGE_PAGE
    m = mmap.mmap(-1, n + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        m.madvise(mmap.MADV_HUGEPAGE)
    except OSError:                     # a kernel without THP
        m.close()
        return None
    whole = np.frombuffer(m, np.uint8)  # holds the mapping (an exported buffer)
    at = -whole.ctypes.data % HUGE_PAGE
    return whole[at:at + n]


#: ``madvise`` advice that faults a range in writable without writing it (Linux 5.14)
MADV_POPULATE_WRITE = 23


def prefault(a: np.ndarray) -> threading.Thread | None:
    """Fault in every page of ``a`` (a page-aligned array, such as
    :func:`huge_page_array`'s) on another thread, its contents unchanged
    (``madvise(MADV_POPULATE_WRITE)`` through ctypes, which lets other threads run): the
    first iteration's kernels then write to resident pages. The main job's 37 MB arena
    took 42 ms of first-touch faults (2 MiB pages; 114 ms on 4 KiB ones) inside its first
    iteration; here they overlap the compile's rendering, while the other core waits for
    the program. None where the call is missing (not Linux); a kernel without the advice
    refuses it and the pages fault in at first use, as before."""
    import ctypes
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)

    def run(a=a):                       # holds the array (and its mapping) meanwhile
        madvise(a.ctypes.data, a.nbytes, MADV_POPULATE_WRITE)
    t = threading.Thread(target=run, name="autodiff-arena-prefault", daemon=True)
    t.start()
    return t


def arena_host(device, nbytes: int) -> np.ndarray | None:
    """The host memory an arena of ``nbytes`` bytes lives in on ``device``: on a CPU
    device, from :data:`HUGE_ARENA` bytes on, a :func:`huge_page_array` (None elsewhere:
    the arena is a plain device buffer)."""
    return huge_page_array(nbytes) if is_cpu(device) and nbytes >= HUGE_ARENA else None


def arena_buffer(ctx, device, nbytes: int, host: np.ndarray | None = None):
    """The arena: a read-write ``cl.Buffer`` of at least ``nbytes`` bytes (in ``host``,
    an :func:`arena_host` array allocated earlier, if it is large enough).

    On a CPU device, an arena of at least :data:`HUGE_ARENA` bytes is host memory on
    transparent huge pages (:func:`huge_page_array`) wrapped with ``CL_MEM_USE_HOST_PTR``,
    which PoCL's CPU drivers use in place (pyopencl keeps the array alive with the buffer).
    A step streams the whole arena through its kernels (the main job's: 36 MiB) and on
    4 KiB pages every page of it is a data-TLB miss; on 2 MiB pages (same hour,
    alternating): the main job's step on two threads 21.3-22.8 -> 20.5-21.3 ms, on one
    thread 28.9-29.5 -> 28.2-28.8 ms; W3 on two threads 19.4-20.0 -> 19.1-19.7 ms.
    Elsewhere (a GPU, a small arena, no huge pages): a plain device buffer.

    Raises:
        pyopencl.MemoryError: the device (or the host, for the mapping) cannot allocate
            ``nbytes`` bytes (:func:`check_arena` has checked the device's limits first).
    """
    import pyopencl as cl
    mf = cl.mem_flags
    if host is None or host.nbytes < nbytes:
        host = arena_host(device, nbytes)
    if host is None:
        return cl.Buffer(ctx, mf.READ_WRITE, max(nbytes, 4))
    return cl.Buffer(ctx, mf.READ_WRITE | mf.USE_HOST_PTR, hostbuf=host)


def source_dir() -> str:
    """Directory where generated sources are written (under the user's cache dir)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "autodiff", "opencl")
    os.makedirs(path, exist_ok=True)
    return path


def write_source(src: str) -> str:
    """Write ``src`` to :func:`source_dir` (named by its hash; kept if there) and return the
    path: build errors and the :mod:`.prejit` helper read it there. The file appears whole
    or not at all (written under a temporary name, then renamed): processes rendering the
    same program at once (the ranks of a data-parallel job) never read one half-written."""
    path = os.path.join(source_dir(), hashlib.sha1(src.encode()).hexdigest()[:16] + ".cl")
    if not os.path.exists(path):
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        try:
            with os.fdopen(fd, "w") as f:
                f.write(src)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    return path


def build_file(ctx, device, path: str, frontend_ok: bool = True):
    """Build the program in source file ``path`` (:func:`write_source`), or in bitcode file
    ``path`` compiled from one by :mod:`.frontend` (``.bc``). A source on a device the
    front end serves is compiled by it first; where it fails (or PoCL rejects the
    bitcode), PoCL builds the source itself, and reports its errors. ``frontend_ok=False``:
    PoCL builds a source.

    Raises:
        KernelBuildError: with the source path and the build log.
    """
    import pyopencl as cl
    from . import frontend
    if frontend_ok and not path.endswith(".bc") and \
            (fe := frontend.for_device(device)) is not None:
        path = fe.start(path).result() or path
    if path.endswith(".bc"):
        try:
            with open(path, "rb") as f:
                return cl.Program(ctx, [device], [f.read()]).build(devices=[device])
        except (cl.Error, OSError):
            path = frontend.source_of(path)
    with open(path) as f:
        src = f.read()
    try:
        return cl.Program(ctx, src).build(devices=[device])
    except cl.Error as e:
        raise KernelBuildError(path, str(e)) from None


def build(ctx, device, src: str, names: list[str]):
    """Build ``src`` as one program and create each kernel once.

    Returns:
        ``(cl.Program, {name: cl.Kernel}, source path)``.

    Raises:
        KernelBuildError: with the generated source path and the build log.
    """
    import pyopencl as cl
    path = write_source(src)
    prg = build_file(ctx, device, path)
    return prg, {n: cl.Kernel(prg, n) for n in names}, path


#: Feeder staging arrays in use outside a recorded loop before a sync frees them
STAGING_UNRECORDED = 4 * RING

#: pinned staging arrays allocated (and mapped) at once
STAGING_SLAB = 16


class Staging:
    """Pinned host arrays that Feeder values are copied into and written to the arena from
    with non-blocking copies; reused, so the steady state allocates nothing.

    An array is *taken* per Feeder call and stays in use until the caller knows its copy
    has completed and no replay needs it: :meth:`release` (a checkpoint dropping its
    record) or :meth:`release_all` (the end of the run) returns it to the free lists.
    Pinned memory is a ``CL_MEM_ALLOC_HOST_PTR`` buffer mapped once (the pattern GPU
    vendors recommend for fast, truly asynchronous host-to-device copies); on a CPU device
    it is plain host memory. A zero-size value gets a plain empty array (nothing to copy).
    """

    def __init__(self, ctx, queue):
        self.ctx, self.queue = ctx, queue
        self._free: dict = collections.defaultdict(list)
        self._used: dict = {}          # id(array) -> (key, array)
        self._keep: list = []          # the cl.Buffers behind the mapped arrays

    @property
    def in_use(self) -> int:
        """Arrays taken and not yet released (their copies may still be in flight)."""
        return len(self._used)

    def take(self, shape: tuple, dtype) -> np.ndarray:
        """A free pinned array of ``shape`` and ``dtype`` (allocated if none is free)."""
        key = (tuple(shape), dtype)
        free = self._free.get(key)
        if free:                               # the steady state: no numpy call at all
            a = free.pop()
            self._used[id(a)] = (key, a)
            return a
        if not math.prod(shape):
            return np.empty(shape, dtype)      # nothing to transfer (and no pinned map)
        free = self._free[key]
        if not free:
            free.extend(self._pinned(shape, dtype, STAGING_SLAB))
        a = free.pop()
        self._used[id(a)] = (key, a)
        return a

    def release(self, arrays) -> None:
        """``arrays`` (taken earlier, their copies complete) are free again."""
        for a in arrays:
            entry = self._used.pop(id(a), None)
            if entry is not None:
                self._free[entry[0]].append(entry[1])

    def release_all(self) -> None:
        """Every array taken is free again (call after a sync)."""
        for key, a in self._used.values():
            self._free[key].append(a)
        self._used.clear()

    def _pinned(self, shape, dtype, count: int) -> list:
        """``count`` pinned arrays of ``shape`` from one buffer mapped once (a map costs a
        synchronisation)."""
        import pyopencl as cl
        mf = cl.mem_flags
        buf = cl.Buffer(self.ctx, mf.READ_WRITE | mf.ALLOC_HOST_PTR,
                        count * int(np.prod(shape)) * np.dtype(dtype).itemsize)
        a, ev = cl.enqueue_map_buffer(self.queue, buf, cl.map_flags.READ | cl.map_flags.WRITE,
                                      0, (count,) + tuple(shape), dtype)
        ev.wait()
        self._keep.append(buf)
        return [a[i, ...] for i in range(count)]   # views, 0-d ones too (not scalars)


# -- steps --------------------------------------------------------------------------------
@dataclass(eq=False)
class Launch:
    name: str
    global_size: tuple
    local_size: tuple
    kernel: object = None
    rand: bool = False        # draws random numbers: needs the current iteration words
    counters: bool = False    # reads loop counters: needs them written (control.py)
    reps_arg: int = 0         # kernel argument index of the repeat count (an iteration
    reps: int = 1             # block's chain: Loop.block), and its value now
    ctr: int = -1             # the arena word of the counter it advances per repeat (the
    #                           argument after reps), -1: none
    wrd: int = -1             # the arena word of the Philox iteration word it advances per
    #                           repeat (the next argument; its step the one after), -1: none
    team: int = 0             # a team chain's work-groups (chain.team), 0: not one
    flops: int = 0            # its matmuls' flops (recorded with ``profile=True``)


@dataclass(eq=False)
class Feed:
    """Host -> arena: ``spec.fn()`` copied into a pinned staging array, written at
    ``offset``."""
    spec: object
    offset: int           # bytes
    shape: tuple
    dtype: str
    pending: object = None  # staging array filled for the current iteration

    def __post_init__(self):
        # what a value must be to skip :func:`~autodiff.device.host.check_feed` (which
        # reports every mismatch): the shape and the host dtype, with no int range to check
        self.plain = (tuple(self.spec.shape), dtypes.host(self.spec.dtype)) \
            if dtypes.name(self.spec.dtype) not in ("int32", "int64") else None


@dataclass(eq=False)
class RingFeed(Feed):
    """A Feed whose value goes into slot ``count % slots`` of a ring in the arena (byte
    offset ``ring`` of slot 0, ``stride`` bytes a slot) instead of the Feeder's buffer; a
    one-work-item body in the iteration's chain copies the slot into the buffer
    (:mod:`autodiff.device.opencl.rings`). ``count``: values written since the run
    started (the device's counter restarts with the arena's constants region)."""
    ring: int = 0
    slots: int = 0
    stride: int = 0
    count: int = 0


def _host_dtypes(spec, n: int) -> list:
    """The host dtype each of a Receiver's ``n`` values is handed over in (None: as
    stored)."""
    return [None if dt is None else dtypes.host(dt) for dt in spec.dtypes or (None,) * n]


@dataclass(eq=False)
class Receive:
    """Arena -> host: non-blocking reads of ``parts`` = [(offset bytes, shape, dtype)]
    into staging arrays (``free``: sets not in flight)."""
    spec: object
    parts: list
    free: list = field(default_factory=list)

    def __post_init__(self):
        self.hosts = _host_dtypes(self.spec, len(self.parts))


@dataclass(eq=False)
class RingReceive:
    """A Receiver whose values the device copies, every iteration, into slot ``count %
    slots`` of a ring in the arena (a kernel body in the iteration's launch chain:
    :mod:`autodiff.device.opencl.rings`); the host reads the whole ring
    (``slots * stride`` bytes at byte offset ``ring``) once per ``slots`` iterations
    instead of one read per iteration, then calls the Receiver for each. ``parts``: [(byte
    offset within a slot, shape, dtype)]. ``count``: iterations copied since the run
    started (the device's counter restarts with the arena's constants region);
    ``unread``: their :class:`Pending` items not yet covered by a read."""
    spec: object
    parts: list
    ring: int
    slots: int
    stride: int
    count: int = 0
    unread: list = field(default_factory=list)

    def __post_init__(self):
        self.hosts = _host_dtypes(self.spec, len(self.parts))
        # (first byte, end byte, shape, dtype) of each part within a slot
        self.views = [(off, off + math.prod(shape) * np.dtype(dt).itemsize, shape, dt)
                      for off, shape, dt in self.parts]

    def split(self, host: np.ndarray) -> list[np.ndarray]:
        """Each part of every slot of a read of the whole ring (``host``: ``slots *
        stride`` bytes) as one array ``[slots, *shape]`` viewing ``host`` (parts start at
        multiples of their itemsize within a slot: :mod:`.rings`)."""
        rows = host.reshape(self.slots, self.stride)
        return [rows[:, a:b].view(dt).reshape((self.slots, *shape))
                for a, b, shape, dt in self.views]


@dataclass(eq=False)
class Loop:
    """A ``For``: ``body`` runs once per element of ``range`` from the host.

    Attributes:
        feeds: the Feeds directly in the body, in program order.
        recovers: an outermost loop: checkpointed, restores the variables when it stops.
        site: the user's ``file:line`` of the ``ir_for``.
        inner: the body holds no nested loop (its Feeders may run ahead: ``prefetch``).
        flag_at_end: read the index-error record at the end of each iteration (the
            program has index-checked kernels and the body does not end with a Receive,
            whose read includes it).
        block: iterations per launch (0: one): the body is Feeders through rings
            (``lead`` of them, first), one one-work-item chain launch, which reruns the
            iteration on the device (its ``reps`` argument; a chain reading the loop's
            counter or drawing random numbers advances the counter or the Philox
            iteration word between repeats: its ``ctr``, ``wrd`` arguments), and
            Receivers through rings. Up to ``block`` iterations then cost the host one
            launch and one write per Feeder (its values of the block, consecutive ring
            slots: two writes where the ring wraps; W4 on two threads: 32 -> 26 us of
            host CPU per step), and a checkpoint or the run's end cuts a block short.
    """
    range: range
    body: list
    feeds: list
    recovers: bool = False
    site: str = "?"
    inner: bool = True
    flag_at_end: bool = False
    block: int = 0
    lead: int = 0


@dataclass(eq=False, slots=True)
class Pending:
    """A non-blocking read not yet handed to the host: a Receiver's values (``recv``,
    ``arrays``) and/or the index-error record (``flag``), read in iteration ``iters``
    (``k``: index in the loop being run, ``outer``: in the outermost loop, or None)."""
    event: object
    recv: Receive | None
    arrays: list | None
    flag: np.ndarray | None
    iters: tuple
    k: int
    outer: int | None
    slot: int = -1          # a RingReceive's: the ring slot its values are in


@dataclass(eq=False)
class Checkpoint:
    """The loop-written parameters at the start of iteration ``base`` (a device copy),
    and the Feeder staging arrays of every call since (the record a replay reads), the
    events of their writes (kept: dropping a pyopencl NannyEvent waits for its copy), and
    the results of the host callbacks since (:mod:`.callback`); ``blocks``: the staging
    arrays of iteration blocks (:meth:`Executable._exec_block`), of which the record holds
    row views."""
    base: int
    buffer: object
    record: list
    results: list = field(default_factory=list)
    events: list = field(default_factory=list)
    blocks: list = field(default_factory=list)      # staging arrays the record views


class Executable:
    """A compiled program ready to :meth:`run`.

    Host callbacks follow the order contract of :mod:`autodiff.device.host` lazily: with
    ``prefetch=n`` (loops without nested loops) the Feeders of iteration ``k`` are called at
    its start, right after the Receivers of iterations ``<= k - n - 1`` have run; the reads
    behind Receivers stay in flight until then (no synchronisation per iteration). With
    ``prefetch=0``, and outside such loops, a Feeder runs at its place in the program
    after every earlier Receiver has returned.

    Out-of-range indices: each index-checked kernel (Gather, ScatterAdd) records the first
    failure in the arena's error record (:data:`.codegen.FLAG`: kernel id, count, smallest
    and largest bad index); the record is read with every Receiver's values and at the end
    of every iteration (non-blocking, like the Receivers), so the host raises
    :class:`~autodiff.errors.IndexOutOfRange` for the right iteration, before a later
    Receiver of it runs.

    Stops (a failing callback, an index error, an interrupt anywhere): every
    :attr:`checkpoint_every` iterations of an outermost loop, the parameters the loops
    write are copied on the device into a checkpoint buffer (a copy command in the
    in-order queue, behind the iterations before it: no synchronisation, the device keeps
    running); the Feeder values of the calls since stay on the host (the staging arrays
    of the non-blocking writes anyway). Two checkpoints are kept, since
    Receivers lag the host loop by up to ``prefetch`` iterations. When the run stops in
    iteration ``s`` (for an interrupt: the first iteration not completed, i.e. with a
    Receiver or index check outstanding or not fully enqueued), the latest checkpoint at
    or before ``s`` is copied back and the iterations from it to ``s - 1`` run again with
    the recorded Feeder values and no callbacks. The kernels are deterministic, so the
    parameters end bit-identical to their values at the start of iteration ``s`` (the
    numpy device's semantics). The steady state pays one device copy per checkpoint
    instead of a parameter snapshot per iteration.

    Attributes:
        vals: graph node id -> numpy array for the program's outputs (after ``run``).
        stages: printable stages (``procedural``, ``fused``, ``memory``, ``opencl``).
        stats: compile figures (kernel count, times in seconds).
        progress: where the run is or stopped (:class:`~autodiff.device.host.Progress`).
        checkpoint_every: iterations between checkpoints (:func:`checkpoint_every`; a
            loop with Receiver rings deeper than :data:`RING` has its own span).
    """

    def __init__(self, ctx, device, queue, arena, arena_bytes: int, steps: list,
                 params: list, outputs: dict, flag_offset: int, stages: dict, stats: dict,
                 written: tuple = (0, 0), set_words=None, checked=(), prefetch=None):
        self.ctx, self.device, self.queue = ctx, device, queue
        self._write, self._read = _transfers()
        self.arena, self.arena_bytes = arena, arena_bytes
        self.steps, self.params, self.outputs = steps, params, outputs
        self.flag_offset = flag_offset
        self.stages, self.stats = stages, stats
        self.vals: dict = {}
        self.prefetch = prefetch_option(prefetch)
        self.checked = list(checked)     # index-checked graph nodes; kernel id = position + 1
        self.progress = Progress()
        self._prof = None
        self._last_launch = None        # the event of the latest kernel launch
        self._written = written          # (byte offset, bytes) of the loop-written params
        self._buffers: list = []         # checkpoint buffers not in use
        self._set_words = set_words      # kernel writing the Philox iteration words
        self.constants = (0, np.zeros(0, np.float32))   # (byte offset, values): lifted literals
        if set_words is not None:
            set_words.set_scalar_arg_dtypes([None, np.uint32, np.uint32])
        for lp in _loops(steps):
            lp.flag_at_end = bool(self.checked) and not (lp.body and
                                                         type(lp.body[-1]) is Receive)
        feed_bytes = sum(int(np.prod(f.shape)) * np.dtype(f.dtype).itemsize
                         for lp in _loops(steps) for f in _feeds(lp.body))
        feed_bytes += sum(w.nbytes for lp in _loops(steps)        # recorded callback results
                          for w in _feeds(lp.body, callback.CallWrite))
        self.checkpoint_every = checkpoint_every(feed_bytes, self.prefetch)
        # a loop of deeper rings (no Feeders, no nested loop: :mod:`.rings`) checkpoints in
        # whole blocks of them, at least two blocks apart; it records no Feeder value
        self._spans = {id(lp): checkpoint_every(0, self.prefetch, _ring_depth(lp))
                       for lp in _loops(steps) if _ring_depth(lp) > RING}
        self._staging = Staging(ctx, queue)
        self._flags: list = []           # host arrays for reads of the error record
        self.tier = None                 # team runs swapped in while it runs (tiers.py)

    # -- the run ----------------------------------------------------------------------------
    def run(self, store: dict) -> None:
        """Copy variables in, run, copy variables and outputs back (also on error).

        Raises:
            FeederError, ReceiverError, IndexOutOfRange, KeyboardInterrupt: the run
                stopped; ``store`` then holds the values after the completed iterations of
                the outermost loop (:attr:`progress`).
        """
        import pyopencl as cl
        self.progress = Progress()          # first: a stop before the loop names nothing
        q = self.queue
        t0 = time.perf_counter()
        if self.constants[1].size:
            cl.enqueue_copy(q, self.arena, self.constants[1], dst_offset=self.constants[0],
                            is_blocking=False)
        self._write_params(store)
        self._reset_flag()
        for r in _feeds(self.steps, RingReceive):     # the device's ring counters restart
            r.count, r.unread = 0, []
        for f in _feeds(self.steps, RingFeed):
            f.count = 0
        self._pending: collections.deque = collections.deque()
        self._waited = None                 # the last read waited for (complete)
        self._iters: list = []
        self._words = self._dev_words = (0, 0)
        self._dev_counters = None           # loop counters last written to the arena
        self._replay: collections.deque | None = None
        self._replay_results: collections.deque | None = None   # callback results
        self._record: list | None = None    # Feeder staging arrays of the current span
        self._ckpts: list = []              # the outermost loop's checkpoints (at most 2)
        self._unrecorded: list = []         # Feeder staging arrays outside loops
        self._events: list = []             # Feeder writes not known to be complete
        self._enqueued, self._partial = 0, False
        self._first = self._iter0 = None
        self._t0 = t0
        if self.queue.properties & cl.command_queue_properties.PROFILING_ENABLE:
            self._prof = []
        tier = self.tier if self._prof is None else None    # a profile times tier 1
        if tier is not None:
            tier.begin(self)
        t_loops = cpu_loops = None
        try:
            self._exec(self.steps)
            self._drain()
            q.finish()
            t_loops = time.perf_counter()   # the last iteration done, before the read-back
            cpu_loops = time.process_time()
        finally:
            if tier is not None:
                self.stats["team_switches"] = list(tier.switches)
                self.stats["team_busy"] = list(tier.busy)
                self.stats["team_swap_s"] = tier.swap_s
            with deferred_interrupts():     # the variables are read back whole
                q.finish()
                self._events, self._record, self._ckpts = [], None, []
                self._staging.release_all()
                values = {}
                for var, off in self.params:
                    out = np.empty(var.shape, dtypes.storage(var.dtype))
                    if out.size:
                        cl.enqueue_copy(q, out, self.arena, src_offset=off, is_blocking=True)
                    values[var] = out
                store.update(values)
        for node_id, (off, shape, dtype) in self.outputs.items():
            out = np.empty(shape, dtype)
            if out.size:
                cl.enqueue_copy(q, out, self.arena, src_offset=off, is_blocking=True)
            self.vals[node_id] = out
        flag = self._flag_array()
        cl.enqueue_copy(q, flag, self.arena, src_offset=self.flag_offset, is_blocking=True)
        self.stats["run_s"] = time.perf_counter() - t0
        if self._first is not None:
            self.stats["first_iteration_s"] = self._first
            t1, rest, c1 = self._iter0
            if rest > 0:                    # the loops' throughput: no read-back in it
                self.stats["steady_iteration_ms"] = (t_loops - t1) / rest * 1e3
                self.stats["steady_cpu_ms"] = (cpu_loops - c1) / rest * 1e3   # all threads
        if self._prof is not None:
            self.stats["kernel_us"] = _profile(self._prof)
            self._prof = None
        if flag[0]:                          # an index-checked kernel outside loops
            raise self._index_error(flag, ())

    def _write_params(self, store: dict) -> None:
        """The variables' values (``store``) into the arena: one mapped write of the
        region they span (a variable after another, padding between), not a copy command
        per variable (the main job's 103 took 9-31 ms of its first iteration; the map
        1-2 ms)."""
        import pyopencl as cl
        values = [(off, np.ascontiguousarray(store[var])) for var, off in self.params
                  if var.value.size]
        if not values:
            return
        lo = min(off for off, _ in values)
        hi = max(off + a.nbytes for off, a in values)
        region, _ = cl.enqueue_map_buffer(self.queue, self.arena,
                                          cl.map_flags.WRITE_INVALIDATE_REGION, lo,
                                          (hi - lo,), np.uint8, is_blocking=True)
        try:
            for off, a in values:
                region[off - lo:off - lo + a.nbytes] = a.reshape(-1).view(np.uint8)
        finally:
            region.base.release(self.queue)

    def _exec(self, steps) -> None:
        import pyopencl as cl
        enqueue = cl.enqueue_nd_range_kernel
        q = self.queue
        prof = self._prof
        for st in steps:
            if type(st) is Launch:
                if st.rand and self._words != self._dev_words:
                    self._write_words()
                if st.counters and control.counters_now(self) != self._dev_counters:
                    control.write_counters(self)
                ev = self._last_launch = enqueue(q, st.kernel, st.global_size,
                                                 st.local_size)
                if prof is not None:
                    prof.append((st.name, ev))
            elif type(st) is Loop:
                self._loop(st)
            elif type(st) in HOST_STEPS:    # If / While (control.py), callbacks (callback.py)
                st.run(self)
            elif type(st) is Feed or type(st) is RingFeed:
                if st.pending is None:          # in place: program order
                    if self._replay is None:
                        self._drain()           # every earlier Receiver has returned
                    self._call_feed(st)
                self._write_feed(st)
            elif self._replay is not None:      # a replay suppresses Receivers
                continue
            elif type(st) is RingReceive:
                self._ring_receive(st)
            else:
                self._receive(st)

    def _loop(self, lp: Loop, start: int = 0, stop: int | None = None) -> None:
        """Run iterations ``start .. stop-1`` of ``lp`` (all by default). An outermost loop
        checkpoints, and when it stops restores the parameters of the iteration it stopped
        in (:meth:`_stop`) before the error propagates."""
        import pyopencl as cl
        q = self.queue
        replay = self._replay is not None
        top = not self._iters and not replay
        depth = len(self._iters)
        self._iters.append(0)
        stop = len(lp.range) if stop is None else stop
        ahead = self.prefetch if lp.inner and lp.feeds and not replay else 0
        every = self._spans.get(id(lp), self.checkpoint_every)
        tier = self.tier if self._prof is None and top else None    # between outermost
        #                                                              iterations: tiers.py
        # blocks only where nothing per iteration is asked for (a profile times launches),
        # and with Feeders only where the Receivers the order rule waits for were read a
        # block earlier (a replay calls no Receiver)
        block = lp.block if not lp.flag_at_end and self._prof is None and (
            replay or not lp.feeds or ahead >= 2 * lp.block - 1) else 0
        if lp.block and not block:
            _as_compiled(lp.body[lp.lead])
        limit = 2 * block if block else RING    # iterations in flight
        # reads pending at most: two rings' worth per ring Receiver, at least 2 RING
        pending = max(2 * RING, 2 * _ring_depth(lp) * sum(type(r) is RingReceive
                                                          for r in lp.body))
        marks: collections.deque = collections.deque()      # (event, iterations)
        flight = 0
        try:
            if not replay:
                self._drain()               # everything before the loop has run
                if self.checked:            # and an index error there comes first
                    self._read_flag()
                    self._drain()
            if top:
                self.progress.enter(lp.site)
                self._enqueued, self._partial = start, False
            k = start
            while k < stop:
                n = 1                           # iterations this pass (a block's, or one)
                if block and self._first is not None:
                    n = min(block, stop - k)
                    if top and not replay:      # a checkpoint starts a block
                        n = min(n, every - (k - start) % every)
                    for r in () if replay else lp.body[lp.lead + 1:]:
                        if len(r.unread) == r.slots:    # (a read an interrupt cut off)
                            self._read_ring(r)
                        n = min(n, r.slots - len(r.unread))   # read before a launch refills
                while marks and flight + n > limit:     # at most RING iterations in
                    ev, m = marks.popleft()             # flight (2 blocks): deep PoCL
                    ev.wait()                           # queues slow every command down
                    flight -= m
                self._iters[depth] = k
                self._words = iteration_words(self._iters)
                if not replay:
                    if ahead and not block:
                        self._run_due(k - ahead - 1)    # the order rule, then the Feeders
                    elif not lp.feeds:                  # (a block's: per iteration inside)
                        self._poll()
                        self._throttle(pending)
                    if top:
                        self._retire(self._completed())
                        if (k - start) % every == 0:
                            self._checkpoint(k)
                    if ahead and not block:
                        for f in lp.feeds:
                            self._call_feed(f)
                if top:
                    self._partial = True
                if tier is not None:
                    tier.step(self, k)
                self._last_launch = None
                if block:
                    self._exec_block(lp, depth, k, n, ahead)
                else:
                    self._exec(lp.body)
                if lp.flag_at_end and not replay:
                    self._read_flag()
                # the iteration's last launch marks it (an in-order queue: all before it
                # are done with it): a marker command costs PoCL 3 us
                marks.append((self._last_launch or cl.enqueue_marker(q), n))
                flight += n
                k += n
                if top:
                    self._enqueued = k
                    self._partial = False
                if self._first is None and not replay:  # one sync: first iteration (JIT)
                    marks[-1][0].wait()
                    self._first = time.perf_counter() - self._t0
                    self._iter0 = (time.perf_counter(), stop - start - 1, time.process_time())
            if not replay:
                self._drain()               # the loop's callbacks have all run
            if top:
                self.progress.finished(stop)
        except BaseException as e:
            if top:
                self._stop(lp, e)
            raise
        finally:
            del self._iters[depth:]
            self._words = iteration_words(self._iters)
            if block:
                _as_compiled(lp.body[lp.lead])
            if top:
                self.progress.leave()

    def _exec_block(self, lp: Loop, depth: int, k: int, n: int, ahead: int) -> None:
        """Iterations ``k .. k+n-1`` of block loop ``lp`` (:attr:`Loop.block`): for each in
        turn the order rule (Receivers of iterations ``<= j - ahead - 1``) and its Feeders,
        each value written into the next slot of its ring; then the chain launched once
        with ``reps = n``; then each iteration's Receiver slots handed to the host."""
        lead = lp.lead
        feeds = lp.body[:lead]
        j = k
        # a live run copies each Feeder's values of the block into one staging array and
        # writes it into consecutive ring slots with one command (two where the ring
        # wraps) instead of one per iteration; a replay writes its recorded values singly
        rows = self._block_rows(feeds, n, lp.block) if self._replay is None else None
        try:
            for j in range(k, k + n) if lead else ():
                self._iters[depth] = j
                if ahead:
                    self._run_due(j - ahead - 1)
                for i, f in enumerate(feeds):
                    if rows is None:
                        self._call_feed(f)      # a replay's: the recorded value
                        self._write_feed(f)
                    else:
                        self._call_feed(f, rows[i][j - k, ...])     # (0-d: a view)
        except FeederError:
            if j > k:   # the iterations fed before run, and then their Receivers, as they
                if rows is not None:                        # would have without blocks
                    self._write_rows(feeds, rows, j - k)
                self._launch_block(lp, depth, k, j - k)
                self._drain()
            raise
        if rows is not None:
            self._write_rows(feeds, rows, n)
        self._launch_block(lp, depth, k, n)

    def _block_rows(self, feeds: list, n: int, block: int) -> list | None:
        """The first ``n`` rows of one staging array ``[block, *shape]`` per ring Feeder
        of a block of ``n <= block`` iterations (None when a value is empty): one shape
        per Feeder however the run's start, its checkpoints and its end cut blocks short,
        so that one set of pinned arrays serves them all (W4: two slabs of arrays per run
        instead of six, 2.3 MiB instead of 4.6). Released with the checkpoint whose record
        views its rows (or at the next sync outside any record)."""
        if not all(math.prod(f.shape) for f in feeds):
            return None
        whole = [self._staging.take((block, *f.shape), f.dtype) for f in feeds]
        for a in whole:
            if self._record is not None and self._iters:
                self._ckpts[-1].blocks.append(a)
            else:
                self._keep_unrecorded(a)
        return [a[:n] for a in whole]

    def _write_rows(self, feeds: list, rows: list, m: int) -> None:
        """Write the first ``m`` rows of each Feeder's block array (:meth:`_block_rows`)
        into its ring's next ``m`` slots: consecutive slots, so one write, or two where the
        ring wraps around."""
        for f, a in zip(feeds, rows):
            first = f.count % f.slots
            upto = min(m, f.slots - first)
            self._events.append(self._write(self.queue, self.arena, a[:upto],
                                            f.ring + first * f.stride))
            if m > upto:
                self._events.append(self._write(self.queue, self.arena, a[upto:m], f.ring))
            f.count += m
        self._release_unrecorded()

    def _launch_block(self, lp: Loop, depth: int, k: int, n: int) -> None:
        """Launch iterations ``k .. k+n-1`` of block loop ``lp`` (their Feeder values
        written), then hand each iteration's Receiver slots to the host."""
        import pyopencl as cl
        lead = lp.lead
        la = lp.body[lead]
        _set_reps(la, n)
        self._iters[depth] = k  # iteration k's counters and Philox words; the chain
        if la.counters:         # advances this loop's after each repeat
            if control.counters_now(self) != self._dev_counters:
                control.write_counters(self)
            _set_ctr(la, control.COUNTERS + depth)
        if la.rand:
            self._words = iteration_words(self._iters)
            if self._words != self._dev_words:
                self._write_words()
            _set_wrd(la, *_word_step(depth))
        self._last_launch = cl.enqueue_nd_range_kernel(self.queue, la.kernel,
                                                       la.global_size, la.local_size)
        if la.counters:
            c = list(self._dev_counters)
            c[depth] += n
            self._dev_counters = tuple(c)
        if la.rand:
            end = list(self._iters)
            end[depth] += n
            self._dev_words = iteration_words(end)
        if self._prof is not None:
            self._prof.append((la.name, self._last_launch))
        if self._replay is not None:        # a replay suppresses Receivers
            return
        for j in range(k, k + n):
            self._iters[depth] = j
            for r in lp.body[lead + 1:]:
                self._ring_receive(r)

    def _completed(self) -> int:
        """Iterations of the outermost loop completed: fully enqueued, with no Receiver or
        index check outstanding."""
        done = self._enqueued
        if self._pending and self._pending[0].outer is not None:
            done = min(done, self._pending[0].outer)
        return done

    def _retire(self, done: int) -> None:
        """Iterations ``< done`` are complete: no stop can go back before the newest
        checkpoint at or before ``done``, so the older one is dropped (its Feeder record
        released)."""
        self.progress.done(done)
        if len(self._ckpts) == 2 and self._ckpts[1].base <= done:
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        """Drop the oldest checkpoint: once its Feeder writes are done (long since: they
        are a span of :attr:`checkpoint_every` iterations, more than are ever in flight,
        before the newest checkpoint), release their staging arrays and its buffer."""
        old = self._ckpts.pop(0)
        for ev in old.events:
            ev.wait()
        self._staging.release(old.record + old.results + old.blocks)
        if old.buffer is not None:
            self._buffers.append(old.buffer)

    def _checkpoint(self, k: int) -> None:
        """Copy the loop-written parameters into a checkpoint: a device copy enqueued after
        every command of the iterations before ``k`` (the queue is in order), without
        waiting for them; the oldest of three is dropped and its Feeder record released."""
        import pyopencl as cl
        with deferred_interrupts():
            if len(self._ckpts) == 2:
                self._drop_oldest()
            buf = None
            off, nb = self._written
            if nb:
                buf = self._buffers.pop() if self._buffers else \
                    cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, nb)
                cl.enqueue_copy(self.queue, buf, self.arena, byte_count=nb, src_offset=off,
                                dst_offset=0)
            self._ckpts.append(Checkpoint(k, buf, []))
            self._record = self._ckpts[-1].record
            self._events = self._ckpts[-1].events

    def _stop(self, lp: Loop, e: BaseException) -> None:
        """The outermost loop ``lp`` stops: put back the parameters of the start of the
        iteration it stops in (that of a callback or index error; for anything else,
        e.g. an interrupt, the first iteration not completed)."""
        it = getattr(e, "iteration", None)
        target = it[0] if it else self._completed()
        with deferred_interrupts():
            self._pending.clear()
            self.queue.finish()
            if self._written[1] and (target != self._enqueued or self._partial):
                self._restore(lp, target)
            self._reset_flag()
            self.progress.stopped(target)

    def _restore(self, lp: Loop, s: int) -> None:
        """Restore the latest checkpoint at or before iteration ``s`` of the outermost loop
        ``lp`` and rerun the iterations from it to ``s - 1`` from the Feeder record."""
        import pyopencl as cl
        q = self.queue
        ck = [c for c in self._ckpts if c.base <= s][-1]
        off, nb = self._written
        cl.enqueue_copy(q, self.arena, ck.buffer, byte_count=nb, src_offset=0, dst_offset=off)
        record = [a for c in self._ckpts if c.base >= ck.base for a in c.record]
        self._replay = collections.deque(record)
        self._replay_results = collections.deque(
            a for c in self._ckpts if c.base >= ck.base for a in c.results)
        for f in _feeds(lp.body):
            f.pending = None
            if type(f) is RingFeed:     # slots may be written for iterations never run:
                f.count = 0             # the device's counter restarts with the host's
                cl.enqueue_copy(q, self.arena, np.zeros(1, np.int32),
                                dst_offset=f.ring - 4, is_blocking=True)
        saved, self._iters = self._iters, []
        try:
            self._loop(lp, ck.base, s)
        finally:
            self._replay = None
            q.finish()
            self._iters = saved

    def _write_words(self) -> None:
        """Enqueue the write of the current Philox iteration words into the arena."""
        import pyopencl as cl
        k = self._set_words
        k.set_args(self.arena, *self._words)
        cl.enqueue_nd_range_kernel(self.queue, k, (1,), (1,))
        self._dev_words = self._words

    # -- the index-error record ---------------------------------------------------------------
    def _flag_array(self) -> np.ndarray:
        return self._flags.pop() if self._flags else np.empty(codegen.FLAG_WORDS, np.int32)

    def _reset_flag(self) -> None:
        import pyopencl as cl
        init = np.array(codegen.FLAG_INIT, np.int32)
        cl.enqueue_copy(self.queue, self.arena, init, dst_offset=self.flag_offset,
                        is_blocking=True)
        self._dev_words = (0, 0)            # the record holds the Philox words too

    def _read_flag(self) -> None:
        """A non-blocking read of the error record, checked in order with the Receivers."""
        import pyopencl as cl
        a = self._flag_array()
        ev = cl.enqueue_copy(self.queue, a, self.arena, src_offset=self.flag_offset,
                             is_blocking=False)
        self._pending.append(self._pending_item(ev, None, None, a))

    def _pending_item(self, ev, recv, arrays, flag) -> Pending:
        it = tuple(self._iters)
        return Pending(ev, recv, arrays, flag, it, it[-1] if it else -1,
                       it[0] if it else None)

    def _index_error(self, flag: np.ndarray, it: tuple) -> IndexOutOfRange:
        node = self.checked[int(flag[0]) - 1]
        rows = node.srcs[0].shape[0] if node.op is Op.GATHER else node.arg
        return IndexOutOfRange(op_name(node), node.site, it, rows, int(flag[4]),
                               int(flag[5]), int(flag[6]))

    # -- feeders ------------------------------------------------------------------------------
    def _call_feed(self, f: Feed, into: np.ndarray | None = None) -> None:
        """Call Feeder ``f`` and copy its value into a staging array (``f.pending``), or
        into ``into`` (a row of a block's array, :meth:`_block_rows`; written later by
        :meth:`_write_rows`); record it for a replay. A replay takes the recorded value.

        Raises:
            FeederError: the callback raised, or its value has the wrong shape or dtype.
        """
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
        plain = f.plain
        a = self._staging.take(f.shape, f.dtype) if into is None else into
        if plain is not None and type(v) is np.ndarray and v.shape == plain[0] and \
                v.dtype == plain[1]:
            a[...] = v                          # (0.9 us less than np.copyto's dispatch)
        else:
            try:
                check_feed(f.spec, v, it)
            except FeederError:
                if into is None:
                    self._staging.release([a])
                self._drain()
                raise
            np.copyto(a, v)
        if self._record is not None and it:
            self._record.append(a)
        elif into is None:                      # a Feeder outside any loop
            self._keep_unrecorded(a)
        if into is None:
            f.pending = a

    def _keep_unrecorded(self, a: np.ndarray) -> None:
        """Staging array ``a`` (outside the checkpoints' records; its write to the arena
        is about to be enqueued) stays in use until :meth:`_release_unrecorded` after a
        later sync."""
        self._unrecorded.append(a)

    def _release_unrecorded(self) -> None:
        """Called right after a write from a staging array was enqueued: once more than
        :data:`STAGING_UNRECORDED` arrays are kept, a sync completes their writes and
        returns them to the pool. Never from :meth:`_keep_unrecorded` itself: there the
        newest array's write is not enqueued yet, and released before it, the array went
        to the next value taken, which the device then wrote in this one's place (one
        rank's ``all_reduce`` result arriving with the next collective's values)."""
        if len(self._unrecorded) > STAGING_UNRECORDED:
            self.queue.finish()
            self._staging.release(self._unrecorded)
            self._unrecorded = []

    def _write_feed(self, f: Feed) -> None:
        if not f.pending.size:
            f.pending = None
            return
        at = f.offset
        if type(f) is RingFeed:             # the next slot of its ring
            at = f.ring + (f.count % f.slots) * f.stride
            f.count += 1
        # keep the event: dropping a pyopencl NannyEvent blocks until the copy is done
        self._events.append(self._write(self.queue, self.arena, f.pending, at))
        f.pending = None
        self._release_unrecorded()

    # -- receivers ------------------------------------------------------------------------------
    def _receive(self, r: Receive) -> None:
        import pyopencl as cl
        flag = None
        if self.checked:                    # the error record first: a bad index earlier in
            flag = self._flag_array()       # the iteration stops it before this Receiver
            cl.enqueue_copy(self.queue, flag, self.arena, src_offset=self.flag_offset,
                            is_blocking=False)
        arrays = r.free.pop() if r.free else [np.empty(shape, dtype)
                                              for _, shape, dtype in r.parts]
        ev = None
        for (off, _, _), a in zip(r.parts, arrays):
            if a.size:
                ev = self._read(self.queue, a, self.arena, off)
        if ev is None:                      # only empty values: order by a marker
            ev = cl.enqueue_marker(self.queue)
        self._pending.append(self._pending_item(ev, r, arrays, flag))

    def _ring_receive(self, r: RingReceive) -> None:
        """This iteration's values are in ring slot ``r.count % r.slots`` (the device copied
        them): a pending item without a read yet; a full ring is read at once (before the
        next iteration can overwrite its oldest slot)."""
        it = tuple(self._iters)
        p = Pending(None, r, None, None, it, it[-1] if it else -1, it[0] if it else None,
                    r.count % r.slots)
        r.count += 1
        r.unread.append(p)
        self._pending.append(p)
        if len(r.unread) == r.slots:
            self._read_ring(r)

    def _read_ring(self, r: RingReceive) -> None:
        """One non-blocking read of ring ``r`` into a new array; its unread items get the
        event and their slot's values: views of that array, which nothing else writes or
        reuses, so :meth:`_finish_one` hands them over without a copy."""
        host = np.empty(r.slots * r.stride, np.uint8)
        ev = self._read(self.queue, host, self.arena, r.ring)
        parts = r.split(host)
        for p in r.unread:
            p.event = ev
            p.arrays = [x[p.slot, ...] for x in parts]     # (0-d arrays, not scalars)
        r.unread = []

    def _throttle(self, most: int) -> None:
        """In a loop without Feeders: keep fewer than ``most`` reads in flight."""
        while len(self._pending) >= most:
            self._finish_one(wait=True)

    def _poll(self) -> None:
        import pyopencl as cl
        done = cl.command_execution_status.COMPLETE
        while self._pending and self._pending[0].event is not None and \
                self._pending[0].event.command_execution_status == done:
            self._finish_one(wait=False)

    def _run_due(self, k: int) -> None:
        """Hand the host every read of iterations ``<= k`` of the loop being run."""
        while self._pending and self._pending[0].k <= k:
            self._finish_one(wait=True)

    def _drain(self) -> None:
        while self._pending:
            self._finish_one(wait=True)

    def _finish_one(self, wait: bool) -> None:
        """The oldest read: its error record checked, then its Receiver called; removed
        only once that returned (an interrupt inside leaves its iteration incomplete)."""
        p = self._pending[0]
        if p.event is None:                 # a ring slot not read yet: read the ring now
            self._read_ring(p.recv)
        if wait and p.event is not self._waited:    # a ring's items share one read
            p.event.wait()
            self._waited = p.event
        if p.flag is not None and p.flag[0]:
            raise self._index_error(p.flag, p.iters)
        if p.recv is not None:
            ring = p.slot >= 0      # views of a ring read's own array (:meth:`_read_ring`)
            try:
                p.recv.spec.fn(*[(a if ring else a.copy()) if dt is None else a.astype(dt)
                                 for a, dt in zip(p.arrays, p.recv.hosts)])
            except Exception as e:
                raise ReceiverError(p.recv.spec.name, p.iters,
                                    f"callback raised {type(e).__name__}: {e}") from e
        self._pending.popleft()
        if type(p.recv) is Receive:
            p.recv.free.append(p.arrays)
        if p.flag is not None:
            self._flags.append(p.flag)


def _as_compiled(la: Launch) -> None:
    """Leave the kernel object of block launch ``la`` as compiled (:data:`.chain.ONCE`):
    one iteration per launch, no counter or Philox word advanced."""
    reps, ctr, wrd, wstep = ONCE
    _set_reps(la, reps)
    _set_ctr(la, ctr)
    _set_wrd(la, wrd, wstep)


def _word_step(depth: int) -> tuple[int, int]:
    """(arena word, uint32 step as an int32) by which the Philox iteration words
    (:func:`~autodiff.graph.rng.iteration_words`) change when the index of the loop at
    ``depth`` goes up by one: the outermost loop's index is word ``c2``, the others enter
    ``c3`` times ``FOLD ** (depth - 1)``."""
    if depth == 0:
        return philox.ITER_WORDS, 1
    step = pow(FOLD, depth - 1, 1 << 32)
    return philox.ITER_WORDS + 1, step - (1 << 32) if step >= 1 << 31 else step


def _set_wrd(la: Launch, word: int, step: int) -> None:
    """Launch ``la`` advances the Philox iteration word at arena word ``word`` by
    ``step`` after each repeat from now on (-1: none)."""
    if la.wrd != word:
        set_int_args(la.kernel, la.reps_arg + 2, (word, step))
        la.wrd = word


def _set_ctr(la: Launch, word: int) -> None:
    """Launch ``la`` (an iteration block's chain) advances the counter at arena word
    ``word`` after each repeat from now on (-1: none)."""
    if la.ctr != word:
        set_int_args(la.kernel, la.reps_arg + 1, (word,))
        la.ctr = word


def _set_reps(la: Launch, n: int) -> None:
    """Launch ``la`` (an iteration block's chain) runs ``n`` iterations from now on."""
    if la.reps != n:
        set_int_args(la.kernel, la.reps_arg, (n,))
        la.reps = n


def _blocks(s) -> list:
    """The step lists inside step ``s``: a loop's body, a branch's or while loop's blocks."""
    if type(s) is Loop:
        return [s.body]
    if type(s) is control.IfStep:
        return [s.then, s.orelse]
    if type(s) is control.WhileStep:
        return [s.cond, s.body]
    return []


def _ring_depth(lp: Loop) -> int:
    """The slots of loop ``lp`` 's Receiver rings (:data:`RING` without any: rings in one
    body have one depth, :mod:`.rings`)."""
    return max((r.slots for r in lp.body if type(r) is RingReceive), default=RING)


def _loops(steps):
    for s in steps:
        if type(s) is Loop:
            yield s
        for blk in _blocks(s):
            yield from _loops(blk)


def _feeds(steps, kind=Feed):
    """The steps of type ``kind`` (default: Feeds, ring Feeds included) in ``steps``,
    nested blocks included."""
    for s in steps:
        if isinstance(s, kind):
            yield s
        for blk in _blocks(s):
            yield from _feeds(blk, kind)


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
