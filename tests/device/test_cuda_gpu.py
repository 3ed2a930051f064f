"""The CUDA device on a real GPU (``pytest -m cuda``; skipped, with what is missing, on
machines without an NVIDIA GPU and driver): the op suite, the random programs, W1 and the
6-layer transformer against the numpy reference within the OpenCL device's tolerances,
the control-flow and host-callback programs,
``examples/transformer.py --device cuda``, bad input behaving as on the other devices, and
the TVM device's ``target="cuda"``.
"""
from __future__ import annotations

import functools
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "opt"))

import cuda_programs  # noqa: E402
from cuda_programs import feeder, loop_program, sweep  # noqa: E402
from host_contract import (check_feeder_error, check_gather_out_of_range,  # noqa: E402
                           check_receiver_error)

import autodiff as ad  # noqa: E402
from autodiff.device.cuda import driver  # noqa: E402

WHY = driver.missing()
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(WHY is not None, reason=f"no GPU: {WHY}")]

ROOT = Path(__file__).resolve().parents[2]
RTOL, ATOL = 1e-5, 1e-6


@pytest.mark.parametrize("case", cuda_programs.op_suite_cases(), ids=lambda c: c[0])
def test_op_suite(case, monkeypatch):
    """Every op-suite case with ``check_op`` on the cuda device: against torch, float64
    finite differences and the numpy device (``DEVICE_RTOL``)."""
    import op_helper
    monkeypatch.setattr(op_helper, "DEVICE", "cuda")
    _, fn, kw = case
    fn(**kw)


@pytest.mark.parametrize("case", cuda_programs.control_cases(), ids=lambda c: c[0])
def test_control_flow_and_callbacks(case):
    """The control-flow and host-callback programs of test_cuda_control.py on the GPU:
    each test's own checks (against torch or the numpy device)."""
    _, fn, kw = case
    ad.reset()
    fn(**kw)


def test_random_programs():
    from hypothesis import HealthCheck, given, settings
    from opt_programs import assert_same, build, execute_graph, specs

    from autodiff.device import cuda
    from autodiff.opt import optimize

    @settings(max_examples=80, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(specs())
    def check(spec):
        prog = build(spec)
        ref = execute_graph(prog, prog.graph)
        got = execute_graph(prog, optimize(prog.graph), interpreter=cuda.compile)
        assert_same(ref, got, RTOL, ATOL, "cuda")
    check()


@pytest.mark.parametrize("device", ["cuda", "tvm-cuda"])
def test_op_sweep(device):
    ref, _ = sweep("numpy")
    if device == "tvm-cuda":
        pytest.importorskip("tvm", reason="the tvm device needs the [tvm] extra")
        got, report = sweep_on("tvm", target="cuda")
    else:
        got, report = sweep("cuda")
        st = report.stats["cuda"]
        assert st["device"] == driver.select().name and st["graphs"] >= 1
    for i, (r, g) in enumerate(zip(ref, got)):
        np.testing.assert_allclose(g, r, rtol=RTOL, atol=ATOL * max(1, np.abs(r).max()),
                                   err_msg=f"value {i}")


def sweep_on(device, **options):
    real = ad.execute
    ad.execute = functools.partial(real, **options)
    try:
        return sweep(device)
    finally:
        ad.execute = real


@pytest.mark.parametrize("dropout", [False, True], ids=["sgd", "dropout"])
def test_receivers_in_order(dropout):
    seen_ref, seen = [], []
    w = loop_program(12, feeder(), lambda l, w: seen_ref.append((float(l), w)), dropout)
    ad.execute(device="numpy")
    w_ref = w.numpy()
    ad.reset()
    w = loop_program(12, feeder(), lambda l, w: seen.append((float(l), w)), dropout)
    report = ad.execute(device="cuda")
    np.testing.assert_allclose([s[0] for s in seen], [s[0] for s in seen_ref], rtol=RTOL,
                               atol=ATOL)
    np.testing.assert_allclose(w.numpy(), w_ref, rtol=RTOL, atol=ATOL)
    assert report.stats["cuda"]["per_iteration"]["graph_launches"] == 1


def test_receiver_error_restores_last_completed_iteration():
    check_receiver_error("cuda")


def test_wrong_feeder_shape_keeps_last_completed_iteration():
    check_feeder_error("cuda")


def test_gather_out_of_range_raises():
    check_gather_out_of_range("cuda")


@pytest.mark.slow
def test_w1_linear_1000_steps_matches_numpy():
    from example_loader import load_example
    ex = load_example("linear")
    runs = {}
    for dev in ("numpy", "cuda"):
        net = ex.build()
        losses, _ = ex.train(net, steps=1000, device=dev)
        runs[dev] = np.asarray(losses), net.state_dict()
    (l_ref, s_ref), (l_gpu, s_gpu) = runs["numpy"], runs["cuda"]
    for k, ref in s_ref.items():
        np.testing.assert_allclose(s_gpu[k], ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    np.testing.assert_allclose(l_gpu, l_ref, rtol=1e-4, atol=1e-4 * np.abs(l_ref).max())


@pytest.mark.slow
def test_six_layer_transformer_matches_numpy():
    """bench W2 for 5 steps (where implementations agree to ~1e-6)."""
    from bench.workloads import run_autodiff, tiny_transformer
    w = tiny_transformer.WORKLOAD
    outs = {dev: run_autodiff.run(w, w.init(0), w.data(5), 5, dev) for dev in ("numpy", "cuda")}
    for k, ref in outs["numpy"].final.items():
        np.testing.assert_allclose(outs["cuda"].final[k], ref, rtol=1e-4,
                                   atol=1e-5 * max(1.0, np.abs(ref).max()), err_msg=k)


@pytest.mark.slow
def test_transformer_example_command_line():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "transformer.py"),
                          "--device", "cuda", "--steps", "20", "--eval-batches", "2",
                          "--sample-len", "8", "--plot", "", "--no-progress"],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "device cuda: " in out.stdout and "compute_capability" in out.stdout
    first = float(out.stdout.split("train loss: first ")[1].split(",")[0])
    assert math.isfinite(first) and "validation loss: before" in out.stdout
