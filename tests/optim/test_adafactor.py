"""Adafactor against ``torch.optim.Adafactor``: a Linear layer (2-D weight, bias), a 3-D and
a 1-D parameter trained in ``ir_for`` (traced once) and by PyTorch eagerly, with default and
non-default hyper-parameters, two parameter groups, state dicts moving both ways, a
scheduler driving ``lr``, and PyTorch's argument errors."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import nn, optim
from backends import device_params
from optim_helpers import to_torch

STEPS = 10
torch.set_num_threads(1)


def _problem(steps: int = STEPS):
    rng = np.random.default_rng(3)
    f = lambda *s, scale=1.0: (rng.standard_normal(s) * scale).astype(np.float32)
    params = dict(w=f(3, 5), b=f(3), w3=f(2, 3, 4, scale=0.5), s=f(4, scale=0.05) + 0.1)
    return params, f(steps, 8, 5), f(steps, 2, 8, 4)


def _loss(lin, w3, s, x, y, mse):
    h = lin(x).tanh()                      # [8, 3]
    q = (h @ w3) * s                       # [2, 8, 4]
    return mse(q.tanh(), y) + (w3 * w3).mean() * 0.1


def _groups(lin, w3, s, second):
    """The Linear's parameters with the optimizer's arguments; ``w3``, ``s`` with ``second``
    on top (a second group) or in the first group when ``second`` is None."""
    if second is None:
        return [lin.weight, lin.bias, w3, s]
    return [{"params": [lin.weight, lin.bias]}, {"params": [w3, s], **second}]


def _ours(kw, second=None, steps=STEPS, state=None, sched=None, device="numpy"):
    p, xs, ys = _problem(steps)
    lin = nn.Linear(5, 3)
    lin.load_state_dict({"weight": p["w"], "bias": p["b"]})
    w3, s = nn.Parameter(p["w3"]), nn.Parameter(p["s"])
    opt = optim.Adafactor(_groups(lin, w3, s, second), **kw)
    if state is not None:
        opt.load_state_dict(state)
    sch = sched(optim, opt) if sched else None
    it, lrs, cur = iter(zip(xs, ys)), [], {}

    def fx():
        cur["x"], cur["y"] = next(it)
        return cur["x"]

    def body():
        x = ad.Feeder(fx, [8, 5], name="x")
        y = ad.Feeder(lambda: cur["y"], [2, 8, 4], name="y")
        opt.zero_grad()
        _loss(lin, w3, s, x, y, nn.MSELoss()).backward()
        opt.step()
        if sch is not None:
            sch.step()
            ad.Receiver(lambda v: lrs.append(float(v)), [opt.param_groups[0]["lr"]])
    ad.ir_for(steps, body)
    ad.execute(device=device)
    return [t.numpy() for t in (lin.weight, lin.bias, w3, s)], opt, lrs


def _theirs(kw, second=None, steps=STEPS, state=None, sched=None):
    p, xs, ys = _problem(steps)
    lin = torch.nn.Linear(5, 3)
    lin.load_state_dict({"weight": torch.tensor(p["w"]), "bias": torch.tensor(p["b"])})
    w3 = torch.nn.Parameter(torch.tensor(p["w3"]))
    s = torch.nn.Parameter(torch.tensor(p["s"]))
    opt = torch.optim.Adafactor(_groups(lin, w3, s, second), **kw)
    if state is not None:
        opt.load_state_dict(state)
    sch = sched(torch.optim, opt) if sched else None
    lrs = []
    for x, y in zip(xs, ys):
        opt.zero_grad()
        _loss(lin, w3, s, torch.tensor(x), torch.tensor(y), torch.nn.MSELoss()).backward()
        opt.step()
        if sch is not None:
            sch.step()
            lrs.append(opt.param_groups[0]["lr"])
    return [t.detach().numpy() for t in (lin.weight, lin.bias, w3, s)], opt, lrs


def _same_params(ps, tps, rtol=1e-4, atol=1e-5):
    for name, a, t in zip(("weight", "bias", "w3", "s"), ps, tps):
        np.testing.assert_allclose(a, t, rtol=rtol, atol=atol, err_msg=name)


def _same_state(sd, tsd, lr_rtol=0.0):
    """Same param_groups (``lr`` within ``lr_rtol``: a scheduler's rate is a float32
    device value), same state keys in torch's order, shapes and values."""
    lrs = [g.pop("lr") for g in sd["param_groups"]]
    tlrs = [g.pop("lr") for g in tsd["param_groups"]]
    np.testing.assert_allclose(lrs, tlrs, rtol=lr_rtol)
    assert sd["param_groups"] == tsd["param_groups"]
    assert sorted(sd["state"]) == sorted(tsd["state"])
    for i, st in tsd["state"].items():
        assert list(sd["state"][i]) == list(st), i          # keys, in torch's order
        for k, v in st.items():
            assert sd["state"][i][k].shape == tuple(v.shape), (i, k)
            np.testing.assert_allclose(sd["state"][i][k], v.numpy(), rtol=1e-4, atol=1e-8,
                                       err_msg=f"state {i} {k}")


