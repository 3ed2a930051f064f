"""Losses with PyTorch's names and reductions."""
from __future__ import annotations

from ..graph.tensor import Tensor
from .functional import cross_entropy, reduce_loss
from .module import Module


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean (or sum) of squared differences; shapes broadcast like PyTorch."""
    d = input - target
    return reduce_loss(d * d, reduction)


class MSELoss(Module):
    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        return mse_loss(input, target, self.reduction)


class CrossEntropyLoss(Module):
    """Cross-entropy from logits (``torch.nn.CrossEntropyLoss``, without class weights).

    ``forward(logits [N, C], target int32 [N]) -> scalar`` (mean over the non-ignored
    targets by default); see :func:`autodiff.nn.functional.cross_entropy` for the other
    shapes, probability targets, ``ignore_index`` and ``label_smoothing``.
    """

    def __init__(self, ignore_index: int = -100, reduction: str = "mean",
                 label_smoothing: float = 0.0):
        super().__init__()
        self.ignore_index, self.reduction = ignore_index, reduction
        self.label_smoothing = label_smoothing

    def forward(self, input: Tensor, target) -> Tensor:
        return cross_entropy(input, target, ignore_index=self.ignore_index,
                             reduction=self.reduction, label_smoothing=self.label_smoothing)
