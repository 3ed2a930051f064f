"""Elementwise math: unary functions, binary functions, ``clamp``, tests for NaN and inf.

Primitives are graph ops (``EXP``, ``ATAN``, ``LOG1P``, ...); the rest are compositions
chosen to be accurate in float32 and to give PyTorch's gradients (the elementwise fusion
turns each composition into one kernel). Rounding (``floor``, ``round``, ...) goes
through an exact float -> int32 -> float conversion below ``2**23``, where every float32
is already an integer above; its gradient is zero, as in PyTorch.
"""
from __future__ import annotations

import math

import ml_dtypes

from .. import dtypes, ops
from ..ir import Op
from ...errors import DTypeError
from ..trace import no_grad, user_site
from .dtype import binary, check_divisor, promoted

_LN2 = math.log(2.0)
_BIG = 8388608.0          # 2**23: every float32 of at least this magnitude is an integer
#: Numerical Recipes' ``erfcc`` coefficients (Press et al., 2nd ed., sec. 6.2): the exponent
#: of ``erfc(z) / t`` is ``-z^2 + c0 + t (c1 + t (c2 + ...))``
_ERFC = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
         -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def mask_or(a, b):
    """Elementwise ``a or b`` of two masks (in the comparison result type)."""
    return (a.float() + b.float()) > 0


def mask_and(a, b):
    return (a.float() * b.float()) > 0


def mask_not(a):
    return a.float() == 0


