"""W1 mlp255: the original project's linear example.

``Linear(255, 255) -> Sigmoid -> Linear(255, 255)`` on a ``[2, 255]`` input of 0.2,
loss = sum of the output, SGD lr 0.01, 1000 steps.
"""
from __future__ import annotations

import numpy as np

from .layers import init_linear, linear, matmul_flops
from .spec import Data, Workload, full


def init(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    params: dict = {}
    init_linear(rng, params, "fc1", 255, 255)
    init_linear(rng, params, "fc2", 255, 255)
    return params


def loss(F, P, D):
    return linear(P, "fc2", F.sigmoid(linear(P, "fc1", D["x"]))).sum()


WORKLOAD = Workload(
    key="W1", name="mlp255", title="Linear(255,255)-Sigmoid-Linear, [2,255], sum loss, SGD",
    steps=1000, quick_steps=1000, lr=0.01, init=init,
    data=lambda steps: Data(const={"x": full((2, 255), 0.2)}), loss=loss,
    flops=matmul_flops(2, 255, 255, grads=1) + matmul_flops(2, 255, 255))
