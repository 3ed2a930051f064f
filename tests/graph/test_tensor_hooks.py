"""``Tensor.register_hook``, ``retain_grad`` and ``retains_grad`` against PyTorch running
the same code: the hooks see the gradient while ``backward()`` is traced, may replace it,
run in registration order (``retain_grad``'s last), once per tensor with the summed
gradient, and inside an ``ir_for`` body once, for every iteration."""
import numpy as np
import pytest
import torch

import autodiff as ad
from backends import device_params

RTOL, ATOL = 1e-5, 1e-6


def _data(seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((4, 3)).astype(np.float32),
            rng.standard_normal((3, 2)).astype(np.float32))


def _program(lib, x0, w0, log):
    """The same code for torch (lib=torch) and autodiff: hooks on a leaf, on a non-leaf
    used twice, a retained non-leaf, a removed hook."""
    x = lib.tensor(x0, requires_grad=True)
    w = lib.tensor(w0, requires_grad=True)
    h = x @ w
    h.retain_grad()                                           # before the hooks: runs last
    h.register_hook(lambda g: log.append("h1") or g * 3.0)
    h.register_hook(lambda g: log.append("h2"))               # None: keeps the gradient
    gone = h.register_hook(lambda g: g * 100.0)
    gone.remove()
    t = h.tanh()
    t.retain_grad()
    w.register_hook(lambda g: log.append("w") or g - 0.5)
    w.register_post_accumulate_grad_hook(lambda p: log.append("w-post"))
    loss = (t * t).sum() + (h * 0.25).sum()                  # h used twice: one call
    loss.backward()
    return x, w, h, t


@pytest.mark.parametrize("device", device_params())
def test_hooks_match_torch(device):
    x0, w0 = _data()
    ref_log, log = [], []
    rx, rw, rh, rt = _program(torch, x0, w0, ref_log)
    x, w, h, t = _program(ad, x0, w0, log)
    assert log == ref_log == ["h1", "h2", "w", "w-post"]
    ad.execute(device=device)
    for ours, ref in ((x, rx), (w, rw), (h, rh), (t, rt)):
        np.testing.assert_allclose(ours.grad.numpy(), ref.grad.numpy(), rtol=RTOL, atol=ATOL)
    assert (h.retains_grad, t.retains_grad, x.retains_grad) == (True, True, False)
    assert (rh.retains_grad, rt.retains_grad, rx.retains_grad) == (True, True, False)


def test_hook_order_is_registration_order():
    for lib in (torch, ad):
        log = []
        x = lib.tensor(np.arange(1, 4, dtype=np.float32), requires_grad=True)
        y = x * 2.0
        y.register_hook(lambda g: log.append(lib.__name__ + "a") or g + 1.0)
        y.register_hook(lambda g: log.append(lib.__name__ + "b") or g * 2.0)
        y.sum().backward()
        if lib is torch:
            ref, ref_log = x.grad.numpy(), [s.replace("torch", "") for s in log]
    ad.execute(device="numpy")
    assert [s.replace("autodiff", "") for s in log] == ref_log == ["a", "b"]
    np.testing.assert_allclose(x.grad.numpy(), ref, rtol=RTOL, atol=ATOL)


def test_handle_is_a_context_manager_and_remove_is_idempotent():
    x = ad.tensor(np.array([1.0, -2.0, 3.0], np.float32), requires_grad=True)
    y = x * 3.0
    with y.register_hook(lambda g: g * 0.0) as handle:
        pass
    handle.remove()                                            # twice: no error
    (y * y).sum().backward()
    ad.execute(device="numpy")
    np.testing.assert_allclose(x.grad.numpy(), 18.0 * np.array([1, -2, 3]), rtol=RTOL)


