"""Host functions inside the program on the OpenCL device (graph ``CALLBACK``:
``autodiff.host_callback`` and the collectives of :mod:`autodiff.distributed`): a host
boundary in the queue that does not stop it.

The lowering emits a callback as two statements (:mod:`autodiff.procedural.lower`): the
operands' read (:class:`~autodiff.procedural.ir.CallbackRead`) as soon as they are ready,
the result's write (:class:`~autodiff.procedural.ir.CallbackWrite`) as late as its readers
allow, with every kernel that does not need the result in between. Here they are two host
steps:

* :class:`CallRead`: non-blocking reads of the operand staging buffers (arena) into pinned
  host arrays; the host goes on enqueueing the kernels after it.
* :class:`CallWrite`: the host waits for *that read only* (never for the queue: the
  kernels enqueued since keep the device busy), calls the function
  (:func:`~autodiff.device.host.call_callback`; for a collective, the MPI all-reduce),
  copies the result into a pinned staging array and enqueues its non-blocking write into
  the arena; the result's readers are enqueued behind it on the in-order queue.

So under ``DistributedDataParallel`` bucket ``k``'s copy and all-reduce run while the
device computes the backward of bucket ``k + 1`` (the kernels between the two steps), and
the optimizer's kernels of bucket ``k`` wait only for bucket ``k``'s result. The steps are
not launches, so a launch chain (:mod:`.chain`) never crosses them. ``report.stats
["opencl"]["callbacks"]`` lists, per block holding callbacks, the host steps in the order
the host runs them (``read``/``write`` of each callback, ``launch xN`` between), and
``callback_wait_s`` / ``callback_host_s`` the seconds the host waited for operand reads
and spent in the functions.

Failures, as on every device: a function that raises (or returns a wrong value) stops the
run with :class:`~autodiff.errors.CallbackError` for its iteration, once the Receivers of
earlier iterations have run; a :class:`~autodiff.errors.DistributedError` (another process
failed) propagates unchanged and runs no pending Receiver (whose error would be a second
one). Recovery: each result's staging array is kept with the outermost loop's checkpoint,
as Feeder values are, and a replay (:meth:`.runtime.Executable._restore`) writes the
recorded results back instead of calling the function again (a collective runs once per
iteration on every process).
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ...errors import DistributedError
from ..host import call_callback


@dataclass(eq=False)
class CallRead:
    """Arena -> host: non-blocking reads of the operands ``parts`` = [(offset bytes,
    shape, dtype)] of callback ``spec`` into pinned arrays (``arrays``, allocated at the
    first run), completing ``event``."""
    spec: object
    parts: list
    label: str
    arrays: list | None = None
    event: object = None

    def run(self, exe) -> None:
        import pyopencl as cl
        if exe._replay is not None:         # a replay writes the recorded result
            return
        if self.arrays is None:
            self.arrays = [exe._staging._pinned(shape, dtype, 1)[0] if int(np.prod(shape))
                           else np.empty(shape, dtype) for _, shape, dtype in self.parts]
        ev = None
        for (off, _, _), a in zip(self.parts, self.arrays):
            if a.size:
                ev = cl.enqueue_copy(exe.queue, a, exe.arena, src_offset=off,
                                     is_blocking=False)
        self.event = ev


@dataclass(eq=False)
class CallWrite:
    """Host -> arena: wait for ``read``, call the function, write its result (``shape``,
    storage ``dtype``) at ``offset`` with a non-blocking copy."""
    read: CallRead
    offset: int
    shape: tuple
    dtype: str

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize

    def run(self, exe) -> None:
        import pyopencl as cl
        if exe._replay is not None:
            a = exe._replay_results.popleft()
        else:
            a = self._call(exe)
        if a.size:
            # keep the event: dropping a pyopencl NannyEvent blocks until the copy is done
            exe._events.append(cl.enqueue_copy(exe.queue, exe.arena, a, dst_offset=self.offset,
                                               is_blocking=False))
        exe._release_unrecorded()       # (only now: a's write is enqueued)

    def _call(self, exe) -> np.ndarray:
        r = self.read
        it = tuple(exe._iters)
        t0 = time.perf_counter()
        if r.event is not None:
            r.event.wait()                  # this read only: later kernels keep running
        t1 = time.perf_counter()
        try:
            v = call_callback(r.spec, it, r.arrays, copy=not r.spec.collective)
        except DistributedError:
            raise                           # another process failed: no second error here
        except Exception:
            exe._drain()                    # earlier Receivers run first (their error first)
            raise
        finally:
            r.event = None
            st = exe.stats
            st["callback_wait_s"] = st.get("callback_wait_s", 0.0) + (t1 - t0)
            st["callback_host_s"] = st.get("callback_host_s", 0.0) + (
                time.perf_counter() - t1)
        a = exe._staging.take(self.shape, self.dtype)
        np.copyto(a, v.reshape(self.shape))
        if exe._record is not None and it:
            exe._ckpts[-1].results.append(a)    # replayed after a stop (see the module doc)
        else:                                   # outside the outermost loop's checkpoints
            exe._keep_unrecorded(a)
        return a


#: host steps the runtime hands to their ``run(exe)``
STEPS = (CallRead, CallWrite)


def steps_for(stmt, off: dict, steps: list, storage) -> object:
    """The host step of a ``CallbackRead`` / ``CallbackWrite`` statement ``stmt`` (buffer
    float offsets ``off``); a write finds its read among ``steps`` (the same block)."""
    from ...procedural.ir import CallbackRead
    call = stmt.call
    label = f"{call.spec.name}#{call.node}"
    if isinstance(stmt, CallbackRead):
        return CallRead(call.spec, [(off[b.name] * 4, tuple(b.shape), storage(b.dtype))
                                    for b in call.args], label)
    read = next(s for s in reversed(steps) if type(s) is CallRead and s.label == label)
    b = call.result
    return CallWrite(read, off[b.name] * 4, tuple(b.shape), storage(b.dtype))


def trace(steps: list, blocks) -> list[list[str]]:
    """Per block (top level, loop bodies, branches) holding callbacks, its host steps in
    order: ``read <callback>``, ``write <callback>``, ``launch xN`` (N launches in a row),
    ``feed``, ``receive``, ``loop``, ``control``. ``blocks(step)`` gives a step's blocks."""
    out = []

    def walk(blk):
        if any(type(s) in STEPS for s in blk):
            line: list[str] = []
            for s in blk:
                kind = type(s).__name__
                if kind == "Launch":
                    n = int(line.pop().split("x")[1]) if line and line[-1].startswith(
                        "launch x") else 0
                    line.append(f"launch x{n + 1}")
                elif type(s) is CallRead:
                    line.append(f"read {s.label}")
                elif type(s) is CallWrite:
                    line.append(f"write {s.read.label}")
                else:
                    line.append({"Feed": "feed", "Receive": "receive",
                                 "Loop": "loop"}.get(kind, "control"))
            out.append(line)
        for s in blk:
            for b in blocks(s):
                walk(b)
    walk(steps)
    return out
