"""``ir_if``: both branches traced once, the taken one runs on the device; each program is
checked against the same steps run eagerly in PyTorch with a Python ``if`` (50 iterations
where it trains)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff.nn import MSELoss
from autodiff.optim import SGD
from backends import opencl_missing
from control_helpers import Feed, assert_params, data, models, path_params, run

N = 50


@pytest.fixture(params=path_params())
def path(request):
    return request.param


def _torch_loss(ref, x, y):
    return torch.nn.functional.mse_loss(ref(torch.from_numpy(x)), torch.from_numpy(y))


def test_receiver_in_a_branch_runs_only_when_taken(path):
    """Validation every k-th step: a counter variable decides on the device."""
    k = 7
    xs, ys = data(N)
    net, ref = models()
    opt = SGD(net.parameters(), lr=0.05)
    count = ad.zeros(())
    seen, feeds = [], Feed(zip(xs, ys))
    val_x, val_y = ad.tensor(xs[0]), ad.tensor(ys[0])

    def step():
        xy = feeds.items[0]
        x = ad.Feeder(lambda: feeds()[0], shape=xy[0].shape)
        y = ad.Feeder(lambda: feeds.items[feeds.calls - 1][1], shape=xy[1].shape)
        opt.zero_grad()
        MSELoss()(net(x), y).backward()
        opt.step()
        count.add_(1.0)

        def validate():
            with ad.no_grad():
                ad.Receiver(lambda v, c: seen.append((int(c), float(v))),
                            [MSELoss()(net(val_x), val_y), count])
            count.zero_()

        ad.ir_if(count >= k, validate)

    ad.ir_for(N, step)
    run(path)
    topt = torch.optim.SGD(ref.parameters(), lr=0.05)
    expect = []
    for i, (x, y) in enumerate(zip(xs, ys)):
        topt.zero_grad()
        _torch_loss(ref, x, y).backward()
        topt.step()
        if (i + 1) % k == 0:
            with torch.no_grad():
                expect.append((k, _torch_loss(ref, xs[0], ys[0]).item()))
    assert [c for c, _ in seen] == [c for c, _ in expect]
    np.testing.assert_allclose([v for _, v in seen], [v for _, v in expect], rtol=1e-5,
                               atol=1e-6)
    assert_params(net, ref)


def test_gradient_accumulation_steps_every_k(path):
    """Gradients of k micro-batches summed in variables; ``opt.step()`` every k-th step."""
    k = 4
    xs, ys = data(N)
    net, ref = models()
    params = list(net.parameters())
    opt = SGD(params, lr=0.1, momentum=0.5)
    acc = [ad.zeros(*p.shape) for p in params]
    count = ad.zeros(())
    X, Y = ad.tensor(xs), ad.tensor(ys)

    def step(i):
        opt.zero_grad()
        (MSELoss()(net(X[i]), Y[i]) / k).backward()
        with ad.no_grad():
            for a, p in zip(acc, params):
                a.add_(p.grad)
        count.add_(1.0)

        def update():
            for a, p in zip(acc, params):
                p.grad = a
            opt.step()
            for a in acc:
                a.zero_()
            count.zero_()

        ad.ir_if(count == k, update)

    ad.ir_for(N, step)
    run(path)
    topt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.5)
    topt.zero_grad()
    for i, (x, y) in enumerate(zip(xs, ys)):
        (_torch_loss(ref, x, y) / k).backward()
        if (i + 1) % k == 0:
            topt.step()
            topt.zero_grad()
    assert_params(net, ref)
    for a, p in zip(acc, ref.parameters()):      # the partial sum of the last 2 steps
        np.testing.assert_allclose(a.numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_update_skipped_when_the_loss_is_not_finite(path):
    xs, ys = data(N)
    for bad, v in ((5, np.inf), (17, np.nan), (18, -np.inf), (40, np.nan)):
        ys[bad, 2, 1] = v                         # the loss is inf or NaN there
    net, ref = models()
    opt = SGD(net.parameters(), lr=0.1)
    X, Y = ad.tensor(xs), ad.tensor(ys)
    skipped = []

    def step(i):
        opt.zero_grad()
        loss = MSELoss()(net(X[i]), Y[i])
        loss.backward()
        ad.ir_if(loss.isfinite(), opt.step,
                 lambda: ad.Receiver(lambda j: skipped.append(int(j)), [i]))

    ad.ir_for(N, step)
    run(path)
    topt = torch.optim.SGD(ref.parameters(), lr=0.1)
    expect = []
    for i, (x, y) in enumerate(zip(xs, ys)):
        topt.zero_grad()
        loss = _torch_loss(ref, x, y)
        loss.backward()
        if torch.isfinite(loss):
            topt.step()
        else:
            expect.append(i)
    assert skipped == expect == [5, 17, 18, 40]
    assert_params(net, ref)


def test_values_and_gradients_flow_through_the_taken_branch(path):
    """A data-dependent branch inside the model, trained 50 steps like torch."""
    xs, ys = data(N)
    net, ref = models()
    torch.manual_seed(3)
    w2 = torch.randn(2, 2) * 0.5
    w2a = ad.tensor(w2.numpy(), requires_grad=True)
    w2t = w2.clone().requires_grad_(True)
    opt = SGD([*net.parameters(), w2a], lr=0.05)
    X, Y = ad.tensor(xs), ad.tensor(ys)
    losses = []

    def step(i):
        opt.zero_grad()
        h = net(X[i])
        out = ad.ir_if(h.sum() > 0, lambda: (h @ w2a).sigmoid() * 2,
                       lambda: h * h + h @ w2a)
        loss = MSELoss()(out, Y[i])
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: losses.append(float(v)), [loss])

    ad.ir_for(N, step)
    run(path)
    topt = torch.optim.SGD(list(ref.parameters()) + [w2t], lr=0.05)
    expect, taken = [], 0
    for x, y in zip(xs, ys):
        topt.zero_grad()
        h = ref(torch.from_numpy(x))
        if h.sum() > 0:
            out, taken = torch.sigmoid(h @ w2t) * 2, taken + 1
        else:
            out = h * h + h @ w2t
        loss = torch.nn.functional.mse_loss(out, torch.from_numpy(y))
        loss.backward()
        topt.step()
        expect.append(loss.item())
    assert 0 < taken < N                  # both branches ran
    np.testing.assert_allclose(losses, expect, rtol=1e-5, atol=1e-6)
    assert_params(net, ref)
    np.testing.assert_allclose(w2a.numpy(), w2t.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_feeder_in_a_branch_is_called_only_when_taken(path):
    flags = Feed([np.array(v, np.float32) for v in (1, 0, 0, 1, 1, 0)])
    inner = Feed([np.full(2, v, np.float32) for v in (10, 20, 30)])
    got = []

    def step():
        f = ad.Feeder(flags, shape=())
        ad.ir_if(f > 0.5, lambda: ad.Receiver(lambda v: got.append(v.tolist()),
                                              [ad.Feeder(inner, shape=(2,)) + 1]))

    ad.ir_for(6, step)
    run(path)
    assert inner.calls == 3 and got == [[11, 11], [21, 21], [31, 31]]


def test_variables_merge_and_values_return(path):
    """A variable assigned in one branch keeps its value when the other runs; returned
    nests of tensors and numbers come back with their structure."""
    flags = Feed([np.array(v, np.float32) for v in (1, 0, 1, 0, 0)])
    a, b = ad.zeros(2), ad.zeros(())
    got = []

    def step():
        f = ad.Feeder(flags, shape=())

        def then():
            a.add_(1.0)
            return {"x": a * 2, "n": (b, 1.0)}

        def orelse():
            b.add_(10.0)
            return {"x": a + 0.5, "n": (b * 1, 0.0)}

        r = ad.ir_if(f > 0, then, orelse)
        assert set(r) == {"x", "n"} and isinstance(r["n"], tuple)
        ad.Receiver(lambda x, n, m: got.append((x.tolist(), float(n), float(m))),
                    [r["x"], r["n"][0], r["n"][1]])

    ad.ir_for(5, step)
    run(path)
    assert got == [([2, 2], 0, 1), ([1.5, 1.5], 10, 0), ([4, 4], 10, 1), ([2.5, 2.5], 20, 0),
                   ([2.5, 2.5], 30, 0)]
    assert a.numpy().tolist() == [2, 2] and float(b.numpy()) == 30


def test_python_bool_picks_a_branch_at_trace_time():
    x = ad.tensor(np.ones(2, np.float32))
    assert ad.ir_if(True, lambda: x * 2, lambda: x).shape == (2,)
    assert ad.ir_if(0, lambda: 1 / 0) is None
    text = ad.runtime.format_stage("graph")
    assert " if " not in text


def test_nested_branches(path):
    flags = Feed([np.array(v, np.float32) for v in ([1, 1], [1, 0], [0, 1], [0, 0])])
    got = []

    def step():
        f = ad.Feeder(flags, shape=(2,))
        r = ad.ir_if(f[0] > 0, lambda: ad.ir_if(f[1] > 0, lambda: f * 0 + 1, lambda: f * 0 + 2),
                     lambda: ad.ir_if(f[1] > 0, lambda: f * 0 + 3, lambda: f * 0 + 4))
        ad.Receiver(lambda v: got.append(float(v[0])), [r])

    ad.ir_for(4, step)
    run(path)
    assert got == [1, 2, 3, 4]


def test_gradient_of_a_branch_outside_any_loop(path):
    x0 = np.array([0.3, -1.2, 2.0], np.float32)
    for flag in (1.0, 0.0):
        ad.reset()
        x = ad.tensor(x0, requires_grad=True)
        p = ad.tensor(np.float32(flag))
        y = ad.ir_if(p > 0.5, lambda: (x * x).exp(), lambda: (x * 3).sin())
        y.sum().backward()
        g = x.grad
        run(path)
        tx = torch.tensor(x0, requires_grad=True)
        (torch.exp(tx * tx) if flag else torch.sin(tx * 3)).sum().backward()
        np.testing.assert_allclose(y.numpy(), (np.exp(x0 * x0) if flag else np.sin(3 * x0)),
                                   rtol=1e-6)
        np.testing.assert_allclose(g.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device,ir", [
    ("numpy", "graph"), ("numpy", "procedural"),
    pytest.param("opencl", "graph", marks=pytest.mark.skipif(
        opencl_missing() is not None, reason=str(opencl_missing())))])
def test_range_checked_gather_inside_a_branch(device, ir):
    """A range-checked gather (an embedding lookup, its ids fed each iteration) in an
    ``ir_if`` branch with a result, inside the loop, which control lowering rewrites."""
    table = ad.Tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    seen = []

    def body(i):
        idx = ad.Feeder(lambda: np.array([3, 1], np.int32), [2], "int32", name="ids")
        # a branch with a result: control lowering rewrites it (new nodes)
        v = ad.ir_if(i % 2 == 1, lambda: table[idx].sum(0) * i, lambda: table[0] * 0.0)
        ad.ir_if(i % 2 == 1, lambda: ad.Receiver(lambda v: seen.append(v.copy()), [v]))
    ad.ir_for(4, body)
    ad.execute(device=device, **({"ir": ir} if device == "numpy" else {}))
    rows = table.numpy()[[3, 1]].sum(0)
    assert len(seen) == 2
    np.testing.assert_allclose(seen[0], rows * 1, rtol=1e-6)
    np.testing.assert_allclose(seen[1], rows * 3, rtol=1e-6)
