"""The loop index of ``ir_for``: ``body(i)`` gets an int32 0-d tensor, the range's value."""
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


def test_index_is_the_range_value(path):
    rows = np.arange(40, dtype=np.float32).reshape(20, 2)
    table = ad.tensor(rows)
    got, kinds = [], []

    def body(i):
        kinds.append((i.dtype, i.shape))
        ad.Receiver(lambda r: got.append(r), [table[i]])

    ad.ir_for(range(3, 17, 4), body)
    run(path)
    assert kinds == [("int32", ())]
    np.testing.assert_array_equal(np.stack(got), rows[3:17:4])


def test_nested_loops_have_their_own_index(path):
    a = ad.tensor(np.arange(3, dtype=np.float32) * 10)
    b = ad.tensor(np.arange(4, dtype=np.float32))
    got = []
    ad.ir_for(3, lambda i: ad.ir_for(range(1, 4), lambda j: ad.Receiver(
        lambda v: got.append(float(v)), [a[i] + b[j]])))
    run(path)
    assert got == [10 * i + j for i in range(3) for j in range(1, 4)]


def test_body_without_argument_gets_no_index(path):
    calls = []
    ad.ir_for(2, lambda: ad.Receiver(lambda v: calls.append(float(v)), [ad.ones(()) * 2]))
    run(path)
    assert calls == [2.0, 2.0]


def test_dataset_on_the_device_trains_without_feeder(path):
    """A dataset placed on the device once and indexed by the step trains exactly like
    torch over the same batches (50 iterations)."""
    n = 50
    xs, ys = data(n)
    net, ref = models()
    opt = SGD(net.parameters(), lr=0.1, momentum=0.9)
    X, Y = ad.tensor(xs), ad.tensor(ys)
    losses = []

    def step(i):
        opt.zero_grad()
        loss = MSELoss()(net(X[i]), Y[i])
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: losses.append(float(v)), [loss])

    ad.ir_for(n, step)
    run(path)
    topt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    expect = []
    for x, y in zip(xs, ys):
        topt.zero_grad()
        loss = torch.nn.functional.mse_loss(ref(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward()
        topt.step()
        expect.append(loss.item())
    np.testing.assert_allclose(losses, expect, rtol=1e-5, atol=1e-6)
    assert_params(net, ref)


def test_index_shows_in_the_graph():
    t = ad.tensor(np.zeros((4, 2), np.float32))
    ad.ir_for(range(0, 4, 2), lambda i: ad.Receiver(lambda v: None, [t[i]]))
    text = ad.runtime.format_stage("graph")
    assert "for i0 in range(0, 4, 2):" in text and "index i0 * 2" in text


def test_gather_at_the_index_is_a_view_in_the_procedural_ir():
    """A row picked by the loop index is a dynamic slice (an access expression over the loop
    counter), not a gather kernel."""
    t = ad.tensor(np.arange(12, dtype=np.float32).reshape(6, 2))
    got = []
    ad.ir_for(range(1, 6, 2), lambda i: ad.Receiver(lambda v: got.append(v), [t[i] * 2]))
    ad.execute(device="numpy", ir="procedural")
    prog = ad.graph.trace.TRACER.last.stages["procedural"]
    assert not any(s.kind == "Gather" for s in prog.kernels())
    np.testing.assert_array_equal(np.stack(got), 2 * np.arange(12).reshape(6, 2)[1:6:2])
