"""``vloadN``/``vstoreN`` of the OpenCL preamble (:func:`.render.vector_access`): one vector
access at any element offset, with the builtins' meaning (the ``i``-th vector after ``p``);
the rings' int copies through them keep every bit."""
import numpy as np
import pytest

from autodiff.device.cstyle import kernels as K
from autodiff.device.opencl import device

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)

from autodiff.device.opencl import render  # noqa: E402
from autodiff.device.opencl.runtime import run_sources  # noqa: E402


@pytest.mark.parametrize("w", [2, 4, 8, 16])
def test_float_vectors_at_odd_offsets_match_numpy(w):
    """``y[i] = x[i] * 2 + 1`` in vectors of ``w`` read from and written to offsets that are
    not multiples of the vector size, with ``i`` > 0 (the index scales by ``w``)."""
    rng = np.random.default_rng(w)
    n, src, dst = 3, K.SLACK + 1, K.SLACK + 100 + 3
    host = rng.uniform(-2, 2, dst + n * w + K.SLACK).astype(np.float32)
    kern = K.Source("v", f"""__kernel void v(__global float* buf) {{
  const int i = get_global_id(0);
  vstore{w}(vload{w}(i, buf + {src}) * 2.0f + 1.0f, i, buf + {dst});
}}""", (n,), (1,))
    out, _ = run_sources([kern], host)
    want = host.copy()
    want[dst:dst + n * w] = host[src:src + n * w] * np.float32(2) + np.float32(1)
    np.testing.assert_allclose(out, want, rtol=1e-6, atol=0)


def test_ring_copies_move_every_bit():
    """A Receiver or Feeder ring's copy (:func:`.rings._copy`: int words as float vectors)
    moves every bit, NaN payloads and -0.0 included, in vectors of 16 and of 4."""
    from autodiff.device.opencl.rings import _copy
    bits = np.array([0x7FC00001, 0xFF800123, 0x80000000, 0x00000001, 0xFFFFFFFF, 0x3F800000,
                     0x7F800001, 7, 8, 9, 10, 11, 12, 13, 14, 15], np.uint32)
    src, dst = K.SLACK + 5, K.SLACK + 40 + 1
    host = np.zeros(dst + 20 + bits.size + K.SLACK, np.float32)
    host[src:src + bits.size] = bits.view(np.float32)
    kern = K.Source("c", "\n".join([
        "__kernel void c(__global float* buf) {",
        "  __global int* w = (__global int*)buf;",
        _copy(16, f"w + {dst}", f"w + {src}"),
        _copy(12, f"w + {dst + 20}", f"w + {src}"), "}"]), (1,), (1,))
    out, _ = run_sources([kern], host)
    np.testing.assert_array_equal(out[dst:dst + bits.size].view(np.uint32), bits)
    np.testing.assert_array_equal(out[dst + 20:dst + 32].view(np.uint32), bits[:12])


def test_every_program_carries_the_vector_access_preamble():
    src = render.program([K.Source("e", "__kernel void e(__global float* b) { b[0] = 1; }",
                                   (1,), (1,))])
    assert render.VECTOR_ACCESS in src
    assert src.index("#define vload16(i, p)") < src.index("__kernel void e(")


@pytest.mark.parametrize("w", [2, 4, 8, 16])
def test_edge_vectors_store_only_the_lanes_inside(w):
    """:func:`~autodiff.device.cstyle.kernels.store_lanes` of a vector that crosses the
    last column: the lanes before it through the shared partial store
    (:data:`~autodiff.device.cstyle.kernels.EDGE_STORE`, in the program once), none past
    it; a vector wholly past it stores nothing, one wholly inside is one vector store."""
    rng = np.random.default_rng(w)
    src, dst, ncols = K.SLACK + 3, K.SLACK + 64 + 1, w + w // 2
    host = rng.uniform(-2, 2, dst + 3 * w + K.SLACK).astype(np.float32)
    stores = []
    for k in range(3):                  # columns 0, w, 2w: inside, crossing, past
        stores += [f"  {{ const int c = {k * w};"] + [
            "    " + x for x in K.store_lanes(f"(vload{w}(0, buf + {src} + c) * 2.0f)", w,
                                              f"(buf + {dst} + c)", "c", ncols)] + ["  }"]
    kern = K.Source("e", "\n".join(["__kernel void e(__global float* buf) {"] + stores +
                                   ["}"]), (1,), (1,))
    assert f"{K.EDGE_STORE.format(w)}(" in kern.src and "t_.s" not in kern.src
    text = render.program([kern])
    assert text.count(f"static void {K.EDGE_STORE.format(w)}(") == 1
    out, _ = run_sources([kern], host)
    want = host.copy()
    want[dst:dst + ncols] = host[src:src + ncols] * np.float32(2)
    np.testing.assert_array_equal(out, want)
