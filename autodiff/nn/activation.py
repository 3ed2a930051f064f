"""Activation modules with PyTorch's names, arguments and defaults (``ReLU``, ``Sigmoid`` and
``Tanh`` live in :mod:`.layers`); each calls its ``autodiff.nn.functional`` form."""
from __future__ import annotations

import numpy as np

from ..graph.tensor import Tensor
from . import functional as F
from .module import REQUIRED, Module, Parameter, bind_arguments


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
        dim: the dim that sums to 1; ``None`` takes PyTorch's deprecated implicit dim (0
            for a 0-, 1- or 3-D input, else 1; with its warning).
    """

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """``log(softmax(x))`` along ``dim``, computed as ``x - max - log(sum(exp(x - max)))``."""

    def forward(self, x: Tensor) -> Tensor:
        return F.log_softmax(x, self.dim)


# -- one module per functional activation (torch.nn's names, arguments and defaults) -------
class _Elementwise(Module):
    """An activation module calling ``F.<fn>`` with the constructor's keyword arguments."""
    fn = ""
    args: tuple = ()

    def __init__(self, *args, **kwargs):
        super().__init__()
        for k, v in bind_arguments(type(self).__name__, self.args, args, kwargs).items():
            object.__setattr__(self, k, v)

    def forward(self, x: Tensor) -> Tensor:
        return getattr(F, self.fn)(x, **{k: getattr(self, k) for k, _ in self.args})

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={getattr(self, k)}" for k, _ in self.args if k != "inplace")


def _activation(name: str, fn: str, args=(), doc: str = ""):
    return type(name, (_Elementwise,), {"fn": fn, "args": tuple(args), "__doc__": doc or (
        f"``torch.nn.{name}``: :func:`autodiff.nn.functional.{fn}` elementwise "
        f"({', '.join(f'{k}={v!r}' for k, v in args) or 'no arguments'}).")})


LeakyReLU = _activation("LeakyReLU", "leaky_relu", [("negative_slope", 0.01), ("inplace", False)])
ELU = _activation("ELU", "elu", [("alpha", 1.0), ("inplace", False)])
CELU = _activation("CELU", "celu", [("alpha", 1.0), ("inplace", False)])
SELU = _activation("SELU", "selu", [("inplace", False)])
SiLU = _activation("SiLU", "silu", [("inplace", False)])
Mish = _activation("Mish", "mish", [("inplace", False)])
Softplus = _activation("Softplus", "softplus", [("beta", 1.0), ("threshold", 20.0)])
Softsign = _activation("Softsign", "softsign")
Hardtanh = _activation("Hardtanh", "hardtanh", [("min_val", -1.0), ("max_val", 1.0),
                                                ("inplace", False)])
ReLU6 = _activation("ReLU6", "relu6", [("inplace", False)])
Hardsigmoid = _activation("Hardsigmoid", "hardsigmoid", [("inplace", False)])
Hardswish = _activation("Hardswish", "hardswish", [("inplace", False)])
LogSigmoid = _activation("LogSigmoid", "logsigmoid")
GLU = _activation("GLU", "glu", [("dim", -1)])
Threshold = _activation("Threshold", "threshold", [("threshold", REQUIRED),
                                                   ("value", REQUIRED), ("inplace", False)])
Tanhshrink = _activation("Tanhshrink", "tanhshrink")
Softshrink = _activation("Softshrink", "softshrink", [("lambd", 0.5)])
Hardshrink = _activation("Hardshrink", "hardshrink", [("lambd", 0.5)])
LocalResponseNorm = _activation("LocalResponseNorm", "local_response_norm", [
    ("size", REQUIRED), ("alpha", 1e-4), ("beta", 0.75), ("k", 1.0)])


class RReLU(_Elementwise):
    """``torch.nn.RReLU``: :func:`autodiff.nn.functional.rrelu`, random slopes in training
    mode only."""
    fn = "rrelu"
    args = (("lower", 1.0 / 8), ("upper", 1.0 / 3), ("inplace", False))

    def forward(self, x: Tensor) -> Tensor:
        return F.rrelu(x, self.lower, self.upper, training=self.training,
                       inplace=self.inplace)


class Softmin(Softmax):
    """``torch.nn.Softmin``: ``softmax(-x)`` along ``dim`` (``None``: PyTorch's implicit
    dim, as :class:`Softmax`)."""

    def forward(self, x: Tensor) -> Tensor:
        return F.softmin(x, self.dim)


class Softmax2d(Module):
    """``torch.nn.Softmax2d``: softmax over the channels (dim -3) of ``[N, C, H, W]`` or
    ``[C, H, W]``.

    Raises:
        ValueError: not 3-D or 4-D.
    """

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input with 3 or 4 dims, got {x.ndim}")
        return F.softmax(x, -3)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``x`` where ``x > 0``, else ``weight * x``, as ``torch.nn.functional.prelu``:
    ``weight`` has one value, or one per channel (dim 1 of ``input``; dim 0 of a 1-D input).

    Raises:
        ValueError: ``weight``'s size is neither 1 nor the channel count.
    """
    n = weight.numel()
    if n != 1:
        c = input.shape[1] if input.ndim >= 2 else input.shape[0]
        if n != c:
            raise ValueError(f"prelu: weight has {n} values, the input {c} channels")
        if input.ndim >= 2:
            weight = weight.reshape(n, *([1] * (input.ndim - 2)))
    else:
        weight = weight.reshape(())
    return input.where(input > 0, input * weight)


class PReLU(Module):
    """``torch.nn.PReLU``: ``x`` where ``x > 0``, else ``weight * x``, with a learned
    ``weight [num_parameters]`` (``init``), one per channel (dim 1) or shared (1).

    Raises:
        ValueError: ``num_parameters`` does not match the input's channels.
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25):
        super().__init__()
        self.num_parameters = int(num_parameters)
        self.weight = Parameter(np.full(self.num_parameters, init, np.float32))

    def forward(self, x: Tensor) -> Tensor:
        return F.prelu(x, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"
