"""Lazy modules against PyTorch's: uninitialized parameters (``UninitializedParameter``
semantics: no shape, errors of torch's types), materialisation at the first call (shapes,
initialisation bounds, the class becoming ``cls_to_become``), ``has_uninitialized_params``,
``state_dict`` / ``load_state_dict`` before and after, and training where the first call
happens while an ``ir_for`` body is traced with an optimizer built before it."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import nn
from autodiff.nn import functional as F
from autodiff.nn.modules.lazy import LazyModuleMixin
from autodiff.nn.parameter import UninitializedBuffer, UninitializedParameter, is_lazy
from autodiff.optim import SGD, Adam

torch.set_num_threads(1)


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


CASES = [  # class name, args, kwargs, input shape
    ("LazyLinear", (3,), {}, (4, 5)),
    ("LazyLinear", (2,), dict(bias=False), (2, 3, 6)),
    ("LazyConv1d", (4, 3), dict(stride=2, padding=1), (2, 3, 9)),
    ("LazyConv2d", (4, 3), dict(groups=2, padding="same", padding_mode="reflect"), (2, 6, 5, 5)),
    ("LazyConv3d", (2, (2, 1, 2)), dict(bias=False), (3, 4, 3, 4)),              # unbatched
    ("LazyConvTranspose1d", (3, 2), dict(stride=2, output_padding=1), (2, 4, 5)),
    ("LazyConvTranspose2d", (4, 3), dict(groups=2, padding=1), (1, 4, 3, 4)),
    ("LazyConvTranspose3d", (2, 2), dict(stride=(1, 2, 1)), (1, 3, 2, 3, 2)),
    ("LazyBatchNorm1d", (), {}, (4, 3, 5)),
    ("LazyBatchNorm2d", (), dict(momentum=None, affine=False), (3, 2, 4, 3)),
    ("LazyBatchNorm3d", (), dict(track_running_stats=False), (2, 3, 2, 3, 2)),
    ("LazyInstanceNorm1d", (), {}, (2, 3, 6)),
    ("LazyInstanceNorm2d", (), dict(affine=False, track_running_stats=False), (2, 3, 4, 5)),
    ("LazyInstanceNorm3d", (), {}, (2, 3, 2, 4, 3)),
]


@pytest.mark.filterwarnings("ignore:input's size at dim=1 does not match num_features")
@pytest.mark.parametrize("name,args,kw,shape", CASES)
def test_lazy_module_materialises_as_torch(name, args, kw, shape):
    ours, theirs = getattr(nn, name)(*args, **kw), getattr(torch.nn, name)(*args, **kw)
    assert isinstance(ours, LazyModuleMixin)
    # (PyTorch's normalisation layers also show a ``bias`` flag autodiff's do not take)
    assert re.sub("bias=(True|False), ", "", repr(ours)) == \
        re.sub("bias=(True|False), ", "", repr(theirs))
    assert ours.has_uninitialized_params() == theirs.has_uninitialized_params()
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for (n, p), (tn, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert n == tn and type(p).__name__ == type(tp).__name__
    x = _rand(shape, 0)
    ours(ad.Tensor(x))
    theirs(torch.tensor(x))
    ad.execute()                                  # the first call's statistics updates
    assert type(ours) is getattr(nn, type(theirs).__name__)          # cls_to_become
    assert "_initialize_hook" not in vars(ours)
    assert not any(is_lazy(t) for t in [*ours.parameters(), *ours.buffers()])
    for attr in ("in_features", "in_channels", "num_features"):
        if hasattr(theirs, attr):
            # PyTorch leaves num_features 0 where there is nothing to materialise
            want = getattr(theirs, attr) or shape[1]
            assert getattr(ours, attr) == want, attr
    assert [(n, p.shape) for n, p in ours.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
    assert [(n, b.shape, b.dtype.name) for n, b in ours.named_buffers()] == \
        [(n, tuple(b.shape), str(b.dtype).replace("torch.", ""))
         for n, b in theirs.named_buffers()]
    for (n, p), (_, tp) in zip(ours.named_parameters(), theirs.named_parameters()):
        assert type(p) is nn.Parameter and p.requires_grad
        v, t = p.numpy(), tp.detach().numpy()
        if "Norm" in name:                        # ones and zeros, as torch
            np.testing.assert_array_equal(v, t)
        else:                                     # U(-1/sqrt(fan_in), 1/sqrt(fan_in))
            w = ours.weight.shape
            bound = 1 / np.sqrt(w[1] * np.prod(w[2:]))
            assert np.abs(v).max() <= bound + 1e-7
            if n == "weight":
                assert np.abs(v).max() > 0.5 * bound
    # with torch's values loaded, the same output and gradients
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.randn(p.shape))
    ours.load_state_dict(theirs.state_dict())
    xa, xt = ad.Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    y, yt = ours(xa), theirs(xt)
    g = _rand(tuple(yt.shape), 1)
    y.backward(ad.Tensor(g))
    yt.backward(torch.tensor(g))
    grads = {k: p.grad for k, p in ours.named_parameters()}
    gx = xa.grad
    ad.execute()
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gx.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    for k, p in theirs.named_parameters():
        np.testing.assert_allclose(grads[k].numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-4)
    for k, v in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[k], v.numpy(), rtol=1e-5, atol=1e-6)


def test_lazy_instance_norm_takes_an_unbatched_input_s_channels():
    """PyTorch's lazy instance norms read dim 1 even of an unbatched input (and then
    refuse it); here the channel dim is used."""
    m = nn.LazyInstanceNorm3d()
    y = m(ad.Tensor(_rand((3, 2, 4, 3), 0)))
    assert type(m) is nn.InstanceNorm3d and m.num_features == 3 and m.weight.shape == (3,)
    t = torch.nn.InstanceNorm3d(3, affine=True, track_running_stats=True)
    ad.execute()
    np.testing.assert_allclose(y.numpy(), t(torch.tensor(_rand((3, 2, 4, 3), 0))).detach()
                               .numpy(), rtol=1e-4, atol=1e-5)


def test_uninitialized_parameter_semantics():
    m = nn.LazyLinear(3)
    w = m.weight
    assert isinstance(w, UninitializedParameter) and isinstance(w, nn.Parameter)
    assert is_lazy(w) and repr(w) == "<UninitializedParameter>" and w.requires_grad
    assert w.dtype == ad.float32
    with pytest.raises(RuntimeError, match="Can't access the shape"):
        w.shape
    with pytest.raises(ValueError):                  # torch: ValueError for an op
        w * 2.0
    with pytest.raises(ValueError):
        w.numpy()
    sd = m.state_dict()                              # the placeholders themselves, as torch
    assert sd["weight"] is w and is_lazy(sd["bias"])
    b = UninitializedBuffer()
    assert not b.requires_grad and repr(b) == "<UninitializedBuffer>"
    b.materialize((2, 3))
    assert type(b) is ad.Tensor and b.shape == (2, 3) and not is_lazy(b)
    p = UninitializedParameter(requires_grad=False)
    p.materialize(4)
    assert type(p) is nn.Parameter and p.shape == (4,) and not p.requires_grad


def test_load_state_dict_materialises_then_the_call_swaps_the_class():
    t = torch.nn.Conv1d(2, 4, 3)
    m = nn.LazyConv1d(4, 3)
    m.load_state_dict(t.state_dict())
    assert not m.has_uninitialized_params() and type(m) is nn.LazyConv1d
    assert m.weight.shape == (4, 2, 3) and type(m.weight) is nn.Parameter
    x = _rand((1, 2, 6), 2)
    y = m(ad.Tensor(x))
    ad.execute()
    assert type(m) is nn.Conv1d and m.in_channels == 2
    np.testing.assert_allclose(y.numpy(), t(torch.tensor(x)).detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    # an uninitialized state into an uninitialized module: nothing to load, nothing missing
    a, b = nn.LazyLinear(2), nn.LazyLinear(2)
    assert a.load_state_dict(b.state_dict()) == ([], [])
    assert a.has_uninitialized_params()


def test_optimizer_built_before_the_first_call_in_a_traced_loop():
    """As in PyTorch, the optimizer holds the placeholders, which the first call (here while
    the ir_for body is traced) turns into the parameters: Adam trains them. Same losses
    and weights as torch's Adam from the same initial values."""
    ad.manual_seed(3)
    model = nn.Sequential(nn.LazyLinear(6), nn.ReLU(), nn.LazyLinear(2))
    opt = Adam(model.parameters(), lr=0.05)
    assert len(opt.param_groups[0]["params"]) == 4
    x, target = _rand((8, 5), 4), _rand((8, 2), 5)
    losses = []

    def step():
        opt.zero_grad()
        loss = F.mse_loss(model(ad.Tensor(x)), ad.Tensor(target))
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: losses.append(float(v)), [loss])

    ad.ir_for(range(4), step)
    assert [type(m) for m in model] == [nn.Linear, nn.ReLU, nn.Linear]
    initial = {k: v.copy() for k, v in model.state_dict().items()}   # set at the first call
    ad.execute()
    theirs = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.ReLU(), torch.nn.Linear(6, 2))
    theirs.load_state_dict({k: torch.tensor(v) for k, v in initial.items()})
    topt = torch.optim.Adam(theirs.parameters(), lr=0.05)
    want = []
    for _ in range(4):
        topt.zero_grad()
        loss = torch.nn.functional.mse_loss(theirs(torch.tensor(x)), torch.tensor(target))
        loss.backward()
        topt.step()
        want.append(loss.item())
    np.testing.assert_allclose(losses, want, rtol=1e-5, atol=1e-6)
    for k, v in theirs.state_dict().items():
        np.testing.assert_allclose(model.state_dict()[k], v.numpy(), rtol=1e-4, atol=1e-6)


