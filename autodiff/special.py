"""``torch.special``'s functions that autodiff has, under PyTorch's names:
``autodiff.special.gammaln(x)`` is ``torch.special.gammaln(x)``.

Each takes a tensor (``xlogy``/``xlog1py`` also a Python number for either operand) and
returns a tensor of its shape (broadcast for the two-operand ones); integers and bool give
float32, float16/bfloat16 are computed in float32 and rounded once. The approximations and
their measured accuracy are in the docstrings of the :class:`~autodiff.Tensor` methods
(:mod:`autodiff.graph.mixins.special`).
"""
from __future__ import annotations

from .graph.tensor import Tensor, tensor as _tensor


def _t(x) -> Tensor:
    return x if isinstance(x, Tensor) else _tensor(x)


def gammaln(input):
    """``log|Gamma(x)|``: :meth:`Tensor.lgamma`."""
    return _t(input).lgamma()


def digamma(input):
    """:meth:`Tensor.digamma`."""
    return _t(input).digamma()


psi = digamma


def polygamma(n: int, input):
    """``torch.polygamma(n, input)`` (``torch.special.polygamma``): :meth:`Tensor.polygamma`
    (``n = 0``: digamma).

    Raises:
        TypeError: ``n`` is not an int.
        RuntimeError: ``n < 0``.
    """
    return _t(input).polygamma(n)


def multigammaln(input, p: int):
    """:meth:`Tensor.mvlgamma` (raises ``RuntimeError`` for ``p < 1``)."""
    return _t(input).mvlgamma(p)


def erfinv(input):
    """:meth:`Tensor.erfinv` (Giles' single-precision approximation)."""
    return _t(input).erfinv()


def erf(input):
    """:meth:`Tensor.erf`."""
    return _t(input).erf()


def erfc(input):
    """:meth:`Tensor.erfc`."""
    return _t(input).erfc()


def i0(input):
    """:meth:`Tensor.i0` (Cephes)."""
    return _t(input).i0()


def i0e(input):
    """``exp(-|x|) I0(x)`` (Cephes ``i0e``): relative error 2.6e-7 against float64
    PyTorch on [-100, 100]; 0 at ``±inf``. Gradient ``i1e(x) - sign(x) i0e(x)``."""
    return _t(input)._i0e()


def i1(input):
    """The modified Bessel function ``I1`` (Cephes ``i1``): relative error 1.3e-6 on
    [-85, 85]. Gradient ``i0(x) - i1(x)/x`` (1/2 at 0)."""
    return _t(input)._i1()


def i1e(input):
    """``exp(-|x|) I1(x)`` (Cephes ``i1e``): relative error 1.2e-6 on [-100, 100]. Gradient
    ``i0e(x) - i1e(x) (sign(x) + 1/x)``."""
    return _t(input)._i1e()


def ndtr(input):
    """The standard normal CDF ``erfc(-x/sqrt 2)/2``: relative error 3e-6 on [-5, 8],
    1.9e-5 down to -13 (PyTorch's ``(1 + erf)/2`` flushes to 0 below ~-5.5 in float32)."""
    return _t(input)._ndtr()


def ndtri(input):
    """The inverse standard normal CDF (Giles' erfinv with ``w = -log(4p(1-p))``): relative
    error 2.6e-7 for ``p`` in [1e-44, 1 - 6e-8]; ``0, 1 -> -inf, inf``; NaN outside
    [0, 1]."""
    return _t(input)._ndtri()


def log_ndtr(input):
    """``log(ndtr(x))`` without underflow: relative error 2.7e-7 on [-1e3, 0], absolute
    3.5e-7 on [0, 10]."""
    return _t(input)._log_ndtr()


def entr(input):
    """``-x log(x)``; 0 at 0, ``-inf`` below 0."""
    return _t(input)._entr()


def xlogy(input, other):
    """``x * log(y)``, 0 where ``x == 0`` (``torch.special.xlogy``)."""
    if not isinstance(input, Tensor):
        return _t(other)._wrap(_t(other)._lift(input)).xlogy(other) \
            if isinstance(other, Tensor) else _t(input).xlogy(other)
    return input.xlogy(other)


def xlog1py(input, other):
    """``x * log1p(y)``, 0 where ``x == 0`` unless ``y`` is NaN (``torch.special.xlog1py``).
    Gradients ``log1p(y)`` (0 where ``x == 0``) and ``x / (1 + y)``."""
    if not isinstance(input, Tensor):
        if isinstance(other, Tensor):
            return other._wrap(other._lift(input))._xlog1py(other)
        input = _t(input)
    return input._xlog1py(other)


__all__ = ["gammaln", "digamma", "psi", "polygamma", "multigammaln", "erfinv", "erf", "erfc",
           "i0", "i0e", "i1", "i1e", "ndtr", "ndtri", "log_ndtr", "entr", "xlogy", "xlog1py"]
