"""The CUDA prelude: C++ device code that gives the shared C-style kernel templates the
OpenCL C vocabulary they are written in.

The templates (:mod:`autodiff.device.cstyle.kernels`, ``codegen``, ``render``) speak OpenCL
C: ``floatN``/``intN``/``uintN`` vectors with lanes ``.s0 .. .sf`` and component-wise
operators, comparisons giving ``-1``/``0`` lanes, ``vloadN``/``vstoreN``, ``as_int``,
``convert_floatN``, ``select``, builtins generic over scalars and vectors. In CUDA C++ each
of these is a small device function or a struct with operators, generated here for every
width the templates use; the whole program then sits in ``namespace ad`` so that these
vector types hide CUDA's own ``float4`` (whose lanes are ``.x .. .w``, without operators),
while kernels keep their plain names through ``extern "C"``.

Math function names (the dialect's table, :data:`MATH`): the inline transcendentals that
OpenCL programs carry for PoCL (``_ad_log``, ``_ad_pow``, ``_ad_erf``) map to CUDA's own
``logf``/``powf``/``erff`` (libdevice, 1-4 ulp, IEEE special cases); ``_ad_max``/``_ad_min``
keep numpy's NaN propagation around ``fmaxf``/``fminf``.

``vloadN``/``vstoreN`` are lane accesses; every kernel wrapper declares the arena 256-byte
aligned (``__builtin_assume_aligned``), so NVVM merges the lanes of an aligned row into
16-byte ``float4`` transactions where the offsets prove it (``ld.global.v4``), and keeps
element accesses elsewhere, which is all OpenCL's ``vloadN`` requires.

Philox-4x32-10 (:func:`philox`) is the same generator and counter layout as the OpenCL
program's (:mod:`autodiff.device.cstyle.philox`): bit-identical draws on both devices and
the numpy reference.
"""
from __future__ import annotations

from ..cstyle import dtypes as _dtypes, philox as _philox
from ..cstyle.kernels import LANES

#: vector widths the templates use (float16 rows of matmul tiles and reductions, float4
#: and float2 stores of the dot-form tile); a template using another width needs it added
#: here
WIDTHS = (2, 4, 8, 16)

#: OpenCL math builtins generic over float/floatN -> the CUDA float function (one operand
#: or more); every one is defined for scalars and every width
MATH = {
    "exp": ("expf", 1), "exp2": ("exp2f", 1), "sqrt": ("sqrtf", 1), "sin": ("sinf", 1),
    "cos": ("cosf", 1), "tanh": ("tanhf", 1), "fabs": ("fabsf", 1), "rint": ("rintf", 1),
    "_ad_log": ("logf", 1), "_ad_erf": ("erff", 1), "_ad_tanh": ("tanhf", 1),
    "_ad_sin": ("sinf", 1), "_ad_cos": ("cosf", 1),
    "sign": ("_ad_sign1", 1),
    "fmax": ("fmaxf", 2), "fmin": ("fminf", 2), "copysign": ("copysignf", 2),
    "_ad_pow": ("powf", 2), "_ad_max": ("_ad_max1", 2), "_ad_min": ("_ad_min1", 2),
    "fma": ("fmaf", 3),
}

#: integer builtins -> the CUDA int function
INT_MATH = {"min": ("min", 2), "max": ("max", 2), "abs": ("abs", 1)}

HEAD = r"""/* autodiff CUDA program: prelude (OpenCL C vocabulary for the shared templates) */
#define restrict __restrict__
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fc00000)
namespace ad {
typedef unsigned int uint;
__forceinline__ float _ad_sign1(float x) { return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x); }
__forceinline__ float _ad_max1(float a, float b) { return (a != a || b != b) ? a + b : fmaxf(a, b); }
__forceinline__ float _ad_min1(float a, float b) { return (a != a || b != b) ? a + b : fminf(a, b); }
__forceinline__ int as_int(float x) { return __float_as_int(x); }
__forceinline__ int atomic_cmpxchg(volatile int* p, int c, int v) { return atomicCAS((int*)p, c, v); }
__forceinline__ int atomic_inc(volatile int* p) { return atomicAdd((int*)p, 1); }
__forceinline__ int atomic_min(volatile int* p, int v) { return atomicMin((int*)p, v); }
__forceinline__ int atomic_max(volatile int* p, int v) { return atomicMax((int*)p, v); }
__forceinline__ uint as_uint(float x) { return __float_as_uint(x); }
__forceinline__ float as_float(int x) { return __int_as_float(x); }
__forceinline__ float as_float(uint x) { return __uint_as_float(x); }
__forceinline__ int convert_int(float x) { return (int)x; }
__forceinline__ float convert_float(int x) { return (float)x; }
__forceinline__ float select(float a, float b, int c) { return c ? b : a; }
__forceinline__ int select(int a, int b, int c) { return c ? b : a; }
__forceinline__ uint mul_hi(uint a, uint b) { return __umulhi(a, b); }
"""


