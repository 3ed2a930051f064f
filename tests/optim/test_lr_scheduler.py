"""Learning-rate schedules inside the compiled loop against ``torch.optim.lr_scheduler``:
the rate of every step (read by a Receiver), the parameters after 12 steps, the initial
step at construction, and the device-side step count."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import optim
from autodiff.graph.ir import Op
from autodiff.optim import lr_scheduler as S
from optim_helpers import STEPS, ours, theirs

T = torch.optim.lr_scheduler
torch.set_num_threads(1)

SCHEDULES = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[2, 5, 5], gamma=0.5)),
    ("ExponentialLR", dict(gamma=0.9)),
    ("CosineAnnealingLR", dict(T_max=5, eta_min=0.001)),
    ("LinearLR", dict(start_factor=0.1, total_iters=4)),
    ("ConstantLR", dict(factor=0.5, total_iters=3)),
    ("PolynomialLR", dict(total_iters=6, power=2.0)),
    ("OneCycleLR", dict(max_lr=0.1, total_steps=STEPS)),
    ("OneCycleLR", dict(max_lr=[0.1, 0.05], total_steps=STEPS + 3, three_phase=True,
                        anneal_strategy="linear")),
]


@pytest.mark.parametrize("name,kw", SCHEDULES, ids=[s[0] + str(i) for i, s in enumerate(SCHEDULES)])
def test_schedules_match_torch(name, kw):
    w, b, lrs, opt, sched = ours(lambda p: optim.AdamW(p, lr=0.05),
                                 lambda o: getattr(S, name)(o, **kw))
    tw, tb, tlrs, topt, tsched = theirs(lambda p: torch.optim.AdamW(p, lr=0.05),
                                        lambda o: getattr(T, name)(o, **kw))
    np.testing.assert_allclose(lrs, tlrs, rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(w, tw, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b, tb, rtol=1e-4, atol=1e-5)
    assert sched.last_epoch == tsched.last_epoch == STEPS
    np.testing.assert_allclose(sched.get_last_lr(), tsched.get_last_lr(), rtol=1e-5)
    if name == "OneCycleLR":          # momentum cycled on the device too
        np.testing.assert_allclose(float(opt.param_groups[0]["betas"][0].numpy()),
                                   topt.param_groups[0]["betas"][0], rtol=1e-5)
    # the optimizer state dict shows the rate as a float, as torch's
    assert opt.state_dict()["param_groups"][0]["lr"] == pytest.approx(
        topt.state_dict()["param_groups"][0]["lr"], rel=1e-5)


def test_lambda_lr_traced_on_the_step_tensor():
    w, _, lrs, _, _ = ours(lambda p: optim.SGD(p, lr=0.05, momentum=0.9),
                           lambda o: S.LambdaLR(o, [lambda t: (t / 4).clamp(max=1.0) + 0.1,
                                                    lambda t: 0.9 ** t]))
    tw, _, tlrs, _, _ = theirs(lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
                               lambda o: T.LambdaLR(o, [lambda t: min(t / 4, 1.0) + 0.1,
                                                        lambda t: 0.9 ** t]))
    np.testing.assert_allclose(lrs, tlrs, rtol=1e-6)
    np.testing.assert_allclose(w, tw, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("make,tmake", [
    (lambda o: S.SequentialLR(o, [S.LinearLR(o, 0.1, total_iters=3), S.CosineAnnealingLR(o, 6)],
                              [3]),
     lambda o: T.SequentialLR(o, [T.LinearLR(o, 0.1, total_iters=3), T.CosineAnnealingLR(o, 6)],
                              [3])),
    (lambda o: S.SequentialLR(o, [S.ConstantLR(o, 0.5, 2), S.ExponentialLR(o, 0.8),
                                  S.StepLR(o, 2)], [2, 7]),
     lambda o: T.SequentialLR(o, [T.ConstantLR(o, 0.5, 2), T.ExponentialLR(o, 0.8),
                                  T.StepLR(o, 2)], [2, 7])),
    (lambda o: S.MultiplicativeLR(o, lambda t: 0.9 + 0.0 * t),
     lambda o: T.MultiplicativeLR(o, lambda t: 0.9)),
    (lambda o: S.OneCycleLR(o, 0.2, total_steps=STEPS),
     lambda o: T.OneCycleLR(o, 0.2, total_steps=STEPS))])
def test_sequential_multiplicative_and_sgd_momentum_cycling(make, tmake):
    w, b, lrs, _, _ = ours(lambda p: optim.SGD(p, lr=0.05, momentum=0.9), make)
    tw, tb, tlrs, _, _ = theirs(lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9), tmake)
    np.testing.assert_allclose(lrs, tlrs, rtol=1e-5)
    np.testing.assert_allclose(w, tw, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b, tb, rtol=1e-4, atol=1e-5)


def test_construction_sets_rates_on_the_host_and_step_costs_no_host_work():
    p = ad.Tensor(np.zeros(2, np.float32), requires_grad=True)
    opt = optim.SGD([p], lr=1.0)
    sched = S.LinearLR(opt, start_factor=0.25, total_iters=4)
    assert sched.get_last_lr() == [0.25] and sched.base_lrs == [1.0]
    assert opt.param_groups[0]["initial_lr"] == 1.0
    ad.ir_for(3, lambda: sched.step())
    from autodiff.graph.trace import TRACER
    body = TRACER.root.graph.nodes[-1].arg.body
    assert not any(n.op in (Op.FEEDER, Op.RECEIVER) for n in body.nodes)   # device only
    ad.execute()
    assert sched.last_epoch == 3 and sched.get_last_lr() == [pytest.approx(0.8125)]


def test_scheduler_errors():
    p = ad.Tensor(np.zeros(2, np.float32), requires_grad=True)
    opt = optim.SGD([p], lr=1.0)
    with pytest.raises(ValueError, match="total_steps"):
        S.OneCycleLR(opt, 0.1)
    with pytest.raises(ValueError, match="momentum or beta1"):
        S.OneCycleLR(optim.Adagrad([ad.Tensor(np.zeros(1, np.float32), requires_grad=True)]),
                     0.1, total_steps=5)
    with pytest.raises(ValueError, match="milestone"):
        S.SequentialLR(opt, [S.StepLR(opt, 2)], [3])
    with pytest.raises(KeyError, match="initial_lr"):
        S.StepLR(optim.SGD([p], lr=1.0), 2, last_epoch=3)


def test_loading_a_state_dict_keeps_the_schedule_bound():
    """A torch state dict loaded into an optimizer driven by OneCycleLR: lr and beta1 stay
    the scheduler's device variables (taking the loaded values)."""
    p = ad.Tensor(np.zeros(2, np.float32), requires_grad=True)
    opt = optim.AdamW([p], lr=0.01)
    sched = S.OneCycleLR(opt, 0.1, total_steps=10)
    lr_var, beta_var = opt.param_groups[0]["lr"], opt.param_groups[0]["betas"][0]
    t = torch.zeros(2, requires_grad=True)
    topt = torch.optim.AdamW([t], lr=0.01)
    T.OneCycleLR(topt, 0.1, total_steps=10)
    topt.param_groups[0]["lr"], topt.param_groups[0]["betas"] = 0.05, (0.9, 0.99)
    opt.load_state_dict(topt.state_dict())
    g = opt.param_groups[0]
    assert g["lr"] is lr_var and g["betas"][0] is beta_var and g["betas"][1] == 0.99
    assert float(lr_var.numpy()) == pytest.approx(0.05) and sched.get_last_lr() == [
        pytest.approx(0.05)]


