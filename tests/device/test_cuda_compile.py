"""Every program the suite builds for the other devices, rendered in the CUDA dialect and
compiled by NVRTC to CUBIN for ``sm_80`` and ``sm_90`` (no GPU, no driver needed): no
warnings, and every kernel's registers and shared memory (ptxas' report) within what the
architecture allows for the block it is launched with.

Cost: NVRTC spends 0.2-4 s per register-tiled matmul kernel with a fused epilogue (an
AdamW epilogue is 8 rows x 16 lanes of scalar code), so programs are compiled in batches
(one translation unit per family, kernel names prefixed per program), both architectures
at once in two worker processes, and each distinct source only once: the binaries are
cached on disk by source hash (``~/.cache/autodiff/cuda``), where the device itself caches
them. Cold, measured on the 2-core machine under a load of ~9: op suite 88 s, random
programs 91 s, examples 97 s, and (marked slow) the char-LM 557 s and the 6-layer
transformer 244 s; about a quarter of that on an idle machine. Warm, each takes the few
seconds of tracing and rendering.
"""
from __future__ import annotations

import concurrent.futures
import multiprocessing
import sys
from pathlib import Path

import pytest

pytest.importorskip("cuda.bindings.nvrtc", reason="the CUDA compile checks need the [cuda] "
                    "extra (cuda-bindings, nvidia-cuda-nvrtc)")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import cuda_programs  # noqa: E402
from example_loader import load_example  # noqa: E402

from autodiff.device.cuda import nvrtc, prelude, program  # noqa: E402
from autodiff.graph.ir import Op  # noqa: E402
from autodiff.device.cuda.launch import ARCH  # noqa: E402

ARCHS = ("sm_80", "sm_90")
ROOT = Path(__file__).resolve().parents[2]

#: random programs compiled (the OpenCL device test runs the same first 80)
RANDOM_PROGRAMS = 80


@pytest.fixture(scope="module")
def pool():
    """Two worker processes: one NVRTC compile per architecture at a time."""
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(len(ARCHS), mp_context=ctx) as ex:
        yield ex


def _unit(graphs: list, tag: str) -> tuple[str, list]:
    """One translation unit holding every program of ``graphs`` (kernel names prefixed
    ``{tag}{i}_``), and the rendered programs."""
    rendered = [program.render(g, ARCH["sm_90"], prefix=f"{tag}{i}_")
                for i, g in enumerate(graphs)]
    tail = prelude.TAIL
    head = program.program([])[:-len(tail)]
    body = [r.source[len(head):-len(tail)] for r in rendered]
    return head + "\n".join(body) + tail, rendered


def _check(pool, graphs: list, tag: str) -> dict:
    """Compile ``graphs`` as one unit for every architecture and check the report.
    Returns arch -> Binary."""
    assert graphs, "no program collected"
    src, rendered = _unit(graphs, tag)
    futures = {arch: pool.submit(nvrtc.compile, src, arch) for arch in ARCHS}
    out = {}
    for arch, fut in futures.items():
        binary = fut.result()
        limits = ARCH[arch]
        assert binary.kind == "cubin" and binary.image[:4] == b"\x7fELF", arch
        assert not binary.warnings, f"{arch}: NVRTC warnings:\n" + "\n".join(binary.warnings)
        res = binary.resources
        for r in rendered:
            for name, launch in r.kernels.items():
                assert name in res, f"{arch}: no ptxas report for kernel {name}"
                k = res[name]
                threads = launch.geometry.threads
                assert 0 < k.registers <= limits.max_registers, (arch, name, k)
                assert k.registers * threads <= limits.registers, (arch, name, k, threads)
                assert threads <= limits.max_threads, (arch, name, threads)
                assert k.shared <= limits.max_shared, (arch, name, k)
        out[arch] = binary
    return out


def test_op_suite_compiles_for_sm80_and_sm90(pool):
    graphs = cuda_programs.op_suite()
    assert len(graphs) >= 200               # every parametrization of tests/graph/test_ops.py
    _check(pool, graphs, "o")


def test_random_programs_compile_for_sm80_and_sm90(pool):
    graphs = cuda_programs.random_programs(RANDOM_PROGRAMS)
    assert len(graphs) >= RANDOM_PROGRAMS // 2
    _check(pool, graphs, "r")


def test_examples_compile_for_sm80_and_sm90(pool):
    """examples/linear.py (W1's network) and examples/digits.py, their every program."""
    linear, digits = load_example("linear"), load_example("digits")
    graphs = cuda_programs.recorded(lambda: linear.train(linear.build(), 2, "cuda"))
    graphs += cuda_programs.recorded(lambda: digits.main(["--device", "cuda", "--epochs", "1"]))
    assert len(graphs) >= 3
    _check(pool, graphs, "e")


