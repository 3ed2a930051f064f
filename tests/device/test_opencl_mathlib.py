"""Accuracy of the inline ``log`` (``_ad_log``) in ulps against float64 numpy, for the
scalar and the float16 vector overloads, over normal and subnormal inputs and the IEEE
special values."""
import numpy as np
import pytest

from autodiff.device.cstyle import kernels as K
from autodiff.device.opencl import device
from autodiff.device.opencl.dialect import OPENCL

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)

from autodiff.device.opencl.runtime import run_sources  # noqa: E402

N = 1 << 16


def _inputs():
    rng = np.random.default_rng(1)
    parts = [np.exp(rng.uniform(-103, 88.7, N // 2)),           # normal and subnormal
             rng.uniform(0.5, 2.0, N // 4),                        # around 1
             1.0 + rng.uniform(-1e-3, 1e-3, N // 8),               # cancellation zone
             np.arange(1, N // 8 + 1) * 1.4e-45]                   # smallest subnormals
    return np.concatenate(parts).astype(np.float32)


@pytest.fixture(scope="module")
def logs():
    x = _inputs()
    special = np.array([0.0, -0.0, -1.0, np.inf, -np.inf, np.nan, 1.0, 2.0,
                        np.finfo(np.float32).max, np.finfo(np.float32).tiny,
                        np.float32(1.4e-45)] + [1.0] * 5, np.float32)
    ox = K.SLACK
    os_ = ox + x.size
    oy, oy16, osp = os_ + special.size, os_ + special.size + x.size, os_ + special.size + 2 * x.size
    host = np.zeros(osp + special.size + K.SLACK, np.float32)
    host[ox:ox + x.size], host[os_:os_ + special.size] = x, special
    scalar = K.elementwise("l1", x.size, f"_ad_log(buf[{ox} + i])", K.Ref(oy, (1,)),
                           d=OPENCL)
    vec = K.Source("l16", f"""__kernel void l16(__global float* buf) {{
  const int i = get_global_id(0);
  vstore16(_ad_log(vload16(i, buf + {ox})), i, buf + {oy16});
}}""", (x.size // 16,), (16,))
    sp = K.elementwise("lsp", special.size, f"_ad_log(buf[{os_} + i])", K.Ref(osp, (1,)),
                       d=OPENCL)
    out, _ = run_sources([scalar, vec, sp], host)
    return x, out[oy:oy + x.size], out[oy16:oy16 + x.size], special, out[osp:osp + special.size]


def _ulps(x, y):
    ref = np.log(x.astype(np.float64))
    ulp = np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
    return np.abs(y.astype(np.float64) - ref) / ulp


def test_log_scalar_within_one_ulp(logs):
    x, y, _, _, _ = logs
    err = _ulps(x, y)
    assert err.max() <= 1.0, f"max error {err.max():.3f} ulp at x={x[err.argmax()]!r}"
    assert err.mean() < 0.35


def test_log_float16_matches_scalar(logs):
    _, y, y16, _, _ = logs
    np.testing.assert_array_equal(y16, y)


def test_log_special_values(logs):
    *_, special, got = logs
    with np.errstate(divide="ignore", invalid="ignore"):
        ref = np.log(special)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    ok = ~np.isnan(ref)
    np.testing.assert_allclose(got[ok], ref[ok], rtol=2e-7)


@pytest.fixture(scope="module")
def pows():
    rng = np.random.default_rng(2)
    n = 1 << 14
    a = np.concatenate([np.exp(rng.uniform(-5, 5, n)),                  # positive bases
                        -np.exp(rng.uniform(-3, 3, 64)),                # negative bases
                        [0, 0, -0.0, 1, 1, np.inf, 2, 4, -2, -2, 0.999, 0.9]]).astype(np.float32)
    b = np.concatenate([rng.uniform(-8, 8, n),
                        rng.integers(-5, 6, 64),
                        [2, -1, 3, np.nan, 7.5, -2, 0, 0.5, 3, 2.5, 1000, 37]]).astype(np.float32)
    oa = K.SLACK
    ob, oo = oa + a.size, oa + 2 * a.size
    host = np.zeros(oo + a.size + K.SLACK, np.float32)
    host[oa:ob], host[ob:oo] = a, b
    src = K.elementwise("pw", a.size, f"_ad_pow(buf[{oa} + i], buf[{ob} + i])", K.Ref(oo, (1,)),
                        d=OPENCL)
    out, _ = run_sources([src], host)
    return a, b, out[oo:oo + a.size]


def test_pow_error_bound(pows):
    a, b, got = pows
    with np.errstate(all="ignore"):
        ref = np.power(a.astype(np.float64), b.astype(np.float64))
        t = np.abs(b.astype(np.float64) * np.log(np.abs(a.astype(np.float64))))
    ok = np.isfinite(ref) & (np.abs(ref) > 1e-37) & (np.abs(ref) < 1e37) & np.isfinite(t)
    ulp = np.spacing(np.abs(ref[ok]).astype(np.float32)).astype(np.float64)
    err = np.abs(got[ok] - ref[ok]) / ulp
    bound = 1.25 * (1 + t[ok])          # the log's error scaled by |b ln a| (see mathlib)
    assert (err <= bound).all(), f"worst {np.max(err / (1 + t[ok])):.2f} (1 + |b ln a|) ulp"
    assert np.median(err) < 2
    assert err[t[ok] < 1].max() <= 2.0


def test_pow_special_values_like_numpy(pows):
    a, b, got = pows
    with np.errstate(all="ignore"):
        ref = np.power(a, b)
    tail = slice(-76, None)             # negative bases with integer exponents + specials
    np.testing.assert_array_equal(np.isnan(got[tail]), np.isnan(ref[tail]))
    ok = ~np.isnan(ref[tail])
    np.testing.assert_allclose(got[tail][ok], ref[tail][ok], rtol=2e-6)


def test_erf_within_one_and_a_half_ulp_without_exp():
    """``_ad_erf`` against scipy in float64: within 1.5 ulp (0.996 measured) on random
    points, both sides of the branch point 0.921875 and the whole rational branch up to
    4; exact at the special values; no ``exp`` in its code (in a matmul epilogue PoCL's
    ``exp`` cost more than the rest of the GELU)."""
    from autodiff.device.opencl import mathlib
    assert "exp(" not in mathlib.ERF
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.uniform(-5, 5, 1 << 15), rng.uniform(-1e-3, 1e-3, 1 << 10),
                        np.linspace(0.9, 0.95, 1000), np.linspace(-4.1, -0.9, 1 << 14),
                        [0.0, -0.0, 4.0, -4.0, 10.0, np.inf, -np.inf, np.nan]]).astype(np.float32)
    ox, oo = K.SLACK, K.SLACK + x.size
    host = np.zeros(oo + x.size + K.SLACK, np.float32)
    host[ox:oo] = x
    src = K.elementwise("ef", x.size, f"_ad_erf(buf[{ox} + i])", K.Ref(oo, (1,)), d=OPENCL)
    got = run_sources([src], host)[0][oo:oo + x.size]
    from scipy import special
    ref = special.erf(x.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    ok = np.isfinite(ref) & (ref != 0)
    err = np.abs(got[ok] - ref[ok]) / np.spacing(np.abs(ref[ok]).astype(np.float32))
    assert err.max() <= 1.5, f"max {err.max():.2f} ulp at x={x[ok][err.argmax()]!r}"
    assert got[x == 0].tolist() == [0.0, 0.0]
    assert got[np.isinf(x)].tolist() == [1.0, -1.0]
    assert got[np.abs(x) == 4].tolist() == [1.0, -1.0]


def test_a_program_holds_only_the_inline_math_it_calls():
    """``preamble(text)``: the functions ``text`` calls and those they call (``_ad_pow``
    calls ``_ad_log``); max and min come together; nothing for a text calling none; the
    rendered program of a kernel using ``log`` alone has no ``erf``."""
    from autodiff.device.opencl import mathlib, render
    from autodiff.device.opencl.mathlib import _defines
    assert _defines(mathlib.preamble("y = _ad_pow(a, b);")) == {"_ad_pow", "_ad_log"}
    assert _defines(mathlib.preamble("y = _ad_min(a, b);")) == {"_ad_max", "_ad_min"}
    assert mathlib.preamble("y = a + b;") == ""
    assert _defines(mathlib.preamble()) >= {"_ad_log", "_ad_pow", "_ad_erf", "_ad_tanh"}
    src = K.Source("k_log", "__kernel void k_log(__global float* b) { b[0] = _ad_log(b[1]); }",
                   (1,), (1,))
    text = render.program([src])
    assert "_ad_log(float x)" in text and "_ad_erf" not in text and "_ad_pow" not in text


@pytest.mark.parametrize("fn", ["sin", "cos"])
def test_trig_lanes_next_to_a_huge_lane(fn):
    """``_ad_sin``/``_ad_cos`` of every vector width: each lane within 2 ulp (or 1e-7
    absolute near a zero) of float64 numpy, in vectors whose other lanes hold 2^23 and
    more, infinities or NaN (PoCL 3.1's vector builtins turned such a vector's small lanes
    into garbage: sin(0.0021438) = 0.0085751)."""
    rng = np.random.default_rng(5)
    small = np.concatenate([rng.uniform(-4, 4, 64), rng.uniform(-1e-3, 1e-3, 32),
                            [1e-30, -1e-38, 0.0, 2.5e-4]])
    huge = [8388608.0, 1e9, -1e20, 3e38, np.inf, -np.inf, np.nan]
    rows = []
    for w in (2, 4, 8, 16):
        for v in small:
            row = rng.uniform(-4, 4, 16)
            row[0], row[w - 1] = v, huge[len(rows) % len(huge)]
            rows.append(row)
    x = np.array(rows, np.float32)                  # row r is read as float2/4/8/16
    ox, oo = K.SLACK, K.SLACK + x.size
    host = np.zeros(oo + x.size + K.SLACK, np.float32)
    host[ox:oo] = x.ravel()
    widths = [w for w in (2, 4, 8, 16) for _ in small]
    srcs = []
    for w in (2, 4, 8, 16):
        first = widths.index(w)
        srcs.append(K.Source(f"t{w}", f"""__kernel void t{w}(__global float* buf) {{
  const int r = {first} + get_global_id(0);
  vstore{w}(_ad_{fn}(vload{w}(0, buf + {ox} + r * 16)), 0, buf + {oo} + r * 16);
}}""", (len(small),), (1,)))
    out = run_sources(srcs, host)[0][oo:oo + x.size].reshape(x.shape)
    for r, w in enumerate(widths):
        got, ref = out[r, :w], getattr(np, fn)(x[r, :w].astype(np.float64))
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
        ok = ~np.isnan(ref)
        tol = np.maximum(2 * np.spacing(np.abs(ref[ok]).astype(np.float32)), 1e-7)
        assert (np.abs(got[ok] - ref[ok]) <= tol).all(), (w, x[r, :w], got)


def test_sin_cos_of_a_tensor_holding_a_huge_value():
    """End to end: small values of a tensor that also holds 1e10 and inf (the elementwise
    kernel's vectors mix them) keep their sin and cos (before the fix: sin(0.001) came out
    0.0080)."""
    import autodiff as ad
    x = np.float32([0.001, .5, 1e10, 2, .01, -.003, 3, 1, 1e30, -2e-4, np.inf, .25, 1e-30,
                    7, 8, 9, 10])
    a = ad.tensor(x)
    s, c = a.sin(), a.cos()
    ad.execute(device="opencl")
    with np.errstate(invalid="ignore"):
        rs, rc = np.sin(x.astype(np.float64)), np.cos(x.astype(np.float64))
    np.testing.assert_allclose(s.numpy(), rs, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(c.numpy(), rc, rtol=1e-6, atol=1e-7)
