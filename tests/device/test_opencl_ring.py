"""Receiver rings on the OpenCL device: in a loop whose body is kernels and Receivers only,
each iteration's values are copied on the device into a ring slot (a body in the launch
chain) and the host reads the ring once per ``RECEIVER_RING`` iterations (``RING`` where
the body has Feeders)
(:mod:`autodiff.device.opencl.rings`). Every value still reaches its
Receiver, in order, and a failing Receiver still stops the run at its own iteration with
the parameters of that iteration's start."""
import numpy as np
import pytest

import autodiff as ad
from autodiff.device.opencl import device
from autodiff.device.opencl.runtime import (RECEIVER_RING, RING, Feed, Receive, RingFeed,
                                            RingReceive, _feeds)

R = RECEIVER_RING       # the ring (and block) of a loop with Receivers only
from autodiff import nn
from autodiff.optim import SGD

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)


def _program(steps: int, recv, feeder: bool = False, dropout: bool = False):
    """SGD on a [4, 6] weight from a constant [5, 4] input (or a Feeder of it); the
    Receiver gets the loss, a [6] int32 argmax-like count vector and the step's output row
    0. Returns the weight."""
    ad.reset()
    rng = np.random.default_rng(3)
    w = ad.Tensor(rng.standard_normal((4, 6)).astype(np.float32) * 0.5, requires_grad=True)
    x0 = rng.standard_normal((5, 4)).astype(np.float32)
    opt = SGD([w], lr=0.05)
    drop = nn.Dropout(0.3, seed=11)      # a fixed stream: the same draws in any run

    def step():
        x = ad.Feeder(lambda: x0, [5, 4], name="x") if feeder else ad.Tensor(x0)
        opt.zero_grad()
        y = (x @ w).tanh()
        if dropout:
            y = drop(y)
        loss = (y * 2.0 - 0.5).square().mean()
        loss.backward()
        opt.step()
        ad.Receiver(recv, [loss, (y > 0.0).sum(dim=0).int(), y[0]], name="r")
    ad.ir_for(steps, step)
    return w


def _run(steps, device_name, prefetch=None, **kw):
    got = []
    w = _program(steps, lambda *a: got.append([np.array(v) for v in a]), **kw)
    ad.execute(device=device_name, prefetch=prefetch)
    return got, w.numpy()


