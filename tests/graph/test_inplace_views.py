"""In-place updates of views reach the tensor they view, as in PyTorch (found by a
differential fuzz: ``y[0].add_(10)`` and ``W[1].mul_(0)`` used to leave ``y`` and ``W`` as
they were, silently)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from backends import device_params
from op_helper import check_program


def _program(lib, x, g):
    """The same in-place updates of views on both libraries: ``lib`` is ``ad`` or
    ``torch``; returns the values to compare and the leaf whose gradient to compare."""
    t = lib.tensor(x, requires_grad=True)
    y = t * 1.0
    y[0].add_(10.0)                                 # basic index of a traced tensor
    y.t()[1].mul_(g)                                # index of a transpose
    y.view(-1)[3:5].sub_(0.5)                       # slice of a view
    y.narrow(1, 2, 2).div_(4.0)
    y.unsqueeze(0)[0, 1, 0].fill_(3.0)
    y.permute(1, 0)[0].mul_(0.5)
    loss = (y * y).sum()
    loss.backward()
    w = lib.tensor(x.copy())                        # a variable: ASSIGN through views
    w[1].mul_(0.0)
    w.t()[0].fill_(7.0)
    w.squeeze()[0, 1:].zero_()
    return [y, loss, w], t


@pytest.mark.parametrize("device", device_params())
def test_inplace_on_views_reaches_the_base(device):
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
    g = float(rng.uniform(0.5, 2.0))
    check_program(_program, x, g, device=device)


def test_view_of_a_parameter_under_no_grad():
    """A parameter's row zeroed through a view under ``no_grad`` (an ``ASSIGN``), and the
    same without ``no_grad`` refused like PyTorch's leaf-view rule."""
    p = ad.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    with ad.no_grad():
        p[0].zero_()
    with pytest.raises(RuntimeError, match="leaf tensor that requires grad"):
        p[1].mul_(2.0)
    ad.execute(device="numpy")
    np.testing.assert_array_equal(p.numpy(), [[0, 0, 0], [1, 1, 1]])


def test_advanced_indexing_stays_a_copy():
    """Advanced indexing copies (in PyTorch too): updating its result leaves the tensor."""
    x = ad.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    x[[0, 1]].zero_()
    x[:, [2]].fill_(9.0)
    ad.execute(device="numpy")
    np.testing.assert_array_equal(x.numpy(), np.arange(6).reshape(2, 3))


@pytest.mark.parametrize("device", device_params())
def test_inplace_variants_match_torch(device):
    """``clamp_``, ``exp_``, ``masked_fill_``, ``addcmul_``, ``pow_``, ``sigmoid_`` and
    ``lerp_`` (PyTorch's in-place forms, some on views) with a gradient through them."""
    rng = np.random.default_rng(1)
    x = rng.uniform(-1.5, 1.5, (3, 5)).astype(np.float32)
    w = rng.uniform(-1.0, 1.0, (3, 5)).astype(np.float32)

    updates = [lambda y, W: y[0].clamp_(-0.5, 0.5), lambda y, W: y.t()[1].exp_(),
               lambda y, W: y.masked_fill_(y > 1.2, 0.25),
               lambda y, W: y.addcmul_(W, W, value=0.5), lambda y, W: y[2].sigmoid_(),
               lambda y, W: y[1:].pow_(2), lambda y, W: y.lerp_(W, 0.25)]

    def run(lib):                       # each update on its own copy (torch's version checks)
        t = lib.tensor(x, requires_grad=True)
        W = lib.tensor(w)
        ys = []
        for u in updates:
            y = t * 1.0
            u(y, W)
            ys.append(y)
        y = lib.stack(ys)
        (y * W).sum().backward()
        return y, t

    y, t = run(ad)
    ad.execute(device=device)
    yt, tt = run(torch)
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(t.grad.numpy(), tt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_inplace_variant_refuses_a_cast_torch_refuses():
    i = ad.tensor(np.arange(3, dtype=np.int32))
    with pytest.raises(RuntimeError, match="can't be cast"):
        i.sqrt_()
