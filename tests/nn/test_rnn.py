"""RNN, LSTM, GRU and their cells against PyTorch: parameter names and shapes, forward
values, final states, input/state/parameter gradients, weights loaded from PyTorch."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import nn

torch.set_num_threads(1)


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _run(ours, theirs, x, h0=None, c0=None, seed=0):
    """Load torch's weights, run both with random output gradients (output and h_n),
    compare everything."""
    ours.load_state_dict(theirs.state_dict())
    lstm = isinstance(theirs, torch.nn.LSTM)
    xa = ad.Tensor(x, requires_grad=True)
    ha = ad.Tensor(h0, requires_grad=True) if h0 is not None else None
    ca = ad.Tensor(c0, requires_grad=True) if c0 is not None else None
    hx = (ha, ca) if lstm and ha is not None else ha
    out, hn = ours(xa, hx)
    hn = hn[0] if lstm else hn
    go, gh = _rand(out.shape, seed + 1), _rand(hn.shape, seed + 2)
    ((out * ad.Tensor(go)).sum() + (hn * ad.Tensor(gh)).sum()).backward()
    grads = {k: p.grad for k, p in ours.named_parameters()}
    gx, gh0 = xa.grad, ha.grad if ha is not None else None
    ad.execute()
    xt = torch.tensor(x, requires_grad=True)
    ht = torch.tensor(h0, requires_grad=True) if h0 is not None else None
    ct = torch.tensor(c0) if c0 is not None else None
    tout, thn = theirs(xt, (ht, ct) if lstm and ht is not None else ht)
    thn = thn[0] if lstm else thn
    ((tout * torch.tensor(go)).sum() + (thn * torch.tensor(gh)).sum()).backward()
    tol = dict(rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), **tol, err_msg="output")
    np.testing.assert_allclose(hn.numpy(), thn.detach().numpy(), **tol, err_msg="h_n")
    np.testing.assert_allclose(gx.numpy(), xt.grad.numpy(), **tol, err_msg="input grad")
    if gh0 is not None:
        np.testing.assert_allclose(gh0.numpy(), ht.grad.numpy(), **tol, err_msg="h0 grad")
    for k, p in theirs.named_parameters():
        np.testing.assert_allclose(grads[k].numpy(), p.grad.numpy(), **tol, err_msg=k)


@pytest.mark.parametrize("kind,kw", [
    ("LSTM", dict(num_layers=2, bidirectional=True)),
    ("LSTM", dict(batch_first=True, bias=False)),
    ("LSTM", dict(proj_size=3)),
    ("GRU", dict(num_layers=2, batch_first=True)),
    ("GRU", dict(bidirectional=True)),
    ("RNN", dict(nonlinearity="relu", num_layers=2)),
    ("RNN", dict(bidirectional=True))])
def test_recurrent_layers_match_torch(kind, kw):
    torch.manual_seed(0)
    theirs = getattr(torch.nn, kind)(4, 5, **kw)
    ours = getattr(nn, kind)(4, 5, **kw)
    assert [(n, p.shape) for n, p in ours.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
    x = _rand((3, 6, 4) if kw.get("batch_first") else (6, 3, 4), 1)
    _run(ours, theirs, x)


def test_initial_state_and_unbatched():
    torch.manual_seed(1)
    theirs, ours = torch.nn.LSTM(3, 4, 2), nn.LSTM(3, 4, 2)
    _run(ours, theirs, _rand((5, 2, 3), 2), _rand((2, 2, 4), 3), _rand((2, 2, 4), 4))
    theirs, ours = torch.nn.GRU(3, 4), nn.GRU(3, 4)
    _run(ours, theirs, _rand((5, 3), 5), _rand((1, 4), 6))


def test_init_bounds_and_dropout_between_layers():
    m = nn.LSTM(3, 16, 2, dropout=0.5)
    for _, p in m.named_parameters():
        assert np.abs(p.numpy()).max() <= 0.25 + 1e-7        # 1 / sqrt(16)
    x = ad.Tensor(np.ones((4, 2, 3), np.float32))
    m.eval()
    a = m(x)[0]
    m.train()
    b = m(x)[0]
    ad.execute()
    assert not np.allclose(a.numpy(), b.numpy())           # dropout acts in training only


@pytest.mark.parametrize("kind", ["RNNCell", "LSTMCell", "GRUCell"])
def test_cells(kind):
    torch.manual_seed(2)
    theirs, ours = getattr(torch.nn, kind)(3, 4), getattr(nn, kind)(3, 4)
    ours.load_state_dict(theirs.state_dict())
    x, h = _rand((2, 3), 1), _rand((2, 4), 2)
    lstm = kind == "LSTMCell"
    xa = ad.Tensor(x, requires_grad=True)
    out = ours(xa, (ad.Tensor(h), ad.Tensor(h)) if lstm else ad.Tensor(h))
    out = out[0] if lstm else out
    out.sum().backward()
    gx = xa.grad
    ad.execute()
    xt = torch.tensor(x, requires_grad=True)
    tout = theirs(xt, (torch.tensor(h), torch.tensor(h)) if lstm else torch.tensor(h))
    tout = tout[0] if lstm else tout
    tout.sum().backward()
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gx.numpy(), xt.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_errors():
    with pytest.raises(ValueError, match="input_size"):
        nn.LSTM(3, 4)(ad.Tensor(np.zeros((2, 2, 5), np.float32)))
    with pytest.raises(ValueError, match="hidden size"):
        nn.GRU(3, 4)(ad.Tensor(np.zeros((2, 2, 3), np.float32)),
                     ad.Tensor(np.zeros((1, 3, 4), np.float32)))
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="gelu")
    with pytest.raises(ValueError, match="proj_size"):
        nn.LSTM(3, 4, proj_size=4)
