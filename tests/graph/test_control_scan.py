"""``scan``: forward and reverse mode against PyTorch (Python loops, ``nn.LSTM``) and float64
finite differences; the backward pass is a rolled loop over saved per-step values."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff.graph.ir import Op
from autodiff.optim import SGD
from control_helpers import Feed, path_params, run
from op_helper import check_op

T, B, I, H = 7, 3, 4, 5


@pytest.fixture(params=path_params())
def path(request):
    return request.param


def lstm(xs, h0, c0, wih, whh, bih, bhh, checkpoint=None):
    """A one-layer LSTM (PyTorch's gate order i, f, g, o) as a scan over ``xs [T, B, I]``."""
    n = h0.shape[-1]

    def cell(carry, x):
        h, c = carry
        gates = x @ wih.transpose(0, 1) + bih + h @ whh.transpose(0, 1) + bhh
        i, f = gates[:, :n].sigmoid(), gates[:, n:2 * n].sigmoid()
        g, o = gates[:, 2 * n:3 * n].tanh(), gates[:, 3 * n:].sigmoid()
        c = f * c + i * g
        h = o * c.tanh()
        return (h, c), h

    return ad.scan(cell, (h0, c0), xs, checkpoint=checkpoint)


def _lstm_case(seed=0):
    torch.manual_seed(seed)
    ref = torch.nn.LSTM(I, H)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, B, I)).astype(np.float32)
    h0 = rng.standard_normal((1, B, H)).astype(np.float32) * 0.5
    c0 = rng.standard_normal((1, B, H)).astype(np.float32) * 0.5
    return ref, x, h0, c0


@pytest.mark.parametrize("checkpoint", [None, 3])
def test_lstm_matches_torch_values_and_gradients(path, checkpoint):
    ref, x, h0, c0 = _lstm_case()
    names = ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    ws = [ad.tensor(getattr(ref, k).detach().numpy(), requires_grad=True) for k in names]
    xa = ad.tensor(x, requires_grad=True)
    ha, ca = ad.tensor(h0[0], requires_grad=True), ad.tensor(c0[0], requires_grad=True)
    (h, c), ys = lstm(xa, ha, ca, *ws, checkpoint=checkpoint)
    loss = (ys * ys).sum() + (h * c).sum()
    loss.backward()
    grads = [w.grad for w in ws] + [xa.grad, ha.grad, ca.grad]
    run(path)
    xt, ht, ct = (torch.tensor(a, requires_grad=True) for a in (x, h0, c0))
    yt, (hn, cn) = ref(xt, (ht, ct))
    ((yt * yt).sum() + (hn * cn).sum()).backward()
    np.testing.assert_allclose(ys.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(loss.numpy(), ((yt * yt).sum() + (hn * cn).sum()).item(),
                               rtol=1e-5)
    theirs = [getattr(ref, k).grad for k in names] + [xt.grad, ht.grad[0], ct.grad[0]]
    for name, g, t in zip(names + ["x", "h0", "c0"], grads, theirs):
        np.testing.assert_allclose(g.numpy(), t.numpy(), rtol=1e-5, atol=1e-5, err_msg=name)


def _rnn_torch(x, h0, w, u):
    h, ys = h0, []
    for t in range(x.shape[0]):
        h = torch.tanh(x[t] @ w + h @ u)
        ys.append(h.sum(-1))
    return torch.stack(ys) * h.sum()


def _rnn_ad(x, h0, w, u):
    h, ys = ad.scan(lambda h, xt: ((xt @ w + h @ u).tanh(),) * 2, h0, x)
    return ys.sum(-1) * h.sum()


def test_rnn_gradients_against_finite_differences():
    check_op([(5, 2, 3), (2, 4), (3, 4), (4, 4)], _rnn_torch, _rnn_ad, low=-1.0, high=1.0)


def test_reverse_nested_structures_and_length_only(path):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    w = np.array([1.0, -2.0, 0.5], np.float32)

    def f(carry, inp):
        s, n = carry["s"], carry["n"]
        return {"s": s * 0.5 + inp["x"] * inp["w"], "n": n + 1.0}, (s.sum(), [n])

    carry, (tot, [ns]) = ad.scan(f, {"s": ad.zeros(3), "n": 0.0},
                                 {"x": ad.tensor(x), "w": ad.tensor(np.tile(w, (4, 1)))},
                                 reverse=True)
    c2, ys2 = ad.scan(lambda c, _: (c * 2.0, c), ad.ones(()), length=5)
    run(path)
    s, outs, ns_ = np.zeros(3, np.float32), [0.0] * 4, [0.0] * 4
    for k, t in enumerate(range(3, -1, -1)):
        outs[t], ns_[t] = s.sum(), float(k)
        s = s * np.float32(0.5) + x[t] * w
    np.testing.assert_allclose(carry["s"].numpy(), s, rtol=1e-6)
    assert float(carry["n"].numpy()) == 4.0
    np.testing.assert_allclose(tot.numpy(), outs, rtol=1e-6)
    np.testing.assert_allclose(ns.numpy(), ns_)
    assert float(c2.numpy()) == 32.0 and ys2.numpy().tolist() == [1, 2, 4, 8, 16]


@pytest.mark.parametrize("reverse", [False, True])
def test_checkpointed_scan_has_the_same_gradients(path, reverse):
    rng = np.random.default_rng(2)
    x0 = rng.standard_normal((11, 2, 3)).astype(np.float32)
    w0 = rng.standard_normal((3, 3)).astype(np.float32) * 0.6
    out = {}
    for k in (None, 4, 1, 11):
        ad.reset()
        x, w = ad.tensor(x0, requires_grad=True), ad.tensor(w0, requires_grad=True)
        h, ys = ad.scan(lambda h, xt: ((h @ w + xt).sin(),) * 2, ad.zeros(2, 3), x,
                        reverse=reverse, checkpoint=k)
        ((ys * ys).sum() + h.sum()).backward()
        gx, gw = x.grad, w.grad
        run(path)
        out[k] = (ys.numpy(), gx.numpy(), gw.numpy())
    for k in (4, 1, 11):
        for a, b in zip(out[k], out[None]):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6, err_msg=str(k))


