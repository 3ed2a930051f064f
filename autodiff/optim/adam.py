"""Adam and AdamW with ``torch.optim.Adam``/``AdamW`` defaults and update rules.

State per parameter (variables, loop-carried inside ``ir_for``): ``step`` (float32 0-d),
``exp_avg``, ``exp_avg_sq`` and, with ``amsgrad``, ``max_exp_avg_sq``. The bias corrections
``1 - beta ** step`` are computed on the device from the step tensor
(:func:`~.optimizer.one_minus_pow`).
"""
from __future__ import annotations

import numpy as np

from ..graph.tensor import Tensor, zeros
from .optimizer import Optimizer, adam_moments, check, decay, number


def check_betas(betas) -> None:
    for i, b in enumerate(betas):
        check(not number(b) or 0.0 <= b < 1.0, f"Invalid beta parameter at index {i}: {b}")


class Adam(Optimizer):
    """Adam (Kingma and Ba, 2015) as ``torch.optim.Adam`` computes it.

    Per step ``t`` (counted from 1), with gradient ``g`` of parameter ``p``::

        g = g + weight_decay * p          (p = p * (1 - lr * weight_decay) if decoupled)
        m = m + (g - m) * (1 - beta1)
        v = v * beta2 + g * g * (1 - beta2)
        v_hat = max(v_max, v) if amsgrad else v
        p = p - lr / (1 - beta1**t) * m / (sqrt(v_hat) / sqrt(1 - beta2**t) + eps)

    Args:
        params: parameters or parameter groups. lr: learning rate (a float, or a 0-d
            tensor). betas: ``(beta1, beta2)``. eps: added to the denominator.
        weight_decay: L2 penalty added to the gradient (``decoupled_weight_decay``: AdamW's
            decay of the weights instead).
        amsgrad: use the running maximum of ``v``. maximize: ascend instead of descend.
        foreach, capturable, fused: accepted, no effect. differentiable: must be False.

    Raises:
        ValueError: a hyper-parameter is out of range.
    """

    state_keys = ("step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq")

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, *, foreach=None,
                 maximize: bool = False, capturable: bool = False,
                 differentiable: bool = False, fused=None,
                 decoupled_weight_decay: bool = False):
        check(not number(lr) or lr >= 0.0, f"Invalid learning rate: {lr}")
        check(eps >= 0.0, f"Invalid epsilon value: {eps}")
        check_betas(betas)
        check(weight_decay >= 0.0, f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def init_state(self, p: Tensor, group: dict) -> dict:
        st = {"step": Tensor(np.zeros((), np.float32)), "exp_avg": zeros(*p.shape),
              "exp_avg_sq": zeros(*p.shape)}
        if group["amsgrad"]:
            st["max_exp_avg_sq"] = zeros(*p.shape)
        return st

    def update(self, p, g, group, st) -> None:
        lr, (beta1, beta2) = group["lr"], group["betas"]
        step = self.once(st, "step", lambda t: t.add_(1.0))
        g = decay(p, g, group)
        m, v = adam_moments(g, st, beta1, beta2)
        if group["amsgrad"]:
            if "max_exp_avg_sq" not in st:
                st["max_exp_avg_sq"] = zeros(*p.shape)
            v = st["max_exp_avg_sq"].copy_(st["max_exp_avg_sq"].maximum(v))
        step_size = lr / self.one_minus_pow(beta1, step)
        denom = v.sqrt() / self.one_minus_pow(beta2, step).sqrt() + group["eps"]
        p.sub_(m / denom * step_size)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter, 2019), as
    ``torch.optim.AdamW``: ``p = p * (1 - lr * weight_decay)`` before the Adam step.

    Same arguments as :class:`Adam`; ``weight_decay`` defaults to ``0.01``.
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach=None, capturable: bool = False, differentiable: bool = False,
                 fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
