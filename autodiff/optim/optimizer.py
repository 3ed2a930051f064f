"""Optimizer base: ``step()`` traces in-place updates of parameters and state variables."""
from __future__ import annotations

from ..graph.tensor import Tensor


class Optimizer:
    """Holds the parameters; state tensors are variables, so they are loop-carried."""

    def __init__(self, params, defaults: dict):
        self.params = list(params)
        if not self.params:
            raise ValueError("optimizer got an empty parameter list")
        for p in self.params:
            if not isinstance(p, Tensor) or p._var is None:
                raise TypeError("optimizer parameters must be tensors made from data")
        self.defaults = dict(defaults)
        self.state: dict[int, dict] = {}

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget the gradients (``.grad = None``)."""
        for p in self.params:
            p.grad = None

    def step(self) -> None:
        raise NotImplementedError
