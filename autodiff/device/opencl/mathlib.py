"""Inline transcendentals emitted into every program where PoCL's builtins are slow.

PoCL's ``log`` runs at ~0.05 Gelem/s (a scalar library call per element, not vectorised),
30x slower than numpy; ``_ad_log`` below (overloaded for ``float``, ``float4``, ``float16``) is straight-line float code (bit-level
exponent/mantissa split + the Cephes ``logf`` polynomial) that PoCL vectorises across
work-items. Accuracy: within 1 ulp of the correctly rounded result on normal and
subnormal inputs (tested in ``tests/device/test_opencl_mathlib.py``); ``log(0) = -inf``,
``log(x<0) = nan``, ``log(inf) = inf``, ``log(nan) = nan`` as IEEE requires.

:data:`FUNCS` maps a function name used by the renderer to its definition.
"""
from __future__ import annotations

import re

_LOG = r"""
__attribute__((overloadable)) inline T _ad_log(T x) {
  const I sub = isless(x, (T)(1.17549435e-38f));         /* subnormal: scale by 2^23 */
  const T xs = select(x, x * 8388608.0f, sub);
  const U u = as_U(xs);
  I e = convert_I((u >> 23) & (U)(0xffu)) - 126 - select((I)(0), (I)(23), sub);
  const T m = as_T((u & (U)(0x007fffffu)) | (U)(0x3f000000u));  /* xs = m 2^e, m in [.5,1) */
  const I lo = isless(m, (T)(0.707106781186547524f));
  e = select(e, e - 1, lo);
  const T f = select(m - 1.0f, m + m - 1.0f, lo);               /* exact (Sterbenz) */
  const T z = f * f;
  T p = (T)(7.0376836292e-2f);
  p = fma(p, f, (T)(-1.1514610310e-1f)); p = fma(p, f, (T)(1.1676998740e-1f));
  p = fma(p, f, (T)(-1.2420140846e-1f)); p = fma(p, f, (T)(1.4249322787e-1f));
  p = fma(p, f, (T)(-1.6668057665e-1f)); p = fma(p, f, (T)(2.0000714765e-1f));
  p = fma(p, f, (T)(-2.4999993993e-1f)); p = fma(p, f, (T)(3.3333331174e-1f));
  const T fe = convert_T(e);
  T y = p * f * z;
  y = fma(fe, (T)(-2.12194440e-4f), y);
  y = fma(z, (T)(-0.5f), y);
  T r = f + y;
  r = fma(fe, (T)(0.693359375f), r);
  r = select(r, (T)(-INFINITY), isequal(x, (T)(0.0f)));
  r = select(r, (T)(INFINITY), isequal(x, (T)(INFINITY)));
  return select(r, (T)(NAN), isless(x, (T)(0.0f)) | isnan(x));
}
"""

#: vector widths each inline function is emitted for (scalar, the vector kernels' lanes,
#: the matmul dot-form epilogue, float16 rows and loads).
WIDTHS = (1, 2, 4, 8, 16)


def _instantiate(template: str, w: int) -> str:
    sfx = "" if w == 1 else str(w)
    template = template.replace("(T a, T b)", f"(float{sfx} a, float{sfx} b)")
    return (template.replace("as_U", f"as_uint{sfx}").replace("as_T", f"as_float{sfx}")
            .replace("convert_I", f"convert_int{sfx}").replace("convert_T", f"convert_float{sfx}")
            .replace("(T)", f"(float{sfx})").replace("(I)", f"(int{sfx})")
            .replace("(U)", f"(uint{sfx})").replace(" T ", f" float{sfx} ")
            .replace("(T x)", f"(float{sfx} x)").replace(" I ", f" int{sfx} ")
            .replace(" U ", f" uint{sfx} "))


LOG = "".join(_instantiate(_LOG, w) for w in WIDTHS)

