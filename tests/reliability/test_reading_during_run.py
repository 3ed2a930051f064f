"""Item 4: reading the model while ``execute()`` runs it. Inside a callback of the run,
``state_dict()``, ``save()``, ``.numpy()`` or a nested ``execute()`` on the running
program's variables raise a clear error (their host values are from before the run; never
silently stale); a Receiver of the parameters themselves gives their current values."""
from __future__ import annotations

import numpy as np
import pytest

import autodiff as ad
from autodiff.nn import Linear
from autodiff.optim import SGD

STEPS = 6


def _program(device, recv, steps=STEPS, params_to_receiver=False):
    ad.manual_seed(0)
    lin = Linear(3, 2)
    opt = SGD(lin.parameters(), lr=0.1, momentum=0.9)
    xs = iter(np.random.default_rng(1).standard_normal((steps, 4, 3)).astype(np.float32))

    def body():
        opt.zero_grad()
        x = ad.Feeder(lambda: next(xs), [4, 3], name="x")
        loss = (lin(x).tanh() ** 2).sum()
        loss.backward()
        opt.step()
        srcs = [loss] + (list(lin.parameters()) if params_to_receiver else [])
        ad.Receiver(lambda *a: recv(lin, *a), srcs, name="monitor")
    ad.ir_for(steps, body)
    return lin


def _clean(device, steps):
    ad.reset()
    lin = _program(device, lambda *a: None, steps)
    ad.execute(device=device)
    out = lin.state_dict()
    ad.reset()
    return out


READS = {
    "state_dict": lambda lin, tmp: lin.state_dict(),
    "save": lambda lin, tmp: lin.save(tmp / "m.npz"),
    "numpy": lambda lin, tmp: lin.weight.numpy(),
    "tolist": lambda lin, tmp: lin.weight.tolist(),
}


@pytest.mark.parametrize("read", list(READS))
def test_reading_a_running_variable_in_a_callback_raises(device, read, tmp_path):
    want = _clean(device, 3)

    def recv(lin, loss):
        if recv.n == 3:
            READS[read](lin, tmp_path)
        recv.n += 1
    recv.n = 0
    lin = _program(device, recv)
    with pytest.raises(ad.ReceiverError) as info:
        ad.execute(device=device)
    cause = info.value.__cause__
    assert isinstance(cause, RuntimeError), cause
    msg = str(cause)
    assert "execute()" in msg and "Receiver" in msg and "weight" in msg, msg
    assert info.value.iteration == (3,)
    for k, v in lin.state_dict().items():           # after the run: readable again
        np.testing.assert_array_equal(v, want[k])


def test_nested_execute_on_running_variables_raises(device):
    def recv(lin, loss):
        y = lin(ad.Tensor(np.ones((1, 3), np.float32)))
        ad.execute(device="numpy")
        return y
    _program(device, recv)
    with pytest.raises(ad.ReceiverError) as info:
        ad.execute(device=device)
    assert isinstance(info.value.__cause__, RuntimeError)
    assert "owned by the execute() running" in str(info.value.__cause__)
    assert info.value.iteration == (0,)


def test_receiver_of_parameters_sees_current_values(device):
    """The documented way: hand the parameters to a Receiver."""
    got = []

    def recv(lin, loss, w, b):
        got.append({"weight": w, "bias": b})
    _program(device, recv, params_to_receiver=True)
    ad.execute(device=device)
    for k in (0, 2, STEPS - 1):
        want = _clean(device, k + 1)
        for name in ("weight", "bias"):
            np.testing.assert_array_equal(got[k][name], want[name])
