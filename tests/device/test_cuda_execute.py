"""``execute(device="cuda")`` end to end without a GPU: the CUDA device's host loop drives
:class:`cuda_host.HostDriver`, which runs the generated CUDA program compiled for the CPU
(the CUDA dialect of the kernel templates, the prelude, block wrappers, tree reductions with
real barriers, captured graphs replayed). Values are checked against the numpy reference
device, as the OpenCL device is checked on PoCL: an op sweep forward and backward, SGD
loops, Feeder/Receiver order, nested loops with Feeders inside, dropout bit-identical, and
bad input (wrong Feeder shape, Receiver raising, out-of-range gather) behaving as on the
numpy and OpenCL devices. NVRTC's side is checked in test_cuda_compile.py; on a GPU,
test_cuda_gpu.py runs the same programs for real.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.driver", reason="the cuda device needs the [cuda] extra")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import cuda_host  # noqa: E402
from cuda_programs import feeder, loop_program, sweep  # noqa: E402
from host_contract import (check_feeder_error, check_gather_out_of_range,  # noqa: E402
                           check_receiver_error)

import autodiff as ad  # noqa: E402
from autodiff.device.cuda import driver, nvrtc  # noqa: E402

if cuda_host.gxx():
    pytest.skip(cuda_host.gxx(), allow_module_level=True)

RTOL, ATOL = 1e-5, 1e-6


@pytest.fixture(autouse=True)
def host(monkeypatch):
    """The CUDA device on :class:`cuda_host.HostDriver` (NVRTC replaced by the source)."""
    fake = cuda_host.HostDriver()
    driver.init.cache_clear()
    driver.devices.cache_clear()
    monkeypatch.setattr(driver, "bindings", lambda: fake)
    monkeypatch.setattr(nvrtc, "compile", cuda_host.source_binary)
    yield fake
    driver.init.cache_clear()
    driver.devices.cache_clear()


def test_op_sweep_matches_numpy(host):
    ref, _ = sweep("numpy")
    got, report = sweep("cuda")
    for i, (r, g) in enumerate(zip(ref, got)):
        np.testing.assert_allclose(g, r, rtol=RTOL, atol=ATOL * max(1, np.abs(r).max()),
                                   err_msg=f"value {i}")
    st = report.stats["cuda"]
    assert st["device"] == "Host emulation" and st["compute_capability"] == "9.0"
    assert st["kernels"] >= 20 and st["graphs"] == 1 and "memory" in report.stats
    assert host.calls["cuGraphLaunch"] == 1
    src = str(ad.runtime.TRACER.last.stages["cuda"])
    assert "__syncthreads();" in src and 'extern "C" __global__' in src


@pytest.mark.parametrize("dropout", [False, True], ids=["sgd", "dropout"])
def test_receivers_in_order_one_graph_launch_per_iteration(host, dropout):
    """12 SGD steps; with dropout the masks (Philox, iteration words written by a one-thread
    kernel before each graph) are bit-identical to the numpy reference's."""
    seen_ref, seen = [], []
    w = loop_program(12, feeder(), lambda l, w: seen_ref.append((float(l), w)), dropout)
    ad.execute(device="numpy")
    w_ref = w.numpy()
    ad.reset()
    w = loop_program(12, feeder(), lambda l, w: seen.append((float(l), w)), dropout)
    report = ad.execute(device="cuda")
    assert len(seen) == 12
    np.testing.assert_allclose([s[0] for s in seen], [s[0] for s in seen_ref], rtol=RTOL,
                               atol=ATOL)
    for (_, a), (_, b) in zip(seen, seen_ref):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(w.numpy(), w_ref, rtol=RTOL, atol=ATOL)
    st = report.stats["cuda"]
    assert st["per_iteration"]["graph_launches"] == 1
    assert host.calls["cuGraphLaunch"] == 12
    assert st["steady_iteration_ms"] > 0 and st["first_iteration_s"] > 0


def test_receiver_error_restores_last_completed_iteration():
    check_receiver_error("cuda")


