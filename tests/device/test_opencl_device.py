"""Device choice, the no-platform error, build and memory errors (the dialect table:
tests/device/cstyle/test_dialect.py)."""
import pyopencl as cl
import pytest

from autodiff.device.opencl import device


def _have_platform() -> bool:
    try:
        device.candidates()
        return True
    except device.OpenCLUnavailable:
        return False


needs_cl = pytest.mark.skipif(not _have_platform(), reason="no OpenCL platform; install with: "
                              + device.INSTALL)


def test_no_platform_names_install_command(monkeypatch):
    monkeypatch.setattr(cl, "get_platforms", lambda: [])
    with pytest.raises(device.OpenCLUnavailable, match="apt-get install -y pocl-opencl-icd"):
        device.select()


def test_platform_error_names_install_command(monkeypatch):
    def boom():
        raise cl.LogicError("clGetPlatformIDs failed: PLATFORM_NOT_FOUND_KHR")
    monkeypatch.setattr(cl, "get_platforms", boom)
    with pytest.raises(device.OpenCLUnavailable, match="pocl-opencl-icd"):
        device.select()


@needs_cl
def test_select_default_and_substring(monkeypatch):
    monkeypatch.delenv("AUTODIFF_OPENCL_DEVICE", raising=False)
    first = device.candidates()[0][1]
    assert device.select() == first
    label = device.candidates()[0][0]
    assert device.select(label.split()[0].lower()) == first


@needs_cl
def test_select_env_override_and_unknown(monkeypatch):
    monkeypatch.setenv("AUTODIFF_OPENCL_DEVICE", "no-such-device-xyz")
    with pytest.raises(device.OpenCLUnavailable, match="no-such-device-xyz.*found"):
        device.select()
    with pytest.raises(device.OpenCLUnavailable):
        device.select("also-missing")


@needs_cl
def test_gpus_come_first():
    devs = [d for _, d in device.candidates()]
    kinds = [device.is_gpu(d) for d in devs]
    assert kinds == sorted(kinds, reverse=True)


@needs_cl
def test_build_failure_names_source_and_log():
    from autodiff.device.opencl.runtime import KernelBuildError, build
    ctx, dev = device.context()
    with pytest.raises(KernelBuildError) as e:
        build(ctx, dev, "__kernel void broken(__global float* b) { b[0] = undefined_x; }",
              ["broken"])
    assert e.value.path.endswith(".cl")
    assert "undefined_x" in open(e.value.path).read()
    assert "undefined_x" in str(e.value)          # the build log names the culprit


def test_arena_out_of_memory_is_detected_before_running():
    from types import SimpleNamespace
    from autodiff.device.opencl.runtime import ArenaOutOfMemory, check_arena
    dev = SimpleNamespace(max_mem_alloc_size=4 << 30, global_mem_size=5 << 30, name="cpu ")
    check_arena(4 << 30, dev)
    with pytest.raises(ArenaOutOfMemory) as e:
        check_arena((4 << 30) + 1, dev)
    assert e.value.needed == (4 << 30) + 1 and e.value.available == 4 << 30
    assert str((4 << 30) + 1) in str(e.value) and str(4 << 30) in str(e.value)


def _tiny_program():
    import numpy as np
    import autodiff as ad
    return ad.Tensor(np.arange(4, dtype=np.float32)) * 2.0


@needs_cl
def test_execute_defaults_to_opencl(monkeypatch):
    import autodiff as ad
    monkeypatch.delenv("AUTODIFF_DEVICE", raising=False)
    y = _tiny_program()
    assert ad.execute().device == "opencl"
    assert y.numpy().tolist() == [0.0, 2.0, 4.0, 6.0]


def test_execute_device_from_environment(monkeypatch):
    import autodiff as ad
    monkeypatch.setenv("AUTODIFF_DEVICE", "numpy")
    _tiny_program()
    assert ad.execute().device == "numpy"


def test_default_without_platform_raises_and_keeps_the_program(monkeypatch):
    """No silent fallback: the default device is opencl, its absence is an error naming
    the install command, and the traced program stays pending for another device."""
    import autodiff as ad
    monkeypatch.delenv("AUTODIFF_DEVICE", raising=False)
    monkeypatch.setattr(cl, "get_platforms", lambda: [])
    y = _tiny_program()
    with pytest.raises(device.OpenCLUnavailable, match="apt-get install -y pocl-opencl-icd"):
        ad.execute()
    assert ad.execute(device="numpy").device == "numpy"
    assert y.numpy().tolist() == [0.0, 2.0, 4.0, 6.0]


_PINNED = """
import os, sys
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
import numpy as np
import autodiff as ad
from autodiff.device.opencl import device
x = ad.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
y = (x * 2 + 1).sum()
ad.execute(device="opencl")
print(device.select().name.split("-")[0], float(y.numpy()))
"""


def _pinned_run(env_extra: dict) -> list[str]:
    import os
    import subprocess
    import sys
    from pathlib import Path
    env = {k: v for k, v in os.environ.items() if k != "POCL_DEVICES"}
    env.update(env_extra)
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    out = subprocess.run([sys.executable, "-c", _PINNED], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@needs_cl
@pytest.mark.skipif(not hasattr(__import__("os"), "sched_setaffinity"),
                    reason="no CPU affinity call on this platform")
@pytest.mark.skipif(not _have_platform() or "portable computing language" not in
                    " ".join(label.lower() for label, _ in device.candidates()),
                    reason="the one-core driver choice is PoCL's (basic vs pthread)")
def test_one_core_process_runs_kernels_in_its_own_thread():
    name, value = _pinned_run({})
    assert name == "basic" and float(value) == 36.0       # 2 * 15 + 6
    name, value = _pinned_run({"POCL_DEVICES": "pthread"})  # the user's choice is kept
    assert name == "pthread" and float(value) == 36.0


@needs_cl
def test_int_arguments_set_by_bytes_or_by_set_arg_reach_the_kernel():
    """:func:`.runtime.set_int_args` (pyopencl's bytes binding where it has one, else
    ``set_arg``): every argument lands where the kernel reads it, negative ones too."""
    import numpy as np
    from autodiff.device.opencl.runtime import set_int_args
    ctx, dev = device.context()
    prg = cl.Program(ctx, "__kernel void k(__global int* o, int a, int b, int c) "
                          "{ o[0] = a; o[1] = b; o[2] = c; }").build(devices=[dev])
    q = cl.CommandQueue(ctx, dev)

    class OnlySetArg:               # a kernel without the bytes binding
        def __init__(self, k):
            self.set_arg = k.set_arg
    for wrap in (lambda k: k, OnlySetArg):
        k = cl.Kernel(prg, "k")
        out = np.zeros(3, np.int32)
        buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=out)
        k.set_arg(0, buf)
        set_int_args(wrap(k), 1, [7, -3, 2**31 - 1])
        cl.enqueue_nd_range_kernel(q, k, (1,), (1,))
        cl.enqueue_copy(q, out, buf, is_blocking=True)
        np.testing.assert_array_equal(out, [7, -3, 2**31 - 1])
