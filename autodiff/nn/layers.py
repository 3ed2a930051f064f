"""Basic layers with PyTorch's names, parameter layouts and default initialisation."""
from __future__ import annotations

import math

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
        bound = 1.0 / math.sqrt(in_features) if in_features else 0.0
        self.weight = _uniform((out_features, in_features), bound)
        self.bias = _uniform((out_features,), bound) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        from .functional import linear     # leading dims folded: one 2-D DOT, not batched
        return linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, " \
               f"bias={self.bias is not None}"


class ReLU(Module):
    def forward(self, x): return x.relu()


class Sigmoid(Module):
    def forward(self, x): return x.sigmoid()


class Tanh(Module):
    def forward(self, x): return x.tanh()


class Identity(Module):
    def forward(self, x): return x


class ModuleList(Module):
    """Sub-modules in a list, children named ``0``, ``1``, ... (``torch.nn.ModuleList``)."""

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module: Module) -> "ModuleList":
        setattr(self, str(len(self._modules)), module)
        return self

    def __getitem__(self, i: int) -> Module:
        return list(self._modules.values())[i]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class Sequential(ModuleList):
    """Modules applied in order; children are named ``0``, ``1``, ... as in PyTorch."""

    def __init__(self, *mods: Module):
        super().__init__(mods)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x
