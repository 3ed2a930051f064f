"""Shared step counts (``Optimizer.shared_state``): the parameters of a group that start
together share one ``step`` tensor (NAdam also ``mu_product``), advanced once per
``step()``, and every observable result stays PyTorch's: updates, ``state_dict``, loading
a state whose parameters are at different steps."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import optim
from optim_helpers import loss_of, problem

torch.set_num_threads(1)

CASES = [("Adam", dict(lr=0.01)), ("AdamW", dict(lr=0.01, amsgrad=True)),
         ("NAdam", dict(lr=0.01)), ("RAdam", dict(lr=0.01)), ("Adamax", dict(lr=0.01)),
         ("Adagrad", dict(lr=0.1, lr_decay=0.01)), ("RMSprop", dict(lr=0.01))]


def _ours(name, kw, steps, state=None, only_w=0):
    """Both parameters in one group; the first ``only_w`` steps update ``w`` alone (``b``
    gets no gradient then: a separate traced loop)."""
    w0, b0, xs = problem(steps + only_w)
    w, b = ad.Tensor(w0, requires_grad=True), ad.Tensor(b0, requires_grad=True)
    opt = getattr(optim, name)([w, b], **kw)
    if state is not None:
        opt.load_state_dict(state)
    it = iter(xs)

    def body(frozen):
        x = ad.Feeder(lambda: next(it), [5, 3])
        opt.zero_grad()
        loss_of(x, w, b.detach() if frozen else b).backward()
        opt.step()
    if only_w:
        ad.ir_for(only_w, lambda: body(True))
    ad.ir_for(steps, lambda: body(False))
    ad.execute(device="numpy")
    return w.numpy(), b.numpy(), opt


def _theirs(name, kw, steps, only_w=0):
    w0, b0, xs = problem(steps + only_w)
    w, b = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    opt = getattr(torch.optim, name)([w, b], **kw)
    for i, x in enumerate(xs):
        opt.zero_grad()
        loss_of(torch.tensor(x), w, b.detach() if i < only_w else b).backward()
        opt.step()
    return w.detach().numpy(), b.detach().numpy(), opt


def _same_state(sd, tsd):
    assert sorted(sd["state"]) == sorted(tsd["state"])
    for i, st in tsd["state"].items():
        for k, v in st.items():
            np.testing.assert_allclose(sd["state"][i][k], v.numpy(), rtol=1e-4, atol=1e-6,
                                       err_msg=f"state {i} {k}")


@pytest.mark.parametrize("name,kw", CASES, ids=[n for n, _ in CASES])
def test_one_group_shares_its_step_and_matches_torch(name, kw):
    w, b, opt = _ours(name, kw, 6)
    tw, tb, topt = _theirs(name, kw, 6)
    np.testing.assert_allclose(w, tw, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b, tb, rtol=1e-4, atol=1e-5)
    sw, sb = (opt.state[p] for p in opt.param_groups[0]["params"])
    assert sw["step"] is sb["step"]                    # one counter, advanced once a step
    assert float(sw["step"].numpy()) == 6.0
    _same_state(opt.state_dict(), topt.state_dict())
    ids = [id(t) for t in opt.state_tensors()]
    assert len(ids) == len(set(ids))


def test_nadam_shares_mu_product():
    _, _, opt = _ours("NAdam", dict(lr=0.01), 3)
    sw, sb = (opt.state[p] for p in opt.param_groups[0]["params"])
    assert sw["mu_product"] is sb["mu_product"]


@pytest.mark.parametrize("name", ["Adam", "NAdam", "Adagrad"])
def test_loaded_state_at_different_steps_matches_torch(name):
    """``b`` misses the first 3 steps in torch, so the two parameters' steps differ
    (and their ``mu_product``): loaded before tracing, each keeps its own counter."""
    kw = dict(CASES)[name]
    _, _, t_before = _theirs(name, kw, 2, only_w=3)
    state = t_before.state_dict()
    assert float(state["state"][0]["step"]) != float(state["state"][1]["step"])
    w, b, opt = _ours(name, kw, 4, state=state)
    # torch: the same 5 steps, then 4 more with both parameters
    w0, b0, xs = problem(9)
    tw, tb = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    topt = getattr(torch.optim, name)([tw, tb], **kw)
    for i, x in enumerate(xs):
        if i == 5:
            topt.load_state_dict(state)      # what ours loaded (its params start at w0, b0)
            with torch.no_grad():
                tw.copy_(torch.tensor(w0))
                tb.copy_(torch.tensor(b0))
        if i < 5:
            continue
        topt.zero_grad()
        loss_of(torch.tensor(xs[i - 5]), tw, tb).backward()
        topt.step()
    np.testing.assert_allclose(w, tw.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b, tb.detach().numpy(), rtol=1e-4, atol=1e-5)
    sw, sb = (opt.state[p] for p in opt.param_groups[0]["params"])
    assert sw["step"] is not sb["step"]
    _same_state(opt.state_dict(), topt.state_dict())


def test_loaded_equal_steps_are_shared():
    _, _, t = _theirs("Adam", dict(lr=0.01), 2)
    w, b = ad.Tensor(np.ones(3, np.float32), requires_grad=True), \
        ad.Tensor(np.ones(4, np.float32), requires_grad=True)
    opt = optim.Adam([w, b], lr=0.01)
    opt.load_state_dict({"state": {0: {k: torch.zeros(3) if k != "step" else v
                                       for k, v in t.state_dict()["state"][0].items()},
                                   1: {k: torch.zeros(4) if k != "step" else v
                                       for k, v in t.state_dict()["state"][1].items()}},
                         "param_groups": t.state_dict()["param_groups"]})
    assert opt.state[w]["step"] is opt.state[b]["step"]
    assert float(opt.state[w]["step"].numpy()) == 2.0


def test_loading_different_steps_into_a_shared_counter_raises():
    _, _, opt = _ours("Adam", dict(lr=0.01), 2)
    sd = opt.state_dict()
    sd["state"][1]["step"] = np.float32(7.0)
    with pytest.raises(ValueError, match="share one 'step'"):
        opt.load_state_dict(sd)
    sd["state"][1]["step"] = np.float32(2.0)
    opt.load_state_dict(sd)                  # equal values: fine
