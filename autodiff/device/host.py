"""Host logic shared by every device.

* Calling Feeders and Receivers with the errors the user sees
  (:class:`~autodiff.FeederError` / :class:`~autodiff.ReceiverError` naming the callback
  and the loop iteration); index checks (:func:`check_indices`,
  :class:`~autodiff.errors.IndexOutOfRange`).
* The order contract of host callbacks (``execute(prefetch=n)``, :func:`prefetch_option`):
  Feeders among themselves and Receivers among themselves always run in program order.
  With ``prefetch=0`` every callback runs in program order, as if the program ran step by
  step on the host: the Feeders of iteration ``k + 1`` run only after every Receiver of
  iterations ``<= k`` has returned. With ``prefetch=n > 0``, in a loop whose body holds no
  nested loop, the Feeders of iteration ``k + n`` have been called when the Receivers of
  iteration ``k`` run, and the Feeders of iteration ``k + n + 1`` are not called before
  they return: Feeders run exactly ``n`` iterations ahead (fewer at the loop's end). Other
  loops (with a nested loop) and code outside loops keep program order. A device may
  implement the rule eagerly (:class:`FeedAhead`: numpy, TVM: at the start of iteration
  ``k`` call the Feeders through ``k + n``) or lazily (OpenCL: run the Receivers of ``k``
  just before the Feeders of ``k + n + 1``); the order the user sees is the same.
* Where a stopped run leaves the variables (:class:`Progress`): a failing callback, an
  out-of-range index or an interrupt in iteration ``k`` of the outermost loop leaves the
  values after ``k`` completed iterations (after the last iteration whose callbacks all
  returned, for an interrupt), and the error says so and how many Feeder calls were made
  beyond them. Under the rule above that count is the same on every device.
* The memory check made before a program runs, and :func:`deferred_interrupts` for the
  short critical sections of a host loop.
* Host functions inside the program (``CALLBACK``: :func:`call_callback`); every device
  runs them.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading

import numpy as np

from ..errors import (CallbackError, DeviceOutOfMemory, DistributedError, FeederError,
                      IndexOutOfRange, ReceiverError, describe_stop)
from ..graph import dtypes
from ..graph.ir import MOVEMENT, Op

#: ``execute(prefetch=None)``: how many iterations ahead of the Receivers Feeders run
DEFAULT_PREFETCH = 15
#: the largest ``prefetch`` accepted
MAX_PREFETCH = 1024


def prefetch_option(prefetch) -> int:
    """``prefetch`` checked (None: :data:`DEFAULT_PREFETCH`).

    Raises:
        ValueError: not None and not an int in ``[0, MAX_PREFETCH]``.
    """
    if prefetch is None:
        return DEFAULT_PREFETCH
    if isinstance(prefetch, bool) or not isinstance(prefetch, (int, np.integer)) or \
            not 0 <= prefetch <= MAX_PREFETCH:
        raise ValueError(f"prefetch must be None or an int in [0, {MAX_PREFETCH}], got "
                         f"{prefetch!r}")
    return int(prefetch)


class Progress:
    """Where a run is, for the errors it raises and for recovery.

    The device reports the outermost loop it runs (:meth:`enter` / :meth:`leave`), each
    Feeder call with the outermost iteration it belongs to (:meth:`fed`), the iterations
    completed (:meth:`done`: their variables, Receivers and index checks are final), and,
    when it stops, the iteration whose start the variables were restored to
    (:meth:`stopped`). :meth:`describe` then adds that to the error.
    """

    def __init__(self) -> None:
        self.site: str | None = None
        self.completed = 0
        self.calls: dict[int, int] = {}
        self.stop: tuple | None = None       # (site, completed, calls, first, last)
        self.left: tuple | None = None       # (site, iterations) of the last loop run

    def enter(self, site: str) -> None:
        self.site, self.completed, self.calls = site, 0, {}

    def leave(self) -> None:
        self.left = (self.site, self.completed)
        self.site, self.calls = None, {}

    def finished(self, n: int) -> None:
        """The outermost loop ran all its ``n`` iterations: recorded before its cleanup,
        so that an interrupt landing there (before :meth:`leave`) still names the loop as
        run to the end rather than as no loop at all. Ctrl-C is deferred while it records
        (an interrupt between dropping the iterations' Feeder calls and naming the loop
        would leave neither); the caller then keeps the final values."""
        with deferred_interrupts():
            self.done(n)
            self.left = (self.site, n)

    def fed(self, k: int) -> None:
        """A Feeder call for outermost iteration ``k``."""
        self.calls[k] = self.calls.get(k, 0) + 1

    def done(self, k: int) -> None:
        """Iterations ``< k`` of the outermost loop are complete."""
        if k > self.completed:
            self.completed = k
            for j in [j for j in self.calls if j < k]:
                del self.calls[j]

    def stopped(self, k: int) -> None:
        """The run stops with the variables as at the start of iteration ``k``."""
        ahead = {j: c for j, c in self.calls.items() if j >= k}
        self.stop = (self.site, k, sum(ahead.values()), min(ahead, default=None),
                     max(ahead, default=None))

    def describe(self, err: BaseException) -> None:
        """Add the stop (if any) to ``err`` (:func:`~autodiff.errors.describe_stop`)."""
        if self.stop is not None:
            describe_stop(err, *self.stop)
        else:
            describe_stop(err, None, None, 0)


class FeedAhead:
    """The prefetch rule applied eagerly, for one run of a loop whose body holds no nested
    loop: before iteration ``k`` starts, the Feeders of iterations up to ``k + prefetch``
    have been called, in iteration order and each iteration's in program order
    (:meth:`take`). A Feeder that raises stops the calls; its error is raised by
    :meth:`take` for its iteration, once the earlier iterations have run.

    Args:
        feeders: ``(key, FeederSpec)`` of the body, in program order.
        length: iterations of the loop.
        prefetch: iterations ahead (``>= 1``; 0 means: call each Feeder in place).
        prefix: indices of the enclosing loops (outermost first).
        progress: receives :meth:`Progress.fed` for each call.
        outer: the outermost iteration a call of iteration ``j`` belongs to.
    """

    def __init__(self, feeders, length: int, prefetch: int, prefix: tuple, progress,
                 outer) -> None:
        self.feeders, self.length, self.prefetch = feeders, length, prefetch
        self.prefix, self.progress, self.outer = prefix, progress, outer
        self.values: dict[int, dict] = {}
        self.next = 0
        self.error: FeederError | None = None

    def take(self, k: int) -> dict:
        """The Feeder values of iteration ``k`` (key -> array), after calling the Feeders
        through ``k + prefetch``.

        Raises:
            FeederError: a Feeder of iteration ``k`` failed (now or when called ahead).
        """
        self.fill(k + self.prefetch)
        if self.error is not None and self.error.iteration[-1] == k:
            raise self.error
        return self.values.pop(k)

    def fill(self, last: int) -> None:
        """Call the Feeders of iterations up to ``last`` (within the loop) not called yet."""
        while self.error is None and self.next <= min(last, self.length - 1):
            j = self.next
            it = self.prefix + (j,)
            vals = {}
            for key, spec in self.feeders:
                self.progress.fed(self.outer(j))
                try:
                    vals[key] = call_feeder(spec, it)
                except FeederError as e:
                    self.error = e
                    break
            else:
                self.values[j] = vals
            self.next += 1


def check_indices(idx: np.ndarray, rows: int, node, it: tuple) -> None:
    """Raise :class:`~autodiff.errors.IndexOutOfRange` for ``node`` (a ``GATHER`` or
    ``SCATTER_ADD`` graph node; ``arg`` of a ``GATHER`` may name what the user called) if
    an index of ``idx`` is outside ``[0, rows)``."""
    if not idx.size:
        return
    lo, hi = int(idx.min()), int(idx.max())
    if lo >= 0 and hi < rows:
        return
    bad = idx[((idx < 0) | (idx >= rows)) & (idx != ignored(node))]
    if not bad.size:
        return
    raise IndexOutOfRange(op_name(node), node.site, it, rows, bad.size, int(bad.min()),
                          int(bad.max()))


def op_name(node) -> str:
    """What the user called for an index-checked node: a ``GATHER``'s label, else its op."""
    if node.op is Op.GATHER and node.arg is not None:
        return node.arg[0]
    return "gather" if node.op is Op.GATHER else node.op.name.lower()


