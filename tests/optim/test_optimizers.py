"""Every optimizer against ``torch.optim`` over 12 steps traced once (two parameter groups
with their own learning rates), and optimizer state dicts moving both ways."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import optim
from optim_helpers import ours, theirs, to_torch

torch.set_num_threads(1)

CASES = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=0.1)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.95), maximize=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.01, amsgrad=True, weight_decay=0.3)),
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1, weight_decay=0.1)),
    ("Adamax", dict(lr=0.01, weight_decay=0.1)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1)),
    ("NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("RAdam", dict(lr=0.01, weight_decay=0.1)),
    ("RAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1, maximize=True)),
    ("Rprop", dict(lr=0.01)),
    ("Rprop", dict(lr=0.05, etas=(0.3, 1.5), step_sizes=(1e-3, 0.08))),
    ("ASGD", dict(lr=0.05)),
    ("ASGD", dict(lr=0.05, lambd=0.01, alpha=0.5, t0=4, weight_decay=0.1)),
]


@pytest.mark.parametrize("name,kw", CASES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CASES)])
def test_matches_torch(name, kw):
    w, b, _, opt, _ = ours(lambda p: getattr(optim, name)(p, **kw))
    tw, tb, _, topt, _ = theirs(lambda p: getattr(torch.optim, name)(p, **kw))
    np.testing.assert_allclose(w, tw, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b, tb, rtol=1e-4, atol=1e-5)
    assert opt.defaults == topt.defaults
    assert np.abs(w - ours(lambda p: optim.SGD(p, lr=0.0))[0]).max() > 1e-3   # it moved
    # state: same keys and values as torch's
    sd, tsd = opt.state_dict(), topt.state_dict()
    assert [g["params"] for g in sd["param_groups"]] == [g["params"] for g in tsd["param_groups"]]
    assert sd["param_groups"] == tsd["param_groups"]
    assert sorted(sd["state"]) == sorted(tsd["state"])
    for i, st in tsd["state"].items():
        assert list(sd["state"][i]) == list(st), name
        for k, v in st.items():
            np.testing.assert_allclose(sd["state"][i][k], v.numpy(), rtol=1e-4, atol=1e-6,
                                       err_msg=f"{name} state {i} {k}")


@pytest.mark.parametrize("name,kw", [("Adam", dict(lr=0.02, amsgrad=True)),
                                     ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.5)),
                                     ("NAdam", dict(lr=0.01)), ("Adagrad", dict(lr=0.1))])
def test_state_dict_round_trips_with_torch(name, kw):
    """Train 12 steps in one library, move the optimizer state to the other and train 12
    more there: the same as 24 steps in torch."""
    make = lambda p: getattr(optim, name)(p, **kw)
    tmake = lambda p: getattr(torch.optim, name)(p, **kw)
    _, _, _, opt, _ = ours(make)
    _, _, _, topt, _ = theirs(tmake)
    # ours -> torch, and torch -> ours, then continue from the same parameters
    w1, b1, _, t_from_ours, _ = theirs(tmake, state=to_torch(opt.state_dict()))
    w2, b2, _, _, _ = ours(make, state=topt.state_dict())
    w3, b3, _, _, _ = theirs(tmake, state=topt.state_dict())
    np.testing.assert_allclose(w1, w3, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(w2, w3, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b2, b3, rtol=1e-4, atol=1e-5)


def test_param_groups_and_errors():
    a = ad.Tensor(np.zeros(2, np.float32), requires_grad=True)
    b = ad.Tensor(np.zeros(2, np.float32), requires_grad=True)
    opt = optim.Adam([{"params": [a]}, {"params": b, "lr": 0.5, "betas": (0.5, 0.9)}], lr=0.1)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[1]["betas"] == (0.5, 0.9)
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.RMSprop([a], lr=-1)
    with pytest.raises(ValueError, match="Invalid beta"):
        optim.NAdam([a], betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="Nesterov"):
        optim.SGD([a], lr=0.1, nesterov=True)
    with pytest.raises(TypeError, match="made from data"):
        optim.SGD([a * 2.0], lr=0.1)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0]}]})
    assert opt.state[a] == {}                       # a defaultdict, as torch's
    opt.add_param_group({"params": [ad.Tensor(np.zeros(1, np.float32), requires_grad=True)]})
    assert opt.param_groups[2]["lr"] == 0.1 and len(opt.params) == 3


def test_state_is_loop_carried_and_indexed_by_parameter():
    _, _, _, opt, _ = ours(lambda p: optim.AdamW(p, lr=0.01))
    w = opt.param_groups[0]["params"][0]
    st = opt.state[w]
    assert st["step"].numpy() == 12 and st["step"].dtype == "float32"
    assert (st["exp_avg_sq"].numpy() > 0).all()


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_set_to_none_false_keeps_zeros(set_to_none):
    """``zero_grad(set_to_none=False)`` leaves zeros, so an update before the next
    ``backward()`` steps with a zero gradient (weight decay applies), as PyTorch's; with
    None the parameter is skipped."""
    w0 = np.float32([1.0, -2.0])
    w = ad.Tensor(w0, requires_grad=True)
    opt = optim.SGD([w], lr=0.1, weight_decay=0.5)
    tw = torch.tensor(w0, requires_grad=True)
    topt = torch.optim.SGD([tw], lr=0.1, weight_decay=0.5)
    (w * w).sum().backward()
    opt.zero_grad(set_to_none=set_to_none)
    opt.step()
    g = w.grad
    ad.execute(device="numpy")
    (tw * tw).sum().backward()
    topt.zero_grad(set_to_none=set_to_none)
    topt.step()
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-6)
    assert (g is None) == (tw.grad is None)
    if g is not None:
        np.testing.assert_array_equal(g.numpy(), tw.grad.numpy())


@pytest.mark.parametrize("name", ["Adam", "AdamW", "Adamax"])
def test_bias_corrections_are_traced_once_per_step(name):
    """Every parameter of a group divides by the same ``1 - beta ** step``: it is traced
    once per ``step()``, not once per parameter for the graph's CSE to merge (as many
    ``exp`` nodes for four parameters as for one), and the updates still match torch's.
    (NAdam's momentum schedule and RAdam's ``rho_t`` are still traced per parameter.)"""
    from autodiff import nn
    from autodiff.graph.ir import Op
    from autodiff.graph.trace import TRACER
    rng = np.random.default_rng(4)
    inits = [rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (4,), (2, 3), (5,))]

    def exps(arrays) -> int:
        ad.reset()
        ps = [nn.Parameter(ad.Tensor(w)) for w in arrays]
        sum(((p * p).sum() for p in ps), ad.Tensor(0.0)).backward()
        getattr(optim, name)(ps, lr=0.01).step()
        return sum(n.op is Op.EXP for n in TRACER.finish().walk())
    assert exps(inits) == exps(inits[:1]) > 0
    ad.reset()
    ps = [nn.Parameter(ad.Tensor(w)) for w in inits]
    opt = getattr(optim, name)(ps, lr=0.01)
    for _ in range(3):
        opt.zero_grad()
        sum(((p * p).sum() for p in ps), ad.Tensor(0.0)).backward()
        opt.step()
    ad.execute(device="numpy")
    tps = [torch.tensor(w, requires_grad=True) for w in inits]
    topt = getattr(torch.optim, name)(tps, lr=0.01)
    for _ in range(3):
        topt.zero_grad()
        sum((p * p).sum() for p in tps).backward()
        topt.step()
    for p, t in zip(ps, tps):
        np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)