# pow(a, b) = exp(b log|a|) with IEEE special cases; PoCL's pow runs at 0.006 Gelem/s.
# Error: the <= 1 ulp relative error of log is scaled by t = |b ln a|: measured within
# 1.06 (1 + t) ulp (median 1.5 ulp for |b| < 8, |ln a| < 5); exact for a == 1, b == 0,
# b == 2 (a*a). Not a few-ulp pow for large t: builtin pow (1 ulp) is 200x slower here.
_POW = r"""
__attribute__((overloadable)) inline T _ad_pow(T a, T b) {
  const T l = _ad_log(fabs(a));
  const T t = b * l;
  const T c = select((T)(0.0f), fma(b, l, -t), isfinite(t));  /* the product's rounding */
  const T r = exp(t) * (1.0f + c);
  const I bint = isequal(b, rint(b));
  const I bodd = bint & isnotequal(rint(b * 0.5f), b * 0.5f);
  T out = select(r, -r, signbit(a) & bodd);          /* signbit: pow(-0, -1) = -inf */
  out = select(out, (T)(NAN), isless(a, (T)(0.0f)) & (bint == (I)(0)) & isfinite(a));
  out = select(out, a * a, isequal(b, (T)(2.0f)));
  return select(out, (T)(1.0f), isequal(b, (T)(0.0f)) | isequal(a, (T)(1.0f)) |
                                (isequal(fabs(a), (T)(1.0f)) & isinf(b)));   /* (-1)^inf */
}
"""

POW = "".join(_instantiate(_POW, w) for w in WIDTHS)

# erf(x): |x| < 0.921875: x + x P(x^2); |x| < 4: 1 - N(t) / D(t), t = |x| - 0.921875 (exact
# in float32), with the sign of x; else +-1. P (degree 5) is our own Lawson-weighted
# least-squares fit of (erf(x) - x)/x (relative fit error 1.6e-8); N / D (degrees 7 and 7,
# D(0) = 1) our own Lawson-weighted linearised fit of erfc on [0.921875, 4] (absolute
# error 1.9e-10). Within 1 ulp of erf over [-4.5, 4.5] (float32 with fma, against scipy
# in float64; 0.996 ulp measured on PoCL). The same two-interval split is used by ARM's
# optimized-routines erff. No exp: the earlier 1 - exp(-(a + a Q(a))) form spent most of
# its time in PoCL's exp (one Zen 3 thread: `bench.kernels` gelu [1024, 512] 1.37 -> 0.76-
# 0.79 ms, 1.6-1.9x -> 1.02-1.05x the C loop with libmvec; the main job's FF1 product
# [1024, 128] x [128, 512] with a GELU epilogue storing one output 2.81 -> 2.27 ms in a
# harness). PoCL's own erf runs at 0.014 Gelem/s.
_ERF = r"""
__attribute__((overloadable)) inline T _ad_erf(T x) {
  const T a = fabs(x);
  const T s = x * x;
  T p = (T)(-5.99099206738174e-4f);
  p = fma(p, s, (T)(4.993212874978781e-3f)); p = fma(p, s, (T)(-2.6766644790768623e-2f));
  p = fma(p, s, (T)(1.128181740641594e-1f)); p = fma(p, s, (T)(-3.7612494826316833e-1f));
  p = fma(p, s, (T)(1.2837915122509003e-1f));
  const T lo = fma(p, x, x);
  const T t = a - 0.921875f;
  T n = (T)(-8.574651e-05f);
  n = fma(n, t, (T)(0.001745864f)); n = fma(n, t, (T)(-0.015392194f));
  n = fma(n, t, (T)(0.07623135f)); n = fma(n, t, (T)(-0.22921947f));
  n = fma(n, t, (T)(0.4187375f)); n = fma(n, t, (T)(-0.4305602f));
  n = fma(n, t, (T)(0.19232629f));
  T d = (T)(0.003447141f);
  d = fma(d, t, (T)(0.011838828f)); d = fma(d, t, (T)(0.0252923f));
  d = fma(d, t, (T)(0.12143605f)); d = fma(d, t, (T)(0.12634522f));
  d = fma(d, t, (T)(0.54059243f)); d = fma(d, t, (T)(0.2693162f));
  d = fma(d, t, (T)(1.0f));
  const T hi = copysign(1.0f - n / d, x);
  const T r = select(hi, lo, isless(a, (T)(0.921875f)));
  return select(r, copysign((T)(1.0f), x), isgreaterequal(a, (T)(4.0f)));
}
"""

ERF = "".join(_instantiate(_ERF, w) for w in WIDTHS)

# max/min propagating NaN like numpy's maximum/minimum/max (and torch): OpenCL's fmax/fmin
# return the other operand when one is NaN, which would turn relu(nan) into 0.
_MAXMIN = r"""
__attribute__((overloadable)) inline T _ad_max(T a, T b) {
  return select(fmax(a, b), a + b, isnan(a) | isnan(b));
}
__attribute__((overloadable)) inline T _ad_min(T a, T b) {
  return select(fmin(a, b), a + b, isnan(a) | isnan(b));
}
"""

MAXMIN = "".join(_instantiate(_MAXMIN, w) for w in WIDTHS)