def _vec(elem: str, w: int) -> str:
    return f"{elem}{w}"


def _lanes(w: int):
    return [f"s{LANES[j]}" for j in range(w)]


def _struct(elem: str, w: int) -> str:
    """``struct floatN { float s0 .. ; }`` with a broadcast and a per-lane constructor."""
    t, ls = _vec(elem, w), _lanes(w)
    args = ", ".join(f"{elem} a{j}" for j in range(w))
    inits = ", ".join(f"{l}(a{j})" for j, l in enumerate(ls))
    bcast = ", ".join(f"{l}(v)" for l in ls)
    return (f"struct {t} {{\n  {elem} {', '.join(ls)};\n  {t}() = default;\n"
            f"  __forceinline__ explicit {t}({elem} v) : {bcast} {{}}\n"
            f"  __forceinline__ {t}({args}) : {inits} {{}}\n}};\n")


def _lanewise(ret: str, name: str, params: list[tuple[str, str]], expr) -> str:
    """``ret name(params) { r.sJ = expr(J); }``, ``expr(lane)`` the lane's C expression."""
    w = int(ret[len(ret.rstrip("0123456789")):])
    ps = ", ".join(f"{ty} {n}" for ty, n in params)
    body = " ".join(f"r.{l} = {expr(l)};" for l in _lanes(w))
    return f"__forceinline__ {ret} {name}({ps}) {{ {ret} r; {body} return r; }}\n"


def _operators(elem: str, w: int) -> str:
    t, it = _vec(elem, w), _vec("int", w)
    integral = elem != "float"
    out = []
    arith = ["+", "-", "*", "/"] + (["&", "|"] if integral else [])
    for op in arith:
        out.append(_lanewise(t, f"operator{op}", [(t, "a"), (t, "b")], lambda l: f"a.{l} {op} b.{l}"))
        out.append(_lanewise(t, f"operator{op}", [(t, "a"), (elem, "b")], lambda l: f"a.{l} {op} b"))
        out.append(_lanewise(t, f"operator{op}", [(elem, "a"), (t, "b")], lambda l: f"a {op} b.{l}"))
        out.append(f"__forceinline__ {t}& operator{op}=({t}& a, {t} b) {{ return a = a {op} b; }}\n")
        out.append(f"__forceinline__ {t}& operator{op}=({t}& a, {elem} b) {{ return a = a {op} b; }}\n")
    out.append(_lanewise(t, "operator-", [(t, "a")], lambda l: f"-a.{l}"))
    if integral:
        out.append(_lanewise(t, "operator~", [(t, "a")], lambda l: f"~a.{l}"))
    for op in ("<", "<=", ">", ">=", "==", "!="):
        # OpenCL vector comparisons: -1 (all bits set) where true, 0 where false
        out.append(_lanewise(it, f"operator{op}", [(t, "a"), (t, "b")],
                             lambda l: f"-(int)(a.{l} {op} b.{l})"))
        out.append(_lanewise(it, f"operator{op}", [(t, "a"), (elem, "b")],
                             lambda l: f"-(int)(a.{l} {op} b)"))
        out.append(_lanewise(it, f"operator{op}", [(elem, "a"), (t, "b")],
                             lambda l: f"-(int)(a {op} b.{l})"))
    # select(a, b, c): b where the lane's most significant bit of c is set, else a
    out.append(_lanewise(t, "select", [(t, "a"), (t, "b"), (it, "c")],
                         lambda l: f"c.{l} < 0 ? b.{l} : a.{l}"))
    return "".join(out)


