"""Item 2: a Feeder that refills and returns the same numpy array at every call gives the
same results as one returning fresh arrays, on every device: each device copies (or has
consumed) a Feeder's array before calling that Feeder again."""
from __future__ import annotations

import numpy as np

import autodiff as ad
from autodiff.optim import SGD

STEPS = 20


def _data(i):
    return (np.sin(np.arange(6, dtype=np.float32) * (i + 1)) * 2).reshape(2, 3)


class Reused:
    """Returns one array, refilled in place at every call."""

    def __init__(self):
        self.buf, self.i = np.zeros((2, 3), np.float32), 0

    def __call__(self):
        self.buf[:] = _data(self.i)
        self.i += 1
        return self.buf


class Fresh:
    def __init__(self):
        self.i = 0

    def __call__(self):
        self.i += 1
        return _data(self.i - 1)


def _run(device, feed):
    w = ad.Tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    last = ad.Tensor(np.zeros((2, 3), np.float32))          # the Feeder value, assigned
    opt = SGD([w], lr=0.05)
    seen = []

    def body():
        opt.zero_grad()
        x = ad.Feeder(feed, [2, 3], name="x")
        ad.Feeder(feed, [2, 3], name="unused")              # called, value never read
        loss = ((x @ w).tanh() ** 2).sum()
        loss.backward()
        opt.step()
        with ad.no_grad():
            last.copy_(x)
        ad.Receiver(lambda v, l: seen.append((v.copy(), float(l))), [x, loss], name="r")
    ad.ir_for(STEPS, body)
    ad.execute(device=device)
    return w.numpy(), last.numpy(), seen


def test_reused_feeder_array_equals_fresh_arrays(device):
    want_w, want_last, want_seen = _run(device, Fresh())
    ad.reset()
    got_w, got_last, got_seen = _run(device, Reused())
    np.testing.assert_array_equal(got_w, want_w)
    np.testing.assert_array_equal(got_last, want_last)
    assert len(got_seen) == STEPS
    for (gx, gl), (wx, wl) in zip(got_seen, want_seen):
        np.testing.assert_array_equal(gx, wx)
        assert gl == wl
    np.testing.assert_array_equal(want_last, _data(2 * STEPS - 2))   # x of the last step
