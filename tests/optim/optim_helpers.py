"""A tiny two-group regression run by autodiff (traced once in ``ir_for``) and by PyTorch
(eager), returning parameters and per-step learning rates for comparison."""
from __future__ import annotations

import numpy as np
import torch

import autodiff as ad

STEPS = 12


def problem(steps: int = STEPS):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((3, 4)).astype(np.float32),
            rng.standard_normal(4).astype(np.float32),
            rng.standard_normal((steps, 5, 3)).astype(np.float32))


def groups(w, b, lr_b: float = 0.02):
    """Two parameter groups: ``w`` with the defaults, ``b`` with its own ``lr``."""
    return [{"params": [w]}, {"params": [b], "lr": lr_b}]


def loss_of(x, w, b):
    return ((x @ w + b).tanh() ** 2).sum()


def ours(make_opt, make_sched=None, steps: int = STEPS, state=None, device="numpy"):
    """Returns ``(w, b, lrs per step of group 0, optimizer, scheduler)``."""
    w0, b0, xs = problem(steps)
    w, b = ad.Tensor(w0, requires_grad=True), ad.Tensor(b0, requires_grad=True)
    opt = make_opt(groups(w, b))
    if state is not None:
        opt.load_state_dict(state)
    sched = make_sched(opt) if make_sched else None
    it, lrs = iter(xs), []

    def body():
        x = ad.Feeder(lambda: next(it), [5, 3])
        opt.zero_grad()
        loss_of(x, w, b).backward()
        opt.step()
        if sched is not None:
            sched.step()
        lr = opt.param_groups[0]["lr"]
        if isinstance(lr, ad.Tensor):
            ad.Receiver(lambda v: lrs.append(float(v)), [lr])
    ad.ir_for(steps, body)
    ad.execute(device=device)
    return w.numpy(), b.numpy(), lrs, opt, sched


def theirs(make_opt, make_sched=None, steps: int = STEPS, state=None):
    w0, b0, xs = problem(steps)
    w, b = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    opt = make_opt(groups(w, b))
    if state is not None:
        opt.load_state_dict(state)
    sched = make_sched(opt) if make_sched else None
    lrs = []
    for x in xs:
        opt.zero_grad()
        loss_of(torch.tensor(x), w, b).backward()
        opt.step()
        if sched is not None:
            sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    return w.detach().numpy(), b.detach().numpy(), lrs, opt, sched


def to_torch(state: dict) -> dict:
    """Our optimizer state dict with its arrays as torch tensors (what torch loads)."""
    return {"state": {i: {k: torch.as_tensor(v) for k, v in st.items()}
                      for i, st in state["state"].items()},
            "param_groups": [dict(g) for g in state["param_groups"]]}
