"""parameters_to_vector / vector_to_parameters against torch.nn.utils: values, the
gradient through parameters_to_vector, and a hand-written SGD step through vectors in an
ir_for loop (vector_to_parameters writing the parameters in place each iteration)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from backends import device_params

import autodiff as ad
from autodiff import nn
from autodiff.nn.utils import parameters_to_vector, vector_to_parameters


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _twins():
    ad.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    t = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    t.load_state_dict({k: torch.tensor(v) for k, v in m.state_dict().items()})
    return m, t


def test_parameters_to_vector_values_and_gradient():
    m, t = _twins()
    v = parameters_to_vector(m.parameters())
    w = _rand(v.shape, 1)
    (v.sin() * ad.Tensor(w)).sum().backward()
    grads = [p.grad for p in m.parameters()]
    ad.execute()
    vt = torch.nn.utils.parameters_to_vector(t.parameters())
    (vt.sin() * torch.tensor(w)).sum().backward()
    assert v.shape == (4 * 3 + 4 + 2 * 4 + 2,)
    np.testing.assert_allclose(v.numpy(), vt.detach().numpy(), rtol=0, atol=0)
    for g, p in zip(grads, t.parameters()):
        np.testing.assert_allclose(g.numpy(), p.grad.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("device", device_params())
def test_sgd_through_vectors_in_a_loop_like_torch(device):
    m, t = _twins()
    data = [_rand((5, 3), 10 + i) for i in range(4)]
    it, losses = iter(data), []

    def body():
        m.zero_grad()
        y = m(ad.Feeder(lambda: next(it), [5, 3]))
        loss = (y * y).sum()
        loss.backward()
        with ad.no_grad():
            g = parameters_to_vector(p.grad for p in m.parameters())
            vector_to_parameters(parameters_to_vector(m.parameters()) - 0.05 * g,
                                 m.parameters())
        ad.Receiver(lambda v: losses.append(float(v)), [loss])
    ad.ir_for(len(data), body)
    ad.execute(device=device)
    tlosses = []
    for x in data:
        t.zero_grad()
        loss = (t(torch.tensor(x)) ** 2).sum()
        loss.backward()
        with torch.no_grad():
            g = torch.nn.utils.parameters_to_vector(p.grad for p in t.parameters())
            torch.nn.utils.vector_to_parameters(
                torch.nn.utils.parameters_to_vector(t.parameters()) - 0.05 * g,
                t.parameters())
        tlosses.append(loss.item())
    np.testing.assert_allclose(losses, tlosses, rtol=1e-5, atol=1e-6)
    assert losses[-1] < losses[0]
    for k, v in t.state_dict().items():
        np.testing.assert_allclose(m.state_dict()[k], v.numpy(), rtol=1e-5, atol=1e-6)


def test_vector_to_parameters_errors():
    lin = nn.Linear(2, 3)
    with pytest.raises(TypeError):
        vector_to_parameters(np.ones(9, np.float32), lin.parameters())
    with pytest.raises(ValueError):
        vector_to_parameters(ad.Tensor(np.ones(8, np.float32)), lin.parameters())
