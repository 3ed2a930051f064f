"""Iteration blocks on the OpenCL device (``Loop.block``): a loop whose body is one
one-work-item chain launch and Receivers through rings runs up to ``RING`` iterations per
launch (the dispatch kernel's ``reps`` argument). Every value still reaches its Receiver
in order, the parameters are bit-identical to one launch per iteration, and a failing
Receiver still stops the run at its own iteration with that iteration's parameters."""
import numpy as np
import pytest
import pyopencl as cl

import autodiff as ad
from autodiff.device.opencl import device
from autodiff.device.opencl.runtime import CHECKPOINT, RING, Loop, _loops
from test_opencl_ring import _program, _run

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)


@pytest.fixture
def launches(monkeypatch):
    """Names of the kernels enqueued during the test, in order."""
    seen, real = [], cl.enqueue_nd_range_kernel

    def spy(queue, kernel, *a, **kw):
        seen.append(kernel.function_name)
        return real(queue, kernel, *a, **kw)
    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", spy)
    return seen


def _loop(exe) -> Loop:
    (lp,) = [s for s in exe.steps if type(s) is Loop]
    return lp


def test_a_light_loop_runs_in_blocks(opencl_executables, launches, monkeypatch):
    """21 iterations: the first alone (it times the JIT), then blocks cut to fill the
    ring exactly (7, 8, 5): 4 launches of the loop's kernel instead of 21; every
    iteration's values as on the numpy device."""
    steps = 2 * RING + 5
    got, w = _run(steps, "opencl")
    want, w_np = _run(steps, "numpy")
    lp = _loop(opencl_executables[0])
    assert lp.block == RING
    name = lp.body[0].kernel.function_name
    blocked = launches.count(name)
    assert lp.body[0].reps == 1           # the kernel object is left as compiled
    from autodiff.device import opencl
    monkeypatch.setattr(opencl, "_mark_blocks", lambda *a: None)
    del launches[:]
    _run(steps, "opencl")
    assert launches.count(name) - blocked == steps - 4     # the same launches outside
    assert len(got) == len(want) == steps
    for g, r in zip(got, want):
        np.testing.assert_allclose(g[0], r[0], rtol=2e-5, atol=1e-6)
        np.testing.assert_array_equal(g[1], r[1])
        np.testing.assert_allclose(g[2], r[2], rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(w, w_np, rtol=2e-5, atol=1e-6)


def test_blocks_give_the_same_bits_as_one_launch_per_iteration(monkeypatch,
                                                               opencl_executables):
    steps = CHECKPOINT + RING + 3          # across a checkpoint
    got, w = _run(steps, "opencl")
    assert _loop(opencl_executables[-1]).block == RING
    from autodiff.device import opencl
    monkeypatch.setattr(opencl, "_mark_blocks", lambda *a: None)
    plain, w_plain = _run(steps, "opencl")
    assert _loop(opencl_executables[-1]).block == 0
    np.testing.assert_array_equal(w, w_plain)
    np.testing.assert_array_equal([g[0] for g in got], [g[0] for g in plain])
    assert len(set(float(g[0]) for g in got)) == steps      # each iteration's own value


@pytest.mark.parametrize("s", [0, 5, RING, 2 * RING + 1, CHECKPOINT + 3])
def test_a_failing_receiver_stops_at_its_iteration(s, opencl_executables):
    """The Receiver of iteration ``s`` raises (seen up to two blocks later): the error
    names ``s`` and the weight is the one at the start of iteration ``s`` (a replay from
    the last checkpoint runs blocks too)."""
    ad.reset()
    w = _program(s, lambda *a: None)
    ad.execute(device="opencl")
    expected = w.numpy()
    calls = []

    def recv(*a):
        if len(calls) == s:
            raise ValueError("receiver down")
        calls.append(float(a[0]))
    w = _program(CHECKPOINT + 3 * RING, recv)
    with pytest.raises(ad.ReceiverError, match=f"iteration {s}"):
        ad.execute(device="opencl")
    assert _loop(opencl_executables[-1]).block == RING
    assert len(calls) == s
    np.testing.assert_array_equal(w.numpy(), expected)


@pytest.mark.parametrize("kw", [dict(dropout=True), dict(feeder=True)],
                         ids=["random draws", "feeder"])
def test_no_block_where_the_host_works_each_iteration(kw, opencl_executables):
    """Random draws need each iteration's words written by the host, a Feeder its value:
    one launch per iteration."""
    _run(3, "opencl", **kw)
    assert all(lp.block == 0 for lp in _loops(opencl_executables[-1].steps))


def test_a_profiled_run_times_each_iteration(opencl_executables):
    """``profile=True`` records one launch per iteration (per-kernel device times stay
    per iteration): no blocks then."""
    steps = RING + 3
    got = []
    _program(steps, lambda *a: got.append(a))
    ad.execute(device="opencl", profile=True)
    exe = opencl_executables[-1]
    lp = _loop(exe)
    assert lp.block == RING and len(got) == steps
    assert exe.stats["kernel_us"][lp.body[0].name][0] == steps
