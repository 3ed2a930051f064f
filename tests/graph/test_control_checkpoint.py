"""``checkpoint``: the backward pass recomputes a function's activations instead of keeping
them (``torch.utils.checkpoint``); gradients are unchanged, the arena is smaller."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.utils.checkpoint

import autodiff as ad
import autodiff.nn.functional as F
from autodiff.nn import Linear, MSELoss, Module, ModuleList, Tanh
from autodiff.optim import SGD
from control_helpers import path_params, run


@pytest.fixture(params=path_params())
def path(request):
    return request.param


class Block(Module):
    def __init__(self, d):
        super().__init__()
        self.a, self.b, self.act = Linear(d, 4 * d), Linear(4 * d, d), Tanh()

    def forward(self, x):
        return x + self.b(self.act(self.a(x)))


class Net(Module):
    def __init__(self, d, depth, ckpt):
        super().__init__()
        self.blocks = ModuleList([Block(d) for _ in range(depth)])
        self.ckpt = ckpt

    def forward(self, x):
        for blk in self.blocks:
            x = ad.checkpoint(blk, x) if self.ckpt else blk(x)
        return x


def _torch_net(net, d, depth):
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)]
    ref = torch.nn.ModuleList(layers)
    with torch.no_grad():
        for k, blk in enumerate(net.blocks):
            for lin, ours in ((ref[2 * k], blk.a), (ref[2 * k + 1], blk.b)):
                lin.weight.copy_(torch.from_numpy(ours.weight.numpy()))
                lin.bias.copy_(torch.from_numpy(ours.bias.numpy()))
    return ref


def _torch_forward(ref, x, ckpt):
    for k in range(len(ref) // 2):
        def blk(h, k=k):
            return h + ref[2 * k + 1](torch.tanh(ref[2 * k](h)))
        x = torch.utils.checkpoint.checkpoint(blk, x, use_reentrant=False) if ckpt else blk(x)
    return x


def test_training_with_checkpointed_blocks_matches_torch(path):
    d, depth, n = 4, 3, 50
    ad.manual_seed(0)
    net = Net(d, depth, ckpt=True)
    ref = _torch_net(net, d, depth)
    opt = SGD(net.parameters(), lr=0.05)
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((n, 5, d)).astype(np.float32)
    ys = rng.standard_normal((n, 5, d)).astype(np.float32)
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
    topt = torch.optim.SGD(ref.parameters(), lr=0.05)
    expect = []
    for x, y in zip(xs, ys):
        topt.zero_grad()
        loss = torch.nn.functional.mse_loss(_torch_forward(ref, torch.from_numpy(x), True),
                                            torch.from_numpy(y))
        loss.backward()
        topt.step()
        expect.append(loss.item())
    np.testing.assert_allclose(losses, expect, rtol=1e-5, atol=1e-6)
    for k, blk in enumerate(net.blocks):
        np.testing.assert_allclose(blk.a.weight.numpy(), ref[2 * k].weight.detach().numpy(),
                                   rtol=1e-5, atol=1e-5)


def _step_and_arena(ckpt: bool):
    """One SGD step of a 6-block residual MLP; the parameters after it and the memory plan."""
    ad.reset()
    ad.manual_seed(1)
    net = Net(16, 6, ckpt)
    opt = SGD(net.parameters(), lr=0.1)
    x = ad.tensor(np.random.default_rng(0).standard_normal((256, 16)).astype(np.float32))

    def body():
        opt.zero_grad()
        net(x).pow(2).mean().backward()
        opt.step()

    ad.ir_for(1, body)
    rep = ad.execute(device="numpy", ir="procedural", debug=True)
    return [p.numpy() for p in net.parameters()], rep.stats["memory"]


def test_checkpoint_keeps_gradients_and_shrinks_the_arena():
    plain, mem_plain = _step_and_arena(False)
    ckpt, mem_ckpt = _step_and_arena(True)
    for a, b in zip(plain, ckpt):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
    assert mem_ckpt["arena_bytes"] <= 0.5 * mem_plain["arena_bytes"]


def test_random_draws_repeat_in_the_recomputation():
    """Dropout inside a checkpointed function: the recomputed mask is the forward's."""

    class Drop(Module):
        def forward(self, x):
            return F.dropout(x, 0.5, seed=3) * 2.0

    x0 = np.random.default_rng(2).standard_normal((8, 6)).astype(np.float32)
    got = {}
    for ck in (False, True):
        ad.reset()
        x = ad.tensor(x0, requires_grad=True)
        mod = Drop()
        y = ad.checkpoint(mod, x) if ck else mod(x)
        (y * y).sum().backward()
        g = x.grad
        ad.execute(device="numpy")
        got[ck] = (y.numpy(), g.numpy())
    assert (got[True][1] == 0).any() and (got[True][1] != 0).any()
    for a, b in zip(got[True], got[False]):
        np.testing.assert_array_equal(a, b)


def test_checkpoint_needs_a_pure_function():
    w = ad.zeros(3)

    def bad(x):
        w.add_(1.0)
        return x * 2

    with pytest.raises(TypeError, match=r"checkpoint: the function must be pure.*"
                                        r"assign at .*test_control_checkpoint.py:\d+"):
        ad.checkpoint(bad, ad.ones(3))
