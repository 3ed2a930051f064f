"""Sliding windows: ``Tensor.unfold``, the view that convolutions and pooling are built on."""
from __future__ import annotations

from .. import ops
from .dims import norm_dim


class WindowMixin:
    """``unfold``: every ``size``-long window of one dim, as a new last dim (a view)."""

    def unfold(self, dimension: int, size: int, step: int):
        """Windows of ``size`` elements along ``dimension``, starting every ``step``
        elements, as ``torch.Tensor.unfold``.

        ``x [..., L, ...] -> [..., (L - size) // step + 1, ..., size]``:
        ``out[..., o, ..., k] = x[..., o*step + k, ...]``. Nothing is copied: the result is
        an index map over ``x`` (graph op ``WINDOW``), and its gradient adds each window
        element back where it came from (overlapping windows add up).

        >>> Tensor([0., 1, 2, 3, 4]).unfold(0, 2, 2)    # [[0, 1], [2, 3]]

        A 0-d tensor counts as one element along dim 0 (or -1): with ``size`` 1 it gives
        ``[1]``, as PyTorch's does.

        Raises:
            ShapeError: ``size`` or ``step`` below 1, ``size`` longer than the dim, or a
                ``dimension`` out of range.
        """
        from ..tensor import _wrap
        if self.ndim == 0:
            norm_dim(dimension, 0, ())          # only -1 and 0: else PyTorch's IndexError
            return self.reshape(1).unfold(0, size, step).reshape(1)
        return _wrap(ops.window(self.node, dimension, size, step))
