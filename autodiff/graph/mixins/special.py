"""Special functions (``lgamma``, ``digamma``, ``polygamma``, ``erfinv``, ``mvlgamma``,
``i0``, and the ``torch.special`` family built on them) composed from existing graph ops.

The graph IR has no op for any of them. Each value is computed in float32 under
``no_grad()`` from a published approximation (named in each docstring, with the accuracy
measured against float64 PyTorch), and PyTorch's exact derivative is attached through
``value + (x - x.detach()) * derivative`` (:func:`_with_grad`): the added term is exactly 0,
its gradient is the derivative. Where the input or the derivative is not finite (poles,
``±inf``, NaN) the attached gradient is 0 (PyTorch gives ``±inf``/NaN there: a product with
an infinite derivative cannot be exactly 0, and the graph IR has no custom gradients).

dtypes: integers and bool give float32; float16/bfloat16 are computed in float32 and
rounded once (as PyTorch does on the CPU).
"""
from __future__ import annotations

import math

from ..trace import no_grad
from .elementwise import mask_and, mask_not, mask_or

_BIG = 8388608.0          # 2**23: every float32 of at least this magnitude is an integer
_LOG_PI = math.log(math.pi)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT2 = math.sqrt(2.0)

#: Lanczos' approximation, g = 7, n = 9 (Numerical Recipes 3rd ed. sec. 6.1; the
#: coefficients of Boost's / Wikipedia's ``lanczos`` sum for ``Gamma(z + 1)``)
_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028,
            771.32342877765313, -176.61502916214059, 12.507343278686905,
            -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7)

#: ``zeta(k) - 1`` for k = 2..15: ``lgamma(2 + e) = (1 - gamma) e + sum_k (-1)^k (zeta(k) - 1)
#: e^k / k`` (Abramowitz & Stegun 6.1.33 shifted by one; truncation below 1e-9 for |e| <= 1/2),
#: used on [0.5, 4.5) where Lanczos' float32 cancellation (absolute error ~1e-6) spoils the
#: relative accuracy near the roots 1 and 2
_ZETA_M1 = (0.6449340668482264, 0.2020569031595943, 0.08232323371113819, 0.03692775514336993,
            0.01734306198444914, 0.008349277381922827, 0.00407735619794434,
            0.0020083928260822143, 0.0009945751278180853, 0.0004941886041194645,
            0.0002460865533080483, 0.00012271334757848915, 6.124813505870483e-05,
            3.058823630702049e-05)
_EULER = 0.5772156649015329

#: Bernoulli numbers B_2, B_4, ..., B_14 (the asymptotic series of digamma and polygamma)
_BERNOULLI = (1.0 / 6, -1.0 / 30, 1.0 / 42, -1.0 / 30, 5.0 / 66, -691.0 / 2730, 7.0 / 6)

#: Giles, "Approximating the erfinv function" (GPU Computing Gems, 2011/2012), the
#: single-precision version: a polynomial in ``w - 2.5`` for ``w < 5``, in ``sqrt(w) - 3``
#: beyond, with ``w = -log((1 - x)(1 + x))``; highest degree first
_GILES_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                  0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_GILES_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
               0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)

#: Cephes' Chebyshev coefficients (``i0.c``, ``i1.c``; also PyTorch's ATen/native/Math.h)
#: for ``exp(-x) I0(x)`` on [0, 8] and ``exp(-x) sqrt(x) I0(x)`` on (8, inf), and the same
#: for I1 (``exp(-x) I1(x) / x``), trimmed to the terms that reach float32 (those below
#: ~1e-8 of the leading one change no float32 result; PyTorch's float32 I1 trims alike)
_I0_A = (-1.30002500998624804212E-8, 6.04699502254191894932E-8, -2.67079385394061173391E-7,
         1.11738753912010371815E-6, -4.41673835845875056359E-6, 1.64484480707288970893E-5,
         -5.75419501008210370398E-5, 1.88502885095841655729E-4, -5.76375574538582365885E-4,
         1.63947561694133579842E-3, -4.32430999505057594430E-3, 1.05464603945949983183E-2,
         -2.37374148058994688156E-2, 4.93052842396707084878E-2, -9.49010970480476444210E-2,
         1.71620901522208775349E-1, -3.04682672343198398683E-1, 6.76795274409476084995E-1)
