"""One OpenCL program: the OpenCL C preamble, then every kernel.

The preamble defines what the shared templates (:mod:`autodiff.device.cstyle`) call beyond
OpenCL C's builtins: the inline transcendentals (:mod:`.mathlib`), the horizontal sums
and maxima of ``float16`` (:data:`HELPERS`), the dtype helpers
(:data:`autodiff.device.cstyle.dtypes.HELPERS`) and Philox-4x32-10 with the kernel writing
the iteration words (:data:`PHILOX`, the counter layout of
:mod:`autodiff.device.cstyle.philox`). The CUDA device's counterpart is
:mod:`autodiff.device.cuda.prelude`.
"""
from __future__ import annotations

from ..cstyle import dtypes as D
from ..cstyle.dialect import Dialect
from ..cstyle.kernels import Source, micro_kernels
from ..cstyle.philox import ITER_WORDS, SET_KERNEL
from . import mathlib
from .dialect import OPENCL

#: horizontal sums/maxima of float16 (the reductions' and the dot-form matmul's)
HELPERS = """
inline float _hsum16(float16 v) {
  float8 a = v.lo + v.hi; float4 b = a.lo + a.hi; float2 c = b.lo + b.hi; return c.x + c.y;
}
inline float _hmax16(float16 v) {
  float8 a = _ad_max(v.lo, v.hi); float4 b = _ad_max(a.lo, a.hi);
  float2 c = _ad_max(b.lo, b.hi); return _ad_max(c.x, c.y);
}
"""

#: Philox-4x32-10 in OpenCL C (``mul_hi`` the high word of a round's 32x32 -> 64 bit
#: products, the wrapping ``uint`` product the low word) and the iteration-word kernel
PHILOX = f"""
inline uint4 _ad_philox4x32(uint4 c, uint k0, uint k1) {{
  #pragma unroll
  for (int r = 0; r < 10; r++) {{
    if (r) {{ k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }}
    const uint h0 = mul_hi(0xD2511F53u, c.x), l0 = 0xD2511F53u * c.x;
    const uint h1 = mul_hi(0xCD9E8D57u, c.z), l1 = 0xCD9E8D57u * c.z;
    c = (uint4)(h1 ^ c.y ^ k0, l1, h0 ^ c.w ^ k1, l0);
  }}
  return c;
}}
inline float _ad_rand(uint k0, uint k1, int e, __global const float* buf) {{
  const uint4 w = _ad_philox4x32((uint4)((uint)e >> 2, 0u, as_uint(buf[{ITER_WORDS}]),
                                         as_uint(buf[{ITER_WORDS + 1}])), k0, k1);
  const int s = e & 3;
  const uint x = s == 0 ? w.x : (s == 1 ? w.y : (s == 2 ? w.z : w.w));
  return (float)(x >> 8) * 5.9604644775390625e-08f;
}}
__kernel void {SET_KERNEL}(__global float* restrict buf, const uint c2, const uint c3) {{
  buf[{ITER_WORDS}] = as_float(c2);
  buf[{ITER_WORDS + 1}] = as_float(c3);
}}
"""


def program(sources: list[Source], d: Dialect = OPENCL) -> str:
    """The source of one program holding every kernel; helpers, inline math and the Philox
    generator (with its iteration-word kernel) first."""
    parts = [d.preamble, mathlib.preamble(), HELPERS, D.HELPERS, PHILOX]
    parts += micro_kernels("\n".join(s.src for s in sources), d)
    parts += [s.src for s in sources]
    return "\n".join(p for p in parts if p)
