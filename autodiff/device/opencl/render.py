"""One OpenCL program: the OpenCL C preamble, then every kernel.

The preamble defines what the shared templates (:mod:`autodiff.device.cstyle`) call beyond
OpenCL C's builtins -- and ``vloadN``/``vstoreN`` anew, as single vector accesses
(:func:`vector_access`): the inline transcendentals (:mod:`.mathlib`), the horizontal sums
and maxima of ``float16`` (:data:`HELPERS`), the 16x16 register transposes of the
matmul operand packs and the partial stores of edge vectors (:data:`SHARED`, where
called), the dtype helpers
(:data:`autodiff.device.cstyle.dtypes.HELPERS`) and Philox-4x32-10 with the kernel writing
the iteration words (:data:`PHILOX`, the counter layout of
:mod:`autodiff.device.cstyle.philox`). The CUDA device's counterpart is
:mod:`autodiff.device.cuda.prelude`.
"""
from __future__ import annotations

from ..cstyle import dtypes as D
from ..cstyle.dialect import Dialect
from ..cstyle.kernels import (EDGE_STORE, TRANSPOSE8, TRANSPOSE16, TRANSPOSE16_BY8,
                               TRANSPOSE16_ROWS, Source, lane, micro_kernel, micro_names)
from ..cstyle.philox import ITER_WORDS, SET_KERNEL
from . import mathlib
from .dialect import OPENCL


def vector_access(widths=(2, 4, 8, 16)) -> str:
    """``vloadN``/``vstoreN`` on ``__global float`` pointers as one vector access of
    element alignment (a typedef of 4-byte alignment; vector types carry the "may alias
    anything" type-based alias class, so scalar accesses to the same words stay ordered).

    PoCL's kernel library builds ``vload16`` from eight ``float2`` loads and ``vstore16``
    from eight 8-byte stores; its JIT merged them back (loads) or not (a ``vstore16`` left
    three stores), and the extra IR cost instruction selection and loop strength reduction
    time: the work-group compiles of the main job's larger part, body by body, 3.4-4.0 ->
    2.9-3.0 s (PoCL 3.1, LLVM 15, one thread; BENCHMARKS.md). The accesses are small
    functions of the vector type, not bare casts: a function returning or taking
    ``float16`` gets clang's 512-bit ``min-legal-vector-width``, which inlining passes to
    its caller -- without it LLVM splits every ``float16`` into two 256-bit halves on
    AVX-512 (the target prefers 256-bit vectors). Generated code calls them on float
    pointers only (:mod:`.rings` copies its int words as floats: a load and a store move
    the bits unchanged; another pointer type would draw clang's incompatible-pointer
    warning). Only for clang-based OpenCL C compilers (``__clang__``: PoCL; the attributes
    are clang's); others keep their own builtins.

    Args:
        widths: the vector widths N to define (floats per access).

    Returns:
        OpenCL C source (typedefs, ``always_inline`` functions, ``#define`` s) for the
        program's preamble, before any kernel."""
    L = ["#ifdef __clang__"]
    for w in widths:
        u = f"_ad_f{w}u"
        L += [f"typedef float {u} __attribute__((ext_vector_type({w}), aligned(4)));",
              f"static inline __attribute__((always_inline)) float{w} _ad_ld{w}("
              f"__global const float* p) {{ return *(__global const {u}*)p; }}",
              f"static inline __attribute__((always_inline)) void _ad_st{w}("
              f"float{w} x, __global float* p) {{ *(__global {u}*)p = x; }}",
              f"#undef vload{w}", f"#undef vstore{w}",
              f"#define vload{w}(i, p) _ad_ld{w}((p) + (i)*{w})",
              f"#define vstore{w}(x, i, p) _ad_st{w}((x), (p) + (i)*{w})"]
    return "\n".join(L + ["#endif"]) + "\n"


#: one vector access per vloadN/vstoreN (:func:`vector_access`)
VECTOR_ACCESS = vector_access()

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