@pytest.mark.parametrize("device", device_params())
def test_hooks_in_a_loop_body(device):
    """A hook registered in an ``ir_for`` body runs once at trace time; the gradient it
    makes is every iteration's (SGD by hand, against the same eager torch loop)."""
    steps, rng = 4, np.random.default_rng(1)
    xs = rng.standard_normal((steps, 5, 3)).astype(np.float32)
    w0 = rng.standard_normal((3, 2)).astype(np.float32)

    def body(lib, w, x, seen):
        h = x @ w
        h.retain_grad()
        h.register_hook(lambda g: g.clamp(-0.2, 0.2))        # gradient clipping per value
        loss = (h.sigmoid() ** 2).sum()
        loss.backward()
        seen.append(h.grad)
        with (torch.no_grad() if lib is torch else ad.no_grad()):
            w -= 0.5 * w.grad
        w.grad = None

    wt, ref_h = torch.tensor(w0, requires_grad=True), []
    for x in xs:
        body(torch, wt, torch.tensor(x), ref_h)
    w, it, got, calls = ad.tensor(w0, requires_grad=True), iter(xs), [], []

    def step():
        seen = []
        calls.append(1)
        body(ad, w, ad.Feeder(lambda: next(it), [5, 3]), seen)
        ad.Receiver(lambda g: got.append(g.copy()), [seen[0]])
    ad.ir_for(range(steps), step)
    assert len(calls) == 1
    ad.execute(device=device)
    np.testing.assert_allclose(np.array(got), np.array([g.numpy() for g in ref_h]),
                               rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(w.numpy(), wt.detach().numpy(), rtol=RTOL, atol=ATOL)


def test_leaf_hook_sees_the_summed_gradient_once():
    """A variable read, updated in place under no_grad and read again: PyTorch calls its
    hook once with the sum of both reads' gradients."""
    for lib in (torch, ad):
        seen = []
        p = lib.tensor(np.array([0.5, -1.5], np.float32), requires_grad=True)
        p.register_hook(lambda g: seen.append(1) or g * 2.0)
        a = (p * 2.0).exp().sum()
        with (torch.no_grad() if lib is torch else ad.no_grad()):
            p.mul_(3.0)
        (a + (p * 4.0).sum()).backward()
        assert len(seen) == 1
        if lib is torch:
            ref = p.grad.numpy().copy()
    ad.execute(device="numpy")
    np.testing.assert_allclose(p.grad.numpy(), ref, rtol=RTOL, atol=ATOL)


def test_retain_grad_after_in_place_update_and_accumulation():
    for lib in (torch, ad):
        x = lib.tensor(np.array([0.3, -0.7, 1.1], np.float32), requires_grad=True)
        y = x * 2.0
        y.retain_grad()
        y.add_(x * x)                # .grad: the gradient of the new value
        (y * x).sum().backward()
        z = x.exp()
        z.retain_grad()
        keep = {"retain_graph": True} if lib is torch else {}
        (z * 2.0).sum().backward(**keep)
        (z * x).sum().backward()     # adds to z.grad
        if lib is torch:
            ref = (y.grad.numpy().copy(), z.grad.numpy().copy(), x.grad.numpy().copy())
        else:
            ours = (y, z, x)
    ad.execute(device="numpy")
    for t, r in zip(ours, ref):
        np.testing.assert_allclose(t.grad.numpy(), r, rtol=RTOL, atol=ATOL)


def test_errors():
    x = ad.tensor(np.array([1.0, 2.0, 3.0], np.float32), requires_grad=True)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        ad.tensor(np.ones(3, np.float32)).register_hook(lambda g: g)
    with pytest.raises(RuntimeError, match="requires_grad=False"):
        (ad.tensor(np.ones(3, np.float32)) * 2).retain_grad()
    y = x * 3.0
    y.register_hook(lambda g: g.sum())
    with pytest.raises(RuntimeError, match=r"changed the size.*shape \[3\].*shape \[\]") as e:
        y.sum().backward()
    assert "test_tensor_hooks.py:" in str(e.value)
    ad.reset()
    x = ad.tensor(np.array([1.0, 2.0, 3.0], np.float32), requires_grad=True)
    x.register_hook(lambda g: 3)
    with pytest.raises(TypeError, match="returned 'int'"):
        (x * x).sum().backward()
    ad.reset()
    x = ad.tensor(np.array([1.0, 2.0, 3.0], np.float32), requires_grad=True)
    y = x * 2.0
    y.register_hook(lambda g: g.half())
    with pytest.raises(RuntimeError, match="changed the type"):
        y.sum().backward()
