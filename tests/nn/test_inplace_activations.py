"""``inplace=True`` of the activation functions and modules: the input tensor takes the
result, as in PyTorch, so code that reads the input afterwards sees the same values and
gradients as PyTorch's (it used to see the input unchanged)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import nn
from autodiff.nn import functional as F

torch.set_num_threads(1)
TOL = dict(rtol=1e-5, atol=1e-6)

CASES = {
    "relu": ((), {}), "leaky_relu": ((0.2,), {}), "elu": ((0.7,), {}), "celu": ((1.3,), {}),
    "selu": ((), {}), "silu": ((), {}), "mish": ((), {}), "hardtanh": ((-0.5, 0.8), {}),
    "relu6": ((), {}), "hardsigmoid": ((), {}), "hardswish": ((), {}),
    "threshold": ((0.1, -2.0), {}), "rrelu": ((0.1, 0.3), {"training": False}),
}


@pytest.mark.parametrize("name", list(CASES))
def test_functional_inplace_updates_the_input_like_torch(name):
    args, kw = CASES[name]
    x = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32) * 4
    w = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    xa = ad.Tensor(x, requires_grad=True)
    h = xa * 1.5                                   # not a leaf: in place is allowed
    out = getattr(F, name)(h, *args, inplace=True, **kw)
    assert out is h
    ((h * ad.Tensor(w)).sum() + (out * out).sum()).backward()
    ad.execute()
    xt = torch.tensor(x, requires_grad=True)
    ht = xt * 1.5
    outt = getattr(torch.nn.functional, name)(ht, *args, inplace=True, **kw)
    ((ht * torch.tensor(w)).sum() + (outt * outt).sum()).backward()
    np.testing.assert_allclose(h.numpy(), ht.detach().numpy(), **TOL)
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), **TOL)


@pytest.mark.parametrize("inplace", [False, True])
def test_modules_with_inplace_like_torch(inplace):
    x = np.random.default_rng(2).standard_normal((3, 5)).astype(np.float32)
    mods = [(nn.ReLU(inplace), torch.nn.ReLU(inplace)),
            (nn.ELU(0.5, inplace), torch.nn.ELU(0.5, inplace)),
            (nn.Hardtanh(-0.3, 0.3, inplace), torch.nn.Hardtanh(-0.3, 0.3, inplace))]
    for m, t in mods:
        h = ad.Tensor(x) * 2.0
        y = m(h)
        z = h + y                                  # reads the input after the module
        ad.execute()
        ht = torch.tensor(x) * 2.0
        zt = ht + t(ht)
        np.testing.assert_allclose(z.numpy(), zt.numpy(), **TOL)


def test_inplace_on_a_leaf_that_requires_grad_raises_like_torch():
    x = ad.Tensor(np.ones(3, np.float32), requires_grad=True)
    with pytest.raises(RuntimeError):
        F.relu(x, inplace=True)
    with pytest.raises(RuntimeError):
        torch.nn.functional.relu(torch.ones(3, requires_grad=True), inplace=True)


@pytest.mark.parametrize("make", [lambda: nn.Dropout(0.5, inplace=True, seed=1),
                                  lambda: nn.Dropout2d(0.5, inplace=True, seed=1)])
def test_dropout_modules_with_inplace_update_the_input(make):
    m = make()
    x = np.ones((4, 6, 3, 5), np.float32)
    h = ad.Tensor(x) * 1.0
    y = m(h)
    assert y is h
    ad.execute()
    v = h.numpy()
    assert set(np.unique(v)) == {0.0, 2.0}           # the input holds the dropped values
