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

import cuda_host  # noqa: E402
import cuda_programs  # noqa: E402

import autodiff as ad  # noqa: E402

CASES = cuda_programs.control_cases()


@pytest.fixture
def host(monkeypatch):
    """The CUDA device on :class:`cuda_host.HostDriver` (NVRTC replaced by the source)."""
    if cuda_host.gxx():
        pytest.skip(cuda_host.gxx())
    yield cuda_host.install(monkeypatch)
    cuda_host.uninstall()
    ad.reset()


def test_every_device_test_is_collected():
    names = {c[0].split("[")[0] for c in CASES}
    assert len(names) >= 20
    for want in ("control_if.test_nested_branches", "control_while.test_max_iterations_bounds_"
                 "the_loop", "control_index.test_index_is_the_range_value",
                 "host_callback.test_a_failing_callback_names_it_and_the_iteration"):
        assert want in names


#: cases whose run on the CPU stand-in takes long (many-block reductions run thread by
#: thread): end-to-end, marked slow
SLOW = ("control_checkpoint.", "control_scan.")


#: cases compiled (test_cuda_compile.py) but not run on the stand-in: the checkpointed
#: 6-block training takes about 40 s there and runs the same kernel templates as the
#: checkpointed scan above it
NOT_RUN = ("control_checkpoint.test_training_with_checkpointed_blocks_matches_torch",)
RUN = [c for c in CASES if not c[0].startswith(NOT_RUN)]


@pytest.mark.parametrize("case", [pytest.param(c, marks=[pytest.mark.slow]
                                               if c[0].startswith(SLOW) else [])
                                  for c in RUN], ids=[c[0] for c in RUN])
def test_runs_on_the_cuda_host_loop(host, case):
    _, fn, kw = case
    ad.reset()
    fn(**kw)
    assert host.calls.get("cuGraphLaunch", 0) > 0


def _program(dev):
    """Three branches in a loop: kernels only on a device flag, kernels only on the loop
    index, a Receiver on a device flag; and a while loop on a device flag after it."""
    w = ad.Tensor(np.ones(3, np.float32), name="w")
    seen = []

    def step(i):
        w.add_(ad.tensor(np.full(3, 0.5, np.float32)))
        ad.ir_if(w.sum() > 6.0, lambda: w.mul_(ad.tensor(np.full(3, 0.5, np.float32))))
        ad.ir_if(i % 2 == 0, lambda: w.add_(w * 0.1))
        ad.ir_if(w.sum() > 4.5, lambda: ad.Receiver(lambda v, k: seen.append((float(v), int(k))),
                                                    [w.sum(), i]))
    ad.ir_for(6, step)
    ad.ir_while(lambda: w.sum() < 40.0, lambda: w.mul_(ad.tensor(np.full(3, 1.5, np.float32))),
                max_iterations=50)
    ad.execute(device=dev)
    return w.numpy(), seen


def test_branch_decisions_where_they_belong(host):
    """A kernel-only branch on a device flag is guarded kernels inside the iteration's
    graph; a branch on the loop index is decided on the host from its counters; a branch
    with a Receiver reads its flag back; values and Receiver calls as on numpy."""
    from autodiff.device.cuda import control, program
    from autodiff.device.cuda.launch import ARCH
    from autodiff.procedural.ir import IndexValue
    w_ref, seen_ref = _program("numpy")
    ad.reset()
    w, seen = _program("cuda")
    np.testing.assert_allclose(w, w_ref, rtol=1e-6, atol=1e-6)
    assert [k for _, k in seen] == [k for _, k in seen_ref] and len(seen) >= 2
    np.testing.assert_allclose([v for v, _ in seen], [v for v, _ in seen_ref], rtol=1e-6)
    r = program.render(ad.runtime.TRACER.last.optimized, ARCH["sm_90"])
    loop, = [st for st in r.steps if type(st) is program.Loop]
    branches = [st for st in loop.body if type(st) is control.IfStep]
    assert [isinstance(b.cond, IndexValue) for b in branches] == [True, False]
    assert any(type(st) is control.WhileStep for st in r.steps)
    assert "if (!((" in r.source                # the kernels of the device-decided branch
    assert r.counters                           # the Receiver's ``i`` is a counter read
    host_reads = host.calls["cuStreamSynchronize"]
    assert host_reads >= len(seen) + 6


def test_loop_index_in_kernels_is_a_counter_in_the_arena(host):
    """``X[i % 3]`` and ``i`` as a value: kernels read the counters the one-thread kernel
    writes before the graph of each iteration (nested loops: both counters)."""
    from autodiff.device.cuda import program
    from autodiff.device.cuda.launch import ARCH

    def prog(dev):
        X = ad.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
        w = ad.Tensor(np.zeros(4, np.float32))

        def outer(i):
            ad.ir_for(range(1, 7, 2), lambda j: w.add_(X[i % 3] * j.float() + i.float()))
        ad.ir_for(4, outer)
        ad.execute(device=dev)
        return w.numpy()
    ref = prog("numpy")
    ad.reset()
    got = prog("cuda")
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    r = program.render(ad.runtime.TRACER.last.optimized, ARCH["sm_90"])
    assert r.counters and f"void __launch_bounds__(1) {r.counters}(" in r.source
    assert host.calls["cuLaunchKernel"] >= 4 * 3        # the counters, once per iteration


def _callback_program(dev):
    """A host callback inside a loop, on the loop index, with a Receiver after it."""
    w = ad.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    seen = []

    def step(i):
        v = ad.host_callback(lambda a: (a.sum(0) * 2).astype(np.float32),
                             [w * (i.float() + 1)], (3,), name="colsum")
        ad.Receiver(lambda x: seen.append(x), [v + 1])
        w.add_(v.reshape(1, 3) * 0.01)
    ad.ir_for(3, step)
    ad.execute(device=dev)
    return w.numpy(), seen


def test_callback_program_matches_numpy(host):
    w_ref, seen_ref = _callback_program("numpy")
    ad.reset()
    w, seen = _callback_program("cuda")
    np.testing.assert_allclose(w, w_ref, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.stack(seen), np.stack(seen_ref), rtol=1e-6, atol=1e-6)
    per = ad.runtime.TRACER.last.report.stats["cuda"]["per_iteration"]
    assert per["graph_launches"] == 2           # the callback's end splits the iteration


def test_samples_compile_for_sm80_and_sm90():
    """The branch/while/counter program and the callback program above, compiled by NVRTC
    to CUBIN for sm_80 and sm_90: no warnings (test_cuda_compile.py compiles every
    control-flow program, marked slow)."""
    pytest.importorskip("cuda.bindings.nvrtc", reason="needs the [cuda] extra")
    from autodiff.device.cuda import build
    graphs = cuda_programs.recorded(lambda: (_program("cuda"), ad.reset(),
                                             _callback_program("cuda")))
    assert len(graphs) == 2
    for g in graphs:
        for arch in ("sm_80", "sm_90"):
            rendered, binary = build(g, arch)
            assert binary.kind == "cubin" and binary.image[:4] == b"\x7fELF", arch
            assert not binary.warnings, f"{arch}: " + "\n".join(binary.warnings)
            assert set(rendered.kernels) <= set(binary.resources)