_I0_B = (3.39623202570838634515E-9, 2.26666899049817806459E-8, 2.04891858946906374183E-7,
         2.89137052083475648297E-6, 6.88975834691682398426E-5, 3.36911647825569408990E-3,
         8.04490411014108831608E-1)
_I1_A = (9.38153738649577178388E-9, -4.44505912879632808065E-8, 2.00329475355213526229E-7,
         -8.56872026469545474066E-7, 3.47025130813767847674E-6, -1.32731636560394358279E-5,
         4.78156510755005422638E-5, -1.61760815825896745588E-4, 5.12285956168575772895E-4,
         -1.51357245063125314899E-3, 4.15642294431288815669E-3, -1.05640848946261981558E-2,
         2.47264490306265168283E-2, -5.29459812080949914269E-2, 1.02643658689847095384E-1,
         -1.76416518357834055153E-1, 2.52587186443633654823E-1)
_I1_B = (-3.83538038596423702205E-9, -2.63146884688951950684E-8, -2.51223623787020892529E-7,
         -3.88256480887769039346E-6, -1.10588938762623716291E-4, -9.76109749136146840777E-3,
         7.78576235018280120474E-1)

#: Numerical Recipes' ``erfcc`` coefficients (as in ``elementwise.erfc``): ``erfc(z) =
#: t exp(-z^2 + c0 + t (c1 + ...))`` with ``t = 1 / (1 + z/2)``
_ERFC = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
         -1.13520398, 1.48851587, -0.82215223, 0.17087277)


# -- helpers (float32 tensors in, float32 tensors out) ---------------------------------------
def _horner(x, coeffs):
    """``c0 x^(n-1) + ... + c_{n-1}`` (``coeffs`` highest degree first)."""
    acc = x * 0.0 + coeffs[0]
    for c in coeffs[1:]:
        acc = acc * x + c
    return acc


def _chbevl(x, coeffs):
    """Cephes' ``chbevl``: the Chebyshev series ``sum' c_i T_i(x/2)`` (Clenshaw)."""
    b0, b1, b2 = x * 0.0 + coeffs[0], x * 0.0, x * 0.0
    for c in coeffs[1:]:
        b2, b1 = b1, b0
        b0 = x * b1 - b2 + c
    return (b0 - b2) * 0.5


def _ipow(x, k: int):
    """``x**k`` for a positive integer ``k`` by repeated squaring (exact signs)."""
    out, base = None, x
    while k:
        if k & 1:
            out = base if out is None else out * base
        k >>= 1
        if k:
            base = base * base
    return out


def _is_neg_zero(x):
    return mask_and(x == 0, x.reciprocal() < 0)


def _sinpi_cospi(x):
    """``sin(pi x)`` and ``cos(pi x)`` with the argument reduced exactly first: ``r = x -
    round(x)`` in [-1/2, 1/2] (exact in float32), sign ``(-1)^round(x)``; ``cos(pi r)`` is
    ``sin(pi (1/2 - |r|))`` for ``|r| >= 1/4`` (keeps its relative accuracy near the
    half-integers). Also returns ``r`` (0 exactly at the integers)."""
    n = x.round()
    r = x - n
    odd = (n - (n * 0.5).floor() * 2.0) == 1.0
    a = r.abs()
    s = (r * math.pi).sin()
    c = ((0.5 - a) * math.pi).sin().where(a >= 0.25, (r * math.pi).cos())   # exact 0.5 - |r|
    return (-s).where(odd, s), (-c).where(odd, c), r


def _with_grad(value, pairs):
    """``value`` with gradient ``d`` for each ``(x, d)`` of ``pairs`` (``d`` computed
    without gradient): ``value + sum (x - x.detach()) * d``, where each term is exactly 0.
    Non-finite ``x`` or ``d`` get a zero gradient (see the module's docstring)."""
    out = value
    for x, d in pairs:
        with no_grad():
            ok = mask_and(x.isfinite(), d.isfinite())
            ds = d.where(ok, 0.0)
        xs = x.where(ok, 0.0)
        out = out + (xs - xs.detach()) * ds
    return out


