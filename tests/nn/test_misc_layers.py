"""Flatten, Unflatten, Bilinear, Identity, Embedding(padding_idx), Dropout1d/2d and the
containers (ModuleDict, ParameterList, ParameterDict, Sequential/ModuleList features)
against PyTorch."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import nn


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_flatten_unflatten_identity():
    x = _rand((2, 3, 4, 5), 0)
    ys = [nn.Flatten()(ad.Tensor(x)), nn.Flatten(0, 2)(ad.Tensor(x)),
          nn.Unflatten(1, (3, 1))(ad.Tensor(x)), nn.Unflatten(-1, (-1, 5))(ad.Tensor(x)),
          nn.Identity(54, unused=1)(ad.Tensor(x))]
    ad.execute()
    tx = torch.tensor(x)
    refs = [torch.nn.Flatten()(tx), torch.nn.Flatten(0, 2)(tx), torch.nn.Unflatten(1, (3, 1))(tx),
            torch.nn.Unflatten(-1, (-1, 5))(tx), tx]
    for y, r in zip(ys, refs):
        assert y.shape == tuple(r.shape)
        np.testing.assert_array_equal(y.numpy(), r.numpy())


def test_bilinear():
    torch.manual_seed(0)
    t, m = torch.nn.Bilinear(3, 4, 5), nn.Bilinear(3, 4, 5)
    assert [(n, p.shape) for n, p in m.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in t.named_parameters()]
    m.load_state_dict(t.state_dict())
    x1, x2 = _rand((2, 6, 3), 1), _rand((2, 6, 4), 2)
    a1, a2 = ad.Tensor(x1, requires_grad=True), ad.Tensor(x2, requires_grad=True)
    y = m(a1, a2)
    y.sum().backward()
    g1, g2, gw = a1.grad, a2.grad, m.weight.grad
    ad.execute()
    t1, t2 = torch.tensor(x1, requires_grad=True), torch.tensor(x2, requires_grad=True)
    ty = t(t1, t2)
    ty.sum().backward()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    for a, b in ((g1, t1.grad), (g2, t2.grad), (gw, t.weight.grad)):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-5)


def test_embedding_padding_idx_gets_no_gradient():
    torch.manual_seed(1)
    t = torch.nn.Embedding(6, 3, padding_idx=-2)
    m = nn.Embedding(6, 3, padding_idx=-2)
    assert m.padding_idx == 4 and np.all(m.weight.numpy()[4] == 0)
    with torch.no_grad():
        t.weight[4] = 1.5                         # a loaded value is kept, as in torch
    m.load_state_dict(t.state_dict())
    idx = np.array([[0, 4, 2], [4, 5, 0]], np.int32)
    y = m(ad.Tensor(idx))
    (y * y).sum().backward()
    g = m.weight.grad
    ad.execute()
    ty = t(torch.tensor(idx.astype(np.int64)))
    (ty * ty).sum().backward()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy())
    np.testing.assert_allclose(g.numpy(), t.weight.grad.numpy(), rtol=1e-6)
    assert np.all(g.numpy()[4] == 0)
    with pytest.raises(NotImplementedError, match="max_norm"):
        nn.Embedding(3, 2, max_norm=1.0)
    e = nn.Embedding.from_pretrained(_rand((4, 2), 3))
    assert not e.weight.requires_grad


@pytest.mark.parametrize("cls,shape,spatial", [(nn.Dropout2d, (4, 6, 3, 5), 2),
                                               (nn.Dropout1d, (4, 6, 7), 1),
                                               (nn.Dropout1d, (6, 7), 1),
                                               (nn.Dropout2d, (6, 3, 5), 1)])   # [N, C, L]
def test_channel_dropout_zeroes_whole_channels(cls, shape, spatial):
    """Whole channels zeroed; a 3-D input to ``Dropout2d`` is ``[N, C, L]``, as PyTorch's
    module takes it (with its warning)."""
    x = np.ones(shape, np.float32)
    m = cls(0.5, seed=3)
    if cls is nn.Dropout2d and len(shape) == 3:
        with pytest.warns(UserWarning, match="interpreted as shape"):
            y = m(ad.Tensor(x))
        with pytest.warns(UserWarning, match="interpreted as shape"):
            torch.nn.Dropout2d(0.5)(torch.ones(shape))
    else:
        y = m(ad.Tensor(x))
    m.eval()
    z = m(ad.Tensor(x))
    ad.execute()
    v = y.numpy().reshape(*shape[:len(shape) - spatial], -1)
    per_channel = v.reshape(-1, v.shape[-1])
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert all(len(set(row)) == 1 for row in per_channel)        # a channel is all or none
    assert 0 < (per_channel[:, 0] == 0).mean() < 1
    np.testing.assert_array_equal(z.numpy(), x)


def test_module_dict_and_parameter_containers_state_dict_keys():
    def build(lib, P):
        class Net(lib.Module):
            def __init__(self):
                super().__init__()
                self.blocks = lib.ModuleDict({"a": lib.Linear(2, 3), "b": lib.Linear(3, 1)})
                self.plist = lib.ParameterList([P(np.ones(2, np.float32)),
                                                P(np.zeros(3, np.float32))])
                self.pdict = lib.ParameterDict({"scale": P(np.ones(1, np.float32))})
                self.seq = lib.Sequential(OrderedDict(first=lib.ReLU(),
                                                      second=lib.Linear(2, 2)))
        return Net()
    ours = build(nn, nn.Parameter)
    theirs = build(torch.nn, lambda a: torch.nn.Parameter(torch.tensor(a)))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_modules()] == [n for n, _ in theirs.named_modules()]
    assert "a" in ours.blocks and len(ours.plist) == 2 and list(ours.pdict.keys()) == ["scale"]
    assert isinstance(ours.seq[0], nn.ReLU) and ours.seq.first is ours.seq[0]


def test_module_list_and_sequential_editing():
    ml = nn.ModuleList([nn.ReLU(), nn.Tanh()])
    ml.insert(1, nn.Sigmoid())
    ml.extend([nn.Identity()])
    assert [type(m).__name__ for m in ml] == ["ReLU", "Sigmoid", "Tanh", "Identity"]
    assert isinstance(ml[-1], nn.Identity) and len(ml[1:3]) == 2
    del ml[0]
    assert [k for k in ml._modules] == ["0", "1", "2"]
    s = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert isinstance(s[1:], nn.Sequential) and len(s[1:]) == 2