def test_wrong_feeder_shape_keeps_last_completed_iteration():
    check_feeder_error("cuda")


def test_gather_out_of_range_raises():
    check_gather_out_of_range("cuda")


def test_nested_loops_with_feeders_inside(host):
    """An outer loop whose body runs an inner loop with a Feeder and a Receiver: segments
    before, inside and after the inner loop; values as on the numpy device."""
    def prog(dev):
        w = ad.Tensor(np.ones((3,), np.float32), name="w")
        got, k = [], [0]

        def feed():
            k[0] += 1
            return np.full((3,), k[0], np.float32)

        def outer():
            w.add_(ad.Tensor(np.full((3,), 0.5, np.float32)))

            def inner():
                x = ad.Feeder(feed, shape=[3])
                w.mul_(ad.Tensor(np.full((3,), 0.9, np.float32)))
                ad.Receiver(lambda v: got.append(v), [(w * x).sum()])
            ad.ir_for(range(3), inner)
            w.add_(w * 0.1)
        ad.ir_for(range(4), outer)
        ad.execute(device=dev)
        return got, w.numpy()
    got_ref, w_ref = prog("numpy")
    ad.reset()
    got, w = prog("cuda")
    np.testing.assert_allclose(np.ravel(got), np.ravel(got_ref), rtol=RTOL)
    np.testing.assert_allclose(w, w_ref, rtol=RTOL)
    per = ad.runtime.TRACER.last.report.stats["cuda"]["per_iteration"]
    assert per["graph_launches"] == 2 + 3 and per["copies"] == 3 * 2


@pytest.mark.parametrize("shape", [(3, 1000), (37, 5), (2, 3, 129)],
                         ids=["long-rows", "short-rows", "3d"])
def test_tree_reductions_with_warp_shuffles_match_numpy(host, shape):
    """Sums, maxima, means and softmax over rows longer than a block, shorter than a warp
    and in between: every row one block whose tree in shared memory stops at two warps'
    partials and finishes with ``__shfl_down_sync`` (emulated on the CPU by the host
    driver), against the numpy reference."""
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)

    def prog(dev):
        t = ad.Tensor(x, requires_grad=True)
        outs = [t.sum(-1), t.amax(-1), t.mean(0), t.softmax(-1), t.amax()]
        (outs[0].sum() + (outs[3] * outs[3]).sum()).backward()
        ad.execute(device=dev)
        return [o.numpy() for o in outs] + [t.grad.numpy()]
    ref = prog("numpy")
    ad.reset()
    got = prog("cuda")
    src = str(ad.runtime.TRACER.last.stages["cuda"])
    assert src.count("__shfl_down_sync(0xffffffffu, s, o)") >= 4
    for i, (g, r) in enumerate(zip(got, ref)):
        np.testing.assert_allclose(g, r, rtol=RTOL, atol=ATOL * max(1, np.abs(r).max()),
                                   err_msg=f"value {i}")


