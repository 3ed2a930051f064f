"""``LayerNorm`` with PyTorch's parameter names, layout and defaults."""
from __future__ import annotations

import numbers

import numpy as np

from ..graph.tensor import Tensor
from . import functional as F
from .module import Module, Parameter


class LayerNorm(Module):
    """Normalise over the trailing ``normalized_shape`` dims (``torch.nn.LayerNorm``).

    ``y = (x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance.

    Args:
        normalized_shape: int or tuple: the trailing dims of the input.
        eps: added to the variance.
        elementwise_affine: learn ``weight`` (ones) and ``bias`` (zeros) of
            ``normalized_shape``.
        bias: with ``elementwise_affine``, also learn ``bias``.

    Input ``[..., *normalized_shape]`` float32 -> same shape.
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) \
            else tuple(normalized_shape)
        self.normalized_shape = tuple(int(d) for d in shape)
        self.eps, self.elementwise_affine = float(eps), elementwise_affine
        self.weight = Parameter(np.ones(self.normalized_shape)) if elementwise_affine else None
        self.bias = Parameter(np.zeros(self.normalized_shape)) \
            if elementwise_affine and bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, " \
               f"elementwise_affine={self.elementwise_affine}"