def _float32(x, fn):
    """``fn`` of ``x`` under the dtype rules: integers and bool as float32; float16 and
    bfloat16 computed in float32, rounded once to their dtype."""
    if x.dtype in ("float16", "bfloat16"):
        return fn(x.float()).to(x.dtype)
    return fn(x if x.is_floating_point() else x.float())


def _lgamma_value(x):
    """``lgamma`` of a float32 tensor, no gradient (see :meth:`SpecialMixin.lgamma`)."""
    refl = x < 0.5
    z = (1.0 - x).where(refl, x) - 1.0                     # Gamma(z + 1), z >= -0.5
    a = z * 0.0 + _LANCZOS[0]
    for i, c in enumerate(_LANCZOS[1:], 1):
        a = a + c / (z + float(i))
    t = z + (_LANCZOS_G + 0.5)
    lg = (z + 0.5) * t.log() - t + a.log() + _HALF_LOG_2PI
    zz = z + 1.0                                           # lgamma(zz), zz >= 0.5
    mid = zz < 4.5
    k = (zz + 0.5).floor().where(mid, 2.0)                 # 1, 2, 3 or 4
    e = zz.where(mid, 2.0) - k                             # in [-1/2, 1/2], exact (Sterbenz)
    coeffs = [(-1.0) ** j * _ZETA_M1[j - 2] / j for j in range(len(_ZETA_M1) + 1, 1, -1)]
    series = e * (_horner(e, coeffs) * e + (1.0 - _EULER))  # lgamma(2 + e)
    series = series.where(k != 1.0, series - e.log1p())     # lgamma(1 + e)
    series = series.where(k != 3.0, series + (e + 2.0).log())
    series = series.where(k != 4.0, series + ((e + 2.0) * (e + 3.0)).log())
    lg = series.where(mid, lg)
    s, _, _ = _sinpi_cospi(x)
    lg_refl = _LOG_PI - s.abs().log() - lg                 # log(pi / |sin(pi x)|) - lgamma(1 - x)
    out = lg_refl.where(refl, lg)
    out = out.where(mask_and(x != math.inf, x > -_BIG), math.inf)   # inf, -inf, big negatives
    return out.where(x == x, x)


def _cot_derivative(n: int):
    """Coefficients (lowest degree first) of ``d^n/dx^n cot(pi x)`` as a polynomial in
    ``c = cot(pi x)``: ``d/dx P(c) = P'(c) * (-pi) (1 + c^2)``."""
    p = [0.0, 1.0]
    for _ in range(n):
        dp = [i * p[i] for i in range(1, len(p))] or [0.0]
        q = [0.0] * (len(dp) + 2)
        for i, a in enumerate(dp):
            q[i] += -math.pi * a
            q[i + 2] += -math.pi * a
        p = q
    return p