def _transpose16(rows_from: str = "pointer") -> str:
    """:data:`~autodiff.device.cstyle.kernels.TRANSPOSE16` in OpenCL C: the usual four
    rounds of two-input shuffles of a 16x16 block held in 16 ``float16`` rows (interleave
    single floats, then pairs within each 128-bit quarter; then swap quarters between rows
    4 apart and halves between rows 8 apart), as clang's ``__builtin_shufflevector``
    (AVX-512 unpack and permute instructions). Never inlined: a dispatch kernel compiles
    it once however many packs call it."""
    def quarter_mix(width: int, lo: bool) -> list[int]:   # unpacklo/hi_ps (1), _pd (2)
        off = 0 if lo else 2
        out = []
        for q in range(4):
            if width == 1:
                out += [x for s in (off, off + 1) for x in (4 * q + s, 16 + 4 * q + s)]
            else:
                out += [4 * q + off, 4 * q + off + 1, 16 + 4 * q + off, 16 + 4 * q + off + 1]
        return out

    def quarters(pick: list) -> list[int]:                 # (input, quarter) per quarter
        return [16 * src + 4 * q + e for src, q in pick for e in range(4)]
    rounds = [
        (1, lambda lo: quarter_mix(1, lo)),
        (2, lambda lo: quarter_mix(2, lo)),
        (4, lambda lo: quarters([(0, 0), (1, 0), (0, 2), (1, 2)] if lo else
                                [(0, 1), (1, 1), (0, 3), (1, 3)])),
        (8, lambda lo: quarters([(0, 0), (0, 1), (1, 0), (1, 1)] if lo else
                                [(0, 2), (0, 3), (1, 2), (1, 3)])),
    ]
    if rows_from == "pointer":
        L = [f"__attribute__((noinline)) static void {TRANSPOSE16}(__global const float* "
             "restrict s_, const int st, const int last, __global float* restrict P, "
             "const int kn) {"]
        L += [f"  const float16 x0_{i} = vload16(0, s_ + min({i}, last)*st);" for i in range(16)]
    else:
        L = [f"__attribute__((noinline)) static void {TRANSPOSE16_ROWS}(const float16* "
             "restrict r_, __global float* restrict P, const int kn) {"]
        L += [f"  const float16 x0_{i} = r_[{i}];" for i in range(16)]
    for r, (dist, mask) in enumerate(rounds, 1):
        for i in range(16):
            if (i // dist) % 2 == 0:
                a, b = f"x{r - 1}_{i}", f"x{r - 1}_{i + dist}"
                for j, lo in ((i, True), (i + dist, False)):
                    idx = ", ".join(map(str, mask(lo)))
                    L.append(f"  const float16 x{r}_{j} = "
                             f"__builtin_shufflevector({a}, {b}, {idx});")
    # the rounds leave column c in row c with bits 0 and 1 swapped
    col = [(i & ~3) | ((i & 1) << 1) | ((i >> 1) & 1) for i in range(16)]
    # guarded stores only: a copy unguarded for kn == 16 ran no faster and took 10 ms
    # more to JIT per dispatch kernel
    L += [f"  if ({col[i]} < kn) vstore16(x4_{i}, 0, P + {16 * col[i]});" for i in range(16)]
    L.append("}")
    return "\n".join(L) + "\n"


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


def _edge_store(width: int) -> str:
    """:data:`~autodiff.device.cstyle.kernels.EDGE_STORE` of ``float{width}`` in OpenCL C:
    the lanes through a private array, a loop of ``n`` scalar stores. Never inlined: one
    copy per dispatch kernel, not sixteen guarded stores per edge of every body."""
    lanes = ", ".join(lane("v", j) for j in range(width))
    return (f"__attribute__((noinline)) static void {EDGE_STORE.format(width)}("
            f"const float{width} v, __global float* restrict p, const int n) {{\n"
            f"  const float a[{width}] = {{{lanes}}};\n"
            f"  for (int j = 0; j < n; j++) p[j] = a[j];\n}}\n")


def _transpose8x8(rows: list[str]) -> list[str]:
    """OpenCL C lines transposing the eight ``float8`` values ``rows`` (row ``i`` of an 8x8
    block each) into ``c0`` ... ``c7`` (column ``j`` of the block in ``cj``): three rounds
    of two-input shuffles -- interleave single floats, then pairs, within each 128-bit
    half; then swap halves between rows 4 apart (the usual AVX2 8x8 transpose: 24
    shuffles, eight registers)."""
    def sh(a, b, idx):
        return f"__builtin_shufflevector({a}, {b}, {', '.join(map(str, idx))})"
    lo1, hi1 = (0, 8, 1, 9, 4, 12, 5, 13), (2, 10, 3, 11, 6, 14, 7, 15)
    lo2, hi2 = (0, 1, 8, 9, 4, 5, 12, 13), (2, 3, 10, 11, 6, 7, 14, 15)
    lo3, hi3 = (0, 1, 2, 3, 8, 9, 10, 11), (4, 5, 6, 7, 12, 13, 14, 15)
    L = []
    for k in range(4):
        L += [f"const float8 t{2 * k} = {sh(rows[2 * k], rows[2 * k + 1], lo1)};",
              f"const float8 t{2 * k + 1} = {sh(rows[2 * k], rows[2 * k + 1], hi1)};"]
    for j, (a, b) in enumerate([(0, 2), (1, 3), (4, 6), (5, 7)]):
        L += [f"const float8 u{2 * j} = {sh(f't{a}', f't{b}', lo2)};",
              f"const float8 u{2 * j + 1} = {sh(f't{a}', f't{b}', hi2)};"]
    # u0..u3: columns 0-3 (low half) and 4-7 (high half) of rows 0-3; u4..u7 of rows 4-7
    for c in range(4):
        L += [f"const float8 c{c} = {sh(f'u{c}', f'u{c + 4}', lo3)};",
              f"const float8 c{c + 4} = {sh(f'u{c}', f'u{c + 4}', hi3)};"]
    return L


def _transpose16_by8() -> str:
    """:data:`~autodiff.device.cstyle.kernels.TRANSPOSE16_BY8`: the same transpose as
    :func:`_transpose16`, as four 8x8 transposes of ``float8`` rows
    (:func:`_transpose8x8`): eight registers per block where the ``float16`` form holds 16
    rows of two AVX2 registers each and spills. A loop over the four blocks: its code
    once."""
    L = [f"__attribute__((noinline)) static void {TRANSPOSE16_BY8}(__global const float* "
         "restrict s_, const int st, const int last, __global float* restrict P, "
         "const int kn) {",
         "  #pragma unroll 1",
         "  for (int b_ = 0; b_ < 4; b_++) {",
         "    const int rh = (b_ & 1) * 8, ch = (b_ >> 1) * 8;"]
    L += [f"    const float8 r{i} = vload8(0, s_ + min(rh + {i}, last)*st + ch);"
          for i in range(8)]
    L += ["    " + x for x in _transpose8x8([f"r{i}" for i in range(8)])]
    L += [f"    if (ch + {c} < kn) vstore8(c{c}, 0, P + 16*(ch + {c}) + rh);" for c in range(8)]
    L += ["  }", "}"]
    return "\n".join(L) + "\n"


def _transpose8() -> str:
    """:data:`~autodiff.device.cstyle.kernels.TRANSPOSE8`: eight ``float8`` rows loaded,
    transposed in registers (:func:`_transpose8x8`), eight stored."""
    L = [f"__attribute__((noinline)) static void {TRANSPOSE8}(__global const float* "
         "restrict s_, const int st, __global float* restrict P, const int pst) {"]
    L += [f"  const float8 r{i} = vload8(0, s_ + {i}*st);" for i in range(8)]
    L += ["  " + x for x in _transpose8x8([f"r{i}" for i in range(8)])]
    L += [f"  vstore8(c{c}, 0, P + {c}*pst);" for c in range(8)]
    L.append("}")
    return "\n".join(L) + "\n"


#: name -> definition of each shared function the kernels may call: the transposes
#: (:func:`_transpose16`, :func:`_transpose16_by8`, :func:`_transpose8`), the partial stores
#: (:func:`_edge_store`)
SHARED = {TRANSPOSE16: _transpose16(), TRANSPOSE16_ROWS: _transpose16("rows"),
          TRANSPOSE16_BY8: _transpose16_by8(), TRANSPOSE8: _transpose8(),
          **{EDGE_STORE.format(w): _edge_store(w) for w in (2, 4, 8, 16)}}


def shared_functions(sources: list[Source], d: Dialect = OPENCL) -> list[Source]:
    """The functions :func:`program` adds that ``sources`` call (shared tile loops,
    transposes, partial stores), as sources of their own: what a kernel calling them
    compiles besides its own code (:mod:`.split` counts them)."""
    text = "\n".join(s.src for s in sources)
    out = [Source(m, micro_kernel(m, d), (1,), (1,)) for m in micro_names(text)]
    out += [Source(n, t, (1,), (1,)) for n, t in SHARED.items() if n + "(" in text]
    return out


def program(sources: list[Source], d: Dialect = OPENCL) -> str:
    """The source of one program holding every kernel; the inline math it calls
    (:func:`.mathlib.preamble`), helpers and the Philox generator (with its iteration-word
    kernel) first, then the shared tile loops and transposes the kernels call
    (:func:`shared_functions`)."""
    rest = [HELPERS, D.HELPERS, PHILOX] + [s.src for s in shared_functions(sources, d) + sources]
    parts = [d.preamble, VECTOR_ACCESS, mathlib.preamble("\n".join(rest))] + rest
    return "\n".join(p for p in parts if p)
