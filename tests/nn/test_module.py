"""Modules: parameter order and names, state dicts, files, initialisation, MSELoss."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff.nn import Linear, MSELoss, Parameter, Sequential, Sigmoid, mse_loss


def _pair(seed: int = 0):
    torch.manual_seed(seed)
    ref = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Sigmoid(), torch.nn.Linear(4, 3))
    ad.manual_seed(seed)
    net = Sequential(Linear(5, 4), Sigmoid(), Linear(4, 3))
    return net, ref


def test_parameter_order_and_names_match_torch():
    net, ref = _pair()
    names = [n for n, _ in net.named_parameters()]
    assert names == [n for n, _ in ref.named_parameters()]
    assert names == ["0.weight", "0.bias", "2.weight", "2.bias"]
    shapes = [p.shape for p in net.parameters()]
    assert shapes == [tuple(p.shape) for p in ref.parameters()]
    assert all(isinstance(p, Parameter) and p.requires_grad for p in net.parameters())
    # Deterministic: the same order on every call and for every instance.
    assert [id(p) for p in net.parameters()] == [id(p) for p in net.parameters()]
    assert [n for n, _ in _pair(1)[0].named_parameters()] == names


def test_shared_parameter_listed_once():
    lin = Linear(2, 2)
    net = Sequential(lin, Sigmoid(), lin)
    assert [n for n, _ in net.named_parameters()] == ["0.weight", "0.bias"]


def _nested(nn, param, ones):
    """The same nested model in autodiff (nn=autodiff.nn) or torch (nn=torch.nn)."""
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(3, 3)
            self.scale = param(ones(3))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.first = Block()
            self.head = nn.Sequential(nn.Sigmoid(), nn.Linear(3, 1))
    return Net()


def test_nested_custom_module_names_match_torch():
    import autodiff.nn as adnn
    ours = _nested(adnn, Parameter, np.ones)
    theirs = _nested(torch.nn, torch.nn.Parameter, torch.ones)
    # torch lists a module's own parameters before those of its children.
    assert list(ours.state_dict()) == list(theirs.state_dict()) == [
        "first.scale", "first.proj.weight", "first.proj.bias", "head.1.weight", "head.1.bias"]
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]


@pytest.mark.parametrize("as_numpy", [True, False])
def test_load_torch_state_dict_and_round_trip(as_numpy):
    net, ref = _pair(seed=3)
    sd = ref.state_dict()
    net.load_state_dict({k: v.numpy() for k, v in sd.items()} if as_numpy else sd)
    ours = net.state_dict()
    assert list(ours) == list(sd)
    for k, v in sd.items():
        assert ours[k].dtype == np.float32
        np.testing.assert_array_equal(ours[k], v.numpy(), err_msg=k)
    # Back into torch: the same model.
    ref2 = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Sigmoid(), torch.nn.Linear(4, 3))
    ref2.load_state_dict({k: torch.from_numpy(v) for k, v in ours.items()})
    x = np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)
    y = net(ad.Tensor(x))
    ad.execute()
    np.testing.assert_allclose(y.numpy(), ref2(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_state_dict_is_a_copy():
    net, _ = _pair()
    sd = net.state_dict()
    sd["0.bias"][:] = 42.0
    assert not np.any(net.state_dict()["0.bias"] == 42.0)


def test_load_state_dict_errors():
    net, _ = _pair()
    sd = net.state_dict()
    with pytest.raises(KeyError, match="missing.*0.bias"):
        net.load_state_dict({k: v for k, v in sd.items() if k != "0.bias"})
    with pytest.raises(KeyError, match="unexpected.*extra"):
        net.load_state_dict({**sd, "extra": np.zeros(1)})
    with pytest.raises(RuntimeError, match="size mismatch for 0.weight"):     # torch's
        net.load_state_dict({**sd, "0.weight": np.zeros((5, 4))})
    net.load_state_dict({"0.bias": np.full(4, 7.0)}, strict=False)
    np.testing.assert_array_equal(net.state_dict()["0.bias"], np.full(4, 7.0, np.float32))


def test_save_load_npz(tmp_path):
    net, _ = _pair(seed=5)
    path = tmp_path / "net.npz"
    net.save(path)
    other, _ = _pair(seed=6)
    assert not np.array_equal(other.state_dict()["0.weight"], net.state_dict()["0.weight"])
    other.load(path)
    for (k, a), (k2, b) in zip(net.state_dict().items(), other.state_dict().items()):
        assert k == k2
        np.testing.assert_array_equal(a, b, err_msg=k)


@pytest.mark.parametrize("fan_in,fan_out", [(1, 3), (16, 8), (255, 255)])
def test_linear_init_bounds(fan_in, fan_out):
    lin = Linear(fan_in, fan_out)
    bound = 1.0 / math.sqrt(fan_in)
    w, b = lin.weight.numpy(), lin.bias.numpy()
    assert w.shape == (fan_out, fan_in) and b.shape == (fan_out,)
    assert w.dtype == np.float32 and b.dtype == np.float32
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    if w.size >= 64:                      # spread over the interval, not a constant
        assert np.abs(w).max() > 0.9 * bound and w.std() > 0.4 * bound


def test_linear_without_bias_and_manual_seed():
    lin = Linear(4, 2, bias=False)
    assert lin.bias is None and [n for n, _ in lin.named_parameters()] == ["weight"]
    ad.manual_seed(7)
    a = Linear(4, 2).weight.numpy()
    ad.manual_seed(7)
    np.testing.assert_array_equal(Linear(4, 2).weight.numpy(), a)


def test_linear_forward_backward_matches_torch():
    net, ref = _pair(seed=8)
    net.load_state_dict(ref.state_dict())
    x = np.random.default_rng(1).standard_normal((6, 5)).astype(np.float32)
    out = net(ad.Tensor(x))
    out.sum().backward()
    grads = [p.grad for p in net.parameters()]
    ad.execute()
    tout = ref(torch.from_numpy(x))
    tout.sum().backward()
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    for g, (name, p) in zip(grads, ref.named_parameters()):
        np.testing.assert_allclose(g.numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=name)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("target_shape", [(4, 3), (3,)])
def test_mse_loss_matches_torch(reduction, target_shape):
    rng = np.random.default_rng(2)
    a_np = rng.standard_normal((4, 3)).astype(np.float32)
    t_np = rng.standard_normal(target_shape).astype(np.float32)
    a = ad.Tensor(a_np, requires_grad=True)
    t = ad.Tensor(t_np, requires_grad=True)
    loss = MSELoss(reduction=reduction)(a, t)
    loss.backward()
    ga, gt = a.grad, t.grad
    ad.execute()

    ta = torch.tensor(a_np, requires_grad=True)
    tt = torch.tensor(t_np, requires_grad=True)
    with warnings.catch_warnings():        # torch warns about broadcasting targets
        warnings.simplefilter("ignore")
        tl = torch.nn.MSELoss(reduction=reduction)(ta, tt)
    tl.sum().backward()
    np.testing.assert_allclose(loss.numpy(), tl.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ga.numpy(), ta.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gt.numpy(), tt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_mse_loss_bad_reduction():
    with pytest.raises(ValueError, match="reduction"):
        mse_loss(ad.Tensor(np.ones(2)), ad.Tensor(np.ones(2)), reduction="max")


def test_zero_grad_and_train_eval():
    net, _ = _pair()
    net(ad.Tensor(np.ones((1, 5), np.float32))).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.eval()
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
