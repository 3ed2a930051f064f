"""clip_grad_norm_ / clip_grad_value_ in the traced body against torch.nn.utils, the total
norm logged by a Receiver, and gradient accumulation over micro-batches."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import nn
from autodiff.nn.utils import (clip_grad_norm_, clip_grad_value_, parameters_to_vector,
                               vector_to_parameters)
from autodiff.optim import SGD


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("norm_type,max_norm", [(2.0, 1.0), (1.0, 3.0), (float("inf"), 0.5),
                                                (3.0, 1.0), (2.0, 1e3)])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    a, b = _rand((3, 4), 0), _rand(4, 1)
    A, B = ad.Tensor(a, requires_grad=True), ad.Tensor(b, requires_grad=True)
    C = ad.Tensor(b, requires_grad=True)                       # no gradient: skipped
    ((A * A).sum() * 3 + B.exp().sum()).backward()
    total = clip_grad_norm_([A, B, C], max_norm, norm_type)
    ga, gb = A.grad, B.grad
    ad.execute()
    At, Bt = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    ((At * At).sum() * 3 + Bt.exp().sum()).backward()
    tt = torch.nn.utils.clip_grad_norm_([At, Bt], max_norm, norm_type)
    assert total.shape == () and total.dtype == "float32"
    np.testing.assert_allclose(total.numpy(), tt.numpy(), rtol=1e-6)
    np.testing.assert_allclose(ga.numpy(), At.grad.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(gb.numpy(), Bt.grad.numpy(), rtol=1e-6, atol=1e-7)


def test_clip_grad_value():
    a = _rand((5,), 2) * 3
    A = ad.Tensor(a, requires_grad=True)
    (A * A).sum().backward()
    clip_grad_value_([A], 1.5)
    g = A.grad
    ad.execute()
    np.testing.assert_allclose(g.numpy(), np.clip(2 * a, -1.5, 1.5), rtol=1e-6)


def test_clipping_in_the_loop_with_a_receiver():
    lin = nn.Linear(3, 2)
    opt = SGD(lin.parameters(), lr=0.1)
    norms = []
    xs = iter(_rand((5, 4, 3), 3))

    def body():
        opt.zero_grad()
        lin(ad.Feeder(lambda: next(xs), [4, 3])).pow(2).sum().backward()
        n = clip_grad_norm_(lin.parameters(), 0.1)
        ad.Receiver(lambda v: norms.append(float(v)), [n])
        opt.step()
    ad.ir_for(5, body)
    ad.execute()
    assert len(norms) == 5 and all(v > 0.1 for v in norms)


def test_gradient_accumulation_over_micro_batches():
    """k micro-batches, each ``(loss / k).backward()``, then one step: the same update as one
    batch of k times the size (as in PyTorch)."""
    x, y = _rand((8, 3), 4), _rand((8, 2), 5)
    results = []
    for k in (1, 4):
        ad.manual_seed(0)
        lin = nn.Linear(3, 2)
        opt = SGD(lin.parameters(), lr=0.1, momentum=0.9)

        def body(k=k, lin=lin, opt=opt):
            opt.zero_grad()
            for i in range(k):
                part = slice(i * 8 // k, (i + 1) * 8 // k)
                xb, yb = ad.Tensor(x[part]), ad.Tensor(y[part])
                (nn.functional.mse_loss(lin(xb), yb) / k).backward()
            opt.step()
        ad.ir_for(3, body)
        ad.execute()
        results.append(lin.weight.numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-6)


def test_parameters_vector_round_trip():
    lin = nn.Linear(2, 3)
    v = parameters_to_vector(lin.parameters())
    vector_to_parameters(v * 2.0, lin.parameters())
    w = lin.weight.numpy()
    ad.execute()
    np.testing.assert_allclose(lin.weight.numpy(), 2 * w)
