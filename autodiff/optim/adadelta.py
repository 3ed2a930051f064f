"""Adadelta with ``torch.optim.Adadelta``'s defaults and update rule."""
from __future__ import annotations

import numpy as np

from ..graph.tensor import Tensor, zeros
from .optimizer import Optimizer, check, number


class Adadelta(Optimizer):
    """Adadelta (Zeiler, 2012), as ``torch.optim.Adadelta``::

        g = g + weight_decay * p
        v = rho * v + (1 - rho) * g * g
        delta = sqrt(u + eps) / sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta;  p = p - lr * delta

    State: ``step``, ``square_avg`` (v), ``acc_delta`` (u).

    Raises:
        ValueError: a negative ``lr``, ``eps`` or ``weight_decay``, ``rho`` outside [0, 1].
    """

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0.0, foreach=None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False):
        check(not number(lr) or lr >= 0.0, f"Invalid learning rate: {lr}")
        check(0.0 <= rho <= 1.0, f"Invalid rho value: {rho}")
        check(eps >= 0.0, f"Invalid epsilon value: {eps}")
        check(weight_decay >= 0.0, f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      foreach=foreach, capturable=capturable,
                                      maximize=maximize, differentiable=differentiable))

    def init_state(self, p: Tensor, group: dict) -> dict:
        return {"step": Tensor(np.zeros((), np.float32)), "square_avg": zeros(*p.shape),
                "acc_delta": zeros(*p.shape)}

    def update(self, p, g, group, st) -> None:
        rho, eps, wd = group["rho"], group["eps"], group["weight_decay"]
        self.once(st, "step", lambda t: t.add_(1.0))
        if wd:
            g = g + p * wd
        v = st["square_avg"].mul_(rho).add_(g * g * (1.0 - rho))
        delta = (st["acc_delta"] + eps).sqrt() / (v + eps).sqrt() * g
        st["acc_delta"].mul_(rho).add_(delta * delta * (1.0 - rho))
        p.sub_(delta * group["lr"])
