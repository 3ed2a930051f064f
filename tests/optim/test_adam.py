"""Adam and AdamW against ``torch.optim`` on a small regression, traced once in ``ir_for``."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import nn
from autodiff.optim import SGD, Adam, AdamW

STEPS = 12
torch.set_num_threads(1)


def _problem():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 5)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    x = rng.standard_normal((STEPS, 8, 5)).astype(np.float32)
    y = rng.standard_normal((STEPS, 8, 3)).astype(np.float32)
    return w, b, x, y


def _ours(make_opt, device="numpy"):
    w, b, xs, ys = _problem()
    lin = nn.Linear(5, 3)
    lin.load_state_dict({"weight": w, "bias": b})
    opt = make_opt(lin.parameters())
    it, losses = iter(zip(xs, ys)), []
    cur = {}

    def fx():
        cur["x"], cur["y"] = next(it)
        return cur["x"]

    def step():
        x = ad.Feeder(fx, [8, 5], name="x")
        y = ad.Feeder(lambda: cur["y"], [8, 3], name="y")
        opt.zero_grad()
        loss = nn.MSELoss()(lin(x), y)
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: losses.append(float(v)), [loss])

    ad.ir_for(STEPS, step)
    ad.execute(device=device)
    return np.array(losses), lin, opt


def _theirs(make_opt):
    w, b, xs, ys = _problem()
    lin = torch.nn.Linear(5, 3)
    lin.load_state_dict({"weight": torch.tensor(w), "bias": torch.tensor(b)})
    opt = make_opt(lin.parameters())
    losses = []
    for x, y in zip(xs, ys):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(lin(torch.tensor(x)), torch.tensor(y))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return np.array(losses), lin


CASES = {
    "adam": (lambda p: Adam(p), lambda p: torch.optim.Adam(p)),
    "adam_lr_wd": (lambda p: Adam(p, lr=0.05, betas=(0.8, 0.99), weight_decay=0.1),
                   lambda p: torch.optim.Adam(p, lr=0.05, betas=(0.8, 0.99), weight_decay=0.1)),
    "adam_amsgrad": (lambda p: Adam(p, lr=0.05, amsgrad=True),
                     lambda p: torch.optim.Adam(p, lr=0.05, amsgrad=True)),
    "adamw": (lambda p: AdamW(p, lr=0.05), lambda p: torch.optim.AdamW(p, lr=0.05)),
    "adamw_wd": (lambda p: AdamW(p, lr=0.02, weight_decay=0.5, eps=1e-6),
                 lambda p: torch.optim.AdamW(p, lr=0.02, weight_decay=0.5, eps=1e-6)),
    "sgd_momentum": (lambda p: SGD(p, lr=0.05, momentum=0.9),
                     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_torch(case):
    ours_opt, torch_opt = CASES[case]
    losses, lin, _ = _ours(ours_opt)
    ref_losses, ref = _theirs(torch_opt)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-5)
    np.testing.assert_allclose(lin.weight.numpy(), ref.weight.detach().numpy(), rtol=1e-4,
                               atol=1e-6)
    np.testing.assert_allclose(lin.bias.numpy(), ref.bias.detach().numpy(), rtol=1e-4,
                               atol=1e-6)
    w0, _, _, _ = _problem()
    assert np.abs(lin.weight.numpy() - w0).max() > 5e-3       # the parameters did move


def test_defaults_match_torch():
    p = [nn.Parameter(np.zeros(2))]
    for ours, theirs in ((Adam(p), torch.optim.Adam([torch.zeros(2)])),
                         (AdamW(p), torch.optim.AdamW([torch.zeros(2)]))):
        assert ours.defaults == theirs.defaults


def test_state_is_loop_carried():
    _, lin, opt = _ours(lambda p: AdamW(p, lr=0.01))
    st = opt.state[id(lin.weight)]
    assert st["step"].numpy() == STEPS and st["step"].dtype == "float32"
    assert np.abs(st["exp_avg"].numpy()).max() > 0 and (st["exp_avg_sq"].numpy() > 0).all()


def test_bad_hyper_parameters():
    p = [nn.Parameter(np.zeros(2))]
    with pytest.raises(ValueError):
        Adam(p, lr=-1)
    with pytest.raises(ValueError):
        AdamW(p, betas=(0.9, 1.0))
