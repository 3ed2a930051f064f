"""Adamax with ``torch.optim.Adamax``'s defaults and update rule."""
from __future__ import annotations

import numpy as np

from ..graph.tensor import Tensor, zeros
from .adam import check_betas
from .optimizer import Optimizer, check, number


class Adamax(Optimizer):
    """Adamax, Adam's infinity-norm variant (Kingma and Ba, 2015, section 7), as
    ``torch.optim.Adamax``::

        g = g + weight_decay * p
        m = m + (g - m) * (1 - beta1);  u = max(beta2 * u, |g| + eps)
        p = p - lr / (1 - beta1**t) * m / u

    State: ``step``, ``exp_avg``, ``exp_inf``.

    Raises:
        ValueError: a hyper-parameter out of range.
    """

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, foreach=None, *, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False):
        check(not number(lr) or lr >= 0.0, f"Invalid learning rate: {lr}")
        check(eps >= 0.0, f"Invalid epsilon value: {eps}")
        check_betas(betas)
        check(weight_decay >= 0.0, f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def init_state(self, p: Tensor, group: dict) -> dict:
        return {"step": Tensor(np.zeros((), np.float32)), "exp_avg": zeros(*p.shape),
                "exp_inf": zeros(*p.shape)}

    def update(self, p, g, group, st) -> None:
        beta1, beta2 = group["betas"]
        step = self.once(st, "step", lambda t: t.add_(1.0))
        if group["weight_decay"]:
            g = g + p * group["weight_decay"]
        m = st["exp_avg"].add_((g - st["exp_avg"]) * (1.0 - beta1))
        u = st["exp_inf"].copy_((st["exp_inf"] * beta2).maximum(g.abs() + group["eps"]))
        p.sub_(m / u * (group["lr"] / self.one_minus_pow(beta1, step)))
