"""Failure recovery of the OpenCL runtime: a failing Feeder or Receiver leaves the
parameters of the failing iteration's start, restored from a periodic checkpoint plus a
replay of the iterations since, bit for bit equal to a run that stopped there."""
import numpy as np
import pytest

import autodiff as ad
from autodiff import nn
from autodiff.device.opencl import device, runtime
from autodiff.optim import SGD

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)

EVERY = 4        # checkpoint interval for these tests: failures land across checkpoints


@pytest.fixture(autouse=True)
def _short_checkpoints(monkeypatch):
    monkeypatch.setattr(runtime, "CHECKPOINT", EVERY)


class Source:
    """A Feeder returning one shared array updated in place at every call (the replay
    must use the values recorded at the time, not the array's current contents)."""

    def __init__(self, fail_at: int | None = None):
        self.buf = np.zeros((2, 3), np.float32)
        self.n, self.fail_at = 0, fail_at

    def __call__(self):
        if self.n == self.fail_at:
            raise RuntimeError("feeder down")
        self.n += 1
        self.buf[:] = np.sin(np.arange(6, dtype=np.float32).reshape(2, 3) * self.n)
        return self.buf


def _program(steps, feed, recv, dropout: bool = False):
    w = ad.Tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    opt = SGD([w], lr=0.1)
    drop = nn.Dropout(0.5, seed=11)

    def body():
        opt.zero_grad()
        x = ad.Feeder(feed, shape=[2, 3], name="x")
        h = (x @ w).tanh()
        if dropout:
            h = drop(h)
        loss = (h ** 2).sum()
        loss.backward()
        opt.step()
        ad.Receiver(recv, [loss], name="loss")
    ad.ir_for(range(steps), body)
    return w


def _state_after(steps, dropout=False):
    """The weights after ``steps`` iterations on the OpenCL device (no failure)."""
    ad.reset()
    w = _program(steps, Source(), lambda *a: None, dropout)
    ad.execute(device="opencl")
    out = w.numpy()
    ad.reset()
    return out


@pytest.mark.parametrize("s", [0, 3, 4, 9, 13])
def test_receiver_failure_at_any_iteration_restores_its_start(s):
    expected = _state_after(s, dropout=True)
    calls = []

    def recv(loss):
        if len(calls) == s:
            raise ValueError("receiver down")
        calls.append(float(loss))
    w = _program(20, Source(), recv, dropout=True)
    with pytest.raises(ad.ReceiverError, match=f"iteration {s}"):
        ad.execute(device="opencl")
    assert len(calls) == s
    np.testing.assert_array_equal(w.numpy(), expected)


@pytest.mark.parametrize("s", [0, 7, 8])
def test_feeder_failure_restores_its_iteration_start(s):
    expected = _state_after(s)
    w = _program(20, Source(fail_at=s), lambda *a: None)
    with pytest.raises(ad.FeederError, match=f"iteration {s}"):
        ad.execute(device="opencl")
    np.testing.assert_array_equal(w.numpy(), expected)


def _nested(outer, fail_at, seen):
    """Outer loop of SGD steps, each feeding three inner batches into a running sum."""
    w = ad.Tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    acc = ad.Tensor(np.zeros((3, 4), np.float32))
    opt = SGD([w], lr=0.05)
    src = Source(fail_at=fail_at)

    def step():
        opt.zero_grad()
        loss = ((ad.Feeder(src, shape=[2, 3]) @ w).tanh() ** 2).sum()
        loss.backward()
        opt.step()

        def inner():
            acc.add_(ad.Feeder(src, shape=[2, 3]).sum() * w)
        ad.ir_for(3, inner)
        ad.Receiver(lambda v: seen.append(v), [loss])
    ad.ir_for(outer, step)
    return w, acc


def test_feeder_failure_inside_inner_loop_restores_outer_iteration_start():
    """Outer iteration 6 fails in its second inner Feeder call (after its SGD step and
    one inner iteration ran): parameters and the loop-carried sum go back to the start of
    outer iteration 6 (the numpy device's semantics for nested loops)."""
    seen = []
    w, acc = _nested(6, None, seen)
    ad.execute(device="opencl")
    w_ref, acc_ref = w.numpy(), acc.numpy()
    ad.reset()
    w, acc = _nested(10, 6 * 4 + 2, seen)     # 4 Feeder calls per outer iteration
    with pytest.raises(ad.FeederError, match=r"iteration \[6, 1\]"):
        ad.execute(device="opencl")
    np.testing.assert_array_equal(w.numpy(), w_ref)
    np.testing.assert_array_equal(acc.numpy(), acc_ref)


def test_no_failure_results_do_not_depend_on_checkpoint_interval(monkeypatch):
    a = _state_after(11, dropout=True)
    monkeypatch.setattr(runtime, "CHECKPOINT", 1000)
    np.testing.assert_array_equal(_state_after(11, dropout=True), a)


@pytest.mark.parametrize("prefetch", [0, 16])
def test_checkpoints_do_not_drain_the_queue(monkeypatch, prefetch):
    """A checkpoint is a copy command behind the iterations before it: the host never
    waits for the device to finish at one, so a run of many checkpoint intervals
    synchronises as often as a run of one (only at the loop's start and end)."""
    import pyopencl as cl
    finish = cl.CommandQueue.finish
    calls = []

    def counting(self):
        calls.append(1)
        return finish(self)
    monkeypatch.setattr(cl.CommandQueue, "finish", counting)

    def syncs(steps):
        ad.reset()
        _program(steps, Source(), lambda loss: None)
        calls.clear()
        ad.execute(device="opencl", prefetch=prefetch)
        return len(calls)
    few, many = syncs(2), syncs(20 * EVERY)
    assert many == few, (few, many)
