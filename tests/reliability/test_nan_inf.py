"""Item 8: NaN and infinities propagate through every op as in PyTorch, on every device
(a diverging run shows NaN instead of silently continuing)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff.optim import SGD

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -0.5, 1e30],
                   np.float32)
A, B = (g.ravel() for g in np.meshgrid(SPECIAL, SPECIAL, indexing="ij"))

UNARY = ["neg", "exp", "log", "exp2", "log2", "sqrt", "rsqrt", "reciprocal", "sin", "cos",
         "tanh", "sigmoid", "relu", "abs", "erf", "sign", "square"]
BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "pow": "pow",
          "maximum": "maximum", "minimum": "minimum", "lt": "lt", "le": "le", "gt": "gt",
          "ge": "ge", "eq": "eq", "ne": "ne"}


def _check(got, want, what=""):
    want = np.asarray(want, np.float32)
    assert got.shape == want.shape, what
    bad = ~((got == want) | (np.isnan(got) & np.isnan(want)) |
            (np.isfinite(want) & (np.abs(got - want) <= 1e-5 + 1e-5 * np.abs(want))))
    assert not bad.any(), (what, got[bad], want[bad], np.flatnonzero(bad))


def _run(device, fn, *arrays):
    xs = [ad.Tensor(a) for a in arrays]
    y = fn(*xs)
    ad.execute(device=device)
    return y.numpy() if not isinstance(y, dict) else {k: v.numpy() for k, v in y.items()}


def test_unary(device):
    """Every unary op in one program (one compile per device)."""
    got = _run(device, lambda x: {op: getattr(x, op)() for op in UNARY}, SPECIAL)
    for op in UNARY:
        _check(got[op], getattr(torch.tensor(SPECIAL), op)().numpy(), op)


def test_binary(device):
    got = _run(device, lambda a, b: {op: getattr(a, op)(b) for op in BINARY}, A, B)
    for op, name in BINARY.items():
        _check(got[op], getattr(torch.tensor(A), name)(torch.tensor(B)).float().numpy(), op)


def test_where_clamp_and_masks(device):
    m = (np.arange(A.size) % 2).astype(np.float32)
    got = _run(device, lambda m_, a, b: ad.where(m_, a, b), m, A, B)
    _check(got, torch.where(torch.tensor(m) != 0, torch.tensor(A), torch.tensor(B)).numpy())
    got = _run(device, lambda x: x.clamp(-1.0, 2.0), SPECIAL)
    _check(got, torch.tensor(SPECIAL).clamp(-1.0, 2.0).numpy())


def test_reductions(device):
    ops = ["sum", "mean", "amax", "amin", "softmax", "log_softmax"]
    x = np.stack([SPECIAL, np.roll(SPECIAL, 3), np.linspace(-2, 2, SPECIAL.size),
                  np.full(SPECIAL.size, -np.inf)]).astype(np.float32)
    x[2, 4] = np.nan                        # a row with one NaN among finite values
    x[:, 5] = -np.inf                       # a column of -inf (and a row of them)
    got = _run(device, lambda t: {(op, d): getattr(t, op)(d) for op in ops for d in (0, 1)},
               x)
    for op in ops:
        for d in (0, 1):
            _check(got[op, d], getattr(torch.tensor(x), op)(d).numpy(), (op, d))


def test_matmul_propagates_nan_and_inf(device):
    a = np.ones((3, 4), np.float32)
    a[0, 1], a[2, 3] = np.nan, np.inf
    b = np.full((4, 2), 0.5, np.float32)
    got = _run(device, lambda x, y: x @ y, a, b)
    _check(got, (torch.tensor(a) @ torch.tensor(b)).numpy())


def test_diverging_run_shows_nan(device):
    """A NaN entering the weights (through relu and a maximum) stays there, as in torch."""
    w = ad.Tensor(np.ones((2, 2), np.float32), requires_grad=True)
    opt = SGD([w], lr=0.1)
    seen = []
    feeds = iter([np.ones((1, 2), np.float32), np.full((1, 2), np.nan, np.float32),
                  np.ones((1, 2), np.float32)])

    def body():
        opt.zero_grad()
        x = ad.Feeder(lambda: next(feeds), [1, 2])
        loss = (x @ w).relu().maximum(0.0).sum()
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: seen.append(float(v)), [loss])
    ad.ir_for(3, body)
    ad.execute(device=device)
    assert np.isfinite(seen[0]) and np.isnan(seen[1]) and np.isnan(seen[2]), seen
    assert np.isnan(w.numpy()).all()
