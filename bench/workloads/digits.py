"""W4 digits: MLP 64-256-256-10 with ReLU, softmax cross-entropy on scikit-learn's
``load_digits`` (pixels / 16), minibatch 64, 20 epochs, SGD lr 0.1.

A fixed permutation splits the 1797 images into 1437 for training and 360 for testing;
each epoch visits the training set in a fresh seeded order, dropping the last partial batch
(22 batches of 64 per epoch, 440 steps). Accuracy is measured on the test images with the
final parameters (numpy forward pass). A ReLU that flips on a rounding difference sends two
correct systems apart by up to ~2e-3 over 440 steps, so agreement is also checked after a
5-step run.
"""
from __future__ import annotations

import functools

import numpy as np

from .layers import init_linear, linear, matmul_flops
from .spec import Data, Workload

BATCH, EPOCHS, N_TRAIN = 64, 20, 1437
STEPS_PER_EPOCH = N_TRAIN // BATCH


@functools.lru_cache(maxsize=1)
def _split():
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    perm = np.random.default_rng(0).permutation(len(x))
    return x[perm[:N_TRAIN]], y[perm[:N_TRAIN]], x[perm[N_TRAIN:]], y[perm[N_TRAIN:]]


def init(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    params: dict = {}
    init_linear(rng, params, "fc1", 64, 256)
    init_linear(rng, params, "fc2", 256, 256)
    init_linear(rng, params, "fc3", 256, 10)
    return params


def data(steps: int) -> Data:
    """Minibatches ``x [steps, 64, 64]`` and one-hot labels ``y [steps, 64, 10]``."""
    x, y, _, _ = _split()
    rng = np.random.default_rng(2)
    epochs = -(-steps // STEPS_PER_EPOCH)
    order = np.concatenate([rng.permutation(N_TRAIN)[:STEPS_PER_EPOCH * BATCH]
                            for _ in range(epochs)])[:steps * BATCH]
    onehot = np.eye(10, dtype=np.float32)[y[order]]
    return Data(stream={"x": x[order].reshape(steps, BATCH, 64),
                        "y": onehot.reshape(steps, BATCH, 10)})


def logits(F, P, x):
    h = F.relu(linear(P, "fc1", x))
    h = F.relu(linear(P, "fc2", h))
    return linear(P, "fc3", h)


def loss(F, P, D):
    return (F.log_softmax(logits(F, P, D["x"])) * D["y"]).sum() * (-1.0 / BATCH)


def evaluate(params: dict) -> dict:
    """Test accuracy (fraction in [0, 1]) of the final parameters."""
    from .frameworks import NUMPY
    _, _, xt, yt = _split()
    pred = np.argmax(logits(NUMPY, params, xt), axis=-1)
    return {"accuracy": float(np.mean(pred == yt))}


WORKLOAD = Workload(
    key="W4", name="digits", title="MLP 64-256-256-10 ReLU, softmax CE, load_digits, batch 64",
    steps=EPOCHS * STEPS_PER_EPOCH, quick_steps=EPOCHS * STEPS_PER_EPOCH, lr=0.1, init=init,
    data=data, loss=loss, evaluate=evaluate,
    flops=(matmul_flops(BATCH, 64, 256, grads=1) + matmul_flops(BATCH, 256, 256)
           + matmul_flops(BATCH, 256, 10)),
    check_steps=5)      # ReLU kinks: correct systems end 440 steps up to ~2e-3 apart