def ignored(node) -> int | None:
    """The index value a ``GATHER`` allows outside its range (read as row 0), or None."""
    return node.arg[1] if node.op is Op.GATHER and node.arg is not None else None


def safe_indices(idx: np.ndarray, node) -> np.ndarray:
    """``idx`` with the ignored value (:func:`ignored`) replaced by row 0."""
    ign = ignored(node)
    return idx if ign is None else np.where(idx == ign, 0, idx).astype(idx.dtype)

#: ops whose value is a view of their operand on the host (no allocation)
VIEWS = MOVEMENT - {Op.PAD, Op.CONCAT}


def available_memory() -> int | None:
    """Bytes of host memory available now (``psutil`` when installed, else ``sysconf``);
    None where neither can tell."""
    try:
        import psutil
        return int(psutil.virtual_memory().available)
    except ImportError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(nodes, device: str, available: int | None = None) -> None:
    """Raise :class:`~autodiff.errors.DeviceOutOfMemory` if one value of ``nodes`` (graph
    IR nodes the device materialises: every op but host views) is larger than the memory
    available (``available`` bytes, default :func:`available_memory`). Called before a
    program runs, so nothing is allocated and no variable changes."""
    available = available_memory() if available is None else available
    if available is None:
        return
    big = max((n for n in nodes if n.op not in VIEWS and n.op is not Op.FOR),
              key=lambda n: n.nbytes, default=None)
    if big is not None and big.nbytes > available:
        raise DeviceOutOfMemory(device, f"the {big.dtype} {list(big.shape)} value of "
                                        f"{big.op.name.lower()} (traced at {big.site})",
                                big.nbytes, available)


