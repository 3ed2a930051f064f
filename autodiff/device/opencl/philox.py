"""Philox-4x32-10 in OpenCL C: the device side of ``Op.RAND`` (procedural :class:`Rand`).

A word-for-word port of :func:`autodiff.graph.rng.philox4x32` and the counter layout of
:func:`autodiff.graph.rng.philox_uniform`, so that a dropout mask drawn on the OpenCL
device is bit-identical to the numpy reference:

* key ``(k0, k1) = (seed mod 2**32, stream mod 2**32)``, literals in the kernel;
* counter ``(e >> 2, 0, c2, c3)`` for flat element ``e`` (node sizes below ``2**31``, so
  the high word of ``e // 4`` is 0); ``(c2, c3)`` are the *iteration words* of the
  enclosing loops (:func:`autodiff.graph.rng.iteration_words`), which the host writes into
  the arena at :data:`ITER_WORDS` (two uint32 bit patterns) with :data:`SET_KERNEL` before
  the first launch that reads them in a new iteration;
* element ``e`` takes word ``e & 3`` of its block: ``(word >> 8) * 2**-24`` is exact in
  float32, so both devices produce the same bits.

The 32x32 -> 64 bit products of a round are ``mul_hi`` (high word) and the wrapping
``uint`` product (low word).
"""
from __future__ import annotations

from .kernels import SLACK

#: float offset in the arena of the iteration words ``c2, c3`` (just after the error flag,
#: inside the 16 floats the layout reserves for it)
ITER_WORDS = SLACK + 1

#: name of the kernel that writes the iteration words
SET_KERNEL = "_ad_set_iteration_words"

#: the C call every Rand renders to contains this (marks a kernel that reads the words)
CALL = "_ad_rand("

SOURCE = f"""
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


def call(key, index: str) -> str:
    """C expression of element ``index`` (a C int expression) of a RAND node with ``key``
    ``(seed, stream)``: a float in ``[0, 1 - 2**-24]``."""
    seed, stream = key
    return f"_ad_rand({int(seed) & 0xFFFFFFFF:#x}u, {int(stream) & 0xFFFFFFFF:#x}u, " \
           f"{index}, buf)"


def uses_iteration_words(src: str) -> bool:
    """Whether a kernel's source draws random numbers (and so reads the iteration words)."""
    return CALL in src