def test_graph_size_does_not_grow_with_the_length():
    counts = []
    for n in (3, 300):
        ad.reset()
        w = ad.tensor(np.eye(2, dtype=np.float32), requires_grad=True)
        h, ys = ad.scan(lambda h, x: ((h @ w + x).tanh(),) * 2, ad.zeros(2),
                        ad.tensor(np.ones((n, 2), np.float32)))
        ys.sum().backward()
        counts.append(ad.graph.trace.TRACER.root.graph.count())
    assert counts[0] == counts[1]
    scans = [n for n in ad.graph.trace.TRACER.root.graph.nodes if n.op is Op.SCAN]
    assert [s.arg.reverse for s in scans] == [False, True]    # forward, then backward


def test_rnn_training_loop_matches_torch(path):
    """A recurrent model trained 50 steps over fed sequences, scan inside ir_for."""
    n = 50
    rng = np.random.default_rng(4)
    seqs = rng.standard_normal((n, 6, 2, 3)).astype(np.float32)
    tgts = rng.standard_normal((n, 2)).astype(np.float32)
    w0 = rng.standard_normal((3, 4)).astype(np.float32) * 0.5
    u0 = rng.standard_normal((4, 4)).astype(np.float32) * 0.5
    v0 = rng.standard_normal((4, 1)).astype(np.float32) * 0.5
    w, u, v = (ad.tensor(a, requires_grad=True) for a in (w0, u0, v0))
    opt = SGD([w, u, v], lr=0.1)
    fx, fy = Feed(seqs), Feed(tgts)
    losses = []

    def step():
        opt.zero_grad()
        x = ad.Feeder(fx, shape=(6, 2, 3))
        y = ad.Feeder(fy, shape=(2,))
        h, _ = ad.scan(lambda h, xt: ((xt @ w + h @ u).tanh(), None), ad.zeros(2, 4), x)
        loss = (((h @ v).reshape(2) - y) ** 2).mean()
        loss.backward()
        opt.step()
        ad.Receiver(lambda a: losses.append(float(a)), [loss])

    ad.ir_for(n, step)
    run(path)
    wt, ut, vt = (torch.tensor(a, requires_grad=True) for a in (w0, u0, v0))
    topt = torch.optim.SGD([wt, ut, vt], lr=0.1)
    expect = []
    for x, y in zip(seqs, tgts):
        topt.zero_grad()
        h = torch.zeros(2, 4)
        for t in range(6):
            h = torch.tanh(torch.from_numpy(x[t]) @ wt + h @ ut)
        loss = (((h @ vt).reshape(2) - torch.from_numpy(y)) ** 2).mean()
        loss.backward()
        topt.step()
        expect.append(loss.item())
    np.testing.assert_allclose(losses, expect, rtol=1e-5, atol=1e-6)
    for a, b in ((w, wt), (u, ut), (v, vt)):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_if_inside_scan_inside_for(path):
    """Nested: a branch per time step inside a scan inside the training loop, 50 steps."""
    n = 50
    rng = np.random.default_rng(5)
    seqs = rng.standard_normal((n, 5, 3)).astype(np.float32)
    w0 = rng.standard_normal((3, 3)).astype(np.float32) * 0.5
    w = ad.tensor(w0, requires_grad=True)
    opt = SGD([w], lr=0.05)
    fx = Feed(seqs)
    losses = []

    def cell(h, x):
        z = h @ w + x
        h = ad.ir_if(x.sum() > 0, lambda: z.tanh(), lambda: z * 0.5 + h.sin())
        return h, h.sum()

    def step():
        opt.zero_grad()
        h, ys = ad.scan(cell, ad.zeros(3), ad.Feeder(fx, shape=(5, 3)))
        loss = (ys * ys).mean() + (h * h).sum()
        loss.backward()
        opt.step()
        ad.Receiver(lambda a: losses.append(float(a)), [loss])

    ad.ir_for(n, step)
    run(path)
    wt = torch.tensor(w0, requires_grad=True)
    topt = torch.optim.SGD([wt], lr=0.05)
    expect = []
    for seq in seqs:
        topt.zero_grad()
        h, ys = torch.zeros(3), []
        for x in torch.from_numpy(seq):
            z = h @ wt + x
            h = torch.tanh(z) if x.sum() > 0 else z * 0.5 + torch.sin(h)
            ys.append(h.sum())
        ys = torch.stack(ys)
        loss = (ys * ys).mean() + (h * h).sum()
        loss.backward()
        topt.step()
        expect.append(loss.item())
    np.testing.assert_allclose(losses, expect, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w.numpy(), wt.detach().numpy(), rtol=1e-5, atol=1e-5)


def test_residual_stacks_live_in_the_arena():
    """The saved per-step values are temporaries the planner places; checkpointing keeps
    fewer of them."""
    arenas = {}
    for k in (None, 8):
        ad.reset()
        rng = np.random.default_rng(0)
        x = ad.tensor(rng.standard_normal((64, 16, 32)).astype(np.float32))
        w = ad.tensor(rng.standard_normal((32, 32)).astype(np.float32) * 0.1,
                      requires_grad=True)
        h, ys = ad.scan(lambda h, xt: ((h @ w + xt).tanh().sin(),) * 2, ad.zeros(16, 32),
                        x, checkpoint=k)
        ys.sum().backward()
        g = w.grad
        ad.execute(device="numpy", ir="procedural", debug=True)
        plan = ad.graph.trace.TRACER.last.stages["alloc"]
        stacks = [b for name, b in plan.buffers.items() if ".y" in name]
        assert stacks and all(b.kind.value == "temp" and b.shape[0] in (64, 8) for b in stacks)
        assert all(b.name in plan.offsets for b in stacks)
        arenas[k] = plan.arena_bytes
        assert g.numpy().shape == (32, 32)
    assert arenas[8] < 0.6 * arenas[None]
