"""PyTorch's chainable schedules step from the current learning rate, so a rate set by hand
(``group["lr"] = x``, between programs or inside the loop) or a scheduler state loaded at
another step carries on. Each checked against torch, rate by rate (a ``group["lr"] = x``
with a scheduler used to fail at trace time, and a reloaded step count restarted the closed
form)."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import optim
from autodiff.optim import lr_scheduler as S

T = torch.optim.lr_scheduler
# the loops step no optimizer (only the rate matters); torch warns about the order
pytestmark = pytest.mark.filterwarnings("ignore:Detected call of")
CHAINABLE = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[2, 7, 7], gamma=0.5)),
    ("ExponentialLR", dict(gamma=0.9)),
    ("CosineAnnealingLR", dict(T_max=4, eta_min=0.001)),
    ("LinearLR", dict(start_factor=0.1, total_iters=8)),
    ("ConstantLR", dict(factor=0.5, total_iters=7)),
    ("PolynomialLR", dict(total_iters=8, power=2.0)),
]
IDS = [c[0] for c in CHAINABLE]


class Pair:
    """The same schedule on a one-parameter SGD in torch (eager) and here (ir_for loops)."""

    def __init__(self, name, kw, lr=0.05):
        self.t_opt = torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=lr)
        self.t_sched = getattr(T, name)(self.t_opt, **kw)
        self.w = ad.tensor(np.zeros(2, np.float32), requires_grad=True)
        self.opt = optim.SGD([self.w], lr=lr)
        self.sched = getattr(S, name)(self.opt, **kw)
        self.t_lrs, self.lrs = [], []

    def run(self, n, device="numpy", inside=None):
        """``n`` steps each; ``inside(i, group, set_lr)`` may change the rate mid-loop."""
        for i in range(n):
            if inside is not None:
                inside(i, self.t_opt.param_groups[0], lambda g, v: g.__setitem__("lr", v))
            self.t_lrs.append(self.t_opt.param_groups[0]["lr"])
            self.t_sched.step()

        def body(i):
            if inside is not None:
                inside(i, self.opt.param_groups[0], lambda g, v: g.__setitem__("lr", v))
            ad.Receiver(lambda v: self.lrs.append(float(v)), [self.opt.param_groups[0]["lr"]])
            self.sched.step()
        ad.ir_for(range(n), body)
        ad.execute(device=device)

    def check(self):
        np.testing.assert_allclose(self.lrs, self.t_lrs, rtol=1e-5, atol=1e-9)
        np.testing.assert_allclose(self.sched.get_last_lr(), self.t_sched.get_last_lr(),
                                   rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("name,kw", CHAINABLE, ids=IDS)
def test_rate_set_by_hand_between_programs_carries_on(name, kw):
    p = Pair(name, kw)
    p.run(5)
    p.t_opt.param_groups[0]["lr"] = 0.003
    p.opt.param_groups[0]["lr"] = 0.003
    p.run(7)
    p.check()


@pytest.mark.parametrize("name,kw", CHAINABLE, ids=IDS)
def test_scheduler_state_loaded_at_an_earlier_step(name, kw):
    p = Pair(name, kw)
    p.run(4)
    t_state, state = copy.deepcopy(p.t_sched.state_dict()), copy.deepcopy(p.sched.state_dict())
    p.run(3)
    p.t_sched.load_state_dict(t_state)
    p.sched.load_state_dict(state)
    p.run(5)
    p.check()


def test_rate_set_inside_the_loop_on_the_device():
    def inside(i, g, set_lr):
        if isinstance(i, int):
            if i == 4:
                set_lr(g, 0.002)
        else:
            ad.ir_if(i == 4, lambda: set_lr(g, 0.002))
    p = Pair("StepLR", dict(step_size=3, gamma=0.5))
    p.run(9, inside=inside)
    p.check()


def test_left_alone_the_rate_is_the_closed_form_without_drift():
    """500 steps of ExponentialLR untouched: the ratio stays exactly 1, so each rate is the
    closed form's float32 value (``pow``: within 5e-6 of PyTorch's float64 rates)."""
    p = Pair("ExponentialLR", dict(gamma=0.99))
    p.run(500)
    np.testing.assert_allclose(p.lrs, p.t_lrs, rtol=6e-6, atol=0)


def test_on_opencl():
    from backends import opencl_missing
    if opencl_missing():
        pytest.skip(opencl_missing())
    p = Pair("CosineAnnealingLR", dict(T_max=3, eta_min=0.01))
    p.run(4, device="opencl")
    p.t_opt.param_groups[0]["lr"] = 0.03
    p.opt.param_groups[0]["lr"] = 0.03
    p.run(6, device="opencl")
    p.check()


def _branch_run(lib, xs, w0, before_step):
    """SGD whose rate drops to 0.01 at iteration 2, set before or after that step."""
    if lib is torch:
        w = torch.tensor(w0, requires_grad=True)
        opt = torch.optim.SGD([w], lr=0.1)
        for i, x in enumerate(xs):
            if before_step and i == 2:
                opt.param_groups[0]["lr"] = 0.01
            opt.zero_grad()
            (torch.tensor(x) * w).pow(2).sum().backward()
            opt.step()
            if not before_step and i == 2:
                opt.param_groups[0]["lr"] = 0.01
        return w.detach().numpy()
    w = ad.tensor(w0, requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    it = iter(xs)

    def body(i):
        drop = lambda: opt.param_groups[0].__setitem__("lr", 0.01)   # noqa: E731
        if before_step:
            ad.ir_if(i == 2, drop)
        opt.zero_grad()
        (ad.Feeder(lambda: next(it), [3]) * w).pow(2).sum().backward()
        opt.step()
        if not before_step:
            ad.ir_if(i == 2, drop)
    ad.ir_for(range(6), body)
    ad.execute(device="numpy")
    assert opt.state_dict()["param_groups"][0]["lr"] == pytest.approx(0.01)
    return w.numpy()


def test_rate_set_in_a_branch_without_a_scheduler():
    """``group["lr"] = x`` under ``ir_if`` with a plain-number rate, before the update reads
    it: a device variable from then on (the Python float used to become the rate of every
    iteration). After the update read it in the same body: an error, not a silent rate
    that never changes."""
    xs = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)
    w0 = np.float32([0.5, -1.0, 2.0])
    np.testing.assert_allclose(_branch_run(ad, xs, w0, True), _branch_run(torch, xs, w0, True),
                               rtol=1e-5)
    ad.reset()
    with pytest.raises(RuntimeError, match=r"\['lr'\] is set at .*test_lr_chain.py:\d+ after "
                                           r"the optimizer read it"):
        _branch_run(ad, xs, w0, False)


@pytest.mark.parametrize("chained", [False, True])
def test_two_schedulers_on_one_optimizer_compose(chained):
    """A ConstantLR warmup and an ExponentialLR decay on one optimizer, stepped together
    (``ChainedScheduler`` or by hand): each scales the rate the other left, from the
    constructors' initial steps on (the second constructor used to reset the first's
    factor)."""
    def run(lib, S_):
        opt = (torch.optim.SGD([torch.zeros(2, requires_grad=True)], lr=0.05) if lib is torch
               else optim.SGD([ad.tensor(np.zeros(2, np.float32), requires_grad=True)],
                              lr=0.05))
        a = S_.ConstantLR(opt, factor=0.1, total_iters=3)
        b = S_.ExponentialLR(opt, gamma=0.9)
        chain = S_.ChainedScheduler([a, b]) if chained else None
        lrs = []
        if lib is torch:
            for _ in range(8):
                lrs.append(opt.param_groups[0]["lr"])
                chain.step() if chained else (a.step(), b.step())
            return lrs

        def body():
            ad.Receiver(lambda v: lrs.append(float(v)), [opt.param_groups[0]["lr"]])
            chain.step() if chained else (a.step(), b.step())
        ad.ir_for(8, body)
        ad.execute(device="numpy")
        return lrs
    np.testing.assert_allclose(run(ad, S), run(torch, T), rtol=1e-5)
