"""``vloadN``/``vstoreN`` of the OpenCL preamble (:func:`.render.vector_access`): one vector
access at any element offset, for float and int pointers, with the builtins' meaning (the
``i``-th vector after ``p``); a store through a ``const`` pointer does not compile."""
import numpy as np
import pytest

from autodiff.device.cstyle import kernels as K
from autodiff.device.opencl import device

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)

from autodiff.device.opencl import render  # noqa: E402
from autodiff.device.opencl.runtime import KernelBuildError, build, run_sources  # noqa: E402


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


def test_int_vectors_copy_bits_exactly():
    """An int copy (the rings' words) moves every bit, NaN payloads and -0.0 included."""
    bits = np.array([0x7FC00001, 0x80000000, 0x00000001, 0xFFFFFFFF, 0x3F800000, 7, 8, 9,
                     10, 11, 12, 13, 14, 15, 16, 17], np.uint32)
    src, dst = K.SLACK + 5, K.SLACK + 40 + 1
    host = np.zeros(dst + bits.size + K.SLACK, np.float32)
    host[src:src + bits.size] = bits.view(np.float32)
    kern = K.Source("c", f"""__kernel void c(__global float* buf) {{
  __global int* w = (__global int*)buf;
  for (int i = 0; i < 4; i++) vstore4(vload4(i, w + {src}), i, w + {dst});
  vstore16(vload16(0, (__global const int*)w + {src}), 0, w + {dst} + 20);
}}""", (1,), (1,))
    out, _ = run_sources([kern], host)
    np.testing.assert_array_equal(out[dst:dst + bits.size].view(np.uint32), bits)
    np.testing.assert_array_equal(out[dst + 20:dst + 20 + bits.size].view(np.uint32), bits)


def test_store_through_a_const_pointer_is_a_build_error():
    ctx, dev = device.context(None)
    src = render.program([K.Source("s", """__kernel void s(__global const float* p) {
  vstore4(vload4(0, p), 1, p);
}""", (1,), (1,))])
    with pytest.raises(KernelBuildError):
        build(ctx, dev, src, ["s"])


def test_every_program_carries_the_vector_access_preamble():
    src = render.program([K.Source("e", "__kernel void e(__global float* b) { b[0] = 1; }",
                                   (1,), (1,))])
    assert render.VECTOR_ACCESS in src
    assert src.index("#define vload16(i, p)") < src.index("__kernel void e(")
