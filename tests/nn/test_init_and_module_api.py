"""nn.init against PyTorch's distributions and bounds; Module.apply, named_modules,
named_parameters, register_buffer (persistent or not), requires_grad_ (no gradient work
traced for frozen parameters)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import nn
from autodiff.graph.ir import Op
from autodiff.graph.trace import TRACER
from autodiff.nn import init
from autodiff.optim import SGD


def _param(*shape):
    return nn.Parameter(np.zeros(shape, np.float32))


@pytest.mark.parametrize("name,args,shape", [
    ("xavier_uniform_", dict(gain=2.0), (64, 48)), ("xavier_normal_", {}, (64, 48)),
    ("kaiming_uniform_", dict(a=math.sqrt(5)), (32, 16, 3, 3)),
    ("kaiming_normal_", dict(mode="fan_out", nonlinearity="relu"), (32, 16, 3, 3)),
    ("uniform_", dict(a=-0.3, b=0.7), (100, 50)), ("normal_", dict(mean=1.0, std=0.2), (100, 50)),
    ("trunc_normal_", dict(std=0.5, a=-0.6, b=0.8), (100, 50))])
def test_random_inits_match_torch_statistics(name, args, shape):
    ad.manual_seed(0)
    p = _param(*shape)
    assert getattr(init, name)(p, **args) is p
    ours = p.numpy().ravel()
    theirs = getattr(torch.nn.init, name)(torch.empty(shape), **args).numpy().ravel()
    assert abs(ours.mean() - theirs.mean()) < 0.02 + 0.1 * theirs.std()
    assert abs(ours.std() - theirs.std()) < 0.1 * theirs.std()
    assert ours.min() >= theirs.min() - 0.3 * theirs.std() - 1e-6 or name.endswith("normal_")
    if name in ("uniform_", "trunc_normal_", "xavier_uniform_", "kaiming_uniform_"):
        lo, hi = theirs.min(), theirs.max()
        span = hi - lo
        assert ours.min() >= lo - 0.02 * span and ours.max() <= hi + 0.02 * span


def test_deterministic_inits_and_gain():
    p = _param(3, 4)
    init.constant_(p, 0.5)
    assert np.all(p.numpy() == 0.5)
    init.ones_(p)
    assert np.all(p.numpy() == 1)
    init.zeros_(p)
    assert np.all(p.numpy() == 0)
    init.eye_(p)
    np.testing.assert_array_equal(p.numpy(), np.eye(3, 4))
    w = _param(4, 2, 3, 3)
    init.dirac_(w)
    np.testing.assert_array_equal(w.numpy(), torch.nn.init.dirac_(torch.empty(4, 2, 3, 3)).numpy())
    for nl, prm in (("relu", None), ("leaky_relu", 0.2), ("tanh", None), ("selu", None),
                    ("conv2d", None)):
        assert init.calculate_gain(nl, prm) == pytest.approx(torch.nn.init.calculate_gain(nl, prm))


def test_orthogonal():
    for shape in ((5, 3), (3, 5), (4, 2, 2)):
        p = _param(*shape)
        init.orthogonal_(p, gain=2.0)
        q = p.numpy().reshape(shape[0], -1)
        small = min(q.shape)
        gram = q @ q.T if q.shape[0] == small else q.T @ q
        np.testing.assert_allclose(gram, 4.0 * np.eye(small), atol=1e-5)


def test_init_errors():
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(_param(3))
    with pytest.raises(ValueError, match="Mode"):
        init.kaiming_uniform_(_param(3, 3), mode="fan")
    with pytest.raises(RuntimeError, match="traced value"):
        init.zeros_(ad.Tensor(np.ones(2, np.float32)) * 2.0)


def test_apply_named_modules_and_buffers():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.register_buffer("stat", ad.Tensor(np.zeros(2, np.float32)))
            self.register_buffer("scratch", ad.Tensor(np.ones(2, np.float32)), persistent=False)

    shared = Block()
    net = nn.Sequential(shared, nn.ReLU(), shared)
    assert [n for n, _ in net.named_modules()] == ["", "0", "0.lin", "1"]
    # PyTorch's order: own parameters, own persistent buffers, then children; a shared
    # module appears under each of its names
    assert list(net.state_dict()) == ["0.stat", "0.lin.weight", "0.lin.bias", "2.stat",
                                      "2.lin.weight", "2.lin.bias"]
    assert [n for n, _ in net.named_buffers()] == ["0.stat", "0.scratch"]
    seen = []
    net.apply(lambda m: seen.append(type(m).__name__))
    assert seen == ["Linear", "Block", "ReLU", "Sequential"]
    net.apply(lambda m: init.zeros_(m.weight) if isinstance(m, nn.Linear) else None)
    assert np.all(shared.lin.weight.numpy() == 0)
    assert [n for n, _ in shared.named_parameters(prefix="blk")] == ["blk.lin.weight",
                                                                     "blk.lin.bias"]
    assert [n for n, _ in shared.named_parameters(recurse=False)] == []
    with pytest.raises(KeyError, match="already exists"):
        shared.register_buffer("lin", ad.Tensor(np.zeros(1, np.float32)))
    assert net.get_submodule("0.lin") is shared.lin


def test_requires_grad_freezes_without_gradient_work():
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    net[0].requires_grad_(False)
    x = ad.Tensor(np.ones((2, 3), np.float32))
    net(x).sum().backward()
    assert net[0].weight.grad is None and net[0].bias.grad is None
    assert net[2].weight.grad is not None
    dots = [n for n in TRACER.root.graph.nodes if n.op is Op.DOT]
    assert len(dots) == 3          # 2 forward + the last layer's weight gradient only
    opt = SGD(net.parameters(), lr=0.1)
    w0 = net[0].weight.numpy()
    opt.step()
    ad.execute()
    np.testing.assert_array_equal(net[0].weight.numpy(), w0)


def test_load_state_dict_reports_keys_like_torch():
    net = nn.Linear(2, 2)
    res = net.load_state_dict({"weight": np.zeros((2, 2), np.float32), "extra": np.zeros(1)},
                              strict=False)
    assert res.missing_keys == ["bias"] and res.unexpected_keys == ["extra"]
    with pytest.raises(RuntimeError, match="missing"):
        net.load_state_dict({"weight": np.zeros((2, 2), np.float32)})
