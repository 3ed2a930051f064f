"""Loop semantics: a traced ir_for equals the same steps run eagerly in PyTorch."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff.nn import Linear, MSELoss, Sequential, Sigmoid
from autodiff.optim import SGD

RTOL, ATOL = 1e-5, 1e-6     # float32 against float32, same operation order up to summation


def _models(seed: int = 0):
    torch.manual_seed(seed)
    ref = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Sigmoid(), torch.nn.Linear(4, 2))
    net = Sequential(Linear(3, 4), Sigmoid(), Linear(4, 2))
    net.load_state_dict(ref.state_dict())
    return net, ref


def _data(n: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((5, 3)).astype(np.float32),
             rng.standard_normal((5, 2)).astype(np.float32)) for _ in range(n)]


def _torch_train(ref, data, lr, momentum, **sgd):
    opt = torch.optim.SGD(ref.parameters(), lr=lr, momentum=momentum, **sgd)
    losses = []
    for x, y in data:
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(ref(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _assert_params_equal(net, ref):
    theirs = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    ours = net.state_dict()
    assert list(ours) == list(theirs)
    for k in theirs:
        np.testing.assert_allclose(ours[k], theirs[k], rtol=RTOL, atol=ATOL, err_msg=k)


class Counter:
    """A Feeder callback handing out ``items`` in order, counting its calls."""

    def __init__(self, items):
        self.items, self.calls = list(items), 0

    def __call__(self):
        v = self.items[self.calls]
        self.calls += 1
        return v


SGD_VARIANTS = [
    (0.0, {}),
    (0.9, {}),
    (0.9, {"nesterov": True}),
    (0.9, {"dampening": 0.5}),       # torch starts the buffer at the first gradient
    (0.5, {"weight_decay": 0.1}),
]


@pytest.mark.parametrize("momentum,sgd", SGD_VARIANTS)
def test_five_iterations_equal_five_torch_sgd_steps(momentum, sgd):
    net, ref = _models()
    data = _data(5)
    xs, ys = Counter(x for x, _ in data), Counter(y for _, y in data)
    opt = SGD(net.parameters(), lr=0.5, momentum=momentum, **sgd)
    loss_fn = MSELoss()
    seen = []

    def step():
        opt.zero_grad()
        x = ad.Feeder(xs, shape=(5, 3), name="x")
        y = ad.Feeder(ys, shape=(5, 2), name="y")
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: seen.append(v), [loss], name="loss")

    ad.ir_for(5, step)
    ad.execute()
    want = _torch_train(ref, data, 0.5, momentum, **sgd)

    assert xs.calls == 5 and ys.calls == 5
    assert len(seen) == 5 and all(v.shape == () and v.dtype == np.float32 for v in seen)
    np.testing.assert_allclose(np.array(seen), want, rtol=RTOL, atol=ATOL)
    _assert_params_equal(net, ref)
    # The parameters really moved, so the comparison above is not trivially true.
    assert not np.allclose(net.state_dict()["0.weight"], _models()[0].state_dict()["0.weight"])


def test_nested_loops_call_feeder_per_inner_iteration():
    net, ref = _models(seed=2)
    data = _data(12, seed=3)
    xs, ys = Counter(x for x, _ in data), Counter(y for _, y in data)
    opt = SGD(net.parameters(), lr=0.3, momentum=0.5)
    seen = []

    def inner():
        opt.zero_grad()
        x = ad.Feeder(xs, shape=(5, 3))
        y = ad.Feeder(ys, shape=(5, 2))
        loss = ((net(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: seen.append(float(v)), [loss])

    ad.ir_for(3, lambda: ad.ir_for(4, inner))
    ad.execute()
    want = _torch_train(ref, data, 0.3, 0.5)
    assert xs.calls == 12 and ys.calls == 12
    np.testing.assert_allclose(seen, want, rtol=RTOL, atol=ATOL)
    _assert_params_equal(net, ref)


def test_nested_loop_outer_body_sees_inner_updates():
    """A variable updated by an inner loop is read after it, in the outer body."""
    acc = ad.Tensor(np.zeros(2, np.float32))
    after_inner = []

    def outer():
        ad.ir_for(4, lambda: acc.add_(1.0))
        ad.Receiver(lambda v: after_inner.append(v.copy()), [acc * 1.0])
        acc.mul_(2.0)

    ad.ir_for(3, outer)
    ad.execute()
    # acc: ((0 + 4) * 2 + 4) * 2 + 4 = 28 before the last doubling, 56 after.
    np.testing.assert_array_equal([v[0] for v in after_inner], [4.0, 12.0, 28.0])
    np.testing.assert_array_equal(acc.numpy(), np.full(2, 56.0, np.float32))


def test_receiver_values_in_iteration_order_with_several_tensors():
    counter = ad.Tensor(np.zeros((), np.float32))
    got = []

    def step():
        counter.add_(1.0)
        ad.Receiver(lambda a, b: got.append((float(a), b.tolist())),
                    [counter, counter * ad.Tensor(np.array([1.0, -1.0], np.float32))])

    ad.ir_for(range(2, 6), step)
    ad.execute()
    assert got == [(1.0, [1.0, -1.0]), (2.0, [2.0, -2.0]), (3.0, [3.0, -3.0]),
                   (4.0, [4.0, -4.0])]


def test_execute_twice_and_trace_again():
    ad.execute()
    ad.execute()                                   # an empty program runs too
    x = ad.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = (x * 2.0).sum(1)                           # program 1
    ad.execute()
    np.testing.assert_array_equal(y.numpy(), [6.0, 24.0])
    z = y + x.sum(1)                               # program 2 reads program 1's result
    ad.execute()
    np.testing.assert_array_equal(z.numpy(), [9.0, 36.0])
    np.testing.assert_array_equal(y.numpy(), [6.0, 24.0])
    ad.execute()
    np.testing.assert_array_equal(z.numpy(), [9.0, 36.0])


def test_training_continues_across_programs():
    """Two programs of 2 and 3 iterations equal 5 torch steps (momentum state carried)."""
    net, ref = _models(seed=4)
    data = _data(5, seed=5)
    xs, ys = Counter(x for x, _ in data), Counter(y for _, y in data)
    opt = SGD(net.parameters(), lr=0.5, momentum=0.9)

    def step():
        opt.zero_grad()
        loss = MSELoss()(net(ad.Feeder(xs, (5, 3))), ad.Feeder(ys, (5, 2)))
        loss.backward()
        opt.step()

    ad.ir_for(2, step)
    ad.execute()
    ad.ir_for(3, step)
    ad.execute()
    _torch_train(ref, data, 0.5, 0.9)
    _assert_params_equal(net, ref)


def test_top_level_gradient_of_non_scalar_is_gradient_of_sum():
    rng = np.random.default_rng(6)
    w_np = rng.standard_normal((3, 4)).astype(np.float32)
    x_np = rng.standard_normal((2, 3)).astype(np.float32)
    w = ad.Tensor(w_np, requires_grad=True)
    out = (ad.Tensor(x_np) @ w).tanh()            # [2, 4], not a scalar
    out.backward()
    g = w.grad
    ad.execute()
    tw = torch.tensor(w_np, requires_grad=True)
    (torch.from_numpy(x_np) @ tw).tanh().sum().backward()
    np.testing.assert_allclose(g.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_backward_with_explicit_gradient():
    w_np = np.array([1.0, -2.0, 3.0], np.float32)
    seed_np = np.array([0.5, 2.0, -1.0], np.float32)
    w = ad.Tensor(w_np, requires_grad=True)
    (w * w).backward(ad.Tensor(seed_np))
    g = w.grad
    ad.execute()
    np.testing.assert_allclose(g.numpy(), 2 * w_np * seed_np, rtol=1e-6)


def test_load_after_loop_sees_final_value():
    v = ad.Tensor(np.ones(3, np.float32))
    before = v * 1.0                               # LOAD before the loop: initial value

    def body():
        v.mul_(2.0)
    ad.ir_for(4, body)
    after = v * 1.0                                # LOAD after FOR: the loop's final value
    v.add_(1.0)
    last = v * 1.0
    ad.execute()
    np.testing.assert_array_equal(before.numpy(), np.ones(3))
    np.testing.assert_array_equal(after.numpy(), np.full(3, 16.0))
    np.testing.assert_array_equal(last.numpy(), np.full(3, 17.0))
    np.testing.assert_array_equal(v.numpy(), np.full(3, 17.0))


def test_loop_body_reads_value_computed_before_loop():
    base = ad.Tensor(np.array([1.0, 2.0], np.float32)) * 3.0     # computed once, at top level
    acc = ad.Tensor(np.zeros(2, np.float32))
    ad.ir_for(5, lambda: acc.add_(base))
    ad.execute()
    np.testing.assert_array_equal(acc.numpy(), [15.0, 30.0])
    np.testing.assert_array_equal(base.numpy(), [3.0, 6.0])


def test_loop_range_int_and_empty():
    acc = ad.Tensor(np.zeros((), np.float32))
    calls = []
    ad.ir_for(range(0), lambda: acc.add_(ad.Feeder(lambda: calls.append(1) or
                                                    np.ones((), np.float32), ())))
    ad.ir_for(range(1, 10, 3), lambda: acc.add_(1.0))           # 3 iterations
    ad.execute()
    assert calls == []
    assert acc.item() == 3.0
    with pytest.raises(TypeError):
        ad.ir_for([1, 2], lambda: None)


def test_gather_with_int_feeder_in_loop_matches_torch_embedding():
    """Rows picked by fed int32 indices (repeats included) train like torch.nn.Embedding."""
    rng = np.random.default_rng(7)
    table_np = rng.standard_normal((6, 3)).astype(np.float32)
    idx = [rng.integers(0, 6, (4,)).astype(np.int32) for _ in range(4)]
    idx[0][:] = [1, 1, 1, 5]
    table = ad.Tensor(table_np, requires_grad=True)
    feed = Counter(idx)
    opt = SGD([table], lr=0.2)

    def step():
        opt.zero_grad()
        rows = table[ad.Feeder(feed, (4,), dtype="int32", name="idx")]
        (rows.tanh() ** 2).sum().backward()
        opt.step()

    ad.ir_for(4, step)
    ad.execute()
    ref = torch.tensor(table_np, requires_grad=True)
    topt = torch.optim.SGD([ref], lr=0.2)
    for i in idx:
        topt.zero_grad()
        (ref[torch.from_numpy(i).long()].tanh() ** 2).sum().backward()
        topt.step()
    assert feed.calls == 4
    np.testing.assert_allclose(table.numpy(), ref.detach().numpy(), rtol=RTOL, atol=ATOL)


def test_receiver_at_top_level_runs_once_after_loop():
    v = ad.Tensor(np.zeros(2, np.float32))
    got = []
    ad.Receiver(lambda a: got.append(a.tolist()), [v * 1.0])     # before the loop
    ad.ir_for(3, lambda: v.add_(1.0))
    ad.Receiver(lambda a: got.append(a.tolist()), [v])           # after it
    ad.execute()
    assert got == [[0.0, 0.0], [3.0, 3.0]]