def _functions(w: int) -> str:
    f, i = _vec("float", w), _vec("int", w)
    out = []
    for name, (cfn, n) in MATH.items():
        params = [(f, "abc"[k]) for k in range(n)]
        out.append(_lanewise(f, name, params,
                             lambda l: f"{cfn}({', '.join(f'{p}.{l}' for _, p in params)})"))
    for name, (cfn, n) in INT_MATH.items():
        params = [(i, "abc"[k]) for k in range(n)]
        out.append(_lanewise(i, name, params,
                             lambda l: f"::{cfn}({', '.join(f'{p}.{l}' for _, p in params)})"))
    out.append(_lanewise(i, f"convert_int{w}", [(f, "a")], lambda l: f"(int)a.{l}"))
    out.append(_lanewise(f, f"convert_float{w}", [(i, "a")], lambda l: f"(float)a.{l}"))
    out.append(_lanewise(f, f"convert_float{w}", [(f, "a")], lambda l: f"a.{l}"))
    out.append(_lanewise(i, f"as_int{w}", [(f, "a")], lambda l: f"__float_as_int(a.{l})"))
    out.append(_lanewise(f, f"as_float{w}", [(i, "a")], lambda l: f"__int_as_float(a.{l})"))
    out.append(_vload(w))
    return "".join(out)


def _vload(w: int) -> str:
    """``vloadN(i, p)`` / ``vstoreN(v, i, p)``: ``N`` floats at ``p + i*N``, as lane
    accesses that NVVM merges into 16-byte transactions where it can prove the alignment."""
    f, ls = _vec("float", w), _lanes(w)
    ld = " ".join(f"r.{l} = q[{j}];" for j, l in enumerate(ls))
    st = " ".join(f"q[{j}] = v.{l};" for j, l in enumerate(ls))
    return (f"__forceinline__ {f} vload{w}(size_t i, const float* p) {{ const float* q = "
            f"p + i*{w}; {f} r; {ld} return r; }}\n"
            f"__forceinline__ void vstore{w}({f} v, size_t i, float* p) {{ float* q = "
            f"p + i*{w}; {st} }}\n")


def _scalar_math() -> str:
    """Scalar overloads of every generic name (in ``namespace ad`` they hide the global
    ones, so each name is defined for ``float`` here too)."""
    out = []
    for name, (cfn, n) in MATH.items():
        if name == cfn:
            continue
        ps = ", ".join(f"float {p}" for p in "abc"[:n])
        call = ", ".join("abc"[:n])
        prefix = "" if cfn.startswith("_ad_") else "::"
        out.append(f"__forceinline__ float {name}({ps}) {{ return {prefix}{cfn}({call}); }}\n")
    for name, (cfn, n) in INT_MATH.items():
        ps = ", ".join(f"int {p}" for p in "abc"[:n])
        out.append(f"__forceinline__ int {name}({ps}) {{ return ::{cfn}({', '.join('abc'[:n])}); }}\n")
    return "".join(out)


HELPERS = r"""
/* horizontal sum / maximum of a float16, in the OpenCL helpers' pairwise order */
__forceinline__ float _hsum16(float16 v) {
  float a[8], b[4];
  a[0] = v.s0 + v.s8; a[1] = v.s1 + v.s9; a[2] = v.s2 + v.sa; a[3] = v.s3 + v.sb;
  a[4] = v.s4 + v.sc; a[5] = v.s5 + v.sd; a[6] = v.s6 + v.se; a[7] = v.s7 + v.sf;
  for (int j = 0; j < 4; j++) b[j] = a[j] + a[j + 4];
  return (b[0] + b[2]) + (b[1] + b[3]);
}
/* the shared 16x16 transpose of B^T into panels (cstyle.kernels.TRANSPOSE16) */
__forceinline__ void _ad_tp16(const float* s_, int st, int last, float* P, int kn) {
  for (int i = 0; i < 16; i++) {
    const float* r = s_ + min(i, last) * st;
    for (int kk = 0; kk < kn; kk++) P[16 * kk + i] = r[kk];
  }
}
__forceinline__ void _ad_tp16v(const float16* r, float* P, int kn) {
  for (int i = 0; i < 16; i++) {
    const float* x = reinterpret_cast<const float*>(r + i);
    for (int kk = 0; kk < kn; kk++) P[16 * kk + i] = x[kk];
  }
}
/* the shared 8x8 transpose of a pack (cstyle.kernels.TRANSPOSE8) */
__forceinline__ void _ad_tp8(const float* s_, int st, float* P, int pst) {
  for (int c = 0; c < 8; c++)
    for (int i = 0; i < 8; i++) P[c * pst + i] = s_[i * st + c];
}
/* the first n lanes of a vector stored (cstyle.kernels.EDGE_STORE) */
#define AD_STN(W) __forceinline__ void _ad_st##W##n(float##W v, float* p, int n) { \
  const float* a = reinterpret_cast<const float*>(&v); \
  for (int j = 0; j < n; j++) p[j] = a[j]; }
AD_STN(2) AD_STN(4) AD_STN(8) AD_STN(16)
/* a vector divided by a scalar: one division and a product (cstyle codegen, mathlib) */
#define AD_DIVS(T) __forceinline__ T _ad_divs(T a, float b) { \
  const float r = 1.0f / b; return isinf(r) ? a / b : a * r; }
AD_DIVS(float2) AD_DIVS(float4) AD_DIVS(float8) AD_DIVS(float16)
__forceinline__ float _hmax16(float16 v) {
  float a[8], b[4];
  a[0] = _ad_max(v.s0, v.s8); a[1] = _ad_max(v.s1, v.s9); a[2] = _ad_max(v.s2, v.sa);
  a[3] = _ad_max(v.s3, v.sb); a[4] = _ad_max(v.s4, v.sc); a[5] = _ad_max(v.s5, v.sd);
  a[6] = _ad_max(v.s6, v.se); a[7] = _ad_max(v.s7, v.sf);
  for (int j = 0; j < 4; j++) b[j] = _ad_max(a[j], a[j + 4]);
  return _ad_max(_ad_max(b[0], b[2]), _ad_max(b[1], b[3]));
}
"""


