"""Adam and AdamW with ``torch.optim.Adam``/``AdamW`` defaults and update rules.

All state lives in variables updated in place under ``no_grad``, so inside ``ir_for`` it is
loop-carried: ``exp_avg`` and ``exp_avg_sq`` (``max_exp_avg_sq`` with ``amsgrad``) per
parameter, and one float32 step count ``step`` per parameter. The bias corrections
``1 - beta ** step`` are computed on the device from the step tensor (``Op.POW``).
"""
from __future__ import annotations

import numpy as np

from ..graph.tensor import Tensor, zeros
from ..graph.trace import no_grad
from .optimizer import Optimizer


class Adam(Optimizer):
    """Adam (Kingma and Ba, 2015) as ``torch.optim.Adam`` computes it.

    Per step ``t`` (counted from 1), with gradient ``g`` of parameter ``p``::

        g = g + weight_decay * p                      (L2 penalty, if weight_decay)
        m = m + (g - m) * (1 - beta1)
        v = v * beta2 + g * g * (1 - beta2)
        v_hat = max(v_max, v) if amsgrad else v
        p = p - lr / (1 - beta1**t) * m / (sqrt(v_hat) / sqrt(1 - beta2**t) + eps)

    Args:
        params: parameters (variables that require grad).
        lr: learning rate. betas: ``(beta1, beta2)``. eps: added to the denominator.
        weight_decay: L2 penalty added to the gradient.
        amsgrad: use the running maximum of ``v``.
        maximize: ascend instead of descend.

    Raises:
        ValueError: a hyper-parameter is out of range.
    """

    decoupled = False

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, maximize: bool = False):
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError(f"invalid lr {lr}, eps {eps} or weight_decay {weight_decay}")
        if not all(0.0 <= b < 1.0 for b in betas) or len(betas) != 2:
            raise ValueError(f"invalid betas {betas}: each must be in [0, 1)")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))
        self.lr, self.betas, self.eps = float(lr), tuple(float(b) for b in betas), float(eps)
        self.weight_decay, self.amsgrad, self.maximize = float(weight_decay), amsgrad, maximize
        for p in self.params:
            st = {"step": Tensor(np.zeros((), np.float32)), "exp_avg": zeros(*p.shape),
                  "exp_avg_sq": zeros(*p.shape)}
            if amsgrad:
                st["max_exp_avg_sq"] = zeros(*p.shape)
            self.state[id(p)] = st

    def step(self) -> None:
        """Trace one update of every parameter that has a gradient."""
        beta1, beta2 = self.betas
        with no_grad():
            for p in self.params:
                g = p.grad
                if g is None:
                    continue
                if self.maximize:
                    g = -g
                st = self.state[id(p)]
                step = st["step"].add_(1.0)
                if self.weight_decay:
                    if self.decoupled:
                        p.mul_(1.0 - self.lr * self.weight_decay)
                    else:
                        g = g + p * self.weight_decay
                m = st["exp_avg"].add_((g - st["exp_avg"]) * (1.0 - beta1))
                v = st["exp_avg_sq"].mul_(beta2).add_(g * g, alpha=1.0 - beta2)
                if self.amsgrad:
                    v = st["max_exp_avg_sq"].copy_(st["max_exp_avg_sq"].maximum(v))
                step_size = self.lr / (1.0 - beta1 ** step)
                denom = v.sqrt() / (1.0 - beta2 ** step).sqrt() + self.eps
                p.sub_(m / denom * step_size)

    def state_tensors(self) -> list[Tensor]:
        """Every state variable (for checkpointing or inspection)."""
        return [t for st in self.state.values() for t in st.values()]


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter, 2019), as
    ``torch.optim.AdamW``: ``p = p * (1 - lr * weight_decay)`` before the Adam step.

    Same arguments as :class:`Adam`; ``weight_decay`` defaults to ``0.01``.
    """

    decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, maximize: bool = False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize)
