"""``Module.register_full_backward_hook`` / ``register_full_backward_pre_hook`` and the
global ``nn.modules.module.register_module_*`` hooks against PyTorch running the same
model and hook code: call order, the grad_input / grad_output tuples (None entries
included), hooks replacing gradients (and so the parameter gradients), modules of several
inputs and outputs, no input requiring grad, errors, removal, and hooks in an ``ir_for``
training loop (called once at trace time, their effect part of every iteration).

Tolerances: float32 on a few small Linear/Tanh layers, the same operations as torch in
possibly another summation order: rtol=1e-5, atol=1e-6 (as tests/nn/test_module_hooks.py);
the 2-layer LSTM's gradients: rtol=1e-4, atol=1e-5 (as tests/nn/test_rnn.py)."""
import warnings

import numpy as np
import pytest
import torch

import autodiff as ad
import autodiff.nn as adnn
from autodiff import optim
from backends import device_params

torch.set_num_threads(1)
RTOL, ATOL = 1e-5, 1e-6


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _copy(ours, ref):
    ours.load_state_dict({k: v.detach().numpy() for k, v in ref.state_dict().items()})


def _mlp(nn, seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 3))


def _values(entries):
    """A hook's tuple as numpy arrays (None kept); ours are read after execute()."""
    out = []
    for v in entries:
        if v is None:
            out.append(None)
        elif isinstance(v, torch.Tensor):
            out.append(v.detach().numpy())
        else:
            out.append(v.numpy())
    return out


def _same_seen(seen, ref_seen):
    """The (name, tuples...) records of the hooks: same names, Nones and values."""
    assert [s[0] for s in seen] == [s[0] for s in ref_seen]
    for ours, theirs in zip(seen, ref_seen):
        for a, b in zip(ours[1:], theirs[1:]):
            assert len(a) == len(b), ours[0]
            for x, y in zip(_values(a), _values(b)):
                assert (x is None) == (y is None), ours[0]
                if x is not None:
                    np.testing.assert_allclose(x, y, rtol=RTOL, atol=ATOL, err_msg=ours[0])


def _mlp_hooks(net, log, seen):
    """Hooks written once for both libraries: pre-hook doubling grad_output of the last
    layer, a full hook replacing grad_input of the Tanh, observers, prepend, a removed
    hook."""
    def pre2(m, go):
        log.append("pre2")
        seen.append(("pre2", go))
        return (go[0] * 2.0,)

    def full2(m, gi, go):
        log.append("full2")
        seen.append(("full2", gi, go))

    def full2_first(m, gi, go):
        log.append("full2_first")

    def full1(m, gi, go):
        log.append("full1")
        seen.append(("full1", gi, go))
        return (gi[0] * 0.5 + 0.25,)

    def full0(m, gi, go):
        log.append("full0")
        seen.append(("full0", gi, go))
    net[2].register_full_backward_pre_hook(pre2)
    net[2].register_full_backward_hook(full2)
    net[2].register_full_backward_hook(full2_first, prepend=True)
    net[1].register_full_backward_hook(full1)
    net[0].register_full_backward_hook(full0)
    gone = net[0].register_full_backward_hook(lambda m, gi, go: (gi[0] * 0.0,))
    gone.remove()


def test_hooks_match_torch():
    x0 = _rand((6, 4), 0)
    ref, net = _mlp(torch.nn), _mlp(adnn)
    _copy(net, ref)
    ref_log, ref_seen, log, seen = [], [], [], []
    _mlp_hooks(ref, ref_log, ref_seen)
    _mlp_hooks(net, log, seen)
    xt = torch.tensor(x0, requires_grad=True)
    ref(xt).square().sum().backward()
    xa = ad.tensor(x0, requires_grad=True)
    net(xa).square().sum().backward()
    assert log == ref_log == ["pre2", "full2_first", "full2", "full1", "full0"]
    ad.execute(device="numpy")
    _same_seen(seen, ref_seen)
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=RTOL, atol=ATOL)
    for (n, p), (_, rp) in zip(net.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), rp.grad.numpy(), rtol=RTOL, atol=ATOL,
                                   err_msg=n)


