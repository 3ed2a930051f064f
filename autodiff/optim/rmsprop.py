"""RMSprop with ``torch.optim.RMSprop``'s defaults and update rule."""
from __future__ import annotations

import numpy as np

from ..graph.tensor import Tensor, zeros
from .optimizer import Optimizer, check, nonzero, number


class RMSprop(Optimizer):
    """RMSprop (Hinton's lecture notes; centred form of Graves, 2013), as
    ``torch.optim.RMSprop``::

        g = g + weight_decay * p
        v = alpha * v + (1 - alpha) * g * g
        avg = sqrt(v - g_avg**2) if centered (g_avg = alpha * g_avg + (1 - alpha) * g)
              else sqrt(v);  avg = avg + eps
        buf = momentum * buf + g / avg;  p = p - lr * buf     (momentum > 0)
        p = p - lr * g / avg                                  (otherwise)

    State: ``step``, ``square_avg``, ``momentum_buffer`` (momentum > 0), ``grad_avg``
    (centered).

    Raises:
        ValueError: a negative ``lr``, ``eps``, ``momentum``, ``weight_decay`` or ``alpha``.
    """

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 capturable: bool = False, foreach=None, maximize: bool = False,
                 differentiable: bool = False):
        check(not number(lr) or lr >= 0.0, f"Invalid learning rate: {lr}")
        check(eps >= 0.0, f"Invalid epsilon value: {eps}")
        check(momentum >= 0.0, f"Invalid momentum value: {momentum}")
        check(weight_decay >= 0.0, f"Invalid weight_decay value: {weight_decay}")
        check(alpha >= 0.0, f"Invalid alpha value: {alpha}")
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps,
                                      centered=centered, weight_decay=weight_decay,
                                      capturable=capturable, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable))

    def init_state(self, p: Tensor, group: dict) -> dict:
        st = {"step": Tensor(np.zeros((), np.float32)), "square_avg": zeros(*p.shape)}
        if nonzero(group["momentum"]):
            st["momentum_buffer"] = zeros(*p.shape)
        if group["centered"]:
            st["grad_avg"] = zeros(*p.shape)
        return st

    def update(self, p, g, group, st) -> None:
        alpha, wd, lr = group["alpha"], group["weight_decay"], group["lr"]
        self.once(st, "step", lambda t: t.add_(1.0))
        if wd:
            g = g + p * wd
        v = st["square_avg"].mul_(alpha).add_(g * g * (1.0 - alpha))
        if group["centered"]:
            ga = st["grad_avg"]
            ga = ga.add_((g - ga) * (1.0 - alpha))
            avg = (v - ga * ga).sqrt()
        else:
            avg = v.sqrt()
        avg = avg + group["eps"]
        if nonzero(group["momentum"]):
            buf = st["momentum_buffer"].mul_(group["momentum"]).add_(g / avg)
            p.sub_(buf * lr)
        else:
            p.sub_(g / avg * lr)