def check_feed(spec, v, it: tuple) -> None:
    """Raise :class:`FeederError` unless ``v`` is an array of the Feeder's shape and (host)
    dtype, with int64 values inside the int32 storage."""
    if not isinstance(v, np.ndarray):
        raise FeederError(spec.name, it, f"expected a numpy array of shape {list(spec.shape)} "
                                         f"{spec.dtype}, got {type(v).__name__}")
    if tuple(v.shape) != tuple(spec.shape) or v.dtype != dtypes.host(spec.dtype):
        raise FeederError(spec.name, it, f"expected shape {list(spec.shape)} {spec.dtype}, "
                                         f"got shape {list(v.shape)} {v.dtype}")
    try:
        dtypes.check_range(v, spec.dtype)
    except OverflowError as e:
        raise FeederError(spec.name, it, str(e)) from None


def call_feeder(spec, it: tuple) -> np.ndarray:
    """A copy of ``spec.fn()``'s array, checked against the Feeder's shape and dtype.

    The copy is the device's own: a callback may refill and return the same array at every
    call (every device copies or fully consumes a Feeder's value before calling that
    Feeder again).

    Args:
        spec: the node's :class:`~autodiff.graph.ir.FeederSpec`.
        it: the loop indices, outermost first (``()`` outside loops).

    Raises:
        FeederError: the callback raised or returned a wrong value.

    Returns:
        The value in the device storage dtype (int64 as int32).
    """
    try:
        v = spec.fn()
    except Exception as e:
        raise FeederError(spec.name, it, f"callback raised {type(e).__name__}: {e}") from e
    check_feed(spec, v, it)
    return np.array(dtypes.to_storage(v, spec.dtype), order="C", copy=True)


def call_receiver(spec, it: tuple, arrays) -> None:
    """``spec.fn(*arrays)`` with fresh numpy copies the callback may keep, in the host
    dtypes of ``spec.dtypes`` (device storage arrays are converted: int32 -> int64).

    Raises:
        ReceiverError: the callback raised (chained as ``__cause__``).
    """
    dts = spec.dtypes or (None,) * len(arrays)
    arrays = [np.array(a) if dt is None else np.array(a, dtype=dtypes.host(dt))
              for a, dt in zip(arrays, dts)]
    try:
        spec.fn(*arrays)
    except Exception as e:
        raise ReceiverError(spec.name, it, f"callback raised {type(e).__name__}: {e}") from e


def call_callback(spec, it: tuple, arrays, copy: bool = True) -> np.ndarray:
    """``spec.fn(*arrays)`` for a ``CALLBACK`` node (``spec``: its
    :class:`~autodiff.graph.ir.CallbackSpec`), with fresh numpy copies of the operand
    values (device storage arrays in, host dtypes given to ``fn``); returns the result
    checked against ``spec.shape``/``spec.dtype`` and converted to the device storage
    dtype (a C-contiguous array the device owns).

    ``copy=False`` (for functions known not to keep their arguments nor return them, the
    collectives of :mod:`autodiff.distributed`): operands already in their host dtype are
    passed as they are, and the result is returned without a copy when it is already in
    the storage dtype (the caller copies it where it needs).

    Raises:
        CallbackError: the function raised or returned a wrong value.
        DistributedError: raised by a collective (another process failed): unchanged.
    """
    dts = spec.dtypes or (None,) * len(arrays)
    arrays = [np.array(a, copy=copy or None) if dt is None
              else np.array(a, dtype=dtypes.host(dt), copy=copy or None)
              for a, dt in zip(arrays, dts)]
    try:
        v = spec.fn(*arrays)
    except DistributedError:
        raise
    except Exception as e:
        raise CallbackError(spec.name, it, f"callback raised {type(e).__name__}: {e}") from e
    if not isinstance(v, np.ndarray) or tuple(v.shape) != tuple(spec.shape) or \
            v.dtype != dtypes.host(spec.dtype):
        got = (f"shape {list(v.shape)} {v.dtype}" if isinstance(v, np.ndarray)
               else type(v).__name__)
        raise CallbackError(spec.name, it, f"expected a numpy array of shape "
                                           f"{list(spec.shape)} {spec.dtype}, got {got}")
    return np.array(dtypes.to_storage(v, spec.dtype), order="C", copy=copy or None)


@contextlib.contextmanager
def deferred_interrupts():
    """Within the block, Ctrl-C (SIGINT) is recorded instead of raised; leaving the block
    raises ``KeyboardInterrupt`` if one came. For the host loop's short critical sections
    (a checkpoint, a recovery, writing variables back) that must not be torn. Only in the
    main thread with Python's default SIGINT handler; elsewhere the block runs as is."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    got = []
    prev = signal.signal(signal.SIGINT, lambda sig, frame: got.append(sig))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, prev)
        if got:
            raise KeyboardInterrupt