def _two(nn):
    class Two(nn.Module):
        """Positional args: a tensor, an int, a tensor without grad, a tensor; returns two
        tensors and an int."""

        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, a, k, b, c):
            y = self.lin(a) * b + c.sum()
            return y, (y * 2.0).tanh(), k
    torch.manual_seed(1)
    return Two()


def _two_hooks(m, log, seen):
    def pre(mod, go):
        log.append("pre")
        seen.append(("pre", go))
        return (go[0] + 1.0, None if go[1] is None else go[1] * 3.0, None)

    def full(mod, gi, go):
        log.append("full")
        seen.append(("full", gi, go))
        return (gi[0] * 2.0, None, gi[2], gi[3] - 1.0)
    m.register_full_backward_pre_hook(pre)
    m.register_full_backward_hook(full)


@pytest.mark.parametrize("use_second", [True, False])
def test_several_inputs_and_outputs_match_torch(use_second):
    """grad_input: None for the int, zeros for the tensor without grad; grad_output: None
    for the int and for an output the loss does not use; replacements of two inputs."""
    a0, b0, c0, w0 = _rand((2, 3), 1), _rand((2, 3), 2), _rand((4,), 3), _rand((2, 3), 4)
    results, ref_model = [], _two(torch.nn)
    for lib, m in ((torch, ref_model), (ad, _two(adnn))):
        if lib is ad:
            _copy(m, ref_model)
        log, seen = [], []
        _two_hooks(m, log, seen)
        a, c = lib.tensor(a0, requires_grad=True), lib.tensor(c0, requires_grad=True)
        y1, y2, k = m(a * 1.5, 7, lib.tensor(b0), c * 1.0)
        assert k == 7
        loss = (y1 * lib.tensor(w0)).sum() + (y2.sum() if use_second else 0.0)
        loss.backward()
        results.append((m, log, seen, a, c))
    ad.execute(device="numpy")
    (rm, rlog, rseen, ra, rc), (m, log, seen, a, c) = results
    assert log == rlog == ["pre", "full"]
    _same_seen(seen, rseen)
    assert (seen[0][1][1] is None) == (not use_second)
    for ours, theirs in ((a, ra), (c, rc)):
        np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=RTOL,
                                   atol=ATOL)
    for (n, p), (_, rp) in zip(m.named_parameters(), rm.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), rp.grad.numpy(), rtol=RTOL, atol=ATOL,
                                   err_msg=n)