def philox() -> str:
    """Philox-4x32-10 and the kernel writing the iteration words (see
    :mod:`autodiff.device.cstyle.philox` for the counter layout)."""
    w = _philox.ITER_WORDS
    return f"""
__forceinline__ uint4 _ad_philox4x32(uint4 c, uint k0, uint k1) {{
  #pragma unroll
  for (int r = 0; r < 10; r++) {{
    if (r) {{ k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }}
    const uint h0 = mul_hi(0xD2511F53u, c.s0), l0 = 0xD2511F53u * c.s0;
    const uint h1 = mul_hi(0xCD9E8D57u, c.s2), l1 = 0xCD9E8D57u * c.s2;
    c = uint4(h1 ^ c.s1 ^ k0, l1, h0 ^ c.s3 ^ k1, l0);
  }}
  return c;
}}
__forceinline__ float _ad_rand(uint k0, uint k1, int e, const float* buf) {{
  const uint4 w = _ad_philox4x32(uint4((uint)e >> 2, 0u, as_uint(buf[{w}]),
                                       as_uint(buf[{w + 1}])), k0, k1);
  const int s = e & 3;
  const uint x = s == 0 ? w.s0 : (s == 1 ? w.s1 : (s == 2 ? w.s2 : w.s3));
  return (float)(x >> 8) * 5.9604644775390625e-08f;
}}
extern "C" __global__ void __launch_bounds__(1) {_philox.SET_KERNEL}(float* restrict buf, const uint c2, const uint c3) {{
  buf[{w}] = as_float(c2);
  buf[{w + 1}] = as_float(c3);
}}
"""


def counters(name: str) -> str:
    """Kernel ``name`` writing the loop counters into the arena (its arguments are the
    counters; layout: :mod:`autodiff.device.opencl.control`), added to programs that read
    them."""
    from ..opencl import control
    n = control.MAX_DEPTH
    return (f'extern "C" __global__ void __launch_bounds__(1) {name}('
            "float* restrict buf, " + ", ".join(f"const int c{d}" for d in range(n)) + ") {\n"
            + "".join(f"  buf[{control.COUNTERS + d}] = as_float(c{d});\n" for d in range(n))
            + "}\n")


def source() -> str:
    """The prelude: macros, then the opening of ``namespace ad`` (closed by
    :data:`TAIL`) with every type and function the templates use."""
    parts = [HEAD]
    parts += [_struct(e, w) for e in ("float", "int") for w in WIDTHS] + [_struct("uint", 4)]
    parts.append(_scalar_math())
    parts += [_operators(e, w) for e in ("float", "int") for w in WIDTHS]
    parts += [_functions(w) for w in WIDTHS]
    parts += [HELPERS, _dtypes.CPP_PRELUDE, philox()]      # dtype loads/stores, int helpers
    return "".join(parts)


#: closes the namespace :func:`source` opens
TAIL = "}  // namespace ad\n"
