"""NAdam with ``torch.optim.NAdam``'s defaults and update rule."""
from __future__ import annotations

import numpy as np

from ..graph.tensor import Tensor, zeros
from .adam import check_betas
from .optimizer import Optimizer, adam_moments, check, decay, number, pow_


class NAdam(Optimizer):
    """Adam with Nesterov momentum (Dozat, 2016), as ``torch.optim.NAdam``::

        mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay));  mu_prod *= mu_t
        m, v as Adam;  denom = sqrt(v / (1 - beta2**t)) + eps
        p -= lr * (1 - mu_t) / (1 - mu_prod) * g / denom
        p -= lr * mu_{t+1} / (1 - mu_prod * mu_{t+1}) * m / denom

    State: ``step``, ``mu_product`` (0-d, starts at 1), ``exp_avg``, ``exp_avg_sq``.

    Raises:
        ValueError: a hyper-parameter out of range.
    """

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach=None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False):
        check(not number(lr) or lr >= 0.0, f"Invalid learning rate: {lr}")
        check(eps >= 0.0, f"Invalid epsilon value: {eps}")
        check_betas(betas)
        check(weight_decay >= 0.0, f"Invalid weight_decay value: {weight_decay}")
        check(momentum_decay >= 0.0, f"Invalid momentum_decay value: {momentum_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach,
                                      capturable=capturable, differentiable=differentiable))

    shared_state = ("step", "mu_product")

    def init_state(self, p: Tensor, group: dict) -> dict:
        return {"step": Tensor(np.zeros((), np.float32)),
                "mu_product": Tensor(np.ones((), np.float32)),
                "exp_avg": zeros(*p.shape), "exp_avg_sq": zeros(*p.shape)}

    def update(self, p, g, group, st) -> None:
        lr, (beta1, beta2) = group["lr"], group["betas"]
        md = group["momentum_decay"]
        step = self.once(st, "step", lambda t: t.add_(1.0))
        bc2 = self.one_minus_pow(beta2, step)
        g = decay(p, g, group)
        mu = (1.0 - 0.5 * pow_(0.96, step * md)) * beta1
        mu_next = (1.0 - 0.5 * pow_(0.96, (step + 1.0) * md)) * beta1
        mp = self.once(st, "mu_product", lambda t: t.mul_(mu))
        m, v = adam_moments(g, st, beta1, beta2)
        denom = (v / bc2).sqrt() + group["eps"]
        p.sub_(g / denom * (lr * (1.0 - mu) / (1.0 - mp)))
        p.sub_(m / denom * (lr * mu_next / (1.0 - mp * mu_next)))
