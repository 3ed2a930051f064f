"""Host callbacks shared by every device: calling Feeders and Receivers with the errors the
user sees (:class:`~autodiff.FeederError` / :class:`~autodiff.ReceiverError` naming the
callback and the loop iteration)."""
from __future__ import annotations

import numpy as np

from ..errors import FeederError, ReceiverError
from ..graph import dtypes


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
    """``spec.fn()``, checked against the Feeder's shape and dtype.

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
    return dtypes.to_storage(v, spec.dtype)


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
