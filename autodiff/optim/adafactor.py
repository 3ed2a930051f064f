"""Adafactor with ``torch.optim.Adafactor``'s defaults and update rule.

State per parameter (variables, loop-carried inside ``ir_for``): ``step`` (float32 0-d);
for a parameter of two or more dimensions the factored second moment ``row_var`` (the
parameter's shape with the last dimension 1) and ``col_var`` (the shape with the
second-to-last dimension 1); for a 0-d or 1-d parameter the full second moment ``variance``
(the parameter's shape). All float32. The per-step scalars (``t ** beta2_decay``, the
relative step size, the RMS of the parameter and of the update) are computed on the device.
"""
from __future__ import annotations

import numpy as np

from ..graph.tensor import Tensor, zeros
from .optimizer import Optimizer, check, number

#: ``torch.finfo(torch.float32).eps``: epsilon1 when ``eps[0]`` is None (parameters are float32)
_F32_EPS = float(np.finfo(np.float32).eps)


class Adafactor(Optimizer):
    """Adafactor (Shazeer and Stern, "Adafactor: Adaptive Learning Rates with Sublinear
    Memory Cost", 2018), as ``torch.optim.Adafactor`` (torch 2.x,
    ``torch/optim/_adafactor.py``) computes it.

    Per step ``t`` (counted from 1), with gradient ``g`` of parameter ``p`` (negated with
    ``maximize``), ``eps = (eps1, eps2)`` (``eps1 = None``: float32's machine epsilon)::

        w = t ** beta2_decay                          (1 - beta2_t)
        rho = min(lr, 1 / sqrt(t))                    (relative step size)
        alpha = max(eps2, RMS(p)) * rho               (RMS(p) before weight decay)
        p = p * (1 - lr * weight_decay)
        if p.dim() > 1:                               (factored over the last two dims)
            row_var = lerp(row_var, mean(g * g, dim=-1), w)
            col_var = lerp(col_var, mean(g * g, dim=-2), w)
            v = row_var * col_var / max(mean(row_var, dim=-2), eps1)
        else:
            variance = lerp(variance, g * g, w);  v = variance
        u = g / sqrt(max(v, eps1 ** 2))
        p = p - alpha / max(1, RMS(u) / d) * u

    Unlike the paper, ``lr`` caps the relative step size (the paper's constant 0.01, hence
    the default) and scales the decoupled weight decay, and ``eps1`` is applied to the
    variance estimate and the update rather than added to ``g * g`` (PyTorch's note).
    There is no ``lr=None`` mode (PyTorch has none either: the relative step
    ``min(lr, 1/sqrt(t))`` is always used).

    Args:
        params: parameters or parameter groups. lr: cap of the relative step size and
            weight-decay scale (a float, or a 1-element tensor; a scheduler may drive it).
        beta2_decay: exponent ``tau`` of ``1 - beta2_t = t ** tau`` (<= 0).
        eps: ``(eps1, eps2)``: eps1 the floor of the variance estimate (None: float32's
            machine epsilon), eps2 the floor of the parameter RMS scaling the step.
        d: update-clipping threshold on ``RMS(u)`` (>= 1). weight_decay: decoupled decay.
        foreach: accepted, no effect. maximize: ascend instead of descend.

    Raises:
        ValueError: as PyTorch's: a tensor ``lr`` with more than one element, a negative
            ``lr``, ``eps1``, ``eps2`` or ``weight_decay``, a positive ``beta2_decay``,
            ``d < 1``.
        TypeError: an ``lr`` that is not a number or a tensor (``None`` included, where
            PyTorch's comparison fails with ``TypeError`` too).
    """

    state_keys = ("step", "row_var", "col_var", "variance")

    def __init__(self, params, lr: float = 1e-2, beta2_decay: float = -0.8,
                 eps=(None, 1e-3), d: float = 1.0, weight_decay: float = 0.0, *,
                 foreach=None, maximize: bool = False):
        if isinstance(lr, Tensor):
            check(lr.numel() == 1, "Tensor lr must be 1-element")
        elif not number(lr):
            raise TypeError(
                f"Adafactor: lr must be a number or a 1-element tensor, got {lr!r} "
                "(as torch.optim.Adafactor, there is no lr=None mode: the relative step "
                "size min(lr, 1/sqrt(t)) always uses lr)")
        else:
            check(0.0 <= lr, f"Learning rate should be >= 0 but is: {lr}")
        check(0.0 >= beta2_decay, f"beta2_decay should be <= 0 but is: {beta2_decay}")
        check(eps[0] is None or 0.0 <= eps[0], f"epsilon1 should be >= 0 but is: {eps[0]}")
        check(0.0 <= eps[1], f"epsilon2 should be >= 0 but is: {eps[1]}")
        check(1.0 <= d, f"Clipping threshold d should be >= 1 but is: {d}")
        check(0.0 <= weight_decay, f"weight_decay should be >= 0 but is: {weight_decay}")
        super().__init__(params, dict(lr=lr, beta2_decay=beta2_decay, eps=tuple(eps), d=d,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize))

    def init_state(self, p: Tensor, group: dict) -> dict:
        st = {"step": Tensor(np.zeros((), np.float32))}
        if p.dim() > 1:
            st["row_var"] = zeros(*p.shape[:-1], 1)
            st["col_var"] = zeros(*p.shape[:-2], 1, p.shape[-1])
        else:
            st["variance"] = zeros(*p.shape)
        return st

    def update(self, p, g, group, st) -> None:
        lr, d, wd = group["lr"], group["d"], group["weight_decay"]
        eps1, eps2 = group["eps"]
        if eps1 is None:
            eps1 = _F32_EPS
        step = self.once(st, "step", lambda t: t.add_(1.0))
        one_minus_beta2 = step ** float(group["beta2_decay"])
        rho = (1.0 / step.sqrt()).minimum(lr)
        alpha = (p * p).mean().sqrt().maximum(eps2) * rho
        if wd:
            p.mul_(1.0 - lr * wd)
        gg = g * g
        if p.dim() > 1:
            row = st["row_var"].lerp_(gg.mean(dim=-1, keepdim=True), one_minus_beta2)
            col = st["col_var"].lerp_(gg.mean(dim=-2, keepdim=True), one_minus_beta2)
            v = row * col / row.mean(dim=-2, keepdim=True).clamp(min=eps1)
        else:
            v = st["variance"].lerp_(gg, one_minus_beta2)
        u = v.clamp(min=eps1 * eps1).rsqrt() * g
        denom = ((u * u).mean().sqrt() / d).maximum(1.0)
        p.sub_(u * (alpha / denom))