@pytest.mark.parametrize("kind", ["feeders", "host_functions"])
def test_staging_returns_to_the_pool_only_after_its_write(host, monkeypatch, kind):
    """Outside any recorded loop, more values staged than ``STAGING_UNRECORDED`` (Feeders,
    host-function results): every pinned array returned to the pool was written to the
    device since it was taken (released before its write, the next value staged in it
    went out in its place: the race the OpenCL device's collectives showed), and the
    values arrive."""
    from autodiff.device.cuda import runtime as R
    written, taken, early, released = set(), [], [], []
    real_take, real_all, real_write = R.Staging.take, R.Staging.release_all, \
        R.Executable._write

    def take(self, shape, dtype):
        a = real_take(self, shape, dtype)
        taken.append(R._ptr(a))
        written.discard(R._ptr(a))
        return a

    def release_all(self):
        early.extend(p for p in taken if p not in written)
        released.append(len(taken))
        taken.clear()
        return real_all(self)

    def write(self, offset, a, base=None):
        written.add(R._ptr(a))
        return real_write(self, offset, a, base)
    monkeypatch.setattr(R.Staging, "take", take)
    monkeypatch.setattr(R.Staging, "release_all", release_all)
    monkeypatch.setattr(R.Executable, "_write", write)
    n = R.STAGING_UNRECORDED + 8
    xs = np.random.default_rng(7).standard_normal((n, 5)).astype(np.float32)
    ad.reset()
    if kind == "feeders":
        got = []
        for i in range(n):
            x = ad.Feeder(lambda i=i: xs[i], [5], name=f"x{i}")
            ad.Receiver(lambda v: got.append(float(v)), [x.sum()], name=f"r{i}")
        ad.execute(device="cuda")
        np.testing.assert_allclose(got, xs.sum(1), rtol=RTOL, atol=ATOL)
    else:
        outs = [ad.host_callback(lambda v, k=k: v * (k + 1), [ad.tensor(xs[k]) * 1], (5,),
                                 name=f"h{k}") * 1 for k in range(n)]
        ad.execute(device="cuda")
        for k, t in enumerate(outs):
            np.testing.assert_allclose(t.numpy(), xs[k] * (k + 1), rtol=RTOL, atol=ATOL)
    assert early == [], f"{len(early)} arrays back in the pool before their write"
    assert sum(released) >= n, released        # every staged array was looked at


@pytest.mark.parametrize("where", ["receiver", "feeder"])
@pytest.mark.parametrize("at", [0, 5, 11])
def test_keyboard_interrupt_in_a_callback_keeps_one_completed_iteration(host, where, at):
    """A callback raising ``KeyboardInterrupt`` in iteration ``at`` of 12: the run stops
    with ``ExecutionInterrupted`` naming ``at`` completed iterations, and the variables
    hold exactly their values after them (the checkpoint restored and replayed, as on the
    other devices), whatever was in flight."""
    from host_contract import loop_program, state_after

    from autodiff.errors import ExecutionInterrupted
    expected = state_after(at)
    good = feeder()
    calls = {"feed": 0, "recv": 0}

    def feed():
        calls["feed"] += 1
        if where == "feeder" and calls["feed"] == at + 1:
            raise KeyboardInterrupt
        return good()

    def recv(loss, w):
        calls["recv"] += 1
        if where == "receiver" and calls["recv"] == at + 1:
            raise KeyboardInterrupt
    w = loop_program(12, feed, recv)
    with pytest.raises(ExecutionInterrupted) as info:
        ad.execute(device="cuda")
    e = info.value
    assert e.completed == at and f"after {at} completed iteration" in str(e), str(e)
    np.testing.assert_allclose(w.numpy(), expected, rtol=RTOL, atol=ATOL)
    assert e.feeder_calls == calls["feed"] - at


def test_ctrl_c_in_a_loop_without_callbacks_ends_on_a_launched_iteration(host, monkeypatch):
    """Ctrl-C while a loop without callbacks launches (here: during the 4th graph launch):
    deferred to the end of that iteration's launches, which then complete; the variables
    hold the values after the iterations launched, and the error names them."""
    import _thread

    from autodiff.errors import ExecutionInterrupted
    launches = [0]
    real = host.cuGraphLaunch

    def launch(*a):
        launches[0] += 1
        if launches[0] == 4:
            _thread.interrupt_main()
        return real(*a)
    monkeypatch.setattr(host, "cuGraphLaunch", launch)
    w = ad.Tensor(np.ones(3, np.float32), name="w")

    def body():
        w.sub_(ad.Tensor(np.full(3, 0.5, np.float32)))
    ad.ir_for(10, body)
    with pytest.raises(ExecutionInterrupted) as info:
        ad.execute(device="cuda")
    k = info.value.completed
    assert k is not None and 1 <= k < 10, str(info.value)
    np.testing.assert_array_equal(w.numpy(), np.full(3, 1 - 0.5 * k, np.float32))
    assert f"after {k} completed iteration" in str(info.value)