CASES = {
    "defaults": (dict(), None),
    "lr_caps_then_relative": (dict(lr=0.4), None),         # 1/sqrt(t) < 0.4 from t = 7
    "weight_decay_maximize": (dict(lr=0.05, weight_decay=0.3, maximize=True), None),
    "beta2_eps_d": (dict(beta2_decay=-0.5, eps=(1e-3, 0.3), d=1.2), None),
    "eps1_zero_d_large": (dict(lr=0.2, eps=(0.0, 1e-3), d=4.0, beta2_decay=0.0), None),
    "groups": (dict(lr=0.03, weight_decay=0.1),
               dict(lr=0.5, beta2_decay=-0.6, eps=(None, 0.2), d=1.5, maximize=True)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_matches_torch(case):
    kw, second = CASES[case]
    ps, opt, _ = _ours(kw, second)
    tps, topt, _ = _theirs(kw, second)
    # eps1 = 0 divides by variance estimates near zero: float32 rounding (the fused
    # procedural path sums the row means in another order) grows to ~2e-5 over 10 steps
    # on parameters of magnitude 1-5 (measured 1.8e-5), where the other cases stay at 5e-6
    _same_params(ps, tps, atol=5e-5 if case == "eps1_zero_d_large" else 1e-5)
    p0, _, _ = _problem()
    for a, b in zip(ps, (p0["w"], p0["b"], p0["w3"], p0["s"])):
        assert np.abs(a - b).max() > 1e-3                 # every parameter moved
    assert opt.defaults == topt.defaults
    _same_state(opt.state_dict(), topt.state_dict())


def test_state_layout():
    """``row_var``/``col_var`` for the 2-D and 3-D parameters (last two dims factored),
    ``variance`` for the 1-D ones, a float32 0-d ``step``, all loop-carried."""
    _, opt, _ = _ours(dict())
    sd = opt.state_dict()["state"]
    assert {i: {k: v.shape for k, v in st.items()} for i, st in sd.items()} == {
        0: {"step": (), "row_var": (3, 1), "col_var": (1, 5)},
        1: {"step": (), "variance": (3,)},
        2: {"step": (), "row_var": (2, 3, 1), "col_var": (2, 1, 4)},
        3: {"step": (), "variance": (4,)}}
    assert all(v.dtype == np.float32 for st in sd.values() for v in st.values())
    assert all(st["step"] == STEPS for st in sd.values())
    assert all((v > 0).all() for st in sd.values() for k, v in st.items() if k != "step")


@pytest.mark.parametrize("case", ["defaults", "groups"])
def test_state_dict_round_trips_with_torch(case):
    """Train 10 steps in one library, move the state to the other, train 10 more there:
    the same as staying in torch."""
    kw, second = CASES[case]
    _, opt, _ = _ours(kw, second)
    _, topt, _ = _theirs(kw, second)
    from_ours, t_from_ours, _ = _theirs(kw, second, state=to_torch(opt.state_dict()))
    from_torch, o_from_torch, _ = _ours(kw, second, state=topt.state_dict())
    ref, tref, _ = _theirs(kw, second, state=topt.state_dict())
    _same_params(from_ours, ref)
    _same_params(from_torch, ref)
    _same_state(o_from_torch.state_dict(), tref.state_dict())
    assert all(st["step"] == 2 * STEPS for st in o_from_torch.state_dict()["state"].values())


def test_step_lr_scheduler_matches_torch():
    """StepLR halves ``lr`` on the device: it caps the relative step and scales the
    weight decay."""
    kw = dict(lr=0.2, weight_decay=0.2)
    sched = lambda lib, o: lib.lr_scheduler.StepLR(o, step_size=3, gamma=0.5)
    ps, opt, lrs = _ours(kw, sched=sched)
    tps, topt, tlrs = _theirs(kw, sched=sched)
    np.testing.assert_allclose(lrs, tlrs, rtol=1e-6)
    assert len(set(lrs)) == 4
    _same_params(ps, tps)
    _same_state(opt.state_dict(), topt.state_dict(), lr_rtol=1e-7)


@pytest.mark.parametrize("device", device_params())
def test_devices(device):
    kw, second = CASES["groups"]
    ps, _, _ = _ours(kw, second, device=device)
    tps, _, _ = _theirs(kw, second)
    _same_params(ps, tps)


BAD = [dict(lr=-0.1), dict(beta2_decay=0.1), dict(eps=(-1e-3, 1e-3)), dict(eps=(None, -1.0)),
       dict(d=0.5), dict(weight_decay=-0.1), dict(lr=None)]


@pytest.mark.parametrize("kw", BAD, ids=[str(k) for k in BAD])
def test_bad_arguments_raise_as_torch(kw):
    with pytest.raises(Exception) as theirs:
        torch.optim.Adafactor([torch.zeros(2, requires_grad=True)], **kw)
    with pytest.raises(theirs.type) as ours:
        optim.Adafactor([nn.Parameter(np.zeros(2))], **kw)
    if theirs.type is ValueError:
        assert str(ours.value) == str(theirs.value)


def test_defaults_match_torch():
    ours = optim.Adafactor([nn.Parameter(np.zeros(2))])
    theirs = torch.optim.Adafactor([torch.zeros(2, requires_grad=True)])
    assert ours.defaults == theirs.defaults
    assert list(ours.param_groups[0]) == list(theirs.param_groups[0])
