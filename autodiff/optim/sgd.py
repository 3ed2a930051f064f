"""Stochastic gradient descent, with PyTorch's ``torch.optim.SGD`` semantics."""
from __future__ import annotations

from ..graph.tensor import Tensor, zeros
from .optimizer import Optimizer, check, nonzero, number


class SGD(Optimizer):
    """``torch.optim.SGD``: ``p -= lr * g`` with optional momentum, dampening, Nesterov,
    weight decay and ``maximize``.

    Per step, with gradient ``g`` (negated when ``maximize``)::

        g = g + weight_decay * p
        buf = g (first step) else momentum * buf + (1 - dampening) * g
        g = g + momentum * buf if nesterov else buf
        p = p - lr * g

    State (with ``momentum``): ``momentum_buffer`` per parameter (a variable, zeros until
    the first step, loop-carried); an internal 0/1 flag reproduces PyTorch's undamped first
    step when ``dampening`` is set (not part of ``state_dict()``).

    Raises:
        ValueError: a negative ``lr``/``momentum``/``weight_decay``, or Nesterov without
            momentum or with dampening.
    """

    state_keys = ("momentum_buffer",)

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False,
                 foreach=None, differentiable: bool = False, fused=None):
        check(not number(lr) or lr >= 0.0, f"Invalid learning rate: {lr}")
        check(momentum >= 0.0, f"Invalid momentum value: {momentum}")
        check(weight_decay >= 0.0, f"Invalid weight_decay value: {weight_decay}")
        check(not nesterov or (momentum > 0 and dampening == 0),
              "Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def init_state(self, p: Tensor, group: dict) -> dict:
        if not nonzero(group["momentum"]):
            return {}
        st = {"momentum_buffer": zeros(*p.shape)}
        if group["dampening"]:
            st["_started"] = zeros()
        return st

    def loaded_state(self, p: Tensor, state: dict) -> None:
        if "momentum_buffer" in state:
            state["_started"] = Tensor(1.0)

    def update(self, p, g, group, st) -> None:
        wd, mom, damp = group["weight_decay"], group["momentum"], group["dampening"]
        if wd:
            g = g + p * wd
        if nonzero(mom):
            buf = st["momentum_buffer"]
            if damp:
                started = st.setdefault("_started", zeros())
                buf.mul_(mom).add_(g * (1.0 - started * damp))
                started.fill_(1.0)
            else:
                buf.mul_(mom).add_(g)
            g = g + buf * mom if group["nesterov"] else buf
        p.sub_(g * group["lr"])
