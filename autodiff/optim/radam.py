"""RAdam with ``torch.optim.RAdam``'s defaults and update rule."""
from __future__ import annotations

import numpy as np

from ..graph.tensor import Tensor, where, zeros
from .adam import check_betas
from .optimizer import Optimizer, adam_moments, check, decay, number, pow_


class RAdam(Optimizer):
    """Rectified Adam (Liu et al., 2020), as ``torch.optim.RAdam``::

        m, v as Adam;  m_hat = m / (1 - beta1**t)
        rho_inf = 2 / (1 - beta2) - 1;  rho_t = rho_inf - 2 t beta2**t / (1 - beta2**t)
        p -= lr * m_hat * r_t * sqrt(1 - beta2**t) / (sqrt(v) + eps)   if rho_t > 5
        p -= lr * m_hat                                                 otherwise
        r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))

    The branch is a device ``where`` on the step tensor; ``rho_t`` is computed without
    cancellation (:func:`~.optimizer.one_minus_pow`), so the switch happens at the same step
    as PyTorch's float64 host computation (for beta2 = 0.999, rho_5 = 4.996).

    Raises:
        ValueError: a hyper-parameter out of range.
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, decoupled_weight_decay: bool = False, *,
                 foreach=None, maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False):
        check(not number(lr) or lr >= 0.0, f"Invalid learning rate: {lr}")
        check(eps >= 0.0, f"Invalid epsilon value: {eps}")
        check_betas(betas)
        check(weight_decay >= 0.0, f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, maximize=maximize,
                                      foreach=foreach, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      differentiable=differentiable))

    def init_state(self, p: Tensor, group: dict) -> dict:
        return {"step": Tensor(np.zeros((), np.float32)), "exp_avg": zeros(*p.shape),
                "exp_avg_sq": zeros(*p.shape)}

    def update(self, p, g, group, st) -> None:
        lr, (beta1, beta2) = group["lr"], group["betas"]
        step = self.once(st, "step", lambda t: t.add_(1.0))
        g = decay(p, g, group)
        m, v = adam_moments(g, st, beta1, beta2)
        bc2 = self.one_minus_pow(beta2, step)
        m_hat = m / self.one_minus_pow(beta1, step)
        rho_inf = 2.0 / (1.0 - beta2) - 1.0
        rho_t = rho_inf - step * pow_(beta2, step) * 2.0 / bc2
        rect = ((rho_t - 4.0) * (rho_t - 2.0) * rho_inf
                / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho_t)).clamp(min=0.0).sqrt()
        adaptive = bc2.sqrt() / (v.sqrt() + group["eps"])
        p.sub_(m_hat * lr * where(rho_t > 5.0, adaptive * rect, 1.0))