def test_no_input_requires_grad_fires_at_the_outputs():
    x0 = _rand((3, 4), 5)
    for lib, nn in ((torch, torch.nn), (ad, adnn)):
        log = []
        lin = _mlp(nn)[0]
        lin.register_full_backward_hook(
            lambda m, gi, go: log.append((gi, tuple(g.shape for g in go))))
        with pytest.warns(UserWarning, match="no inputs require gradients"):
            lin(lib.tensor(x0)).sum().backward()
        assert log == [((None,), ((3, 5),))]
        lin.register_full_backward_hook(lambda m, gi, go: (go[0],))
        with pytest.raises(RuntimeError, match="no input requires gradient should always "
                                               "return None"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lin(lib.tensor(x0)).sum().backward()
        frozen = nn.Linear(4, 2).requires_grad_(False)     # nothing requires grad: no call
        frozen.register_full_backward_hook(lambda m, gi, go: log.append("never"))
        out = frozen(lib.tensor(x0))
        assert not out.requires_grad and "never" not in log


def test_lstm_hooks_see_the_top_level_tensors_of_its_output():
    """LSTM returns (output, (h_n, c_n)): grad_output is (d output, None), as torch."""
    torch.manual_seed(2)
    ref, net = torch.nn.LSTM(3, 4, num_layers=2), adnn.LSTM(3, 4, num_layers=2)
    _copy(net, ref)
    x0, g0 = _rand((5, 2, 3), 6), _rand((5, 2, 4), 7)
    seen, ref_seen = [], []
    for model, lib, store in ((ref, torch, ref_seen), (net, ad, seen)):
        model.register_full_backward_pre_hook(lambda m, go, s=store: s.append(("pre", go)))
        model.register_full_backward_hook(
            lambda m, gi, go, s=store: s.append(("full", gi, go)) or (gi[0] * -1.0,))
        x = lib.tensor(x0, requires_grad=True)
        out, (h, c) = model(x * 1.0)
        ((out * lib.tensor(g0)).sum() + h.sum()).backward()
        store.append(x)
    ad.execute(device="numpy")
    assert seen[0][1][1] is None and len(seen[1][1]) == 1
    _same_seen(seen[:2], ref_seen[:2])
    np.testing.assert_allclose(seen[2].grad.numpy(), ref_seen[2].grad.numpy(), rtol=1e-4,
                               atol=1e-5)


def test_tensor_hooks_on_the_output_run_before_the_module_hooks():
    x0 = _rand((2, 4), 8)
    logs = []
    for lib, nn in ((torch, torch.nn), (ad, adnn)):
        log = []
        lin = _mlp(nn)[0]
        lin.register_full_backward_pre_hook(lambda m, go: log.append("module pre"))
        lin.register_forward_hook(lambda m, a, o: o * 2.0)       # grad_output is of this
        lin.register_full_backward_hook(lambda m, gi, go: log.append("module full"))
        y = lin(lib.tensor(x0, requires_grad=True))
        y.register_hook(lambda g: log.append("tensor") or g * 3.0)
        y.sum().backward()
        logs.append(log)
    assert logs[0] == logs[1] == ["tensor", "module pre", "module full"]


def test_errors_as_torch():
    x0 = _rand((2, 4), 9)
    cases = [
        ("register_full_backward_hook", lambda m, gi, go: (gi[0], gi[0]),
         RuntimeError, "Backward hook returned an invalid number of grad_input, got 2, but "
                       "expected 1"),
        ("register_full_backward_pre_hook", lambda m, go: (go[0], go[0]),
         RuntimeError, "Backward pre hook returned an invalid number of grad_output, got 2, "
                       "but expected 1"),
        ("register_full_backward_hook", lambda m, gi, go: (gi[0][:1],),
         RuntimeError, "changed the size of value"),
        ("register_full_backward_pre_hook", lambda m, go: (go[0][:, :2],),
         RuntimeError, "changed the size of value")]
    for method, hook, exc, match in cases:
        for lib, nn in ((torch, torch.nn), (ad, adnn)):
            lin = _mlp(nn)[0]
            getattr(lin, method)(hook)
            with pytest.raises(exc, match=match):
                lin(lib.tensor(x0, requires_grad=True)).sum().backward()
    lin = adnn.Linear(4, 5)
    lin.register_full_backward_hook(lambda m, gi, go: ("not a tensor",))
    with pytest.raises(TypeError, match="not a tensor|str"):
        lin(ad.tensor(x0, requires_grad=True)).sum().backward()


def test_handles_remove_context_manager_and_no_grad():
    lin, log = adnn.Linear(2, 2), []
    x = ad.tensor(_rand((1, 2), 10), requires_grad=True)
    with lin.register_full_backward_hook(lambda m, gi, go: log.append("ctx")):
        lin(x).sum().backward()
    lin(x).sum().backward()
    h = lin.register_full_backward_pre_hook(lambda m, go: log.append("pre"))
    k = lin.register_full_backward_hook(lambda m, gi, go: log.append("full"))
    lin(x).sum().backward()
    with ad.no_grad():                                         # nothing to hook
        assert not lin(x).requires_grad
    h.remove(), k.remove(), k.remove()
    lin(x).sum().backward()
    assert log == ["ctx", "pre", "full"]
    assert not (lin._backward_hooks or lin._backward_pre_hooks)


def _global_hooks(mod, log):
    """The global hooks of ``mod`` (torch.nn.modules.module or ours), logging by class."""
    name = lambda m: type(m).__name__            # noqa: E731
    return [mod.register_module_forward_pre_hook(lambda m, a: log.append(("gpre", name(m)))),
            mod.register_module_forward_hook(lambda m, a, o: log.append(("gfwd", name(m)))),
            mod.register_module_full_backward_pre_hook(
                lambda m, go: log.append(("gbpre", name(m)))),
            mod.register_module_full_backward_hook(
                lambda m, gi, go: log.append(("gbwd", name(m))) or
                ((gi[0] * 0.5,) if name(m) == "Tanh" else None))]


def test_global_hooks_run_before_the_modules_own_like_torch():
    from autodiff.nn.modules import module as ours_mod
    from torch.nn.modules import module as torch_mod
    x0 = _rand((3, 4), 11)
    logs, grads, ref = [], [], _mlp(torch.nn)
    for lib, net, mod in ((torch, ref, torch_mod), (ad, _mlp(adnn), ours_mod)):
        log = []
        if lib is ad:
            _copy(net, ref)
        net[0].register_forward_pre_hook(lambda m, a: log.append(("pre", "own")))
        net[0].register_forward_hook(lambda m, a, o: log.append(("fwd", "own")))
        net[2].register_full_backward_pre_hook(lambda m, go: log.append(("bpre", "own")))
        net[2].register_full_backward_hook(lambda m, gi, go: log.append(("bwd", "own")))
        handles = _global_hooks(mod, log)
        try:
            x = lib.tensor(x0, requires_grad=True)
            net(x).sum().backward()
        finally:
            for h in handles:
                h.remove()
        logs.append(log)
        grads.append((x, net))
    assert logs[0] == logs[1] and len(logs[1]) == 20
    assert ("gbwd", "Tanh") in logs[1] and logs[1][-3:] == [
        ("gbpre", "Linear"), ("gbwd", "Linear"), ("gbwd", "Sequential")]
    assert logs[1][:3] == [("gpre", "Sequential"), ("gpre", "Linear"), ("pre", "own")]
    ad.execute(device="numpy")
    (rx, rnet), (x, net) = grads
    np.testing.assert_allclose(x.grad.numpy(), rx.grad.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(net[0].weight.grad.numpy(), rnet[0].weight.grad.numpy(),
                               rtol=RTOL, atol=ATOL)
    from autodiff.nn import module as impl
    assert not (impl._global_forward_pre_hooks or impl._global_forward_hooks   # removed
                or impl._global_backward_pre_hooks or impl._global_backward_hooks
                or impl._global_forward_hooks_with_kwargs
                or impl._global_forward_hooks_always_called)


@pytest.mark.parametrize("device", device_params())
def test_hooks_in_a_training_loop(device):
    """A pre-hook scaling the last layer's grad_output and a full hook clipping the Tanh's
    grad_input change every SGD step, as in eager torch; the hooks are traced once."""
    steps = 4
    xs = _rand((steps, 6, 4), 12)

    def add_hooks(net, calls):
        net[2].register_full_backward_pre_hook(
            lambda m, go: calls.append("pre") or (go[0] * 0.5,))
        net[1].register_full_backward_hook(
            lambda m, gi, go: calls.append("full") or (gi[0].clamp(-0.05, 0.05),))

    ref, net = _mlp(torch.nn, 3), _mlp(adnn, 3)
    _copy(net, ref)
    ref_calls, calls = [], []
    add_hooks(ref, ref_calls)
    add_hooks(net, calls)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.3)
    ref_losses = []
    for x in xs:
        ropt.zero_grad()
        loss = ref(torch.tensor(x)).square().mean()
        loss.backward()
        ropt.step()
        ref_losses.append(loss.item())
    opt, it, losses = optim.SGD(net.parameters(), lr=0.3), iter(xs), []

    def step():
        opt.zero_grad()
        loss = net(ad.Feeder(lambda: next(it), [6, 4])).square().mean()
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: losses.append(float(v)), [loss])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                # the first layer's input: no grad
        ad.ir_for(range(steps), step)
    assert calls == ["pre", "full"] and len(ref_calls) == 2 * steps
    ad.execute(device=device)
    np.testing.assert_allclose(losses, ref_losses, rtol=RTOL, atol=ATOL)
    for (n, p), (_, rp) in zip(net.named_parameters(), ref.named_parameters()):
        np.testing.assert_allclose(p.numpy(), rp.detach().numpy(), rtol=RTOL, atol=ATOL,
                                   err_msg=n)