class ElementwiseMixin:
    def _un(self, op: Op):
        return self._wrap(ops.unary(op, self.node))

    def _bin(self, op: Op, other, reverse: bool = False):
        """``op(self, other)`` (``op(other, self)`` with ``reverse``), promoted as PyTorch
        does (:func:`.dtype.binary`)."""
        return binary(op, other, self) if reverse else binary(op, self, other)

    def _signed(self, f):
        """``f`` of an odd function evaluated on ``|x|`` with the sign put back. ``|x|`` is
        ``where(x < 0, -x, x)`` so that the gradient at 0 is ``f'(0)``, not 0."""
        neg = self < 0
        v = f((-self).where(neg, self))
        return (-v).where(neg, v)

    # -- primitives ------------------------------------------------------------------------
    def exp(self): return self._un(Op.EXP)
    def log(self): return self._un(Op.LOG)
    def exp2(self): return self._un(Op.EXP2)
    def log2(self): return self._un(Op.LOG2)
    def sqrt(self): return self._un(Op.SQRT)
    def rsqrt(self): return self._un(Op.RSQRT)
    def reciprocal(self): return self._un(Op.RECIP)
    def sin(self): return self._un(Op.SIN)
    def cos(self): return self._un(Op.COS)
    def tanh(self): return self._un(Op.TANH)
    def sigmoid(self): return self._un(Op.SIGMOID)
    def relu(self): return self._un(Op.RELU)
    def abs(self): return self._un(Op.ABS)
    def erf(self): return self._un(Op.ERF)
    def sign(self): return self._un(Op.SIGN)
    def atan(self): return self._un(Op.ATAN)
    def log1p(self): return self._un(Op.LOG1P)
    def expm1(self): return self._un(Op.EXPM1)
    def neg(self): return -self
    def square(self): return self ** 2 if self.dtype == "bool" else self * self

    sgn = sign
    negative = neg
    arctan = atan
    absolute = abs

    def positive(self):
        """The tensor itself (``+x``); a bool tensor raises, as in PyTorch."""
        if self.dtype == "bool":
            raise DTypeError(f"positive: the + operator on a bool tensor is not supported "
                             f"(traced at {user_site()})")
        return self

    # -- trigonometric and hyperbolic --------------------------------------------------------
    def tan(self): return self.sin() / self.cos()

    def asin(self):
        """``atan(x / sqrt((1 - x)(1 + x)))``: ``±pi/2`` at ``±1``, NaN outside ``[-1, 1]``."""
        x = self._floating()
        return (x / ((1.0 - x) * (1.0 + x)).sqrt()).atan()

    def acos(self):
        """``2 atan(sqrt((1 - x) / (1 + x)))`` (exact differences near ``x = 1``)."""
        x = self._floating()
        return ((1.0 - x) / (1.0 + x)).sqrt().atan() * 2.0

    def atan2(self, other):
        """The angle of the point ``(other, self)`` in ``(-pi, pi]`` (``torch.atan2(y, x)``).
        The result dtype is PyTorch's: the operands' promoted dtype
        (``torch.result_type``), the default float (float32) if that is integral or bool;
        float16/bfloat16 results are computed in float32 and rounded once."""
        dt = dtypes.result_type(self, other)
        if not dt.is_floating_point:
            dt = dtypes.float32
        if dt != "float32":
            return self.float().atan2(other.float() if hasattr(other, "node") else other).to(dt)
        y = self.float()
        x = other.float() if hasattr(other, "node") else self._wrap(self._lift(other)).float()
        zero = x == 0
        ratio = y / x.where(mask_not(zero), 1.0)
        both_inf = mask_and(y.isinf(), x.isinf())         # inf/inf: the diagonal, +-pi/4
        a = ratio.where(mask_not(both_inf), y.sign() * x.sign()).atan()
        half = self._wrap(ops.const(math.pi / 2, ())).copysign(y)
        pi = self._wrap(ops.const(math.pi, ())).copysign(y)
        on_axis = half.where(y != 0, y)
        return on_axis.where(zero, (a + pi).where(x < 0, a))

    arcsin, arccos, arctan2 = asin, acos, atan2

    def sinh(self):
        """``(expm1(x) - expm1(-x)) / 2`` (no cancellation near 0), ``exp(|x| - ln 2)`` with
        the sign of ``x`` above 88 (where ``expm1`` overflows before ``sinh`` does)."""
        x = self._floating()
        big = x.abs() > 88.0
        xs = x.where(mask_not(big), 0.0)
        small = (xs.expm1() - (-xs).expm1()) * 0.5
        return ((x.abs() - _LN2).exp() * x.sign()).where(big, small)

    def cosh(self):
        """``e + 1/(4e)`` with ``e = exp(|x| - ln 2)``: finite up to ``cosh``'s own overflow."""
        e = (self._floating().abs() - _LN2).exp()
        return e + 0.25 / e

    def asinh(self):
        """``sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2)))``; ``log|x| + ln 2`` above 1e10."""
        def f(a):
            big = a > 1e10
            s = a.minimum(1e10)
            return (a.maximum(1e10).log() + _LN2).where(
                big, (s + s * s / (1.0 + (1.0 + s * s).sqrt())).log1p())
        return self._floating()._signed(f)

    def acosh(self):
        """``log1p(t + sqrt(2t + t^2))`` with ``t = x - 1``; ``log x + ln 2`` above 1e10."""
        x = self._floating()
        big = x > 1e10
        t = x.minimum(1e10) - 1.0
        return (x.maximum(1e10).log() + _LN2).where(big, (t + (t * 2.0 + t * t).sqrt()).log1p())

    def atanh(self):
        """``log1p(2x / (1 - x)) / 2``."""
        x = self._floating()
        return (x * 2.0 / (1.0 - x)).log1p() * 0.5

    arcsinh, arccosh, arctanh = asinh, acosh, atanh

    # -- logarithms --------------------------------------------------------------------------
    def log10(self): return self.log() * (1.0 / math.log(10.0))

    def logaddexp(self, other):
        """``log(exp(a) + exp(b))`` as ``max + log1p(exp(-|a - b|))``; equal infinities
        give themselves, and ties split the gradient evenly, as in PyTorch."""
        m = self.maximum(other)
        d = self - other
        d = d.where(d == d, 0.0)                 # a == b == ±inf: a - b is NaN
        return m + (-d.abs()).exp().log1p()

    def logaddexp2(self, other):
        return self.mul(_LN2).logaddexp(other * _LN2) * (1.0 / _LN2)

    # -- rounding (no gradient) --------------------------------------------------------------
    def trunc(self):
        """Rounded toward zero: an exact float -> int32 -> float conversion below ``2**23``."""
        with no_grad():
            t = self.to("int32").float()
            return t.where(self.abs() < _BIG, self)

    fix = trunc

    def floor(self):
        with no_grad():
            t = self.trunc()
            return t - (t > self).float()

    def ceil(self):
        with no_grad():
            t = self.trunc()
            return t + (t < self).float()

    def round(self, decimals: int = 0):
        """Rounded to the nearest integer, halves to even (PyTorch and numpy); with
        ``decimals``, ``round(x * 10**d) / 10**d``."""
        if decimals:
            s = 10.0 ** decimals
            return (self * s).round() / s
        with no_grad():
            r = (self + 0.5).floor()
            tie = (r - self) == 0.5
            odd = (r - (r * 0.5).floor() * 2.0) == 1.0
            return (r - mask_and(tie, odd).float()).where(self.abs() < _BIG, self)

    def frac(self):
        """``x - trunc(x)`` (gradient 1)."""
        return self - self.trunc()

    # -- binary -------------------------------------------------------------------------------
    def maximum(self, other): return self._bin(Op.MAX, other)
    def minimum(self, other): return self._bin(Op.MIN, other)

    def fmax(self, other):
        """``maximum`` that ignores a NaN operand; at a tie the gradient goes to ``self``
        (as PyTorch's)."""
        o = other if hasattr(other, "node") else self._wrap(self._lift(other))
        return self.where(mask_or(self >= o, o != o), o)

    def fmin(self, other):
        o = other if hasattr(other, "node") else self._wrap(self._lift(other))
        return self.where(mask_or(self <= o, o != o), o)

    def logit(self, eps: float | None = None):
        """``log(x / (1 - x))``, ``x`` first clamped to ``[eps, 1 - eps]`` when ``eps`` is
        given (``torch.logit``)."""
        x = self if eps is None else self.clamp(eps, 1.0 - eps)
        return (x / (1.0 - x)).log()

    def fmod(self, other):
        """``a - trunc(a / b) * b``: the remainder with the sign of ``a`` (C's ``fmod``).
        Gradients: 1 for ``a``, ``-trunc(a / b)`` for ``b``."""
        return self - (self / other).trunc() * other

    def remainder(self, other):
        """``a - floor(a / b) * b``: the remainder with the sign of ``b`` (Python's ``%``)."""
        return self - (self / other).floor() * other

    def copysign(self, other):
        """``|a|`` with the sign of ``b`` (``-0.0`` counts as negative)."""
        o = other if hasattr(other, "node") else self._wrap(self._lift(other))
        neg = mask_or(o < 0, mask_and(o == 0, o.reciprocal() < 0))
        return (-self.abs()).where(neg, self.abs())

    def hypot(self, other):
        """``sqrt(a^2 + b^2)``."""
        return (self * self + other * other).sqrt()

    def lerp(self, end, weight):
        """``self + weight * (end - self)``, evaluated as PyTorch does (from ``end`` when
        ``|weight| >= 0.5``, exact at both ends)."""
        w = weight if hasattr(weight, "node") else self._wrap(self._lift(weight))
        d = end - self
        return (self + w * d).where(w.abs() < 0.5, end - d * (1.0 - w))

    def xlogy(self, other):
        """``x * log(y)``, 0 where ``x == 0`` (``torch.xlogy``)."""
        o = other if hasattr(other, "node") else self._wrap(self._lift(other))
        return (self * o.log()).where(self != 0, 0.0).where(o == o, o)

    # -- division with a rounding mode, and PyTorch's other names for the operators ---------
    def divide(self, other, *, rounding_mode: str | None = None):
        """``torch.div``/``torch.divide``: true division (``rounding_mode=None``; integers
        give the default float), or the quotient rounded toward zero (``"trunc"``) or
        toward -inf (``"floor"``, ``floor_divide``), keeping the promoted dtype as PyTorch
        does (a 16-bit float quotient is rounded to its dtype, then truncated).

        Raises:
            RuntimeError: an unknown ``rounding_mode``, or ``ZeroDivisionError`` for an
                integer division with a rounding mode by a 0 known while tracing (a number,
                or a tensor made from data); a traced integer divisor's zeros give 0 on
                the device instead.
        """
        if rounding_mode is None:
            return self / other
        if rounding_mode == "floor":
            return binary(Op.FLOORDIV, self, other, "div")
        if rounding_mode != "trunc":
            raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or "
                               f"'floor' but found '{rounding_mode}'")
        dt = dtypes.result_type(self, other)
        check_divisor("div", dt, self, other)
        if dt.is_floating_point:
            if dt != "float32" and getattr(other, "ndim", 0) == 0:
                # PyTorch's kernel divides 16-bit floats by a scalar (a number, a 0-d
                # tensor) in float32 and truncates before rounding to the dtype
                o = other.float() if hasattr(other, "node") else other
                return (self.float() / o).trunc().to(dt)
            _, (x, o) = promoted(self, other)  # else the quotient in dt, then truncated
            return self._wrap(ops.binary(Op.DIV, x, o)).trunc()
        x = self.to(dt)
        o = other.to(dt) if hasattr(other, "node") else self._wrap(self._lift(other)).to(dt)
        q, r = x // o, x % o                   # floor; toward zero where the signs differ
        return q + (mask_and(r != 0, (x < 0) ^ (o < 0))).to(dt)

    def true_divide(self, other):
        """``self / other`` (``torch.true_divide``, an alias of ``div``)."""
        return self / other

    def multiply(self, other): return self * other

    def subtract(self, other, *, alpha=1):
        """``self - alpha * other`` (``torch.subtract``, an alias of ``sub``)."""
        return self.sub(other, alpha)

    def greater(self, other): return self > other
    def greater_equal(self, other): return self >= other
    def less(self, other): return self < other
    def less_equal(self, other): return self <= other
    def not_equal(self, other): return self != other

    def divide_(self, other, *, rounding_mode: str | None = None):
        """In-place :meth:`divide`."""
        return self._set_promoted(self.divide(other, rounding_mode=rounding_mode))

    def true_divide_(self, other): return self._set_promoted(self / other)
    def multiply_(self, other): return self._set_promoted(self * other)

    def subtract_(self, other, *, alpha=1):
        return self._set_promoted(self.sub(other, alpha))

    # -- clamp --------------------------------------------------------------------------------
    def clamp(self, min=None, max=None):
        """``min(max(x, min), max)``; bounds may be tensors. The gradient reaches ``x``
        where ``min <= x <= max`` (bounds included, as in PyTorch; none where ``x`` is
        NaN) and a tensor bound where it is the result. A NaN bound gives NaN (PyTorch)."""
        if min is None and max is None:
            raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
        out = self
        for bound, beyond in ((min, lambda o, b: o < b), (max, lambda o, b: o > b)):
            if bound is None:
                continue
            b = bound if hasattr(bound, "node") else self._wrap(self._lift(bound))
            out = b.where(beyond(out, b), out)
            if hasattr(bound, "node") or bound != bound:    # a NaN bound: decided here
                out = out.where(b == b, math.nan)           # for a number; no gradient
        if out.requires_grad and self.is_floating_point():  # a NaN x: NaN, no gradient
            out = out.where(self == self, math.nan)
        return out

    clip = clamp

    def clamp_min(self, min): return self.clamp(min=min)
    def clamp_max(self, max): return self.clamp(max=max)

    def where(self, condition, other):
        """``self`` where ``condition`` (bool) is true, else ``other`` (``Tensor.where``;
        the two promoted to one dtype)."""
        _, (x, y) = promoted(self, other)
        return self._wrap(ops.where(self._lift(condition), x, y))

    # -- NaN and infinity ------------------------------------------------------------------
    # integer and bool tensors hold no NaN or infinity (their tests are all False or True)
    def isnan(self): return self != self

    def isinf(self):
        return self.abs() == math.inf if self.is_floating_point() else self != self

    def isposinf(self):
        return self == math.inf if self.is_floating_point() else self != self

    def isneginf(self):
        return self == -math.inf if self.is_floating_point() else self != self

    def isfinite(self):
        return self.abs() < math.inf if self.is_floating_point() else self == self

    def nan_to_num(self, nan: float = 0.0, posinf: float | None = None,
                   neginf: float | None = None):
        """NaN, +inf and -inf replaced (defaults: 0, and the largest and smallest finite
        values of this tensor's dtype, ``torch.finfo(dtype).max``/``min``); integer and
        bool tensors are returned unchanged (a copy, of their dtype), as in PyTorch."""
        if not self.is_floating_point():
            return self.clone()
        big = float(ml_dtypes.finfo(dtypes.host(self.dtype)).max)
        posinf = big if posinf is None else posinf
        neginf = -big if neginf is None else neginf
        out = self.where(self == self, float(nan))
        return out.where(self != math.inf, float(posinf)).where(self != -math.inf, float(neginf))

    def isclose(self, other, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False):
        """``|a - b| <= atol + rtol |b|`` for finite values, ``a == b`` (an infinity is
        close only to itself), NaN equal to NaN only with ``equal_nan``."""
        o = other if hasattr(other, "node") else self._wrap(self._lift(other))
        near = mask_and((self - o).abs() <= (o.abs() * rtol + atol),
                        mask_and(self.isfinite(), o.isfinite()))
        close = mask_or(near, self == o)
        if equal_nan:
            close = mask_or(close, mask_and(self.isnan(), o.isnan()))
        return close

    # -- angles, sinc, signs, erfc ------------------------------------------------------
    def _floating(self):
        """This tensor, integers and bool as float32 (PyTorch's result dtype for the
        floating functions below)."""
        return self if self.is_floating_point() else self.float()

    def deg2rad(self):
        """Degrees to radians, ``x * (pi / 180)`` (integers and bool give float32)."""
        return self._floating() * (math.pi / 180.0)

    def rad2deg(self):
        """Radians to degrees, ``x * (180 / pi)`` (integers and bool give float32)."""
        return self._floating() * (180.0 / math.pi)

    def sinc(self):
        """The normalized sinc ``sin(pi x) / (pi x)``, 1 at 0 with gradient 0 there (as
        ``torch.sinc``; integers and bool give float32)."""
        x = self._floating()
        nz = x != 0
        y = x.where(nz, 1.0) * math.pi
        return (y.sin() / y).where(nz, 1.0)

    def signbit(self):
        """Whether the sign bit is set (bool): ``x < 0``, and ``True`` for ``-0.0``. The
        sign of a NaN cannot be read without a bit cast, which the graph IR lacks: NaN
        gives ``False`` (PyTorch reads its sign bit)."""
        if not self.is_floating_point():
            return self < 0 if self.dtype != "bool" else self != self
        return mask_or(self < 0, mask_and(self == 0, self.reciprocal() < 0))

    def heaviside(self, values):
        """The Heaviside step: 0 where ``x < 0``, ``values`` (a tensor of this dtype,
        broadcast) where ``x == 0``, 1 where ``x > 0`` (NaN gives 0). No gradient
        (PyTorch has none).

        Raises:
            TypeError: ``values`` is not a tensor (PyTorch's too).
            RuntimeError: ``values`` has another dtype (PyTorch does not promote).
        """
        if not hasattr(values, "node"):
            raise TypeError(f"heaviside(): argument 'values' must be Tensor, not "
                            f"{type(values).__name__}")
        if values.dtype != self.dtype:
            raise RuntimeError("heaviside is not yet implemented for tensors with different "
                               f"dtypes ({self.dtype} and {values.dtype})")
        with no_grad():
            step = (self > 0).to(self.dtype)
            return values.where(self == 0, step)

    def erfc(self):
        """The complementary error function ``1 - erf(x)``, accurate where ``erf(x)`` is
        close to 1: ``1 - erf`` in float32 loses all digits of ``erfc`` as ``x`` grows
        (relative error above 1e-4 from ``x ~ 2.5``, 0 from ``x ~ 3.9``), so the value is
        Numerical Recipes' ``erfcc`` (a Chebyshev fit of ``erfc(z) exp(z^2)``, fractional
        error below 1.2e-7, evaluated as ``t exp(-z^2 + P(t))`` with ``t = 1 / (1 + z/2)``,
        ``z = |x|``; ``2 - erfc(z)`` for negative ``x``): within 3e-6 relative of the exact
        ``erfc`` for ``|x| <= 5`` and 3e-5 up to ``x = 9.5``, 0 beyond 10 (float32 underflows
        there). The gradient is the exact ``-2/sqrt(pi) exp(-x^2)`` (of ``-erf``). Integers
        and bool give float32; float16/bfloat16 are computed in float32 and rounded once."""
        if self.dtype in ("float16", "bfloat16"):
            return self.float().erfc().to(self.dtype)
        x = self._floating()
        with no_grad():
            z = x.abs().minimum(10.0)
            t = (z * 0.5 + 1.0).reciprocal()
            poly = _ERFC[-1]
            for c in reversed(_ERFC[1:-1]):
                poly = t * poly + c
            tail = t * (t * poly + (_ERFC[0] - z * z)).exp()
            tail = tail.where(x.abs() < 10.0, 0.0)
            value = (2.0 - tail).where(x < 0, tail)
        e = x.erf()
        out = value + (e.detach() - e)              # the value, with erf's gradient negated
        return out.where(x == x, x)                 # NaN stays NaN

    def deg2rad_(self):
        """In-place :meth:`deg2rad` (a floating tensor: the result must cast to its dtype)."""
        return self._set_promoted(self.deg2rad())

    def rad2deg_(self):
        """In-place :meth:`rad2deg`."""
        return self._set_promoted(self.rad2deg())

    def sinc_(self):
        """In-place :meth:`sinc`."""
        return self._set_promoted(self.sinc())

    def heaviside_(self, values):
        """In-place :meth:`heaviside`."""
        return self._set_promoted(self.heaviside(values))

    def erfc_(self):
        """In-place :meth:`erfc`."""
        return self._set_promoted(self.erfc())

    # casts (float, int, to, ...) are the dtype mixin's (mixins/dtype.py)
