"""Activation modules with PyTorch's names and defaults: ``GELU``, ``Softmax``, ``LogSoftmax``."""
from __future__ import annotations

from ..graph.tensor import Tensor
from . import functional as F
from .module import Module


class GELU(Module):
    """Gaussian error linear unit (``torch.nn.GELU``), elementwise, float32.

    Args:
        approximate: ``"none"`` (exact, ``0.5 x (1 + erf(x / sqrt 2))``) or ``"tanh"``.

    Raises:
        ValueError: unknown ``approximate``.
    """

    def __init__(self, approximate: str = "none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Softmax(Module):
    """Softmax along ``dim`` (max-subtracted, stable for large inputs).

    Args:
        dim: the dim that sums to 1; ``None`` means the last dim (PyTorch's implicit-dim
            rule is deprecated there and not reproduced here).
    """

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x, -1 if self.dim is None else self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """``log(softmax(x))`` along ``dim``, computed as ``x - max - log(sum(exp(x - max)))``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.log_softmax(x, -1 if self.dim is None else self.dim)
