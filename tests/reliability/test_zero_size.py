"""Item 7: zero-size dimensions give PyTorch's results on every device: the sum of an
empty tensor is 0, its mean NaN, a max over an empty dimension an error at trace time;
elementwise ops, matmuls (also with an empty inner dimension), Feeders and Receivers of
empty tensors work, and a training step on an empty batch changes nothing."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff.optim import SGD

HERE = os.path.basename(__file__)
W = np.arange(12, dtype=np.float32).reshape(3, 4) / 10


def test_reductions_and_ops_on_empty_tensors(device):
    x = ad.Feeder(lambda: np.zeros((0, 3), np.float32), [0, 3], name="empty")
    w = ad.Tensor(W)
    seen = []
    out = {
        "sum": x.sum(), "sum0": x.sum(0), "sum1": x.sum(1), "mean": x.mean(),
        "mean0": x.mean(0), "amax1": x.amax(1), "ew": (x * 2.0 + 1.0).relu().exp(),
        "xw": x @ w, "xtx": x.T @ x, "softmax": x.softmax(-1), "var0": x.var(0),
    }
    ad.Receiver(lambda a, b: seen.append((a.shape, b.shape)), [x, out["sum1"]])
    ad.execute(device=device)
    xt, wt = torch.zeros((0, 3)), torch.tensor(W)
    want = {
        "sum": xt.sum(), "sum0": xt.sum(0), "sum1": xt.sum(1), "mean": xt.mean(),
        "mean0": xt.mean(0), "amax1": xt.amax(1), "ew": (xt * 2 + 1).relu().exp(),
        "xw": xt @ wt, "xtx": xt.T @ xt, "softmax": xt.softmax(-1), "var0": xt.var(0),
    }
    for k, t in out.items():
        got, exp = t.numpy(), want[k].numpy()
        assert got.shape == exp.shape, (k, got.shape, exp.shape)
        np.testing.assert_array_equal(got, exp, err_msg=k)      # NaN == NaN here
    assert seen == [((0, 3), (0,))]


def test_max_over_empty_dim_raises_at_trace_time(device):
    x = ad.Tensor(np.zeros((0, 3), np.float32))

    def bad():
        x.amax(0)
    with pytest.raises(IndexError) as info:
        bad()
    msg = str(info.value)
    assert "amax" in msg and "[0, 3]" in msg and f"{HERE}:{bad.__code__.co_firstlineno + 1}" \
        in msg, msg
    for f in (lambda: x.max(0), lambda: x.argmax(0), lambda: x.amin(0)):
        with pytest.raises(IndexError, match="non-zero size"):
            f()
    with pytest.raises(RuntimeError, match="reduction dim to be specified"):
        x.max()                                   # every dim: PyTorch's RuntimeError
    y = x.amax(1)                                 # a non-empty reduced dim is fine
    ad.execute(device=device)
    assert y.numpy().shape == (0,)


def test_training_step_on_empty_batch_changes_nothing(device):
    w = ad.Tensor(W, requires_grad=True)
    opt = SGD([w], lr=0.1, momentum=0.9)
    losses = []

    def body():
        opt.zero_grad()
        x = ad.Feeder(lambda: np.zeros((0, 3), np.float32), [0, 3])
        loss = (x @ w).tanh().sum()
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: losses.append(float(v)), [loss])
    ad.ir_for(3, body)
    ad.execute(device=device)
    assert losses == [0.0, 0.0, 0.0]
    np.testing.assert_array_equal(w.numpy(), W)