def test_sgd_on_a_lazy_batch_norm_network_in_train_and_eval():
    ad.manual_seed(0)
    model = nn.Sequential(nn.LazyConv2d(3, 3, padding=1), nn.LazyBatchNorm2d(), nn.ReLU())
    opt = SGD(model.parameters(), lr=0.1)
    x = _rand((2, 2, 4, 4), 6)

    def step():
        opt.zero_grad()
        model(ad.Tensor(x)).square().mean().backward()
        opt.step()

    ad.ir_for(range(2), step)
    ad.execute()
    bn = model[1]
    assert type(bn) is nn.BatchNorm2d and int(bn.num_batches_tracked.numpy()) == 2
    assert np.abs(bn.running_mean.numpy()).max() > 0
    model.eval()
    y = model(ad.Tensor(x))
    ad.execute()
    assert y.shape == (2, 3, 4, 4)


def test_lazy_errors():
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.LazyConv2d(4, 3, groups=2)(ad.Tensor(_rand((1, 3, 5, 5), 0)))
    with pytest.raises(RuntimeError, match="Expected 3D .unbatched. or 4D .batched. input"):
        nn.LazyConv2d(4, 3)(ad.Tensor(_rand((5, 5), 0)))
    m = nn.LazyLinear(3)
    m(ad.Tensor(_rand((2, 5), 0)))
    with pytest.raises(RuntimeError):                # now a Linear(5, 3), as torch's
        m(ad.Tensor(_rand((2, 6), 0)))
