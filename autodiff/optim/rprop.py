"""Rprop with ``torch.optim.Rprop``'s defaults and update rule."""
from __future__ import annotations

import numpy as np

from ..graph.tensor import Tensor, where, zeros
from .optimizer import Optimizer, check, number


class Rprop(Optimizer):
    """Resilient backpropagation (Riedmiller and Braun, 1993), as ``torch.optim.Rprop``:
    each weight's step size grows by ``etas[1]`` while its gradient keeps its sign and
    shrinks by ``etas[0]`` when it flips (clamped to ``step_sizes``); a flipped gradient
    counts as 0 for that step. ``p = p - sign(g) * step_size``.

    State: ``step``, ``prev`` (the last gradient used), ``step_size`` (``lr`` at first).

    Raises:
        ValueError: a negative ``lr``, or not ``0 < etas[0] < 1 < etas[1]``.
    """

    def __init__(self, params, lr: float = 1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50.0),
                 *, capturable: bool = False, foreach=None, maximize: bool = False,
                 differentiable: bool = False):
        check(not number(lr) or lr >= 0.0, f"Invalid learning rate: {lr}")
        check(0.0 < etas[0] < 1.0 < etas[1], f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=tuple(etas), step_sizes=tuple(step_sizes),
                                      capturable=capturable, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable))

    def init_state(self, p: Tensor, group: dict) -> dict:
        lr = group["lr"]
        lr = float(lr.numpy()) if isinstance(lr, Tensor) else float(lr)
        return {"step": Tensor(np.zeros((), np.float32)), "prev": zeros(*p.shape),
                "step_size": Tensor(np.full(p.shape, lr, np.float32))}

    def update(self, p, g, group, st) -> None:
        (minus, plus), (lo, hi) = group["etas"], group["step_sizes"]
        self.once(st, "step", lambda t: t.add_(1.0))
        s = (g * st["prev"]).sign()
        factor = where(s > 0, plus, where(s < 0, minus, 1.0))
        size = st["step_size"].mul_(factor).clamp_(lo, hi)
        g = g.where(s >= 0, 0.0)
        p.sub_(g.sign() * size)
        st["prev"].copy_(g)
