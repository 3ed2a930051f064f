"""Dim arguments as PyTorch reads them: negative dims, ``dim=None`` for all, tuples."""
from __future__ import annotations

import functools
import numbers

from ...errors import DimError
from ..trace import user_site


def norm_dim(d, ndim: int, shape=None) -> int:
    """``d`` in ``[0, ndim)`` (a 0-d tensor accepts ``-1`` and ``0``, as in PyTorch).

    Raises:
        DimError: ``d`` is out of range (an ``IndexError``, PyTorch's type and wording,
            naming the user's ``file:line``).
        TypeError: ``d`` is not an integer.
    """
    if not isinstance(d, numbers.Integral) or isinstance(d, bool):
        raise TypeError(f"dim must be an int, got {type(d).__name__}")
    n = max(ndim, 1)
    if not -n <= d < n:
        raise DimError("dim", [shape if shape is not None else (None,) * ndim], user_site(),
                       f"Dimension out of range (expected to be in range of [{-n}, {n - 1}],"
                       f" but got {d})")
    return int(d) % n


def norm_dims(dim, ndim: int, shape=None) -> tuple[int, ...]:
    """The sorted dims meant by ``dim``: None, ``()`` (both every dim, as torch 2.13 reads
    ``sum(())``), an int, or a sequence of ints.

    Raises:
        IndexError: a dim is out of range.
        RuntimeError: a dim appears twice.
    """
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(ndim))
    dims = [dim] if isinstance(dim, numbers.Integral) else list(dim)
    out = [norm_dim(d, ndim, shape) for d in dims]
    if len(set(out)) != len(out):
        raise RuntimeError(f"dim {tuple(dims)} appears multiple times in the list of dims")
    return tuple(sorted(d for d in out if d < ndim))


def axis_alias(fn):
    """Accept PyTorch's ``axis=`` keyword as an alias of ``dim=``."""
    @functools.wraps(fn)
    def f(self, *args, **kw):
        if "axis" in kw:
            if "dim" in kw:
                raise TypeError(f"{fn.__name__}() got both 'dim' and its alias 'axis'")
            kw["dim"] = kw.pop("axis")
        return fn(self, *args, **kw)
    return f