@pytest.mark.parametrize("steps", [1, R, 2 * R + 5])
def test_every_iteration_reaches_the_receiver_in_order(steps, opencl_executables):
    """A ring read per R iterations and a partial one at the end: the values of every
    iteration, as on the numpy device; the Receiver's copy joins the loop's one launch."""
    got, w = _run(steps, "opencl")
    want, w_np = _run(steps, "numpy")
    rings = list(_feeds(opencl_executables[-1].steps, RingReceive))
    assert len(rings) == 1 and not list(_feeds(opencl_executables[-1].steps, Receive))
    assert rings[0].slots == R
    assert len(got) == len(want) == steps
    for g, r in zip(got, want):
        np.testing.assert_allclose(g[0], r[0], rtol=2e-5, atol=1e-6)
        np.testing.assert_array_equal(g[1], r[1])
        assert g[1].dtype == np.int32 and g[2].shape == (6,)
        np.testing.assert_allclose(g[2], r[2], rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(w, w_np, rtol=2e-5, atol=1e-6)


def test_each_value_is_its_own_iteration_s():
    """Consecutive iterations' losses differ (the weight moves), so a slot read twice or
    out of order would show: the losses equal a run with one read per iteration (a
    Feeder in a loop run with ``prefetch=0`` keeps plain reads)."""
    ring, _ = _run(2 * R + 3, "opencl")
    plain, _ = _run(2 * R + 3, "opencl", feeder=True, prefetch=0)
    assert len(set(float(g[0]) for g in ring)) == len(ring)
    np.testing.assert_array_equal([g[0] for g in ring], [g[0] for g in plain])


def check_failing_receiver(s: int, steps: int, **kw) -> None:
    """A run of ``steps`` iterations whose Receiver raises in iteration ``s``: the error
    names ``s``, the Receiver saw every iteration before, and the weight is the one at the
    start of iteration ``s`` (that of a run of ``s`` iterations)."""
    ad.reset()
    w = _program(s, lambda *a: None, **kw)
    ad.execute(device="opencl")
    expected = w.numpy()
    calls = []

    def recv(*a):
        if len(calls) == s:
            raise ValueError("receiver down")
        calls.append(float(a[0]))
    w = _program(steps, recv, **kw)
    with pytest.raises(ad.ReceiverError, match=f"iteration {s}"):
        ad.execute(device="opencl")
    assert len(calls) == s
    np.testing.assert_array_equal(w.numpy(), expected)


@pytest.mark.parametrize("s", [0, 5, R, 2 * R + 1])
def test_a_failing_receiver_stops_at_its_iteration(s):
    """The Receiver of iteration ``s`` raises (seen by the host up to a ring later),
    dropout's random draws included."""
    check_failing_receiver(s, 3 * R, dropout=True)


@pytest.mark.parametrize("prefetch", [0, 1, 2 * RING - 2])
def test_rings_only_where_no_value_is_needed_at_once(prefetch, opencl_executables):
    """A loop with a Feeder keeps a read per iteration when ``prefetch`` is below
    ``2 RING - 1`` (the Feeders' order rule may need a Receiver's value before a ring
    would hand it over), and plain Feeder writes."""
    _run(3, "opencl", feeder=True, prefetch=prefetch)
    steps = opencl_executables[-1].steps
    assert list(_feeds(steps, Receive)) and not list(_feeds(steps, RingReceive))
    assert not list(_feeds(steps, RingFeed)) and all(type(f) is Feed for f in _feeds(steps))


def test_no_ring_for_a_heavy_step(opencl_executables, monkeypatch):
    """A loop body of more work than ``rings.WORK`` keeps a read per iteration: there a
    ring would only delay each value (the progress a Receiver shows) by R long steps."""
    from autodiff.device.opencl import rings
    monkeypatch.setattr(rings, "WORK", 10)
    _run(3, "opencl")
    steps = opencl_executables[-1].steps
    assert list(_feeds(steps, Receive)) and not list(_feeds(steps, RingReceive))



def test_kept_values_stay_their_iterations():
    """A Receiver that keeps the arrays it is handed (no copy of its own): each still holds
    its own iteration's values after every later ring read, 0-d for a scalar, and writing
    into one changes no other."""
    steps = 2 * R + 5
    kept = []
    _program(steps, lambda *a: kept.append(a))
    ad.execute(device="opencl")
    want, _ = _run(steps, "numpy")
    assert len(kept) == steps
    for k, (vals, ref) in enumerate(zip(kept, want)):
        assert isinstance(vals[0], np.ndarray) and vals[0].shape == ()
        assert vals[1].dtype == np.int32 and vals[1].shape == (6,)
        for v, r in zip(vals, ref):
            np.testing.assert_allclose(v, r, rtol=1e-5, atol=1e-6, err_msg=f"iteration {k}")
    before = [v.copy() for v in kept[1]]
    kept[0][2][...] = 123.0
    kept[0][0][...] = -1.0
    for v, b in zip(kept[1], before):
        np.testing.assert_array_equal(v, b)


def test_a_fed_loop_keeps_rings_of_ring_slots(opencl_executables):
    """A loop with a Feeder (default ``prefetch``): its Feeder's and Receiver's rings have
    ``RING`` slots (the order rule's bound), a loop without Feeders ``RECEIVER_RING``."""
    _run(3, "opencl", feeder=True)
    steps = opencl_executables[-1].steps
    assert [r.slots for r in _feeds(steps, RingReceive)] == [RING]
    assert [f.slots for f in _feeds(steps, RingFeed)] == [RING]
    _run(3, "opencl")
    assert [r.slots for r in _feeds(opencl_executables[-1].steps, RingReceive)] == [R]
