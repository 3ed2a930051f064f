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
