"""The host-loop contract every device keeps (README, Failure semantics), as checks any
device's tests call: a small SGD loop with a Feeder and a Receiver, its reference state
from the numpy device, and the error cases (a Receiver raising, a Feeder returning a wrong
shape, an out-of-range gather)."""
from __future__ import annotations

import numpy as np
import pytest

import autodiff as ad

RTOL, ATOL = 1e-5, 1e-6


def loop_program(steps, feed, recv, dropout=False):
    """``steps`` SGD steps on ``tanh(x @ w) ** 2`` summed (``x`` fed [2, 3]); the Receiver
    gets the loss and ``w``. Returns ``w`` [3, 4] (nothing runs yet)."""
    ad.manual_seed(1)
    w = ad.Tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4), requires_grad=True)
    from autodiff.nn import functional as F
    from autodiff.optim import SGD
    opt = SGD([w], lr=0.1)

    def body():
        opt.zero_grad()
        x = ad.Feeder(feed, shape=[2, 3], name="x")
        h = (x @ w).tanh()
        if dropout:
            h = F.dropout(h, 0.5)
        loss = (h ** 2).sum()
        loss.backward()
        opt.step()
        ad.Receiver(recv, [loss, w], name="loss")
    ad.ir_for(range(steps), body)
    return w


def feeder():
    """A Feeder of [2, 3] filled with 0.1 k at its k-th call."""
    k = [0]

    def feed():
        k[0] += 1
        return np.full((2, 3), 0.1 * k[0], np.float32)
    return feed


def state_after(steps):
    """``w`` after ``steps`` iterations on the numpy device (the reference)."""
    w = loop_program(steps, feeder(), lambda *a: None)
    ad.execute(device="numpy")
    out = w.numpy()
    ad.reset()
    return out


def check_receiver_error(device: str) -> None:
    """A Receiver raising in iteration 5 stops the run with ``ReceiverError`` naming it,
    the original exception chained, ``w`` as after 5 completed iterations."""
    expected = state_after(5)

    def recv(loss, w):
        recv.n += 1
        if recv.n == 6:
            raise ValueError("stop")
    recv.n = 0
    w = loop_program(12, feeder(), recv)
    with pytest.raises(ad.ReceiverError, match="iteration 5") as e:
        ad.execute(device=device)
    assert isinstance(e.value.__cause__, ValueError)
    np.testing.assert_allclose(w.numpy(), expected, rtol=RTOL, atol=ATOL)


def check_feeder_error(device: str) -> None:
    """A Feeder returning a wrong shape in iteration 3: ``FeederError`` naming it, ``w``
    as after 3 completed iterations."""
    expected = state_after(3)
    good = feeder()

    def feed():
        feed.n += 1
        return good() if feed.n <= 3 else np.zeros((3, 3), np.float32)
    feed.n = 0
    w = loop_program(8, feed, lambda *a: None)
    with pytest.raises(ad.FeederError, match="iteration 3"):
        ad.execute(device=device)
    np.testing.assert_allclose(w.numpy(), expected, rtol=RTOL, atol=ATOL)


def check_gather_out_of_range(device: str) -> None:
    """Row 7 of a 4-row table: an ``IndexError``."""
    table = ad.Tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    idx = ad.Tensor(np.array([1, 7], np.int32))
    out = table[idx] * 1.0
    with pytest.raises(IndexError):
        ad.execute(device=device)
    del out
