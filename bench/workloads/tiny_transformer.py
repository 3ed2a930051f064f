"""W2 tiny-transformer: the original project's transformer example.

Post-LN encoder, 6 layers, d_model 64, 4 heads, FFN 128 ReLU, input ``[2, 64]`` (sequence
of 2, no batch) filled with 0.3, loss = sum of the output, SGD lr 0.01, 500 steps.

Its dynamics amplify float32 rounding: the last layer norm starts with weight 1, so the
gradient reaching the layers below is at first a difference of cancelling terms, and
PyTorch and JAX (and any two correct implementations) end 500 steps ~0.3 apart. Agreement
is therefore also checked after a 5-step run, where they agree to ~1e-6.
"""
from __future__ import annotations

import numpy as np

from .layers import encoder, encoder_flops, init_encoder
from .spec import Data, Workload, full

LAYERS, D, HEADS, FF, SEQ = 6, 64, 4, 128, 2


def loss(F, P, D_):
    return encoder(F, P, D_["x"], LAYERS, HEADS).sum()


WORKLOAD = Workload(
    key="W2", name="tiny_transformer",
    title="post-LN encoder 6x(d64,h4,ff128), [2,64], sum loss, SGD",
    steps=500, quick_steps=500, lr=0.01,
    init=lambda seed: init_encoder(np.random.default_rng(seed), LAYERS, D, FF),
    data=lambda steps: Data(const={"x": full((SEQ, D), 0.3)}), loss=loss,
    flops=encoder_flops(SEQ, 1, SEQ, D, FF, HEADS, LAYERS),
    check_steps=5)      # PyTorch and JAX end 500 steps ~0.3 apart: rounding is amplified
