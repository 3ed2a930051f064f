"""Basic layers with PyTorch's names, parameter layouts and default initialisation."""
from __future__ import annotations

import math

import numpy as np

from ..graph.tensor import Tensor, default_rng
from .module import Module, Parameter


def _uniform(shape, bound: float) -> Parameter:
    return Parameter(default_rng().uniform(-bound, bound, shape))


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight [out, in]``, ``bias [out]``.

    Initialisation as ``torch.nn.Linear``: U(-1/sqrt(in), 1/sqrt(in)) for both (the
    kaiming-uniform with a=sqrt(5) that PyTorch uses reduces to this bound).
    Input ``[..., in]`` -> output ``[..., out]``, float32.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(np.zeros((out_features, in_features), np.float32))
        self.bias = Parameter(np.zeros(out_features, np.float32)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's initialisation, drawn now from the global generator:
        U(-1/sqrt(in_features), 1/sqrt(in_features)) for the weight, then the bias."""
        from . import init
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, x: Tensor) -> Tensor:
        from .functional import linear     # leading dims folded: one 2-D DOT, not batched
        return linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, " \
               f"bias={self.bias is not None}"


class ReLU(Module):
    """``torch.nn.ReLU``: ``max(x, 0)``; with ``inplace`` the input tensor takes the result,
    as in PyTorch (:func:`autodiff.nn.functional.relu`)."""

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, x):
        from .functional import relu
        return relu(x, self.inplace)


class Sigmoid(Module):
    def forward(self, x): return x.sigmoid()


class Tanh(Module):
    def forward(self, x): return x.tanh()


class Identity(Module):
    """``torch.nn.Identity``: returns its input (constructor arguments are ignored)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x): return x


class Flatten(Module):
    """``torch.nn.Flatten``: dims ``start_dim..end_dim`` merged into one (a view)."""

    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """``torch.nn.Unflatten``: dim ``dim`` split into ``unflattened_size`` (one entry may be
    -1).

    Raises:
        ShapeError: the sizes do not multiply to the dim's size.
    """

    def __init__(self, dim: int, unflattened_size):
        super().__init__()
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x: Tensor) -> Tensor:
        d = self.dim % x.ndim
        return x.reshape(*x.shape[:d], *self.unflattened_size, *x.shape[d + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor,
             bias: Tensor | None = None) -> Tensor:
    """``y[..., o] = input1 @ weight[o] @ input2 + bias[o]``, as
    ``torch.nn.functional.bilinear``.

    Args:
        input1: float32 ``[..., in1]``; input2: ``[..., in2]`` with the same leading dims.
        weight: ``[out, in1, in2]``; bias: optional ``[out]``.

    Returns:
        ``[..., out]``: one DOT (``input1 @ weight`` laid out ``[in1, out * in2]``), a
        product with ``input2`` and a sum.

    Raises:
        ShapeError: (a ``RuntimeError`` as PyTorch's, and a ``ValueError``) leading dims
            that differ, or feature sizes that do not fit ``weight`` / ``bias``.
    """
    from ..errors import ShapeError
    from ..graph.trace import user_site
    shapes = [input1.shape, input2.shape, weight.shape]
    if weight.ndim != 3 or input1.ndim < 1 or input1.shape[:-1] != input2.shape[:-1] \
            or input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2] \
            or (bias is not None and tuple(bias.shape) != (weight.shape[0],)):
        raise ShapeError("bilinear", shapes + ([bias.shape] if bias is not None else []),
                         user_site(), "expected input1 [..., in1], input2 [..., in2], weight "
                         "[out, in1, in2] and bias [out]")
    o, i1, i2 = weight.shape
    lead = input1.shape[:-1]
    w = weight.permute(1, 0, 2).reshape(i1, o * i2)
    t = (input1.reshape(-1, i1) @ w).reshape(-1, o, i2)
    y = (t * input2.reshape(-1, 1, i2)).sum(-1).reshape(*lead, o)
    return y + bias if bias is not None else y


class Bilinear(Module):
    """``torch.nn.Bilinear``: ``y[..., o] = x1 @ weight[o] @ x2 + bias[o]``.

    ``weight [out, in1, in2]``, ``bias [out]``, both U(-1/sqrt(in1), 1/sqrt(in1)) as
    PyTorch. Inputs ``[..., in1]`` and ``[..., in2]`` -> ``[..., out]``; computed as one DOT
    (``x1 @ weight`` laid out ``[in1, out * in2]``), a product with ``x2`` and a sum.
    """

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True):
        super().__init__()
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        bound = 1.0 / math.sqrt(in1_features) if in1_features else 0.0
        self.weight = _uniform((out_features, in1_features, in2_features), bound)
        self.bias = _uniform((out_features,), bound) if bias else None

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        return bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in1_features={self.in1_features}, in2_features={self.in2_features}, " \
               f"out_features={self.out_features}, bias={self.bias is not None}"


from .containers import ModuleList, Sequential  # noqa: E402  (kept importable from here)
