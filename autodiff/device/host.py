"""Host logic shared by every device: calling Feeders and Receivers with the errors the
user sees (:class:`~autodiff.FeederError` / :class:`~autodiff.ReceiverError` naming the
callback and the loop iteration), and the memory check made before a program runs."""
from __future__ import annotations

import os

import numpy as np

from ..errors import DeviceOutOfMemory, FeederError, ReceiverError
from ..graph import dtypes
from ..graph.ir import MOVEMENT, Op

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
