"""Item 9: ``cross_entropy`` with ``-inf`` logits (masked classes) gives PyTorch's finite
loss and gradient on every device; LayerNorm and cross_entropy shape errors name the
user's ``file:line``."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import autodiff as ad
from autodiff import nn
from autodiff.nn import functional as F

HERE = os.path.basename(__file__)
NEG = -np.inf
LOGITS = np.array([[1.0, NEG, 2.0, 0.5],
                   [0.5, 1.0, NEG, NEG],
                   [NEG, 0.25, -1.0, 3.0]], np.float32)
TARGET = np.array([0, 1, 3], np.int32)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_minus_inf_logits_match_torch(device, reduction, label_smoothing):
    x = ad.Tensor(LOGITS, requires_grad=True)
    t = ad.Feeder(lambda: TARGET, [3], dtype="int32")
    loss = F.cross_entropy(x, t, reduction=reduction, label_smoothing=label_smoothing)
    loss.sum().backward()
    grad = x.grad
    ad.execute(device=device)
    xt = torch.tensor(LOGITS, requires_grad=True)
    want = TF.cross_entropy(xt, torch.tensor(TARGET, dtype=torch.long), reduction=reduction,
                            label_smoothing=label_smoothing)
    want.sum().backward()
    np.testing.assert_allclose(loss.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
    if label_smoothing == 0.0:            # torch: finite loss, finite gradient
        assert np.isfinite(loss.numpy()).all()
        np.testing.assert_allclose(grad.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_cross_entropy_shape_error_names_user_line(device):
    x = ad.Tensor(np.zeros((2, 3), np.float32))
    t = ad.Tensor(np.zeros(3, np.int32))

    def bad():
        F.cross_entropy(x, t)
    with pytest.raises(ad.ShapeError) as info:
        bad()
    msg = str(info.value)
    assert msg.startswith("cross_entropy:") and "[2, 3]" in msg and "[3]" in msg, msg
    assert f"{HERE}:{bad.__code__.co_firstlineno + 1}" in msg, msg
    probs = ad.Tensor(np.zeros((2, 4), np.float32))

    def bad_probs():
        F.cross_entropy(x, probs)
    with pytest.raises(ad.ShapeError, match=f"{HERE}:{bad_probs.__code__.co_firstlineno + 1}"):
        bad_probs()
    y = x + 1.0                                   # tracing goes on; the program runs
    ad.execute(device=device)
    np.testing.assert_array_equal(y.numpy(), np.ones((2, 3), np.float32))


def test_layer_norm_shape_error_names_user_line(device):
    ln = nn.LayerNorm(4)
    x = ad.Tensor(np.zeros((2, 3), np.float32))

    def bad():
        ln(x)
    with pytest.raises(ad.ShapeError) as info:
        bad()
    msg = str(info.value)
    assert msg.startswith("layer_norm:") and "[2, 3]" in msg and "[4]" in msg, msg
    assert f"{HERE}:{bad.__code__.co_firstlineno + 1}" in msg, msg
    with pytest.raises(ad.ShapeError, match=HERE):
        F.layer_norm(x, (4,))
    y = ln(ad.Tensor(np.ones((2, 4), np.float32)))
    ad.execute(device=device)
    np.testing.assert_allclose(y.numpy(), np.zeros((2, 4), np.float32), atol=1e-6)
