"""W6 cnn: the CNN of ``examples/cnn.py`` on scikit-learn's 8x8 digits, the same math in
every framework: two blocks of Conv2d 3x3 (padding 1, no bias) -> batch normalisation with
the batch's statistics -> ReLU -> max pool 2x2, then Linear(128, 10); softmax cross-entropy,
minibatch 64, SGD lr 0.05.

Convolution and pooling are spelled differently in each framework, so :func:`ops` picks them
by the array type: ``autodiff.nn.functional`` (a DOT over a window view), ``torch.nn.
functional``, ``jax.lax.conv_general_dilated`` / ``reduce_window``, and numpy (for the
accuracy of the final parameters). Batch normalisation is written out (mean and biased
variance over batch and space); the running statistics of ``nn.BatchNorm2d`` are not part
of a training step's math here, so the held-out accuracy normalises with the test batch's
own statistics. Data, split and epochs follow W4 (1437 training images, 22 batches of 64
per epoch).
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from . import digits
from .digits import BATCH, STEPS_PER_EPOCH, _split
from .layers import matmul_flops
from .spec import Data, Workload

EPOCHS, C1, C2, BN_EPS = 20, 16, 32, 1e-5


def init(seed: int) -> dict:
    """Conv weights U(-1/sqrt(fan_in), 1/sqrt(fan_in)) as ``torch.nn.Conv2d``, batch-norm
    scale 1 and shift 0, the Linear layer as ``torch.nn.Linear``."""
    rng = np.random.default_rng(seed)
    u = lambda fan_in, shape: rng.uniform(-1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in),
                                          shape).astype(np.float32)
    return {"conv1.weight": u(9, (C1, 1, 3, 3)),
            "bn1.weight": np.ones(C1, np.float32), "bn1.bias": np.zeros(C1, np.float32),
            "conv2.weight": u(9 * C1, (C2, C1, 3, 3)),
            "bn2.weight": np.ones(C2, np.float32), "bn2.bias": np.zeros(C2, np.float32),
            "fc.weight": u(4 * C2, (10, 4 * C2)), "fc.bias": u(4 * C2, (10,))}


def data(steps: int) -> Data:
    """Minibatches ``x [steps, 64, 1, 8, 8]`` and one-hot labels ``y [steps, 64, 10]``:
    W4's batches (:func:`.digits.data`) as one-channel images."""
    d = digits.data(steps)
    return Data(stream={"x": d.stream["x"].reshape(steps, BATCH, 1, 8, 8),
                        "y": d.stream["y"]})


def _np_conv(x, w):
    win = np.lib.stride_tricks.sliding_window_view(
        np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", win, w)


def ops(x) -> SimpleNamespace:
    """``conv(x, w)`` (3x3, padding 1), ``pool(x)`` (max 2x2) and ``mean(x)`` over batch and
    space (keeping dims) for the framework of array ``x``."""
    mod = type(x).__module__
    if mod.startswith("torch"):
        import torch.nn.functional as TF
        return SimpleNamespace(conv=lambda x, w: TF.conv2d(x, w, padding=1),
                               pool=lambda x: TF.max_pool2d(x, 2),
                               mean=lambda x: x.mean((0, 2, 3), keepdim=True))
    if mod.startswith("autodiff"):
        import autodiff.nn.functional as AF
        return SimpleNamespace(conv=lambda x, w: AF.conv2d(x, w, padding=1),
                               pool=lambda x: AF.max_pool2d(x, 2),
                               mean=lambda x: x.mean((0, 2, 3), keepdim=True))
    if mod.startswith("numpy"):
        return SimpleNamespace(
            conv=_np_conv, mean=lambda x: x.mean((0, 2, 3), keepdims=True),
            pool=lambda x: x.reshape(*x.shape[:2], x.shape[2] // 2, 2, x.shape[3] // 2,
                                     2).max((3, 5)))
    import jax
    import jax.numpy as jnp
    return SimpleNamespace(
        conv=lambda x, w: jax.lax.conv_general_dilated(
            x, w, (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NCHW", "OIHW", "NCHW")),
        pool=lambda x: jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, 2, 2),
                                             (1, 1, 2, 2), "VALID"),
        mean=lambda x: jnp.mean(x, axis=(0, 2, 3), keepdims=True))


def _block(F, O, P, name: str, x):
    y = O.conv(x, P[f"conv{name}.weight"])
    d = y - O.mean(y)
    y = d * F.rsqrt(O.mean(d * d) + BN_EPS)
    y = y * P[f"bn{name}.weight"].reshape(1, -1, 1, 1) + P[f"bn{name}.bias"].reshape(1, -1, 1, 1)
    return O.pool(F.relu(y))


def logits(F, P, x):
    O = ops(x)
    h = _block(F, O, P, "2", _block(F, O, P, "1", x))
    return h.reshape(h.shape[0], 4 * C2) @ P["fc.weight"].T + P["fc.bias"]


def loss(F, P, D):
    return (F.log_softmax(logits(F, P, D["x"])) * D["y"]).sum() * (-1.0 / BATCH)


def evaluate(params: dict) -> dict:
    """Test accuracy of the final parameters (numpy forward, test-batch statistics)."""
    from .frameworks import NUMPY
    _, _, xt, yt = _split()
    pred = np.argmax(logits(NUMPY, params, xt.reshape(-1, 1, 8, 8)), axis=-1)
    return {"accuracy": float(np.mean(pred == yt))}


WORKLOAD = Workload(
    key="W6", name="cnn",
    title="CNN 2x(Conv3x3-BN-ReLU-MaxPool)-Linear, load_digits 8x8, batch 64",
    steps=EPOCHS * STEPS_PER_EPOCH, quick_steps=3 * STEPS_PER_EPOCH, lr=0.05, init=init,
    data=data, loss=loss, evaluate=evaluate,
    # convolutions as the DOTs they lower to: [N*HW, C_in*9] @ [C_in*9, C_out]; the first
    # needs no input gradient
    flops=(matmul_flops(BATCH * 64, 9, C1, grads=1) + matmul_flops(BATCH * 16, 9 * C1, C2)
           + matmul_flops(BATCH, 4 * C2, 10)),
    check_steps=5)      # ReLU and max-pool kinks, as W4
