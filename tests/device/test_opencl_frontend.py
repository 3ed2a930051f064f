"""The OpenCL C front end outside PoCL (:mod:`autodiff.device.opencl.frontend`): its flags
are the ones PoCL compiles with, its bitcode gives the same program as PoCL's own build,
and anything it cannot do falls back to PoCL's build, whose errors users see."""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import autodiff as ad
import autodiff.nn.functional as F
from autodiff.optim import Adam
from autodiff.device.opencl import device, frontend, runtime

try:
    _, DEV = device.context(None)
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)

FE = frontend.for_device(DEV)
needs_fe = pytest.mark.skipif(
    FE is None, reason="no PoCL CPU device with a clang of PoCL's LLVM version and PoCL's "
                       "headers here: PoCL builds every program itself")


def _pocl_options() -> list[str]:
    """The clang options PoCL prints for a build from source (``POCL_DEBUG=llvm``), in a
    process with an empty PoCL cache."""
    code = textwrap.dedent("""
        import pyopencl as cl
        d = cl.get_platforms()[0].get_devices()[0]
        cl.Program(cl.Context([d]), "__kernel void k(__global int* b) { b[0] = 7; }").build()
    """)
    env = dict(os.environ, POCL_DEBUG="llvm", POCL_KERNEL_CACHE="0")
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120).stderr
    m = re.search(r"all build options: (.*)", err)
    if m is None and "POCL_DEBUG" not in DEV.platform.version:
        pytest.skip("this PoCL was built without POCL_DEBUG: it cannot print its options")
    assert m is not None, err[-2000:]
    return m.group(1).split()


@needs_fe
def test_flags_are_the_ones_pocl_compiles_with():
    """Every option PoCL passes to clang is among the front end's (pyopencl's include
    directory aside), spelled as ``clang -cc1`` takes it; the front end adds only what
    PoCL sets on clang's options in code, the headers and the optimisation level."""
    opts = _pocl_options()
    pocl = [o for i, o in enumerate(opts) if "pyopencl" not in o and
            not (o == "-I" and i + 1 < len(opts) and "pyopencl" in opts[i + 1])]
    ours = " ".join(FE.args).replace("-x cl", "-xcl").replace("-triple ", "-triple=")
    ours = ours.split()
    assert [o for o in pocl if o not in ours] == []
    extra = [o for o in ours if o not in pocl]
    assert set(extra) <= {"-fblocks", "-fasm-blocks", "-pic-level", "2", "-pic-is-pie",
                          "-mstackrealign", "-fno-unroll-loops", *frontend.OPT,
                          "-resource-dir", "-internal-isystem",
                          os.path.dirname(FE.include), FE.include}, extra


def _small_program(dev: str, **options):
    """A training loop that uses PoCL's math library (exp, log, tanh, sqrt): losses and
    final weights."""
    rng = np.random.default_rng(3)
    w = ad.Tensor(rng.standard_normal((12, 20)).astype(np.float32) * 0.3, requires_grad=True)
    xs = [rng.standard_normal((6, 12)).astype(np.float32) for _ in range(4)]
    feed, losses = iter(xs), []
    opt = Adam([w], lr=0.01)

    def step():
        x = ad.Feeder(lambda: next(feed), [6, 12], name="x")
        opt.zero_grad()
        h = (x @ w).tanh()
        loss = F.log_softmax(h, dim=-1).neg().mean() + h.exp().sqrt().mean()
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: losses.append(float(v)), [loss], name="loss")
    ad.ir_for(4, step)
    report = ad.execute(device=dev, **options)
    return np.array(losses), w.numpy(), report