def _polygammas(orders, x):
    """``[polygamma(n, x) for n in orders]`` of a float32 tensor, no gradient (``n = 0``:
    digamma), sharing one recurrence and one reduction of ``pi x``: the upward recurrence
    ``psi_n(z) = psi_n(z + N) + (-1)^(n+1) n! sum_{k<N} (z + k)^-(n+1)`` with ``N = 6 +
    max(orders)`` (taken for every ``z``), then the asymptotic series at ``z + N``; for
    ``x < 0`` the reflection ``psi_n(x) = (-1)^n psi_n(1 - x) - pi d^n/dx^n cot(pi x)``."""
    refl = x < 0
    z = (1.0 - x).where(refl, x)
    z = z.where(z == z, 1.0).minimum(3e38)                 # NaN / inf handled at the end
    N = 6 + max(orders)
    accs = [None] * len(orders)
    for k in range(N):
        w = (z + float(k)).reciprocal() if k else z.reciprocal()
        for i, n in enumerate(orders):
            sign = -1.0 if n % 2 == 0 else 1.0             # (-1)^(n+1)
            term = -w if n == 0 else _ipow(w, n + 1) * (sign * float(math.factorial(n)))
            accs[i] = term if accs[i] is None else accs[i] + term
    z = z + float(N)
    w = z.reciprocal()
    w2 = w * w
    s, c, r = _sinpi_cospi(x)
    cot = c / s.where(r != 0, 1.0)
    pole = mask_and(x <= 0, r == 0)                        # 0 and the negative integers
    inf = math.inf
    outs = []
    for n, acc in zip(orders, accs):
        sign = -1.0 if n % 2 == 0 else 1.0
        if n == 0:
            series = z.log() - w * 0.5
            wk = w2
            for k, b in enumerate(_BERNOULLI, 1):
                series = series - wk * (b / (2 * k))
                wk = wk * w2
        else:
            series = _ipow(w, n) * float(math.factorial(n - 1)) + \
                _ipow(w, n + 1) * (math.factorial(n) * 0.5)
            wk = _ipow(w, n + 2)
            for k, b in enumerate(_BERNOULLI, 1):
                series = series + wk * (b * math.factorial(2 * k + n - 1) /
                                        math.factorial(2 * k))
                wk = wk * w2
            series = series * sign
        pos = acc + series                                 # polygamma(n, z)
        coef = _cot_derivative(n)
        dn = _horner(cot, coef[::-1])
        neg = pos * (1.0 if n % 2 == 0 else -1.0) - dn * math.pi
        out = neg.where(refl, pos)
        if n == 0:
            out = out.where(mask_not(pole), math.nan)
            out = out.where(x != 0, -inf)
            out = out.where(mask_not(_is_neg_zero(x)), inf)
            out = out.where(x != inf, inf)
        else:
            out = out.where(mask_not(pole), sign * inf)
            out = out.where(x != inf, 0.0 if n == 1 else math.nan)
            out = out.where(x != -inf, math.nan if n == 1 else sign * inf)
        outs.append(out.where(x == x, x))
    return outs


def _erfinv_core(w, x):
    """Giles' single-precision erfinv from ``w = -log((1 - x)(1 + x))`` and ``x``."""
    central = w < 5.0
    wc = w.where(central, 2.5) - 2.5
    wt = w.where(mask_not(central), 9.0).sqrt() - 3.0
    p = _horner(wc, _GILES_CENTRAL).where(central, _horner(wt, _GILES_TAIL))
    return p * x


def _erfinv_value(x):
    out = _erfinv_core(-((1.0 - x) * (1.0 + x)).log(), x)
    out = out.where(x.abs() < 1.0, math.nan)
    out = out.where(x != 1.0, math.inf).where(x != -1.0, -math.inf)
    return out.where(x == x, x)


def _bessel_value(x, order: int, scaled: bool):
    """Cephes' ``i0``/``i0e``/``i1``/``i1e`` (Chebyshev expansions on [0, 8] and
    (8, inf))."""
    z = x.abs()
    near = z <= 8.0
    zn = z.where(near, 8.0)
    zf = z.where(mask_not(near), 8.0)
    a, b = (_I0_A, _I0_B) if order == 0 else (_I1_A, _I1_B)
    va = _chbevl(zn * 0.5 - 2.0, a)
    if order == 1:
        va = va * zn
    vb = _chbevl(32.0 / zf - 2.0, b) / zf.sqrt()
    v = va.where(near, vb)
    if not scaled:
        v = z.exp() * v                                    # overflows where PyTorch's does
        v = v.where(z != math.inf, math.nan)               # PyTorch: exp(inf) / sqrt(inf)
    else:
        v = v.where(z != math.inf, 0.0)
    if order == 1:
        v = (-v).where(x < 0, v)
    return v.where(x == x, x)


