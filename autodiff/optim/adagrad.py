"""Adagrad with ``torch.optim.Adagrad``'s defaults and update rule."""
from __future__ import annotations

import numpy as np

from ..graph.tensor import Tensor
from .optimizer import Optimizer, check, number


class Adagrad(Optimizer):
    """Adagrad (Duchi et al., 2011), as ``torch.optim.Adagrad``::

        g = g + weight_decay * p
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g * g;  p = p - clr * g / (sqrt(s) + eps)

    State ``step`` and ``sum`` (``initial_accumulator_value``) exist from construction, as
    in PyTorch.

    Raises:
        ValueError: a negative ``lr``, ``lr_decay``, ``weight_decay``,
            ``initial_accumulator_value`` or ``eps``.
    """

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10, foreach=None, *, maximize: bool = False,
                 differentiable: bool = False, fused=None):
        check(not number(lr) or lr >= 0.0, f"Invalid learning rate: {lr}")
        check(lr_decay >= 0.0, f"Invalid lr_decay value: {lr_decay}")
        check(weight_decay >= 0.0, f"Invalid weight_decay value: {weight_decay}")
        check(initial_accumulator_value >= 0.0,
              f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        check(eps >= 0.0, f"Invalid epsilon value: {eps}")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, fused=fused))
        started: dict = {}
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = self.new_state(p, group, started)

    def init_state(self, p: Tensor, group: dict) -> dict:
        init = group["initial_accumulator_value"]
        return {"step": Tensor(np.zeros((), np.float32)),
                "sum": Tensor(np.full(p.shape, init, np.float32))}

    def update(self, p, g, group, st) -> None:
        step = self.once(st, "step", lambda t: t.add_(1.0))
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        clr = group["lr"]
        if group["lr_decay"]:
            clr = clr / ((step - 1.0) * group["lr_decay"] + 1.0)
        s = st["sum"].add_(g * g)
        p.sub_(g / (s.sqrt() + group["eps"]) * clr)
