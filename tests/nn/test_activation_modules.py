"""Every activation module against its ``torch.nn`` namesake: constructor arguments and
defaults, forward values and input gradients (PReLU: its weight's gradient too)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import nn

CASES = [("LeakyReLU", (), {}), ("LeakyReLU", (0.2,), {}), ("ELU", (), {"alpha": 0.7}),
         ("CELU", (1.3,), {}), ("SELU", (), {}), ("SiLU", (), {}), ("Mish", (), {}),
         ("Softplus", (), {"beta": 2.0, "threshold": 3.0}), ("Softsign", (), {}),
         ("Hardtanh", (-0.5, 1.5), {}), ("ReLU6", (), {}), ("Hardsigmoid", (), {}),
         ("Hardswish", (), {}), ("LogSigmoid", (), {}), ("GLU", (), {"dim": 1}),
         ("Softmin", (), {"dim": 1}), ("Softmax2d", (), {}), ("ReLU", (), {}),
         ("GELU", (), {"approximate": "tanh"}), ("Sigmoid", (), {}), ("Tanh", (), {}),
         ("Softmax", (1,), {}), ("LogSoftmax", (), {"dim": 2})]


@pytest.mark.parametrize("name,args,kw", CASES, ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
def test_activation_module_matches_torch(name, args, kw):
    x = (np.random.default_rng(0).standard_normal((2, 4, 3, 5)) * 3).astype(np.float32)
    x[np.abs(x) < 0.05] = 0.3                                # away from kinks
    g = np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    m, t = getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    xa = ad.Tensor(x, requires_grad=True)
    y = m(xa)
    gs = np.random.default_rng(1).standard_normal(y.shape).astype(np.float32)
    y.backward(ad.Tensor(gs))
    gx = xa.grad
    ad.execute()
    xt = torch.tensor(x, requires_grad=True)
    yt = t(xt)
    yt.backward(torch.tensor(gs))
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gx.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-6)
    assert g.shape == x.shape


@pytest.mark.parametrize("n", [1, 4])
def test_prelu(n):
    t = torch.nn.PReLU(n, init=0.1)
    m = nn.PReLU(n, init=0.1)
    assert list(m.state_dict()) == list(t.state_dict())
    with torch.no_grad():
        t.weight.copy_(torch.linspace(0.1, 0.4, n))
    m.load_state_dict(t.state_dict())
    x = np.random.default_rng(2).standard_normal((3, 4, 5)).astype(np.float32)
    xa = ad.Tensor(x, requires_grad=True)
    (m(xa) ** 2).sum().backward()
    gx, gw = xa.grad, m.weight.grad
    ad.execute()
    xt = torch.tensor(x, requires_grad=True)
    (t(xt) ** 2).sum().backward()
    np.testing.assert_allclose(gx.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gw.numpy(), t.weight.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_bad_arguments():
    assert nn.ReLU(inplace=True).inplace and nn.ELU(inplace=True).inplace
    with pytest.raises(TypeError, match="unexpected keyword"):
        nn.LeakyReLU(slope=0.1)
    with pytest.raises(ValueError, match="3 or 4 dims"):
        nn.Softmax2d()(ad.Tensor(np.zeros((2, 3), np.float32)))
