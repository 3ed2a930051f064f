"""Control flow and host callbacks on the CUDA device, without a GPU.

Every program of the control-flow tests that run on the OpenCL device
(tests/graph/test_control_{if,index,while,scan,checkpoint}.py: loop indices, ``ir_if``
decided on the device and on the host, ``ir_while``, scans, checkpoints) and the
``host_callback`` programs of tests/graph/test_host_callback.py:

* run with ``execute(device="cuda")`` on :class:`cuda_host.HostDriver` (the generated CUDA
  program compiled for the CPU, the CUDA host loop unchanged): each test's own checks
  (values, gradients and parameters against PyTorch or the numpy reference, Receiver
  order, ``CallbackError`` naming the callback and iteration, parameters of the last
  completed iteration) hold on the CUDA device;
* compiled by NVRTC to CUBIN for ``sm_80`` and ``sm_90``, all in one translation unit
  (test_cuda_compile.py's check: no warnings, registers and shared memory within the
  architecture's limits).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("cuda.bindings.driver", reason="the cuda device needs the [cuda] extra")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "graph"))

import cuda_host  # noqa: E402
import cuda_programs  # noqa: E402

import autodiff as ad  # noqa: E402
from autodiff.device.cuda import driver, nvrtc  # noqa: E402

MODULES = ["test_control_if", "test_control_index", "test_control_while",
           "test_control_scan", "test_control_checkpoint", "test_host_callback"]
#: how a test function names the device it runs on: argument -> its CUDA value
DEVICE_ARGS = {"path": ("cuda", {}), "options": {"device": "cuda"}}


def _device_tests() -> list:
    """``(id, function, keyword arguments)`` of every test of :data:`MODULES` that takes a
    device (a ``path``, ``options`` or ``device`` argument), the device set to CUDA, one per
    parametrization of its other arguments."""
    import importlib
    import inspect
    out = []
    for mod in MODULES:
        m = importlib.import_module(mod)
        for name, fn in sorted(vars(m).items()):
            if not name.startswith("test_") or not callable(fn):
                continue
            args = inspect.signature(fn).parameters
            if not any(a in args for a in ("path", "options", "device")):
                continue
            seen = set()
            for kw in cuda_programs._cases(fn):
                if "device" in args:
                    kw.update(device="cuda", ir="graph")
                for a, v in DEVICE_ARGS.items():
                    if a in args:
                        kw[a] = v
                key = repr(sorted(kw.items()))
                if key not in seen:
                    seen.add(key)
                    out.append((f"{mod[5:]}.{name}[{len(seen) - 1}]", fn, kw))
    return out


CASES = _device_tests()


@pytest.fixture
def host(monkeypatch):
    """The CUDA device on :class:`cuda_host.HostDriver` (NVRTC replaced by the source)."""
    if cuda_host.gxx():
        pytest.skip(cuda_host.gxx())
    fake = cuda_host.HostDriver()
    driver.init.cache_clear()
    driver.devices.cache_clear()
    monkeypatch.setattr(driver, "bindings", lambda: fake)
    monkeypatch.setattr(nvrtc, "compile", cuda_host.source_binary)
    yield fake
    driver.init.cache_clear()
    driver.devices.cache_clear()
    ad.reset()


def test_every_device_test_is_collected():
    names = {c[0].split("[")[0] for c in CASES}
    assert len(names) >= 20
    for want in ("control_if.test_nested_branches", "control_while.test_max_iterations_bounds_"
                 "the_loop", "control_index.test_index_is_the_range_value",
                 "host_callback.test_a_failing_callback_names_it_and_the_iteration"):
        assert want in names


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_runs_on_the_cuda_host_loop(host, case):
    _, fn, kw = case
    ad.reset()
    fn(**kw)
    assert host.calls.get("cuGraphLaunch", 0) > 0


def test_branch_decisions_where_they_belong(host):
    """A kernel-only branch on a device flag is guarded kernels in the iteration's one
    graph (no read-back); a branch on the loop index is decided on the host (no read-back
    either); a branch with a Receiver on a device flag costs one 4-byte read-back."""
    from autodiff.device.cuda import control, program
    w = ad.Tensor(np.ones(3, np.float32))
    seen = []

    def step(i):
        w.add_(ad.tensor(np.full(3, 0.5, np.float32)))
        ad.ir_if(w.sum() > 6.0, lambda: w.mul_(ad.tensor(np.full(3, 0.5, np.float32))))
        ad.ir_if(i % 2 == 0, lambda: w.add_(w * 0.1))
        ad.ir_if(w.sum() > 4.0, lambda: ad.Receiver(lambda v: seen.append(float(v)),
                                                    [w.sum()]))
    ad.ir_for(6, step)
    ad.execute(device="cuda")
    cuda_w, cuda_seen = w.numpy(), list(seen)
    steps = ad.runtime.TRACER.last.stages if hasattr(ad.runtime.TRACER.last, "stages") else None
    src = str(ad.runtime.TRACER.last.stages["cuda"])
    assert "if (!(" in src                      # guarded kernels: the device-decided branch
    ad.reset()
    seen.clear()
    w = ad.Tensor(np.ones(3, np.float32))
    ad.ir_for(6, step)
    ad.execute(device="numpy")
    np.testing.assert_allclose(cuda_w, w.numpy(), rtol=1e-6)
    np.testing.assert_allclose(cuda_seen, seen, rtol=1e-6)
    assert len(seen) >= 2
    del steps, control, program