def _log_ndtr_value(x):
    """``log(ndtr(x))``: for ``x < 0`` the logarithm of NR's ``erfcc`` form taken termwise,
    ``log(t) - z^2 + P(t) - log 2`` with ``z = -x / sqrt(2)`` (no underflow); for ``x >= 0``
    ``log1p(-erfc(x / sqrt 2) / 2)``."""
    z = (x.abs() * (1.0 / _SQRT2)).minimum(1e19)
    t = (z * 0.5 + 1.0).reciprocal()
    poly = _horner(t, tuple(reversed(_ERFC[1:])))
    log_erfc = t.log() + (t * poly + _ERFC[0]) - z * z
    lo = log_erfc - math.log(2.0)
    hi = (-(log_erfc.exp() * 0.5)).log1p()
    out = lo.where(x < 0, hi)
    out = out.where(x != -math.inf, -math.inf).where(x != math.inf, 0.0)
    return out.where(x == x, x)


_NDTRI_TAIL = 1e-7        # below: Giles' erfinv leaves its range (w > 16)
#: Abramowitz & Stegun 26.2.23 (absolute error below 4.5e-4): the lower-tail normal
#: quantile ``-(t - (c0 + c1 t + c2 t^2) / (1 + d1 t + d2 t^2 + d3 t^3))``, t = sqrt(-2 log p)
_AS_C = (0.010328, 0.802853, 2.515517)
_AS_D = (0.001308, 0.189269, 1.432788, 1.0)


def _ndtri_tail(p):
    """``ndtri(p)`` for tiny ``p``: A&S 26.2.23, then two Newton steps on ``log_ndtr(y) =
    log p`` (:func:`_log_ndtr_value`; converges quadratically from 4.5e-4)."""
    ps = p.where(mask_and(p > 0, p < _NDTRI_TAIL), _NDTRI_TAIL)
    logp = ps.log()
    t = (logp * -2.0).sqrt()
    y = -(t - _horner(t, _AS_C) / _horner(t, _AS_D))
    for _ in range(2):
        lnd = _log_ndtr_value(y)
        y = y - (lnd - logp) * (lnd + y * y * 0.5).exp() * math.sqrt(2.0 * math.pi)
    return y


