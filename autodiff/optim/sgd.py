"""Stochastic gradient descent, with PyTorch's ``torch.optim.SGD`` semantics."""
from __future__ import annotations

from ..graph.tensor import zeros
from ..graph.trace import no_grad
from .optimizer import Optimizer


class SGD(Optimizer):
    """``p -= lr * g`` with optional momentum, dampening, Nesterov and weight decay.

    Momentum buffers are variables (zeros at start, loop-carried). PyTorch starts the
    buffer at the first gradient, undamped; with ``dampening`` a 0/1 ``started`` variable
    per parameter does the same (``buf = m * buf + (1 - dampening * started) * g``).
    """

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum needs momentum > 0 and dampening 0")
        self.lr, self.momentum, self.dampening = lr, momentum, dampening
        self.weight_decay, self.nesterov = weight_decay, nesterov
        if momentum:
            for p in self.params:
                self.state[id(p)] = {"momentum_buffer": zeros(*p.shape)}
                if dampening:
                    self.state[id(p)]["started"] = zeros()

    def step(self) -> None:
        with no_grad():
            for p in self.params:
                g = p.grad
                if g is None:
                    continue
                if self.weight_decay:
                    g = g + p * self.weight_decay
                if self.momentum:
                    state = self.state[id(p)]
                    buf = state["momentum_buffer"]
                    if self.dampening:
                        started = state["started"]
                        buf.mul_(self.momentum).add_(g * (1 - started * self.dampening))
                        started.fill_(1.0)
                    else:
                        buf.mul_(self.momentum).add_(g)
                    g = g + buf * self.momentum if self.nesterov else buf
                p.sub_(g, alpha=self.lr)
