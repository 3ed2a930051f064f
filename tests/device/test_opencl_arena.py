"""The OpenCL device's arena buffer: on a CPU device, a large arena is this process's own
memory on transparent huge pages, used in place by the device (no copy), and a program on
it computes what the numpy device computes."""
import numpy as np
import pytest

import autodiff as ad
from autodiff.device.opencl import device, runtime

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)


def _vma(address: int) -> dict:
    """The ``/proc/self/smaps`` entry (field -> value) of the mapping holding ``address``."""
    entry, hit = {}, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()[0]
            if "-" in head and ":" not in head:        # a mapping's first line
                if hit:
                    return entry
                lo, hi = (int(x, 16) for x in head.split("-"))
                hit, entry = lo <= address < hi, {}
            elif hit:
                key, _, value = line.partition(":")
                entry[key] = value.strip()
    return entry if hit else {}


def _needs_huge_pages():
    import mmap
    if not hasattr(mmap, "MADV_HUGEPAGE"):
        pytest.skip("no MADV_HUGEPAGE on this platform")
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            mode = f.read()
    except OSError:
        pytest.skip("no transparent huge pages on this kernel")
    if "[never]" in mode:
        pytest.skip("transparent huge pages are off on this machine")


def test_huge_page_array_is_aligned_whole_pages_advised_for_huge_pages():
    _needs_huge_pages()
    a = runtime.huge_page_array(5 << 20)
    assert a.dtype == np.uint8 and a.nbytes == 6 << 20
    assert a.ctypes.data % runtime.HUGE_PAGE == 0
    assert not a.any()
    vma = _vma(a.ctypes.data)
    if "THPeligible" not in vma:
        pytest.skip("this kernel's /proc/self/smaps has no THPeligible field")
    assert vma["THPeligible"] == "1", vma


def test_a_large_arena_on_a_cpu_device_is_host_memory_the_kernels_write_in_place():
    """The arena buffer wraps the huge-page array itself: a kernel's store shows in the
    array with no read back."""
    _needs_huge_pages()
    import pyopencl as cl
    ctx, dev = device.context()
    if not dev.type & cl.device_type.CPU:
        pytest.skip("the host-memory arena is for CPU devices")
    buf = runtime.arena_buffer(ctx, dev, runtime.HUGE_ARENA + 12)
    host = buf.hostbuf
    assert host.nbytes >= runtime.HUGE_ARENA + 12 and buf.size == host.nbytes
    assert host.ctypes.data % runtime.HUGE_PAGE == 0
    prg = cl.Program(ctx, "__kernel void k(__global float* b) "
                          "{ b[get_global_id(0) * 1024] = 2.5f; }").build()
    q = cl.CommandQueue(ctx, dev)
    prg.k(q, (16,), None, buf)
    q.finish()
    view = host.view(np.float32)
    np.testing.assert_array_equal(view[:16 * 1024:1024], np.full(16, 2.5, np.float32))
    assert view[1] == 0.0


def test_a_small_arena_is_a_plain_device_buffer():
    import pyopencl as cl
    ctx, dev = device.context()
    buf = runtime.arena_buffer(ctx, dev, 4096)
    assert buf.size == 4096
    assert not buf.flags & cl.mem_flags.USE_HOST_PTR


def test_a_training_loop_on_a_huge_page_arena_matches_the_numpy_device(monkeypatch):
    """Every arena on huge pages (the threshold at 0): an MLP's SGD loop with a Feeder
    and a Receiver gives the numpy device's losses and weights."""
    _needs_huge_pages()
    import pyopencl as cl
    from autodiff.device import opencl
    from autodiff.optim import SGD
    monkeypatch.setattr(runtime, "HUGE_ARENA", 0)
    made, early = [], []

    def spy(ctx, dev, nbytes, host=None):
        early.append(host)
        made.append(runtime.arena_buffer(ctx, dev, nbytes, host))
        return made[-1]
    monkeypatch.setattr(opencl, "arena_buffer", spy)

    def run(dev):
        ad.reset()
        rng = np.random.default_rng(11)
        w1 = ad.Tensor(rng.standard_normal((24, 32)).astype(np.float32) * 0.3,
                       requires_grad=True)
        w2 = ad.Tensor(rng.standard_normal((32, 5)).astype(np.float32) * 0.3,
                       requires_grad=True)
        xs = iter([rng.standard_normal((8, 24)).astype(np.float32) for _ in range(7)])
        opt = SGD([w1, w2], lr=0.05)
        losses = []

        def step():
            opt.zero_grad()
            x = ad.Feeder(lambda: next(xs), [8, 24], name="x")
            loss = ((x @ w1).tanh() @ w2).square().mean()
            loss.backward()
            opt.step()
            ad.Receiver(lambda v: losses.append(float(v)), [loss], name="loss")
        ad.ir_for(7, step)
        report = ad.execute(device=dev)
        return losses, w1.numpy(), w2.numpy(), report

    ref, got = run("numpy"), run("opencl")
    if device.select().type & cl.device_type.CPU:
        assert len(made) == 1 and made[0].flags & cl.mem_flags.USE_HOST_PTR
        assert made[0].hostbuf is early[0]     # the memory allocated (and faulted in) early
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2], ref[2], rtol=1e-5, atol=1e-6)


def test_prefault_makes_every_page_resident_and_keeps_the_contents():
    """:func:`.runtime.prefault`: once its thread is done, writing to every page of the
    array takes no page fault, and what the array held is still there."""
    import resource
    import sys
    if not sys.platform.startswith("linux"):
        pytest.skip("prefault advises Linux's madvise")
    _needs_huge_pages()
    a = runtime.huge_page_array(6 << 20)
    a[:3] = (7, 8, 9)                   # one page resident, with contents
    t = runtime.prefault(a)
    assert t is not None
    t.join(timeout=60)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    a[4096::4096] = 1
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    if faults and not _populate_supported():
        pytest.skip("this kernel has no MADV_POPULATE_WRITE (Linux < 5.14)")
    assert faults == 0
    assert list(a[:3]) == [7, 8, 9] and not a[3:4096].any() and a[4096] == 1


def _populate_supported() -> bool:
    import ctypes
    import mmap
    m = mmap.mmap(-1, 4096)
    buf = (ctypes.c_char * 4096).from_buffer(m)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    ok = libc.madvise(ctypes.addressof(buf), 4096, runtime.MADV_POPULATE_WRITE) == 0
    del buf
    m.close()
    return ok