@needs_fe
def test_a_program_through_the_front_end_computes_what_pocls_build_does():
    """The same loop built by PoCL (``frontend=False``) and through the front end: the
    front end compiled it (``frontend_s`` recorded, bitcode next to the source), and the
    losses and weights agree with PoCL's build and with the numpy device."""
    l0, w0, r0 = _small_program("opencl", frontend=False)
    l1, w1, r1 = _small_program("opencl")
    ln, wn, _ = _small_program("numpy")
    assert "frontend_s" not in r0.stats["opencl"]
    st = r1.stats["opencl"]
    assert "frontend_s" in st
    assert os.path.exists(frontend.bitcode_path(st["source_path"], FE.key))
    np.testing.assert_allclose(l1, l0, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(w1, w0, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(l1, ln, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(w1, wn, rtol=2e-5, atol=1e-6)


def _write(tmp_path, name: str, text: str) -> str:
    path = str(tmp_path / name)
    with open(path, "w") as f:
        f.write(text)
    return path


@needs_fe
def test_a_source_clang_rejects_is_reported_by_pocls_build(tmp_path):
    """A source error: the front end's compile fails, PoCL builds the source and its
    error (with the source path) reaches the user as KernelBuildError."""
    path = _write(tmp_path, "bad.cl", "__kernel void k(__global float* b) { b[0] = nope; }")
    assert FE.start(path).result() is None
    ctx, _ = device.context(None)
    with pytest.raises(runtime.KernelBuildError, match="nope") as e:
        runtime.build_file(ctx, DEV, path)
    assert e.value.path == path


@needs_fe
def test_bitcode_pocl_rejects_falls_back_to_the_source(tmp_path):
    """A bitcode file PoCL cannot read (here: not bitcode at all) is built from its
    source instead, and the kernel runs."""
    import pyopencl as cl
    src = _write(tmp_path, "ok.cl", "__kernel void k(__global float* b) { b[0] = 2.5f; }")
    bc = frontend.bitcode_path(src, FE.key)
    with open(bc, "wb") as f:
        f.write(b"BC\xc0\xde not really")
    ctx = cl.Context([DEV])
    prg = runtime.build_file(ctx, DEV, bc)
    q = cl.CommandQueue(ctx)
    out = np.zeros(1, np.float32)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=out)
    prg.k(q, (1,), None, buf)
    cl.enqueue_copy(q, out, buf)
    assert out[0] == 2.5


@needs_fe
def test_bitcode_is_compiled_once_and_kept(tmp_path):
    """The first start runs clang; the second finds the bitcode and starts nothing."""
    src = _write(tmp_path, "once.cl", "__kernel void k(__global float* b) { b[0] = 1.0f; }")
    job = FE.start(src)
    assert job.proc is not None
    out = job.result()
    assert out == frontend.bitcode_path(src, FE.key) and os.path.getsize(out) > 0
    again = FE.start(src)
    assert again.proc is None and again.result() == out
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


@needs_fe
def test_a_missing_precompiled_header_is_rebuilt(tmp_path, monkeypatch):
    """With the PCH gone, the next compile builds it again (and still compiles)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    fe = frontend.Frontend(FE.clang, FE.flags, FE.include)
    assert not os.path.exists(fe.pch_path())
    src = _write(tmp_path, "p.cl", "__kernel void k(__global float* b) { b[0] = exp(b[1]); }")
    assert fe.start(src).result() is not None
    assert os.path.exists(fe.pch_path())


def test_the_front_end_can_be_turned_off(monkeypatch):
    """``AUTODIFF_OPENCL_FRONTEND=0``, the ``frontend=False`` option and PoCL's own extra
    build flags each leave the build to PoCL."""
    assert not frontend.enabled({"frontend": False})
    monkeypatch.setenv("AUTODIFF_OPENCL_FRONTEND", "0")
    assert not frontend.enabled() and frontend.for_device(DEV) is None
    monkeypatch.delenv("AUTODIFF_OPENCL_FRONTEND")
    monkeypatch.setenv("POCL_EXTRA_BUILD_FLAGS", "-cl-fast-relaxed-math")
    assert not frontend.enabled()


def test_no_clang_of_pocls_version_means_no_front_end(monkeypatch):
    """Without ``clang-<LLVM major>`` the front end is not used (PoCL builds)."""
    monkeypatch.setattr(frontend.shutil, "which", lambda name: None)
    monkeypatch.setattr(frontend.os, "access", lambda path, mode: False)
    monkeypatch.setattr(frontend, "_CACHE", {})
    assert frontend.for_device(DEV) is None


def test_flags_need_the_device_to_name_its_triple_and_cpu():
    """A device whose version string has no ``HSTR`` naming the triple gets no flags."""
    class Fake:
        version = "OpenCL 3.0 SomeVendor"
    assert frontend.flags(Fake(), "x86_64-pc-linux-gnu") is None


def test_a_failing_lookup_leaves_the_build_to_pocl(monkeypatch):
    """A platform query that raises (an OpenCL 1.2 device has no OpenCL C features) gives
    no front end instead of an error in the compile."""
    def broken(device):
        raise RuntimeError("clGetDeviceInfo failed: INVALID_VALUE")
    monkeypatch.setattr(frontend, "_make", broken)
    monkeypatch.setattr(frontend, "_CACHE", {})
    assert frontend.for_device(DEV) is None
