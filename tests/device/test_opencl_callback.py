"""Host functions inside the program on the OpenCL device (:mod:`autodiff.device.opencl.
callback`): the operands' read is issued before the later backward kernels and the
function runs only at the write (overlap), results match the numpy device, and a stop
replays the recorded results instead of calling the function again."""
from __future__ import annotations

import numpy as np
import pytest

import autodiff as ad
from autodiff import nn
from autodiff.device import unavailable
from autodiff.graph.trace import no_grad

pytestmark = pytest.mark.skipif(unavailable("opencl") is not None,
                                reason=str(unavailable("opencl")))


def _two_buckets(calls: list, steps: int = 4):
    """A 2-layer MLP whose weight gradients go through one host function each, in the
    order their backward produces them (layer 2's first), like two DDP buckets."""
    ad.manual_seed(0)
    l1, l2 = nn.Linear(6, 16), nn.Linear(16, 3)
    xs = np.random.default_rng(1).standard_normal((steps, 5, 6)).astype(np.float32)
    feed = iter(xs)

    def host(name):
        def fn(g):
            calls.append(name)
            return g * 0.5
        return fn

    def step():
        x = ad.Feeder(lambda: next(feed), [5, 6], name="x")
        loss = l2(l1(x).tanh()).square().mean()
        loss.backward()
        with no_grad():
            for name, p in (("bucket0", l2.weight), ("bucket1", l1.weight)):
                g = ad.host_callback(host(name), [p.grad], p.shape, name=name)
                p.copy_(p - 0.1 * g)
    ad.ir_for(steps, step)
    return l1, l2


def test_the_read_is_issued_before_the_later_backward_and_the_call_waits_for_it():
    calls: list = []
    l1, l2 = _two_buckets(calls)
    report = ad.execute(device="opencl")
    got = l1.weight.numpy(), l2.weight.numpy()
    assert calls == ["bucket0", "bucket1"] * 4
    body = [line for line in report.stats["opencl"]["callbacks"]
            if any(s.startswith("read bucket0") for s in line)][0]
    at = {s.split("#")[0]: i for i, s in enumerate(body) if s.startswith(("read", "write"))}
    # bucket0's read, then kernels (layer 1's backward: bucket1's gradient), then bucket1's
    # read, and only then bucket0's write (where the host calls its function)
    assert at["read bucket0"] < at["read bucket1"] < at["write bucket0"] < at["write bucket1"]
    between = body[at["read bucket0"] + 1:at["read bucket1"]]
    assert between and all(s.startswith("launch") for s in between), body
    assert report.stats["opencl"]["callback_wait_s"] >= 0
    assert report.stats["opencl"]["callback_host_s"] > 0
    calls.clear()
    l1, l2 = _two_buckets(calls)
    ad.execute(device="numpy")
    np.testing.assert_allclose(got[0], l1.weight.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], l2.weight.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("device", ["numpy", "opencl"])
def test_a_stop_after_a_checkpoint_replays_the_recorded_results(device):
    """The function's result depends on how often it was called: a replay that called it
    again would change the parameters (and the call count)."""
    calls = []
    w = ad.Tensor(np.zeros(5, np.float32))

    def host(a):
        calls.append(1)
        if len(calls) == 71:                # iteration 70: after the checkpoint at 64
            raise ValueError("stop here")
        return (a + len(calls)).astype(np.float32)

    def step():
        v = ad.host_callback(host, [w * 0.5], (5,), name="counter")
        w.copy_(v)
    ad.ir_for(100, step)
    with pytest.raises(ad.CallbackError, match="Callback 'counter' in iteration 70"):
        ad.execute(device=device, prefetch=0)
    assert len(calls) == 71
    want = np.zeros(5, np.float32)
    for k in range(70):
        want = (want * np.float32(0.5) + np.float32(k + 1)).astype(np.float32)
    np.testing.assert_array_equal(w.numpy(), want)
