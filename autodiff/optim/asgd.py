"""ASGD with ``torch.optim.ASGD``'s defaults and update rule."""
from __future__ import annotations

import numpy as np

from ..graph.tensor import Tensor, zeros
from .optimizer import Optimizer, check, number


class ASGD(Optimizer):
    """Averaged SGD (Polyak and Juditsky, 1992), as ``torch.optim.ASGD``::

        g = g + weight_decay * p
        p = p * (1 - lambd * eta) - eta * g
        ax = ax + mu * (p - ax)
        eta = lr / (1 + lambd * lr * t) ** alpha;  mu = 1 / max(1, t - t0)

    State: ``step``, ``eta`` (``lr`` at first), ``mu`` (1), ``ax`` (the average).

    Raises:
        ValueError: a negative ``lr`` or ``weight_decay``.
    """

    def __init__(self, params, lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0.0, foreach=None,
                 maximize: bool = False, differentiable: bool = False,
                 capturable: bool = False):
        check(not number(lr) or lr >= 0.0, f"Invalid learning rate: {lr}")
        check(weight_decay >= 0.0, f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def init_state(self, p: Tensor, group: dict) -> dict:
        lr = group["lr"]
        lr = float(lr.numpy()) if isinstance(lr, Tensor) else float(lr)
        return {"step": Tensor(np.zeros((), np.float32)), "eta": Tensor(np.float32(lr)),
                "mu": Tensor(np.float32(1.0)), "ax": zeros(*p.shape)}

    def update(self, p, g, group, st) -> None:
        lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
        t = st["step"].add_(1.0)
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        eta = st["eta"]
        p.mul_(1.0 - eta * lambd).sub_(g * eta)
        st["ax"].add_((p - st["ax"]) * st["mu"])
        eta.copy_(lr / (t * (lambd * lr) + 1.0) ** alpha)
        st["mu"].copy_(1.0 / (t - t0).maximum(1.0))
