"""``.grad`` is state as in PyTorch: it accumulates across ``ir_for``/``ir_while``
iterations until something zeroes it, and ``.grad`` set inside an ``ir_if`` branch is that
branch's. Checked against the same loop run eagerly by PyTorch (a body traced once used to
start every iteration from the value ``.grad`` had when it was traced: PyTorch-style
gradient accumulation silently stepped with one micro-batch's gradient)."""
import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import optim
from autodiff.graph.ir import Op
from autodiff.graph.trace import TRACER
from backends import device_params

STEPS, K = 6, 3
RTOL, ATOL = 1e-5, 1e-6


def _data():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((STEPS, 4, 3)).astype(np.float32),
            rng.standard_normal((3, 2)).astype(np.float32))


def _loss(x, w):
    return ((x @ w).tanh() ** 2).sum()


def _torch_run(update_at, zero_at_start=False, opt=lambda ps: torch.optim.SGD(ps, lr=0.1,
                                                                              momentum=0.9)):
    """Eager PyTorch: backward every iteration; step and zero_grad where ``update_at(i)``."""
    xs, w0 = _data()
    w = torch.tensor(w0, requires_grad=True)
    o, grads = opt([w]), []
    for i, x in enumerate(xs):
        if zero_at_start:
            o.zero_grad()
        _loss(torch.tensor(x), w).backward()
        grads.append(w.grad.numpy().copy())
        if update_at(i):
            o.step()
            o.zero_grad()
    return w.detach().numpy(), grads, w.grad


def _ours(body_update, device, opt=lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9)):
    xs, w0 = _data()
    w = ad.tensor(w0, requires_grad=True)
    o, it, grads = opt([w]), iter(xs), []

    def body(i):
        x = ad.Feeder(lambda: next(it), [4, 3])
        _loss(x, w).backward()
        ad.Receiver(lambda g: grads.append(g.copy()), [w.grad])
        body_update(i, o)
    ad.ir_for(range(STEPS), body)
    ad.execute(device=device)
    return w, grads


def _step_and_zero(o):
    o.step()
    o.zero_grad()


@pytest.mark.parametrize("device", device_params())
def test_accumulation_with_the_update_under_ir_if(device):
    ref_w, ref_g, _ = _torch_run(lambda i: (i + 1) % K == 0)
    w, grads = _ours(lambda i, o: ad.ir_if((i + 1) % K == 0, lambda: _step_and_zero(o)),
                     device)
    np.testing.assert_allclose(np.array(grads), np.array(ref_g), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(w.numpy(), ref_w, rtol=RTOL, atol=ATOL)


def test_accumulation_with_adam_and_an_else_branch():
    adam_t = lambda ps: torch.optim.Adam(ps, lr=0.05, weight_decay=0.01)   # noqa: E731
    adam_o = lambda ps: optim.Adam(ps, lr=0.05, weight_decay=0.01)         # noqa: E731
    ref_w, ref_g, _ = _torch_run(lambda i: i % 2 == 1, opt=adam_t)
    w, grads = _ours(lambda i, o: ad.ir_if(i % 2 == 1, lambda: _step_and_zero(o),
                                           lambda: None), "numpy", opt=adam_o)
    np.testing.assert_allclose(np.array(grads), np.array(ref_g), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(w.numpy(), ref_w, rtol=1e-4, atol=1e-5)


def test_gradient_grows_without_zero_grad_and_outlives_the_loop():
    _, ref_g, ref_last = _torch_run(lambda i: False)
    w, grads = _ours(lambda i, o: None, "numpy")
    np.testing.assert_allclose(np.array(grads), np.array(ref_g), rtol=RTOL, atol=ATOL)
    # after the loop .grad is the carried value, readable like a parameter
    np.testing.assert_allclose(w.grad.numpy(), ref_last.numpy(), rtol=RTOL, atol=ATOL)
    # and a later backward adds to it, as PyTorch's does
    xs, _ = _data()
    _loss(ad.tensor(xs[0]), w).backward()
    g = w.grad
    ad.execute(device="numpy")
    tw = torch.tensor(w.numpy(), requires_grad=True)
    _loss(torch.tensor(xs[0]), tw).backward()
    np.testing.assert_allclose(g.numpy(), ref_last.numpy() + tw.grad.numpy(), rtol=RTOL,
                               atol=ATOL)


def _grad_loads(graph):
    return [n for n in graph.walk() if n.op in (Op.LOAD, Op.ASSIGN)
            and (n.arg.name or "").endswith(".grad")]


def test_zero_grad_at_the_end_needs_no_carry():
    """``backward(); step(); zero_grad()``: every iteration starts from None, so the
    gradient is not carried (no variable, no extra read)."""
    ref_w, ref_g, _ = _torch_run(lambda i: True)
    xs, w0 = _data()
    w = ad.tensor(w0, requires_grad=True)
    o, it, grads = optim.SGD([w], lr=0.1, momentum=0.9), iter(xs), []

    def body():
        _loss(ad.Feeder(lambda: next(it), [4, 3]), w).backward()
        ad.Receiver(lambda g: grads.append(g.copy()), [w.grad])
        _step_and_zero(o)
    ad.ir_for(STEPS, body)
    assert not _grad_loads(TRACER.root.graph)
    assert w.grad is None
    ad.execute(device="numpy")
    np.testing.assert_allclose(np.array(grads), np.array(ref_g), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(w.numpy(), ref_w, rtol=RTOL, atol=ATOL)


def test_zero_grad_first_needs_no_carry():
    ref_w, _, _ = _torch_run(lambda i: True, zero_at_start=True)
    xs, w0 = _data()
    w = ad.tensor(w0, requires_grad=True)
    o, it = optim.SGD([w], lr=0.1, momentum=0.9), iter(xs)

    def body():
        o.zero_grad()
        _loss(ad.Feeder(lambda: next(it), [4, 3]), w).backward()
        o.step()
    ad.ir_for(STEPS, body)
    assert not _grad_loads(TRACER.root.graph)
    ad.execute(device="numpy")
    np.testing.assert_allclose(w.numpy(), ref_w, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("taken", [True, False])
def test_grad_set_in_a_branch_is_that_branchs(taken):
    xs, w0 = _data()
    w = ad.tensor(w0, requires_grad=True)
    x = ad.tensor(xs[0])
    ad.ir_if(ad.tensor(taken), lambda: _loss(x, w).backward())
    g = w.grad
    ad.execute(device="numpy")
    tw = torch.tensor(w0, requires_grad=True)
    _loss(torch.tensor(xs[0]), tw).backward()
    want = tw.grad.numpy() if taken else np.zeros_like(w0)    # None counts as zeros
    np.testing.assert_allclose(g.numpy(), want, rtol=RTOL, atol=ATOL)


def test_ir_while_carries_the_gradient():
    xs, w0 = _data()
    w = ad.tensor(w0, requires_grad=True)
    n = ad.tensor(np.int32(0))
    x = ad.tensor(xs[0])

    def body():
        _loss(x, w).backward()
        n.add_(1)
    ad.ir_while(lambda: n < 3, body)
    ad.execute(device="numpy")
    tw = torch.tensor(w0, requires_grad=True)
    _loss(torch.tensor(xs[0]), tw).backward()
    np.testing.assert_allclose(w.grad.numpy(), 3 * tw.grad.numpy(), rtol=RTOL, atol=ATOL)
