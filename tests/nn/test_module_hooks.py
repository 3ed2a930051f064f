"""``Module.register_forward_pre_hook`` / ``register_forward_hook`` against PyTorch running
the same model and hook code: call order, what a hook may return, ``prepend``,
``with_kwargs``, ``always_call``, removal, and hooks inside an ``ir_for`` body (called once
at trace time, their effect part of every iteration)."""
import warnings

import numpy as np
import pytest
import torch

import autodiff as ad
import autodiff.nn as adnn
from autodiff import optim
from backends import device_params

RTOL, ATOL = 1e-5, 1e-6


def _model(nn, seed=0):
    torch.manual_seed(seed)
    ad.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3))


def _copy(ours, ref):
    ours.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})


def _hooks(net, log, acts):
    """Hooks written once for both libraries."""
    def pre_scale(m, args):
        log.append("pre_scale")
        return args[0] * 2.0                                  # a single value: wrapped

    def pre_first(m, args):
        log.append("pre_first")                               # prepend: runs first

    def capture(m, args, out):
        log.append("capture")
        acts.append(out)

    def shift(m, args, out):
        log.append("shift")
        return out + 0.5                                      # replaces the output
    net[0].register_forward_pre_hook(pre_scale)
    net[0].register_forward_pre_hook(pre_first, prepend=True)
    net[1].register_forward_hook(capture)
    net[1].register_forward_hook(shift)
    net[2].register_forward_hook(lambda m, a, o: log.append("first"), prepend=True)
    gone = net[2].register_forward_hook(lambda m, a, o: o * 0.0)
    gone.remove()


@pytest.mark.parametrize("device", device_params())
def test_forward_hooks_match_torch(device):
    x0 = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    ref, net = _model(torch.nn), _model(adnn)
    _copy(net, ref)
    ref_log, ref_acts, log, acts = [], [], [], []
    _hooks(ref, ref_log, ref_acts)
    _hooks(net, log, acts)
    rout = ref(torch.tensor(x0))
    rout.square().sum().backward()
    out = net(ad.tensor(x0))
    out.square().sum().backward()
    assert log == ref_log == ["pre_first", "pre_scale", "capture", "shift", "first"]
    got = []
    ad.Receiver(lambda a, o: got.extend([a.copy(), o.copy()]), [acts[0], out])
    ad.execute(device=device)
    np.testing.assert_allclose(got[0], ref_acts[0].detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(got[1], rout.detach().numpy(), rtol=RTOL, atol=ATOL)
    for (n, p), (_, rp) in zip(net.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), rp.grad.numpy(), rtol=RTOL, atol=ATOL,
                                   err_msg=n)


def _kwargs_model(nn):
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)

        def forward(self, x, scale=1.0, *, bias=0.0):
            return self.lin(x) * scale + bias
    return Scaled()


def _kwargs_hooks(m, log):
    def pre(mod, args, kwargs):
        log.append(("pre", sorted(kwargs)))
        return (args[0] + 1.0,), {**kwargs, "bias": 0.25}

    def post(mod, args, kwargs, out):
        log.append(("post", len(args), sorted(kwargs)))
        return out - kwargs["bias"] * 2.0
    m.register_forward_pre_hook(pre, with_kwargs=True)
    m.register_forward_hook(post, with_kwargs=True)


def test_with_kwargs_matches_torch():
    x0 = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    torch.manual_seed(0)
    ref, net = _kwargs_model(torch.nn), _kwargs_model(adnn)
    net.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})
    ref_log, log = [], []
    _kwargs_hooks(ref, ref_log)
    _kwargs_hooks(net, log)
    rout = ref(torch.tensor(x0), 3.0, bias=-1.0)
    out = net(ad.tensor(x0), 3.0, bias=-1.0)
    assert log == ref_log == [("pre", ["bias"]), ("post", 1, ["bias"])]
    ad.execute(device="numpy")
    np.testing.assert_allclose(out.numpy(), rout.detach().numpy(), rtol=RTOL, atol=ATOL)


def test_bad_pre_hook_result_and_always_call():
    for nn, lib in ((torch.nn, torch), (adnn, ad)):
        lin = nn.Linear(2, 2)
        lin.register_forward_pre_hook(lambda m, a, k: "oops", with_kwargs=True)
        with pytest.raises(RuntimeError, match="forward pre-hook must return None or a tuple"):
            lin(lib.ones(1, 2))
    for nn, lib in ((torch.nn, torch), (adnn, ad)):
        log = []
        lin = nn.Linear(2, 2)
        lin.register_forward_hook(lambda m, a, o: log.append(("always", o)), always_call=True)
        lin.register_forward_hook(lambda m, a, o: log.append("plain"))
        with pytest.raises(RuntimeError):
            lin(lib.ones(1, 3))                               # wrong width: forward raises
        assert log == [("always", None)]

        def bad(m, a, o):
            raise ValueError("in hook")
        lin.register_forward_hook(bad, always_call=True)
        with warnings.catch_warnings(record=True) as w, pytest.raises(RuntimeError):
            warnings.simplefilter("always")
            lin(lib.ones(1, 3))
        assert any("always_call=True" in str(x.message) for x in w)


def test_handles_remove_and_context_manager():
    net, log = adnn.Linear(2, 2), []
    with net.register_forward_hook(lambda m, a, o: log.append("ctx")):
        net(ad.ones(1, 2))
    h = net.register_forward_pre_hook(lambda m, a: log.append("pre"), with_kwargs=False)
    k = net.register_forward_hook(lambda m, a, kw, o: log.append("kw"), with_kwargs=True)
    net(ad.ones(1, 2))
    h.remove(), k.remove(), k.remove()
    net(ad.ones(1, 2))
    assert log == ["ctx", "pre", "kw"]
    assert not (net._forward_pre_hooks or net._forward_hooks
                or net._forward_hooks_with_kwargs)


@pytest.mark.parametrize("device", device_params())
def test_hooks_in_a_loop_body(device):
    """Activations captured by a forward hook go to a Receiver every iteration; a hook
    that modifies the output changes every step of training (against eager torch)."""
    steps, rng = 4, np.random.default_rng(2)
    xs = rng.standard_normal((steps, 6, 4)).astype(np.float32)
    ref, net = _model(torch.nn, 3), _model(adnn, 3)
    _copy(net, ref)

    def train(model, opt, x, acts):
        opt.zero_grad()
        loss = model(x).square().mean()
        loss.backward()
        opt.step()

    ref_acts = []
    ref[1].register_forward_hook(lambda m, a, o: ref_acts.append(o.detach().numpy().copy()))
    ref[0].register_forward_hook(lambda m, a, o: o * 0.5)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.3)
    for x in xs:
        train(ref, ropt, torch.tensor(x), None)

    acts, got, calls, it = [], [], [], iter(xs)
    net[1].register_forward_hook(lambda m, a, o: calls.append(1) or acts.append(o))
    net[0].register_forward_hook(lambda m, a, o: o * 0.5)
    opt = optim.SGD(net.parameters(), lr=0.3)

    def step():
        train(net, opt, ad.Feeder(lambda: next(it), [6, 4]), None)
        ad.Receiver(lambda a: got.append(a.copy()), [acts[-1]])
    ad.ir_for(range(steps), step)
    assert len(calls) == 1                                    # traced once
    ad.execute(device=device)
    np.testing.assert_allclose(np.array(got), np.array(ref_acts), rtol=RTOL, atol=ATOL)
    for (n, p), (_, rp) in zip(net.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(p.numpy(), rp.detach().numpy(), rtol=RTOL, atol=ATOL,
                                   err_msg=n)