def test_tree_reductions_with_warp_shuffles_compile_for_sm80_and_sm90(pool):
    """Sums and maxima render as work-group trees in shared memory that finish their last
    32 lanes with ``__shfl_down_sync`` (no barrier after the last shared step): NVRTC
    compiles them with no warnings; values are checked in test_cuda_execute.py."""
    import numpy as np

    import autodiff as ad

    def prog():
        x = ad.Tensor(np.random.default_rng(0).standard_normal((7, 300)).astype(np.float32),
                      requires_grad=True)
        (x.amax(-1).sum() + x.softmax(-1).sum(0).sum() + x.mean()).backward()
        ad.execute(device="cuda")
    graphs = cuda_programs.recorded(prog)
    binaries = _check(pool, graphs, "t")
    src = program.render(graphs[0], ARCH["sm_90"]).source
    assert src.count("__shfl_down_sync(0xffffffffu, s, o)") >= 3
    for kernel in src.split('extern "C" __global__')[1:]:
        if "__shfl_down_sync" in kernel:      # the warp's steps need no barrier
            assert "__syncthreads" not in kernel.split("__shfl_down_sync")[1]
    assert set(binaries) == set(ARCHS)


@pytest.mark.slow
def test_control_flow_programs_compile_for_sm80_and_sm90(pool):
    """The programs of the control-flow and host-callback tests (loop indices, branches
    decided on the device and on the host, while loops, scans, checkpoints, CALLBACK):
    :func:`cuda_programs.control_programs`, run on the CUDA host loop by
    test_cuda_control.py. Slow: 35 programs, about 80 s of NVRTC on a cold binary cache
    (test_cuda_control.py compiles a small program of each kind in the fast suite)."""
    graphs = cuda_programs.control_programs()
    assert len(graphs) >= 25
    _check(pool, graphs, "f")


@pytest.mark.slow
def test_charlm_example_compiles_for_sm80_and_sm90(pool):
    """examples/transformer.py at its defaults (bench W5): training (with its in-loop
    validation, an ``ir_if`` on the loop index holding a Receiver), validation and
    sampling programs."""
    ex = load_example("transformer")
    graphs = cuda_programs.recorded(lambda: ex.main(
        ["--device", "cuda", "--steps", "2", "--eval-every", "1", "--eval-batches", "1",
         "--sample-len", "2", "--plot", "", "--no-progress"]))
    assert len(graphs) >= 3
    assert any(n.op is Op.IF for g in graphs for n in g.walk())     # the validation branch
    _check(pool, graphs, "c")


@pytest.mark.slow
def test_tiny_transformer_compiles_for_sm80_and_sm90(pool):
    """bench W2: the 6-layer post-LN encoder (379 kernels in one loop body)."""
    from bench.workloads import run_autodiff, tiny_transformer
    w = tiny_transformer.WORKLOAD
    graphs = cuda_programs.recorded(
        lambda: run_autodiff.run(w, w.init(0), w.data(2), 2, "numpy"))
    assert len(graphs) == 1
    _check(pool, graphs, "w")


def test_tvm_cuda_target_compiles_with_nvrtc_without_a_toolkit(monkeypatch):
    """The TVM device's ``target="cuda"``: the built module holds CUDA source, which TVM's
    runtime compiles when a GPU loads it, through its ``tvm_callback_cuda_compile`` (NVRTC
    via cuda-bindings, the [cuda] extra). That callback, run here as the runtime runs it,
    gives CUBINs for sm_80 and sm_90 with no nvcc on the PATH; on a GPU the whole path runs
    (test_cuda_gpu.py)."""
    tvm = pytest.importorskip("tvm", reason="the tvm device needs the [tvm] extra")
    import numpy as np
    import tvm_ffi

    import autodiff as ad
    from autodiff.device import tvm as tvm_device
    from autodiff.graph.trace import TRACER
    monkeypatch.setenv("PATH", "/usr/bin:/bin")             # no CUDA toolkit
    monkeypatch.setenv("TVM_CUDA_COMPILE_MODE", "nvrtc")
    rng = np.random.default_rng(0)
    x = ad.Tensor(rng.standard_normal((64, 32)).astype(np.float32), requires_grad=True)
    w = ad.Tensor(rng.standard_normal((32, 16)).astype(np.float32), requires_grad=True)
    ((x @ w).relu().sum(1).exp().sum()).backward()
    g = TRACER.finish()
    compile_cuda = tvm_ffi.get_global_func("tvm_callback_cuda_compile")
    for arch in ARCHS:
        target = tvm_device.make_target({"kind": "cuda", "arch": arch})
        _, ex, _, stats = tvm_device.build(g, target=target)
        cuda_mod = ex.mod.imports[0].imports[0]
        assert stats["target"] == "cuda" and cuda_mod.kind == "cuda"
        src = cuda_mod.inspect_source()
        assert "__global__" in src
        with target:
            cubin = bytes(compile_cuda(src))
        assert cubin[:4] == b"\x7fELF", arch
