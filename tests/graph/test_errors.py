"""Errors name the op or callback, the shapes or the loop iteration, and the user's line."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff.nn import Linear, MSELoss
from autodiff.optim import SGD

HERE = os.path.basename(__file__)


# -- shape errors at trace time ---------------------------------------------------------
def _a(): return ad.Tensor(np.ones((2, 3), np.float32))
def _b(): return ad.Tensor(np.ones((4, 5), np.float32))


# Each case is a one-line lambda: its line is where the bad op is traced.
SHAPE_CASES = [
    ("add", lambda a, b: a + b, ["[2, 3]", "[4, 5]"]),
    ("matmul", lambda a, b: a @ b, ["[2, 3]", "[4, 5]"]),
    ("reshape", lambda a, b: a.reshape(4, -1), ["[2, 3]", "[4, -1]"]),
    ("reshape", lambda a, b: b.reshape(3, 7), ["[4, 5]", "[3, 7]"]),
    ("concat", lambda a, b: ad.concat([a, b], 0), ["[2, 3]", "[4, 5]"]),
    ("broadcast_to", lambda a, b: a.broadcast_to((4, 3)), ["[2, 3]", "[4, 3]"]),
]


@pytest.mark.parametrize("op,fn,shapes", SHAPE_CASES,
                         ids=[f"{c[0]}{i}" for i, c in enumerate(SHAPE_CASES)])
def test_shape_error_names_op_shapes_and_user_line(op, fn, shapes):
    a, b = _a(), _b()
    with pytest.raises(ad.ShapeError) as info:
        fn(a, b)
    msg = str(info.value)
    assert msg.startswith(op + ":"), msg
    for s in shapes:
        assert s in msg, msg
    assert f"{HERE}:{fn.__code__.co_firstlineno}" in msg, msg
    assert info.value.op == op


def test_shape_error_inside_loop_body_points_at_body_line():
    a, b = _a(), _b()

    def body():
        a * b                                                  # the bad line
    line = body.__code__.co_firstlineno + 1
    with pytest.raises(ad.ShapeError, match=f"{HERE}:{line}"):
        ad.ir_for(3, body)
    # The failed loop left the tracer at the top level: tracing goes on.
    c = a + 1.0
    ad.execute()
    np.testing.assert_array_equal(c.numpy(), np.full((2, 3), 2.0, np.float32))


# -- feeder errors ----------------------------------------------------------------------
def _feeder_program(bad, at: int = 3, n: int = 5):
    """A 5-iteration loop whose Feeder 'data' returns ``bad`` on call ``at`` (0-based)."""
    calls = []

    def fn():
        calls.append(len(calls))
        if len(calls) - 1 == at:
            return bad()
        return np.ones((2, 3), np.float32)

    def body():
        x = ad.Feeder(fn, shape=(2, 3), name="data")
        ad.Receiver(lambda v: None, [x.sum()])
    ad.ir_for(n, body)
    return calls


def _raise():
    raise ValueError("disk on fire")


@pytest.mark.parametrize("kind,bad,words", [
    ("shape", lambda: np.ones((3, 2), np.float32), ["[2, 3]", "[3, 2]"]),
    ("dtype", lambda: np.ones((2, 3), np.float64), ["float32", "float64"]),
    ("non_array", lambda: [[1.0] * 3] * 2, ["numpy array", "list"]),
    ("raises", _raise, ["ValueError", "disk on fire"]),
])
def test_feeder_error_names_feeder_and_iteration(kind, bad, words):
    calls = _feeder_program(bad, at=3)
    with pytest.raises(ad.FeederError) as info:
        ad.execute()
    msg = str(info.value)
    assert "'data'" in msg and "iteration 3" in msg, msg
    for w in words:
        assert w in msg, msg
    assert info.value.name == "data" and info.value.iteration == (3,)
    assert calls == [0, 1, 2, 3], "execution must stop at the failing call"
    if kind == "raises":
        assert isinstance(info.value.__cause__, ValueError)


def test_feeder_error_in_nested_loop_gives_both_indices():
    calls = []

    def fn():
        calls.append(1)
        return np.ones(2, np.float32) if len(calls) != 7 else np.ones(3, np.float32)

    def inner():
        ad.Receiver(lambda v: None, [ad.Feeder(fn, shape=(2,), name="nested")])
    ad.ir_for(3, lambda: ad.ir_for(4, inner))
    with pytest.raises(ad.FeederError) as info:
        ad.execute()
    assert info.value.iteration == (1, 2)       # the 7th call: outer 1, inner 2
    assert "iteration [1, 2]" in str(info.value)


def test_feeder_error_outside_loop():
    x = ad.Feeder(lambda: np.zeros(4, np.int32), shape=(4,), name="top")
    y = x * 2.0
    with pytest.raises(ad.FeederError, match="Feeder 'top'.*int32"):
        ad.execute()
    del y


def test_feeder_declared_with_bad_arguments():
    with pytest.raises(TypeError):
        ad.Feeder(np.ones(3), shape=(3,))
    with pytest.raises(TypeError):
        ad.Feeder(lambda: np.ones(3), shape=(3,), dtype="float64")


# -- receiver errors and the state they leave -------------------------------------------
def _train(net, n, data, fail_at=None, momentum=0.0):
    """``n`` SGD steps on ``data[k]``; the Receiver raises in iteration ``fail_at``."""
    opt = SGD(net.parameters(), lr=0.1, momentum=momentum)
    loss_fn = MSELoss()
    feeds, losses = iter(data), []

    def receive(v):
        if len(losses) == fail_at:
            raise KeyError(f"stop at {fail_at}")
        losses.append(float(v))

    def body():
        opt.zero_grad()
        x = ad.Feeder(lambda: next(feeds), shape=(4, 3), name="x")
        loss = loss_fn(net(x), x[:, :2])
        loss.backward()
        opt.step()
        ad.Receiver(receive, [loss], name="loss")
    ad.ir_for(n, body)
    ad.execute()


@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("k", [0, 3])
def test_receiver_error_keeps_state_of_completed_iterations(k, momentum):
    rng = np.random.default_rng(0)
    data = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(5)]
    ad.manual_seed(1)
    net = Linear(3, 2)
    init = net.state_dict()
    with pytest.raises(ad.ReceiverError) as info:
        _train(net, 5, data, fail_at=k, momentum=momentum)
    assert info.value.iteration == (k,) and f"iteration {k}" in str(info.value)
    assert "'loss'" in str(info.value)
    assert isinstance(info.value.__cause__, KeyError)
    after_error = net.state_dict()

    ref = Linear(3, 2)
    ref.load_state_dict(init)
    if k:
        _train(ref, k, data, momentum=momentum)
    for name, v in ref.state_dict().items():
        np.testing.assert_array_equal(after_error[name], v, err_msg=name)
    if k:
        assert not np.array_equal(after_error["weight"], init["weight"])


# -- autograd misuse --------------------------------------------------------------------
def test_backward_twice_accumulates_like_torch():
    rng = np.random.default_rng(2)
    w_np = rng.standard_normal((3, 2)).astype(np.float32)
    x_np = rng.standard_normal((4, 3)).astype(np.float32)
    w = ad.Tensor(w_np, requires_grad=True)
    x = ad.Tensor(x_np)
    h = x @ w
    (h * h).sum().backward()
    h.sigmoid().mean().backward()
    h.sum().backward()
    g = w.grad
    ad.execute()

    tw = torch.tensor(w_np, requires_grad=True)
    th = torch.from_numpy(x_np) @ tw
    (th * th).sum().backward(retain_graph=True)
    th.sigmoid().mean().backward(retain_graph=True)
    th.sum().backward()
    np.testing.assert_allclose(g.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_backward_twice_in_one_loop_iteration_accumulates():
    """Inside an ir_for body the two gradients add before the SGD step, as in torch."""
    rng = np.random.default_rng(3)
    w_np = rng.standard_normal((3,)).astype(np.float32)
    w = ad.Tensor(w_np, requires_grad=True)

    def body():
        w.grad = None
        (w * w).sum().backward()
        w.exp().sum().backward()
        with ad.no_grad():
            w.sub_(w.grad, alpha=0.1)
    ad.ir_for(2, body)
    ad.execute()

    tw = torch.tensor(w_np, requires_grad=True)
    for _ in range(2):
        tw.grad = None
        (tw * tw).sum().backward()
        tw.exp().sum().backward()
        with torch.no_grad():
            tw.sub_(tw.grad, alpha=0.1)
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_inplace_update_of_grad_leaf_outside_no_grad_raises():
    p = ad.Tensor(np.ones(3, np.float32), requires_grad=True)
    with pytest.raises(RuntimeError, match="in place"):
        p -= 1.0
    with pytest.raises(RuntimeError, match="in place"):
        p.add_(p * 2.0)
    with pytest.raises(RuntimeError, match="in place"):
        p.zero_()
    with ad.no_grad():
        p.sub_(1.0)             # allowed
    q = ad.Tensor(np.ones(3, np.float32))
    q += 1.0                    # leaves without grad may be updated anywhere
    ad.execute()
    np.testing.assert_array_equal(p.numpy(), np.zeros(3, np.float32))
    np.testing.assert_array_equal(q.numpy(), np.full(3, 2.0, np.float32))


def test_backward_of_tensor_without_grad_raises():
    x = ad.Tensor(np.ones(3, np.float32))
    with pytest.raises(RuntimeError, match="does not require grad"):
        (x * 2.0).sum().backward()


def test_tensor_from_finished_iteration_raises_outside_loop():
    x = ad.Tensor(np.ones(3, np.float32))
    leaked = []

    def body():
        leaked.append(x * 2.0)
    ad.ir_for(3, body)
    with pytest.raises(RuntimeError, match="loop iteration"):
        leaked[0] + 1.0
    with pytest.raises(RuntimeError, match="loop iteration"):
        ad.Receiver(print, [leaked[0]])
    ad.execute()
    with pytest.raises(RuntimeError, match="loop iteration"):
        leaked[0].numpy()


def test_tensor_from_one_iteration_body_used_in_another_loop_raises():
    x = ad.Tensor(np.ones(3, np.float32))
    leaked = []
    ad.ir_for(2, lambda: leaked.append(x * 2.0))
    with pytest.raises(RuntimeError, match="loop iteration"):
        ad.ir_for(2, lambda: leaked[0] * 3.0)


def test_traced_value_read_before_execute_raises():
    y = ad.Tensor(np.ones(2, np.float32)) * 2.0
    with pytest.raises(RuntimeError, match="execute"):
        y.numpy()


def test_tensor_from_dropped_program_raises():
    """A traced tensor whose program was dropped (``reset()``) cannot be used any more."""
    x = ad.Tensor(np.ones(2, np.float32))
    y = x * 2.0
    ad.reset()
    with pytest.raises(RuntimeError, match="finished program"):
        y + 1.0
