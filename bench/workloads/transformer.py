"""W3 transformer: post-LN encoder, batch 8, sequence 64, d_model 128, 4 heads, FFN 512,
4 layers, MSE to a fixed random target, SGD lr 0.01, 200 steps."""
from __future__ import annotations

import numpy as np

from .layers import encoder, encoder_flops, init_encoder
from .spec import Data, Workload

LAYERS, D, HEADS, FF, SEQ, BATCH = 4, 128, 4, 512, 64, 8


def data(steps: int) -> Data:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((BATCH, SEQ, D)).astype(np.float32)
    target = rng.standard_normal((BATCH, SEQ, D)).astype(np.float32)
    return Data(const={"x": x, "target": target})


def loss(F, P, D_):
    d = encoder(F, P, D_["x"], LAYERS, HEADS) - D_["target"]
    return (d * d).sum() * (1.0 / (BATCH * SEQ * D))


WORKLOAD = Workload(
    key="W3", name="transformer",
    title="post-LN encoder 4x(d128,h4,ff512), [8,64,128], MSE, SGD",
    steps=200, quick_steps=20, lr=0.01,
    init=lambda seed: init_encoder(np.random.default_rng(seed), LAYERS, D, FF),
    data=data, loss=loss,
    flops=encoder_flops(BATCH * SEQ, BATCH, SEQ, D, FF, HEADS, LAYERS))