@pytest.mark.parametrize("kw", [dict(T_0=3), dict(T_0=2, T_mult=2, eta_min=0.001),
                                dict(T_0=1, T_mult=3)])
def test_cosine_annealing_warm_restarts_matches_torch(kw):
    _, sched, _, tsched = _sgd_against_torch("CosineAnnealingWarmRestarts", kw, 30)
    np.testing.assert_allclose(sched.get_last_lr(), tsched.get_last_lr(), rtol=1e-5)


def _sgd_against_torch(name, kw, steps):
    """SGD with momentum under schedule ``name`` here and in torch: the rate of every step
    and the parameters agree. Returns ``(opt, sched, torch_opt, torch_sched)``."""
    w, _, lrs, opt, sched = ours(lambda p: optim.SGD(p, lr=0.05, momentum=0.9),
                                 lambda o: getattr(S, name)(o, **kw), steps=steps)
    tw, _, tlrs, topt, tsched = theirs(lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
                                       lambda o: getattr(T, name)(o, **kw), steps=steps)
    np.testing.assert_allclose(lrs, tlrs, rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(w, tw, rtol=1e-4, atol=1e-5)
    return opt, sched, topt, tsched


@pytest.mark.parametrize("kw", [
    dict(patience=1, factor=0.5),
    dict(mode="max", patience=0, factor=0.3, cooldown=2, threshold=0.05, min_lr=0.004),
    dict(threshold_mode="abs", threshold=0.01, patience=2, min_lr=[0.02, 0.001]),
])
def test_reduce_lr_on_plateau_decides_on_the_device_as_torch(kw):
    """The metric is computed in the loop (no host work): a noisy plateau."""
    metrics = np.float32([1.0, 0.9, 0.95, 0.91, 0.92, 0.93, 0.5, 0.6, 0.61, 0.7, 0.4, 0.45,
                          0.44, 0.46, 0.47, 0.5])
    it, lrs = iter(metrics), []
    w = ad.tensor(np.zeros(2, np.float32), requires_grad=True)
    b = ad.tensor(np.zeros(1, np.float32), requires_grad=True)
    opt = optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.02}], lr=0.05)
    sched = S.ReduceLROnPlateau(opt, **kw)

    def body():
        m = ad.Feeder(lambda: np.asarray(next(it)), [])
        sched.step(m * 1.0)
        ad.Receiver(lambda a, c: lrs.append((float(a), float(c))),
                    [opt.param_groups[0]["lr"], opt.param_groups[1]["lr"]])
    ad.ir_for(len(metrics), body)
    ad.execute(device="numpy")
    tw, tb = torch.zeros(2, requires_grad=True), torch.zeros(1, requires_grad=True)
    topt = torch.optim.SGD([{"params": [tw]}, {"params": [tb], "lr": 0.02}], lr=0.05)
    tsched = T.ReduceLROnPlateau(topt, **kw)
    tlrs = []
    for m in metrics:
        tsched.step(float(m))
        tlrs.append((topt.param_groups[0]["lr"], topt.param_groups[1]["lr"]))
    np.testing.assert_allclose(lrs, tlrs, rtol=1e-6)
    assert sched.num_bad_epochs == tsched.num_bad_epochs
    assert sched.best == pytest.approx(tsched.best)
    assert sched.state_dict()["cooldown_counter"] == tsched.cooldown_counter


@pytest.mark.parametrize("kw", [
    dict(base_lr=0.01, max_lr=0.1, step_size_up=3),
    dict(base_lr=[0.01, 0.02], max_lr=0.1, step_size_up=2, step_size_down=4,
         mode="triangular2"),
    dict(base_lr=0.01, max_lr=0.1, step_size_up=3, mode="exp_range", gamma=0.9),
])
def test_cyclic_lr_matches_torch(kw):
    """Rates and the cycled momentum (SGD's) against torch, over several cycles."""
    opt, _, topt, _ = _sgd_against_torch("CyclicLR", kw, 20)
    np.testing.assert_allclose(float(opt.param_groups[1]["momentum"].numpy()),
                               topt.param_groups[1]["momentum"], rtol=1e-5)
