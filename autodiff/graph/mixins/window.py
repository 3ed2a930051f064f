"""Sliding windows: ``Tensor.unfold``, the view that convolutions and pooling are built on."""
from __future__ import annotations

from .. import ops


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

        Raises:
            ShapeError: ``size`` or ``step`` below 1, ``size`` longer than the dim, or a
                ``dimension`` out of range.
        """
        from ..tensor import _wrap
        return _wrap(ops.window(self.node, dimension, size, step))
