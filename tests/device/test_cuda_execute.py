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


def _sweep(dev):
    """Many ops forward and backward in one program (the OpenCL device test's sweep)."""
    rng = np.random.default_rng(3)
    a = ad.Tensor(rng.uniform(0.5, 2.0, (3, 5)), requires_grad=True)
    b = ad.Tensor(rng.uniform(-1.0, 1.0, (5, 19)), requires_grad=True)
    c = ad.Tensor(rng.uniform(-1.0, 1.0, (19,)), requires_grad=True)
    h = (a @ b + c)
    outs = [h.relu(), h.sigmoid(), h.tanh(), h.exp() * 0.1, a.log(), a.sqrt(),
            a.rsqrt(), a.reciprocal(), h.sin(), h.cos(), h.abs(), h.erf(),
            h.maximum(h * 0.5), h.minimum(h.T.T * 0.25), (h > 0.1).float() * h,
            ad.where(h > 0, h, h * 0.01), a ** 2, a.pow(1.5), h.softmax(-1),
            h.log_softmax(-1), h.sum(0), h.amax(-1), h.mean(), h.permute(1, 0) * 2.0,
            h[:, 2:11] * 3.0, ad.concat([h, a], dim=1), h.reshape(19, 3).sum(1),
            ad.matmul(h.T, h), ad.matmul(h.reshape(1, 3, 19), h.reshape(1, 19, 3)),
            ad.Tensor(rng.standard_normal((80, 19))) @ h.T]     # B packed (transposed)
    loss = sum((o * o).sum() if i % 2 else o.sum() for i, o in enumerate(outs))
    loss.backward()
    report = ad.execute(device=dev)
    return [o.numpy() for o in outs] + [loss.numpy(), a.grad.numpy(), b.grad.numpy(),
                                        c.grad.numpy()], report


def test_op_sweep_matches_numpy(host):
    ref, _ = _sweep("numpy")
    got, report = _sweep("cuda")
    for i, (r, g) in enumerate(zip(ref, got)):
        np.testing.assert_allclose(g, r, rtol=RTOL, atol=ATOL * max(1, np.abs(r).max()),
                                   err_msg=f"value {i}")
    st = report.stats["cuda"]
    assert st["device"] == "Host emulation" and st["compute_capability"] == "9.0"
    assert st["kernels"] >= 20 and st["graphs"] == 1 and "memory" in report.stats
    assert host.calls["cuGraphLaunch"] == 1
    src = str(ad.runtime.TRACER.last.stages["cuda"])
    assert "__syncthreads();" in src and 'extern "C" __global__' in src


def _loop_program(steps, feed, recv, dropout=False):
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


def _feeder():
    k = [0]

    def feed():
        k[0] += 1
        return np.full((2, 3), 0.1 * k[0], np.float32)
    return feed


@pytest.mark.parametrize("dropout", [False, True], ids=["sgd", "dropout"])
def test_receivers_in_order_one_graph_launch_per_iteration(host, dropout):
    """12 SGD steps; with dropout the masks (Philox, iteration words written by a one-thread
    kernel before each graph) are bit-identical to the numpy reference's."""
    seen_ref, seen = [], []
    w = _loop_program(12, _feeder(), lambda l, w: seen_ref.append((float(l), w)), dropout)
    ad.execute(device="numpy")
    w_ref = w.numpy()
    ad.reset()
    w = _loop_program(12, _feeder(), lambda l, w: seen.append((float(l), w)), dropout)
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


def _state_after(steps):
    w = _loop_program(steps, _feeder(), lambda *a: None)
    ad.execute(device="numpy")
    out = w.numpy()
    ad.reset()
    return out


def test_receiver_error_restores_last_completed_iteration():
    expected = _state_after(5)

    def recv(loss, w):
        recv.n += 1
        if recv.n == 6:
            raise ValueError("stop")
    recv.n = 0
    w = _loop_program(12, _feeder(), recv)
    with pytest.raises(ad.ReceiverError, match="iteration 5") as e:
        ad.execute(device="cuda")
    assert isinstance(e.value.__cause__, ValueError)
    np.testing.assert_allclose(w.numpy(), expected, rtol=RTOL, atol=ATOL)


def test_wrong_feeder_shape_keeps_last_completed_iteration():
    expected = _state_after(3)
    good = _feeder()

    def feed():
        feed.n += 1
        return good() if feed.n <= 3 else np.zeros((3, 3), np.float32)
    feed.n = 0
    w = _loop_program(8, feed, lambda *a: None)
    with pytest.raises(ad.FeederError, match="iteration 3"):
        ad.execute(device="cuda")
    np.testing.assert_allclose(w.numpy(), expected, rtol=RTOL, atol=ATOL)


def test_gather_out_of_range_raises():
    table = ad.Tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    idx = ad.Tensor(np.array([1, 7], np.int32))
    out = table[idx] * 1.0
    with pytest.raises(IndexError):
        ad.execute(device="cuda")
    del out


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