# tanh saturating to exactly +-1 where the correctly rounded float32 result is +-1
# (|x| > 9.015: 1 - tanh|x| < 2^-25, as torch gives); PoCL's builtin stops at 1 - 2^-24 there.
_TANH = r"""
__attribute__((overloadable)) inline T _ad_tanh(T x) {
  return select(tanh(x), copysign((T)(1.0f), x), isgreater(fabs(x), (T)(9.015f)));
}
"""

TANH = "".join(_instantiate(_TANH, w) for w in WIDTHS)

# a vector divided by a scalar as one division and a product (a vector division costs ~10
# cycles per vector on AVX-512); where the reciprocal overflows (a zero or subnormal
# divisor) the division itself, so infinities and NaNs stay IEEE's; within 2 ulp of it
_DIVS = r"""
__attribute__((overloadable)) inline floatW _ad_divs(floatW a, float b) {
  const float r = 1.0f / b;
  return isinf(r) ? a / (floatW)(b) : a * (floatW)(r);
}
"""

DIVS = "".join(_DIVS.replace("floatW", f"float{w}") for w in WIDTHS if w > 1)

#: the smallest argument for which PoCL 3.1's vector ``sin``/``cos`` take their
#: large-argument (Payne-Hanek) reduction: 2^23
TRIG_LARGE = 8388608.0


def _lanewise(fn: str, w: int) -> str:
    """``_ad_<fn>`` for ``float<w>``: PoCL's vector ``fn``, unless a lane is at least
    :data:`TRIG_LARGE` (or infinite), then the scalar ``fn`` lane by lane.

    PoCL 3.1's vector ``sin``, ``cos`` (and ``tan``) send *every* lane through the
    large-argument reduction when any lane needs it, which is wrong for small lanes:
    ``sin((float8)(0.0021438f, ..., 1e9f)).s0`` is 0.0085751 (4x the argument). A vector
    load past the end of an odd-sized tensor puts whatever the arena holds next in the
    spare lanes, so this struck ordinary inputs (pocl/pocl pull requests 2309 and 2327;
    measured here: every lane equals the scalar result whenever all lanes are below 2^23,
    none is guaranteed from 2^23 up). Scalar ``fn`` is within 2 ulp at every float."""
    if w == 1:                  # and the lane function: one call, not 16 inlined copies
        return (f"__attribute__((overloadable)) inline float _ad_{fn}(float x) "
                f"{{ return {fn}(x); }}\n"
                f"__attribute__((noinline)) float _ad_{fn}_lane(float x) {{ return {fn}(x); }}\n")
    lanes = ", ".join(f"_ad_{fn}_lane(x.s{i:x})" for i in range(w))
    return (f"__attribute__((overloadable)) inline float{w} _ad_{fn}(float{w} x) {{\n"
            f"  if (any(isgreaterequal(fabs(x), (float{w})({TRIG_LARGE!r}f)))) "
            f"return (float{w})({lanes});\n"
            f"  return {fn}(x);\n}}\n")


SIN = "".join(_lanewise("sin", w) for w in WIDTHS)
COS = "".join(_lanewise("cos", w) for w in WIDTHS)

#: name used in rendered expressions -> definition to include in the program.
FUNCS = {"_ad_log": LOG, "_ad_pow": POW, "_ad_erf": ERF, "_ad_max": MAXMIN, "_ad_tanh": TANH,
         "_ad_divs": DIVS, "_ad_sin": SIN, "_ad_cos": COS}


def _defines(src: str) -> set[str]:
    return set(re.findall(r"inline \w+ (\w+)\(", src))


#: the functions each entry of :data:`FUNCS` defines (``_ad_max`` with ``_ad_min``)
NAMES = {name: _defines(src) for name, src in FUNCS.items()}


def preamble(text: str | None = None) -> str:
    """Source of the inline functions that ``text`` (the rest of a program) calls, with
    those they call in turn (every one with None), to put before the kernels of a program.
    An unused one costs the build its whole optimisation: PoCL compiles with ``inline``
    defined away, so each is an external function (all of them: ~50 ms of a part's
    ``clBuildProgram``, PoCL 3.1)."""
    if text is None:
        return "".join(FUNCS.values())
    want, todo = set(), [text]
    while todo:
        t = todo.pop()
        for name, src in FUNCS.items():
            if name not in want and any(f + "(" in t for f in NAMES[name]):
                want.add(name)
                todo.append(src)
    return "".join(src for name, src in FUNCS.items() if name in want)
