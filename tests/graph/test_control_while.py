"""``ir_while``: a loop whose condition is decided on the device before every iteration."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff.nn import MSELoss
from autodiff.optim import SGD
from control_helpers import assert_params, data, models, path_params, run


@pytest.fixture(params=path_params())
def path(request):
    return request.param


def test_train_until_the_loss_is_small(path):
    """Stop when a Receiver-visible loss falls below a threshold, like a Python while."""
    xs, ys = data(1)
    net, ref = models()
    opt = SGD(net.parameters(), lr=0.2)
    x, y = ad.tensor(xs[0]), ad.tensor(ys[0])
    last = ad.full((), 1e9)
    losses, steps = [], []

    def step(i):
        opt.zero_grad()
        loss = MSELoss()(net(x), y)
        loss.backward()
        opt.step()
        last.copy_(loss.detach())
        ad.Receiver(lambda v, k: (losses.append(float(v)), steps.append(int(k))), [loss, i])

    ad.ir_while(lambda: last > 0.5, step, max_iterations=500)
    run(path)
    topt = torch.optim.SGD(ref.parameters(), lr=0.2)
    expect, prev = [], 1e9
    while prev > 0.5 and len(expect) < 500:
        topt.zero_grad()
        loss = torch.nn.functional.mse_loss(ref(torch.from_numpy(xs[0])),
                                            torch.from_numpy(ys[0]))
        loss.backward()
        topt.step()
        prev = loss.item()
        expect.append(prev)
    assert 5 < len(expect) < 500 and steps == list(range(len(expect)))
    np.testing.assert_allclose(losses, expect, rtol=1e-5, atol=1e-6)
    assert_params(net, ref)


def test_max_iterations_bounds_the_loop(path):
    k = ad.zeros(())
    ad.ir_while(lambda: k > -1.0, lambda: k.add_(1.0), max_iterations=7)
    never = ad.zeros(())
    ad.ir_while(lambda: never > 0.0, lambda: never.add_(1.0))
    run(path)
    assert float(k.numpy()) == 7.0 and float(never.numpy()) == 0.0


def test_while_inside_for_with_the_index(path):
    """The inner loop runs ``i`` times in outer iteration ``i``; its index counts."""
    count = ad.zeros(())
    got = []

    def outer(i):
        c = ad.zeros(())
        c.zero_()

        def inner(j):
            c.add_(1.0)
            ad.Receiver(lambda a, b: got.append((int(a), int(b))), [i, j])

        ad.ir_while(lambda: c < i.float(), inner)
        count.add_(c)

    ad.ir_for(4, outer)
    run(path)
    assert float(count.numpy()) == 0 + 1 + 2 + 3
    assert got == [(i, j) for i in range(4) for j in range(i)]