class SpecialMixin:
    """Gamma-family, inverse-error, Bessel I0/I1 and normal-distribution functions."""

    # -- gamma family -------------------------------------------------------------------------
    def lgamma(self):
        """``log|Gamma(x)|`` (``torch.lgamma``), any shape; integers and bool give float32.

        Lanczos' approximation with g = 7, n = 9 (Numerical Recipes 3rd ed. sec. 6.1, Boost),
        reflection ``log(pi / |sin(pi x)|) - lgamma(1 - x)`` for ``x < 0.5`` (``sin(pi x)``
        after an exact reduction of ``x`` to [-1/2, 1/2]); on [0.5, 4.5) the Taylor series of
        ``lgamma(2 + e)``, ``|e| <= 1/2``, in ``zeta(k) - 1`` (A&S 6.1.33) with the recurrence
        ``lgamma(x + 1) = lgamma(x) + log x``: accurate near the roots 1 and 2 (0 there, as
        PyTorch). Measured against float64 PyTorch: relative error 8.2e-7 on (0, 60] and
        5.7e-7 on [3, 1e36]; on [-30, 0) 2.1e-5 relative to ``max(|lgamma|, 0.1)`` (absolute
        2e-6 near the negative roots: float32 cancellation in the reflection). ``lgamma(0)``,
        negative integers, ``x <= -2**23`` and ``±inf`` give ``inf`` (as PyTorch); NaN gives
        NaN. Gradient:
        ``digamma(x)``."""
        def f(x):
            with no_grad():
                v, (d,) = _lgamma_value(x), _polygammas((0,), x)
            return _with_grad(v, [(x, d)])
        return _float32(self, f)

    def digamma(self):
        """``d/dx lgamma(x)`` (``torch.digamma``, ``torch.special.psi``), any shape;
        integers and bool give float32.

        Upward recurrence ``psi(x) = psi(x + 1) - 1/x`` to ``x >= 6``, then the asymptotic
        (Stirling) series ``log x - 1/(2x) - sum B_2k / (2k x^2k)`` (Abramowitz & Stegun
        6.3.18) to ``B_14`` (the recurrence taken 6 times for every ``x``); reflection
        ``psi(1 - x) - pi cot(pi x)`` for ``x < 0``. Measured against float64 PyTorch on
        [-30, 60] away from the poles: 7e-6 relative to ``max(|psi|, 0.1)`` (absolute below
        1e-6 near its roots). As PyTorch: ``digamma(0) = -inf``, ``digamma(-0.0) = inf``,
        negative integers and ``-inf`` give NaN, ``inf`` gives ``inf``. Gradient:
        ``polygamma(1, x)``."""
        return self.polygamma(0)

    def polygamma(self, n: int):
        """The ``n``-th derivative of digamma (``x.polygamma(n)`` is ``torch.polygamma(n,
        x)``; ``n = 0`` is :meth:`digamma`), any shape; integers and bool give float32.

        For ``n >= 1``: upward recurrence ``psi_n(x) = psi_n(x + 1) + (-1)^(n+1) n! /
        x^(n+1)`` taken ``n + 7`` times for every ``x`` (the value and its derivative, order
        ``n + 1``, share one recurrence), then the asymptotic series (Abramowitz & Stegun
        6.4.11) to ``B_14``; reflection ``psi_n(x) = (-1)^n psi_n(1 - x) - pi d^n/dx^n
        cot(pi x)`` for ``x < 0`` (the derivative as a polynomial in ``cot``). Measured
        against float64 PyTorch for n = 1..4: relative error 5.9e-7 on (0, 60], 3.6e-6 on
        [-10, 0) away from the poles. Poles (0, negative integers): ``±inf`` with the sign of
        ``(-1)^(n+1)``; PyTorch gives the same except for n = 1 at negative integers (a large
        finite value from its rounded ``sin``). ``x = inf``: 0 for n = 1,
        NaN for n >= 2; ``x = -inf``: NaN for n = 1, ``(-1)^(n+1) inf`` for n >= 2 (all as
        PyTorch). For n = 6, 8, 12: 1.1e-6 on (0, 40], 2.3e-6 on [-5, 0) (``n!``
        overflows float32 from n = 35, where values overflow too).
        Gradient: ``polygamma(n + 1, x)``.

        Raises:
            TypeError: ``n`` is not an int.
            RuntimeError: ``n < 0``.
        """
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"polygamma(): argument 'n' must be int, not {type(n).__name__}")
        if n < 0:
            raise RuntimeError("polygamma(n, x) does not support negative n.")

        def f(x):
            with no_grad():
                v, d = _polygammas((n, n + 1), x)
            return _with_grad(v, [(x, d)])
        return _float32(self, f)

    def mvlgamma(self, p: int):
        """The multivariate log-gamma ``p(p-1)/4 log(pi) + sum_{j<p} lgamma(x - j/2)``
        (``torch.mvlgamma``, ``torch.special.multigammaln``), any shape; integers and bool
        give float32. Accuracy: that of :meth:`lgamma` (5e-7 relative against float64
        PyTorch on (1, 40] for p = 3). Elements ``<= (p - 1)/2`` (outside the function's
        domain) give the same formula of ``log|Gamma|`` as PyTorch 2.13, which no longer
        raises there (``inf`` at its poles). Gradient: ``sum_j digamma(x - j/2)``.

        Raises:
            RuntimeError: ``p < 1``.
        """
        if isinstance(p, bool) or not isinstance(p, int):
            raise TypeError(f"mvlgamma(): argument 'p' must be int, not {type(p).__name__}")
        if p < 1:
            raise RuntimeError("p has to be greater than or equal to 1")

        def f(x):
            out = None
            for j in range(p):
                t = (x - j * 0.5).lgamma()
                out = t if out is None else out + t
            return out + p * (p - 1) / 4.0 * _LOG_PI
        return _float32(self, f)

    # -- inverse error function ---------------------------------------------------------------
    def erfinv(self):
        """The inverse error function (``torch.erfinv``), any shape; integers and bool give
        float32.

        Giles' single-precision approximation ("Approximating the erfinv function", GPU
        Computing Gems Jade Edition, 2011): a degree-8 polynomial in ``w - 2.5`` (``w < 5``)
        or ``sqrt(w) - 3``, ``w = -log((1 - x)(1 + x))``. Measured against float64 PyTorch on
        (-1, 1), the last float32 before ``±1`` included: relative error 2.6e-7 (PyTorch
        refines its own with Newton steps; no difference at float32 test tolerances). ``±1``
        give ``±inf``, ``|x| > 1`` and NaN give NaN (as PyTorch).
        Gradient: ``sqrt(pi)/2 exp(erfinv(x)^2)``."""
        def f(x):
            with no_grad():
                v = _erfinv_value(x)
                d = (v * v).exp() * (math.sqrt(math.pi) / 2.0)
            return _with_grad(v, [(x, d)])
        return _float32(self, f)

    # -- modified Bessel functions ------------------------------------------------------------
    def i0(self):
        """The modified Bessel function of the first kind of order 0 (``torch.i0``,
        ``torch.special.i0``), any shape; integers and bool give float32.

        Cephes' Chebyshev expansions (``i0.c``; PyTorch's too) of ``exp(-x) I0(x)`` on
        [0, 8] and ``exp(-x) sqrt(x) I0(x)`` beyond. Measured against float64 PyTorch on
        [-85, 85]: relative error 3.7e-7. Overflows to ``inf`` from ``|x| ~ 89`` and
        gives NaN at ``±inf``, as PyTorch's float32 does. Gradient: ``i1(x)``."""
        def f(x):
            with no_grad():
                v, d = _bessel_value(x, 0, False), _bessel_value(x, 1, False)
            return _with_grad(v, [(x, d)])
        return _float32(self, f)

    def _i0e(self):
        """``exp(-|x|) I0(x)`` (``torch.special.i0e``; Cephes ``i0e``): relative error 2.6e-7
        against float64 PyTorch on [-100, 100]; 0 at ``±inf``. Gradient: ``i1e(x) -
        sign(x) i0e(x)``."""
        def f(x):
            with no_grad():
                v = _bessel_value(x, 0, True)
                d = _bessel_value(x, 1, True) - x.sign() * v
            return _with_grad(v, [(x, d)])
        return _float32(self, f)

    def _i1(self):
        """``I1(x)`` (``torch.special.i1``; Cephes ``i1``, float32 coefficients as
        PyTorch): relative error 1.3e-6 on [-85, 85]; ``i1e`` 1.2e-6 on [-100, 100].
        Gradient ``i0(x) - i1(x)/x``
        (1/2 at 0)."""
        def f(x):
            with no_grad():
                v = _bessel_value(x, 1, False)
                nz = x != 0
                d = (_bessel_value(x, 0, False) - v / x.where(nz, 1.0)).where(nz, 0.5)
            return _with_grad(v, [(x, d)])
        return _float32(self, f)

    def _i1e(self):
        """``exp(-|x|) I1(x)`` (``torch.special.i1e``). Gradient ``i0e(x) - i1e(x) (sign(x)
        + 1/x)`` (1/2 at 0)."""
        def f(x):
            with no_grad():
                v = _bessel_value(x, 1, True)
                nz = x != 0
                d = (_bessel_value(x, 0, True) - v * (x.sign() + x.where(nz, 1.0).reciprocal())
                     ).where(nz, 0.5)
            return _with_grad(v, [(x, d)])
        return _float32(self, f)

    # -- normal distribution, entropy, x log1p(y) ---------------------------------------------
    def _ndtr(self):
        """The standard normal CDF ``erfc(-x / sqrt 2) / 2`` (``torch.special.ndtr``), from
        the accurate :meth:`erfc`: relative error 3e-6 on [-5, 8] and 1.9e-5 on [-13, -5]
        against the float64 ``erfc(-x/sqrt 2)/2``. PyTorch computes ``(1 + erf(x/sqrt 2))/2``,
        which flushes to 0 below ``x ~ -5.5`` in float32 (-8.3 in float64); the tail here is
        the accurate one. Gradient ``exp(-x^2/2) / sqrt(2 pi)``."""
        return _float32(self, lambda x: (x * (-1.0 / _SQRT2)).erfc() * 0.5)

    def _ndtri(self):
        """The inverse of the standard normal CDF (``torch.special.ndtri``): Giles' erfinv
        with ``w = -log(4 p (1 - p))`` computed from ``p`` (so no precision is lost to
        ``2p - 1`` in the lower tail): ``sqrt(2) erfinv(2p - 1)``; below ``p = 1e-7`` (out of
        Giles' range) Abramowitz & Stegun 26.2.23 refined by two Newton steps on
        ``log_ndtr(y) = log p``. Measured against float64 PyTorch: relative error 2.6e-7
        for ``p`` in [1e-44, 1 - 6e-8]. ``p = 0, 1`` give
        ``-inf, inf``, outside [0, 1] and NaN give NaN (as PyTorch). Gradient ``sqrt(2 pi)
        exp(ndtri(p)^2 / 2)``."""
        def f(p):
            with no_grad():
                w = -((p * (1.0 - p)).log() + math.log(4.0))
                v = _erfinv_core(w, p * 2.0 - 1.0) * _SQRT2
                v = _ndtri_tail(p).where(p < _NDTRI_TAIL, v)
                v = v.where(mask_and(p > 0, p < 1), math.nan)
                v = v.where(p != 0, -math.inf).where(p != 1, math.inf).where(p == p, p)
                d = (v * v * 0.5).exp() * math.sqrt(2.0 * math.pi)
            return _with_grad(v, [(p, d)])
        return _float32(self, f)

    def _log_ndtr(self):
        """``log(ndtr(x))`` without underflow (``torch.special.log_ndtr``): the logarithm of
        NR's ``erfcc`` form for ``x < 0``, ``log1p(-ndtr(-x))`` for ``x >= 0``. Measured
        against float64 PyTorch: relative error 2.7e-7 on [-1e3, 0], absolute 3.5e-7 on
        [0, 10] (relative 8e-6 where the value is ~1e-22, NR erfcc's accuracy). Gradient
        ``exp(-x^2/2 - log_ndtr(x)) / sqrt(2 pi)``."""
        def f(x):
            with no_grad():
                v = _log_ndtr_value(x)
                d = (x * x * -0.5 - v).exp() * (1.0 / math.sqrt(2.0 * math.pi))
            return _with_grad(v, [(x, d)])
        return _float32(self, f)

    def _entr(self):
        """The elementwise entropy ``-x log(x)`` (``torch.special.entr``): 0 at 0, ``-inf``
        for ``x < 0``, NaN for NaN (as PyTorch). Gradient ``-(1 + log x)`` for ``x > 0``; 0 at
        and below 0 (PyTorch: ``inf`` at 0, NaN below)."""
        def f(x):
            pos = x > 0
            xp = x.where(pos, 1.0)
            v = -(xp * xp.log())
            v = v.where(pos, 0.0).where(mask_or(x >= 0, x != x), -math.inf)
            return v.where(x == x, x)
        return _float32(self, f)

    def _xlog1py(self, other):
        """``x * log1p(y)``, 0 where ``x == 0`` unless ``y`` is NaN
        (``torch.special.xlog1py``). Gradients: ``log1p(y)`` (0 where ``x == 0``) and
        ``x / (1 + y)``."""
        o = other if hasattr(other, "node") else self._wrap(self._lift(other))
        x = self if self.is_floating_point() else self.float()
        o = o if o.is_floating_point() else o.float()
        return (x * o.log1p()).where(x != 0, 0.0).where(o == o, o)

    # -- in-place forms -----------------------------------------------------------------------
    def lgamma_(self):
        """In-place :meth:`lgamma` (a floating tensor)."""
        return self._set_promoted(self.lgamma())

    def digamma_(self):
        """In-place :meth:`digamma`."""
        return self._set_promoted(self.digamma())

    def polygamma_(self, n: int):
        """In-place :meth:`polygamma`."""
        return self._set_promoted(self.polygamma(n))

    def mvlgamma_(self, p: int):
        """In-place :meth:`mvlgamma`."""
        return self._set_promoted(self.mvlgamma(p))

    def erfinv_(self):
        """In-place :meth:`erfinv`."""
        return self._set_promoted(self.erfinv())

    def i0_(self):
        """In-place :meth:`i0`."""
        return self._set_promoted(self.i0())
