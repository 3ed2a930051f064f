"""nn.utils.parametrize / parametrizations (weight_norm, spectral_norm) and the legacy
nn.utils.weight_norm against torch: state_dict keys, shapes and values, forward values
and gradients, a few SGD steps in an ir_for loop (spectral norm's u/v buffers updated each
iteration), loading a torch state_dict, assignment through right_inverse, removal, errors."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from backends import device_params

import autodiff as ad
from autodiff import nn
from autodiff.nn.utils import parametrizations as P
from autodiff.nn.utils import parametrize, remove_weight_norm, weight_norm
from autodiff.optim import SGD

TP = torch.nn.utils.parametrizations


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _twins(make_ad, make_torch):
    """An autodiff module and a torch one with the same (random) values."""
    ad.manual_seed(0)
    m = make_ad()
    t = make_torch()
    t.load_state_dict({k: torch.tensor(v) for k, v in m.state_dict().items()})
    return m, t


def _assert_state(m, t, rtol=1e-6, atol=1e-7):
    sd, tsd = m.state_dict(), t.state_dict()
    assert list(sd) == list(tsd)
    for k, v in tsd.items():
        assert sd[k].shape == tuple(v.shape), k
        np.testing.assert_allclose(sd[k], v.numpy(), rtol=rtol, atol=atol, err_msg=k)


def _torch_train(t, data, lr, loss_fn):
    opt = torch.optim.SGD(t.parameters(), lr=lr)
    losses = []
    for x in data:
        opt.zero_grad()
        loss = loss_fn(t(torch.tensor(x)))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _ad_train(m, data, lr, loss_fn, device):
    opt = SGD(m.parameters(), lr=lr)
    losses, it = [], iter(data)

    def body():
        opt.zero_grad()
        loss = loss_fn(m(ad.Feeder(lambda: next(it), list(data[0].shape))))
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: losses.append(float(v)), [loss])
    ad.ir_for(len(data), body)
    ad.execute(device=device)
    return losses


# -- weight_norm (parametrization) -------------------------------------------------------
@pytest.mark.parametrize("make,dim", [
    (lambda lib: lib.Linear(3, 4), 0), (lambda lib: lib.Linear(3, 4), 1),
    (lambda lib: lib.Linear(3, 4), None), (lambda lib: lib.Conv2d(2, 3, 2), 0),
    (lambda lib: lib.Conv2d(2, 3, 2), -2), (lambda lib: lib.Conv2d(2, 3, 2), 1)])
def test_weight_norm_state_forward_and_gradients(make, dim):
    m, t = _twins(lambda: make(nn), lambda: make(torch.nn))
    P.weight_norm(m, dim=dim)
    TP.weight_norm(t, dim=dim)
    assert type(m).__name__ == type(t).__name__ == f"Parametrized{type(t).__name__[12:]}"
    _assert_state(m, t)
    x = _rand((2, 3) if isinstance(t, torch.nn.Linear) else (2, 2, 4, 4), 1)
    y = m(ad.Tensor(x))
    (y * y.tanh()).sum().backward()
    g0 = m.parametrizations.weight.original0.grad
    g1 = m.parametrizations.weight.original1.grad
    ad.execute()
    yt = t(torch.tensor(x))
    (yt * yt.tanh()).sum().backward()
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    tl = t.parametrizations.weight
    np.testing.assert_allclose(g0.numpy(), tl.original0.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(g1.numpy(), tl.original1.grad.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", device_params())
def test_weight_norm_trains_in_a_loop_like_torch(device):
    m, t = _twins(lambda: nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2)),
                  lambda: torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(),
                                              torch.nn.Linear(5, 2)))
    P.weight_norm(m[0])
    P.weight_norm(m[2], dim=None)
    TP.weight_norm(t[0])
    TP.weight_norm(t[2], dim=None)
    data = [_rand((4, 3), 10 + i) for i in range(4)]
    losses = _ad_train(m, data, 0.1, lambda y: (y * y).sum(), device)
    tlosses = _torch_train(t, data, 0.1, lambda y: (y * y).sum())
    np.testing.assert_allclose(losses, tlosses, rtol=1e-5, atol=1e-6)
    assert losses[-1] < losses[0]
    _assert_state(m, t, rtol=1e-5, atol=1e-6)


def test_weight_norm_loads_a_torch_state_dict_and_assigns_through_right_inverse():
    t = TP.weight_norm(torch.nn.Linear(3, 4))
    with torch.no_grad():
        t.parametrizations.weight.original0.mul_(torch.tensor(_rand((4, 1), 3)))
    m = P.weight_norm(nn.Linear(3, 4))
    res = m.load_state_dict(t.state_dict())
    assert res.missing_keys == [] and res.unexpected_keys == []
    x = _rand((2, 3), 4)
    y = m(ad.Tensor(x))
    w = _rand((4, 3), 5)
    m.weight = ad.Tensor(w)              # right_inverse: g = ||w||, v = w, in place
    w_read = m.weight
    ad.execute()
    np.testing.assert_allclose(y.numpy(), t(torch.tensor(x)).detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    with torch.no_grad():
        t.weight = torch.tensor(w)
    _assert_state(m, t, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(w_read.numpy(), w, rtol=1e-5, atol=1e-6)
    with pytest.raises(KeyError):
        m.weight = nn.Parameter(w)


def test_weight_norm_remove_parametrizations_and_errors():
    m, t = _twins(lambda: nn.Conv1d(2, 3, 2), lambda: torch.nn.Conv1d(2, 3, 2))
    P.weight_norm(m, dim=1)
    TP.weight_norm(t, dim=1)
    with torch.no_grad():
        t.parametrizations.weight.original0.mul_(1.5)
    m.load_state_dict(t.state_dict())
    assert parametrize.is_parametrized(m) and parametrize.is_parametrized(m, "weight")
    assert not parametrize.is_parametrized(m, "bias")
    assert parametrize.type_before_parametrizations(m) is nn.Conv1d
    with pytest.raises(ValueError):
        parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)
    parametrize.remove_parametrizations(m, "weight")
    torch.nn.utils.parametrize.remove_parametrizations(t, "weight")
    assert type(m) is nn.Conv1d and not parametrize.is_parametrized(m)
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in t.named_parameters()]
    _assert_state(m, t, rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError):
        parametrize.remove_parametrizations(m, "weight")
    with pytest.raises(ValueError):
        P.weight_norm(nn.Linear(2, 2), name="foo")


# -- legacy weight_norm --------------------------------------------------------------------
@pytest.mark.parametrize("device", device_params())
def test_legacy_weight_norm_keys_training_and_removal(device):
    warnings.simplefilter("ignore", FutureWarning)
    m, t = _twins(lambda: nn.Linear(3, 4), lambda: torch.nn.Linear(3, 4))
    with pytest.warns(FutureWarning):
        weight_norm(m)
    torch.nn.utils.weight_norm(t)
    assert [n for n, _ in m.named_parameters()] == ["bias", "weight_g", "weight_v"]
    _assert_state(m, t)
    with pytest.raises(RuntimeError):
        weight_norm(m)
    data = [_rand((5, 3), 20 + i) for i in range(3)]
    losses = _ad_train(m, data, 0.05, lambda y: (y.sin() * y).sum(), device)
    tlosses = _torch_train(t, data, 0.05, lambda y: (y.sin() * y).sum())
    np.testing.assert_allclose(losses, tlosses, rtol=1e-5, atol=1e-6)
    _assert_state(m, t, rtol=1e-5, atol=1e-6)
    remove_weight_norm(m)
    torch.nn.utils.remove_weight_norm(t)
    _assert_state(m, t, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError):
        remove_weight_norm(m)
    g = nn.Conv2d(2, 3, 2)
    weight_norm(g, dim=None)
    assert g.weight_g.shape == () and g.weight_v.shape == (3, 2, 2, 2)


# -- spectral_norm ---------------------------------------------------------------------
def test_spectral_norm_state_and_init():
    ad.manual_seed(1)
    m = P.spectral_norm(nn.Linear(5, 4))
    t = TP.spectral_norm(torch.nn.Linear(5, 4))
    assert list(m.state_dict()) == list(t.state_dict())
    assert [n for n, _ in m.named_buffers()] == [n for n, _ in t.named_buffers()]
    # 16 power iterations from random vectors: u, v are the top singular vectors (up to sign)
    w = m.parametrizations.weight.original.numpy()
    uu, s, vt = np.linalg.svd(w)
    u, v = m.parametrizations.weight[0]._u.numpy(), m.parametrizations.weight[0]._v.numpy()
    assert abs(abs(u @ uu[:, 0]) - 1) < 1e-3 and abs(abs(v @ vt[0]) - 1) < 1e-3
    ct = P.spectral_norm(nn.ConvTranspose2d(2, 3, 2))
    assert ct.parametrizations.weight[0]._u.shape == (3,)     # dim 1 for ConvTranspose
    with pytest.raises(ValueError):
        P.spectral_norm(nn.Linear(2, 2), name="foo")
    with pytest.raises(IndexError):
        P.spectral_norm(nn.Linear(2, 2), dim=2)
    with pytest.raises(ValueError):
        P.spectral_norm(nn.Linear(2, 2), n_power_iterations=0)


@pytest.mark.parametrize("device", device_params())
def test_spectral_norm_trains_in_a_loop_like_torch(device):
    """The power iteration runs in each training-mode forward, u and v loop-carried; the
    torch model's state (u, v included) is loaded first; then eval mode uses them as is."""
    torch.manual_seed(0)
    t = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 2), torch.nn.Tanh(), torch.nn.Flatten(),
                            torch.nn.Linear(27, 2))
    TP.spectral_norm(t[0], n_power_iterations=2)
    TP.spectral_norm(t[3])
    m = nn.Sequential(nn.Conv2d(2, 3, 2), nn.Tanh(), nn.Flatten(), nn.Linear(27, 2))
    P.spectral_norm(m[0], n_power_iterations=2)
    P.spectral_norm(m[3])
    m.load_state_dict(t.state_dict())
    data = [_rand((2, 2, 4, 4), 30 + i) for i in range(4)]
    losses = _ad_train(m, data, 0.2, lambda y: (y * y).sum(), device)
    tlosses = _torch_train(t, data, 0.2, lambda y: (y * y).sum())
    np.testing.assert_allclose(losses, tlosses, rtol=1e-5, atol=1e-6)
    _assert_state(m, t, rtol=1e-5, atol=1e-6)
    u0 = m.state_dict()["0.parametrizations.weight.0._u"]
    m.eval()
    t.eval()
    x = _rand((3, 2, 4, 4), 40)
    y = m(ad.Tensor(x))
    ad.execute(device=device)
    np.testing.assert_allclose(y.numpy(), t(torch.tensor(x)).detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(m.state_dict()["0.parametrizations.weight.0._u"], u0,
                               rtol=0, atol=0)     # eval: no power iteration
    m.train()
    t.train()
    parametrize.remove_parametrizations(m[3], "weight")     # one more iteration, on the host
    torch.nn.utils.parametrize.remove_parametrizations(t[3], "weight")
    _assert_state(m, t, rtol=1e-5, atol=1e-6)


# -- register_parametrization -------------------------------------------------------------
def _parametrizations(lib):
    """A symmetric-matrix and a scaling parametrization (with ``right_inverse``) as modules
    of ``lib`` (``autodiff.nn`` or ``torch.nn``)."""
    class Symmetric(lib.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(0, 1)

    class Scale(lib.Module):
        def __init__(self, s):
            super().__init__()
            self.s = s

        def forward(self, x):
            return x * self.s

        def right_inverse(self, x):
            return x / self.s
    return Symmetric, Scale


_Symmetric, _Scale = _parametrizations(nn)
_TSymmetric, _TScale = _parametrizations(torch.nn)


@pytest.mark.parametrize("device", device_params())
def test_register_parametrization_chain_trains_like_torch(device):
    m, t = _twins(lambda: nn.Linear(4, 4), lambda: torch.nn.Linear(4, 4))
    w_var = m.weight
    parametrize.register_parametrization(m, "weight", _Symmetric())
    parametrize.register_parametrization(m, "weight", _Scale(2.0))
    torch.nn.utils.parametrize.register_parametrization(t, "weight", _TSymmetric())
    torch.nn.utils.parametrize.register_parametrization(t, "weight", _TScale(2.0))
    assert m.parametrizations.weight.original is w_var       # the same variable
    assert len(m.parametrizations.weight) == 2
    _assert_state(m, t)
    data = [_rand((3, 4), 50 + i) for i in range(3)]
    losses = _ad_train(m, data, 0.05, lambda y: (y * y.cos()).sum(), device)
    tlosses = _torch_train(t, data, 0.05, lambda y: (y * y.cos()).sum())
    np.testing.assert_allclose(losses, tlosses, rtol=1e-5, atol=1e-6)
    _assert_state(m, t, rtol=1e-5, atol=1e-6)


def test_register_parametrization_right_inverse_cached_and_checks():
    m, t = _twins(lambda: nn.Linear(3, 3), lambda: torch.nn.Linear(3, 3))
    parametrize.register_parametrization(m, "weight", _Scale(4.0))
    torch.nn.utils.parametrize.register_parametrization(t, "weight", _TScale(4.0))
    _assert_state(m, t)                 # original = right_inverse(weight), on the host
    with parametrize.cached():
        a, b = m.weight, m.weight
        assert a is b
    assert m.weight is not m.weight
    parametrize.remove_parametrizations(m, "weight", leave_parametrized=False)
    torch.nn.utils.parametrize.remove_parametrizations(t, "weight", leave_parametrized=False)
    _assert_state(m, t)

    class Bad(nn.Module):
        def forward(self, x):
            return x[:1]
    with pytest.raises(ValueError):
        parametrize.register_parametrization(nn.Linear(2, 2), "weight", Bad())
    parametrize.register_parametrization(nn.Linear(2, 2), "weight", Bad(), unsafe=True)
    with pytest.raises(ValueError):
        parametrize.register_parametrization(nn.Linear(2, 2), "nope", _Symmetric())
    bn = nn.BatchNorm1d(3)                 # a buffer: its original is a buffer
    parametrize.register_parametrization(bn, "running_var", _Scale(2.0))
    assert "parametrizations.running_var.original" in dict(bn.named_buffers())
