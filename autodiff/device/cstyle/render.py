"""Render C expressions and whole programs: a table op -> C source string.

``CODE_FOR_OP[op](w, *args)`` is the C expression of the elementwise op on operand
expressions ``args`` of vector width ``w`` (1 for scalars). OpenCL C builtins are generic
over ``float``/``floatN``, so one table serves scalar code, the ``float16`` rows of a matmul
epilogue and the vector loads of a reduction. Comparisons produce bool registers: ints 1/0
(a vector comparison in C gives -1/0, hence the negation). How every dtype is stored,
loaded, cast and computed on is :mod:`.dtypes`.

A few ops render as calls to ``_ad_*`` functions that each device defines: ``_ad_log``,
``_ad_pow``, ``_ad_erf``, ``_ad_tanh``, ``_ad_sin``/``_ad_cos`` (PoCL's vector ``sin`` and
``cos`` are wrong in small lanes next to a huge one), ``_ad_max``/``_ad_min`` (numpy's NaN
propagation).
The OpenCL device defines them as inline code (:mod:`autodiff.device.opencl.mathlib`: PoCL's
builtins are scalar library calls, 10-100x slower than ``exp`` on PoCL 3.1), the CUDA
device maps them to CUDA's math functions (:data:`autodiff.device.cuda.prelude.MATH`).
"""
from __future__ import annotations

from typing import Callable

from ...graph.ir import Op
from ...procedural.access import Expr, render as _render_access
from . import dtypes as D


def vt(w: int, base: str = "float") -> str:
    """C type of a ``w``-wide vector of ``base``."""
    return base if w == 1 else f"{base}{w}"


def const(value: float, w: int = 1, dtype: str = "float32") -> str:
    """A C literal of ``value`` (inf and nan spelled as the C macros)."""
    if D.CTYPE[dtype] == "int":
        return D.const(value, dtype, w)
    v = float(value)
    if v != v:
        s = "NAN"
    elif v in (float("inf"), float("-inf")):
        s = "INFINITY" if v > 0 else "(-INFINITY)"
    else:
        s = f"{v!r}f".replace("inff", "INFINITY")
    return s if w == 1 else f"(({vt(w)})({s}))"


def _cmp(sym: str) -> Callable[..., str]:
    def f(w, a, b):
        if w == 1:
            return f"(({a}) {sym} ({b}))"
        return f"(-(({a}) {sym} ({b})))"
    return f


#: op -> fn(width, *operand expressions) -> C expression (float operands; comparisons and
#: ``WHERE`` (bool mask) for every dtype).
CODE_FOR_OP: dict[Op, Callable[..., str]] = {
    Op.NEG: lambda w, x: f"(-({x}))",
    Op.EXP: lambda w, x: f"exp({x})",
    Op.LOG: lambda w, x: f"_ad_log({x})",
    Op.EXP2: lambda w, x: f"exp2({x})",
    Op.LOG2: lambda w, x: f"(_ad_log({x})*1.44269504088896341f)",
    Op.SQRT: lambda w, x: f"sqrt({x})",
    Op.RSQRT: lambda w, x: f"(1.0f/sqrt({x}))",
    Op.RECIP: lambda w, x: f"(1.0f/({x}))",
    Op.SIN: lambda w, x: f"_ad_sin({x})",
    Op.COS: lambda w, x: f"_ad_cos({x})",
    Op.TANH: lambda w, x: f"_ad_tanh({x})",
    Op.SIGMOID: lambda w, x: f"(1.0f/(1.0f+exp(-({x}))))",
    Op.RELU: lambda w, x: f"_ad_max({x}, {const(0.0, w)})",
    Op.ABS: lambda w, x: f"fabs({x})",
    Op.ERF: lambda w, x: f"_ad_erf({x})",
    Op.SIGN: lambda w, x: f"sign({x})",
    Op.ATAN: lambda w, x: f"atan({x})",
    Op.LOG1P: lambda w, x: f"log1p({x})",
    Op.EXPM1: lambda w, x: f"expm1({x})",
    Op.ADD: lambda w, a, b: f"(({a})+({b}))",
    Op.SUB: lambda w, a, b: f"(({a})-({b}))",
    Op.MUL: lambda w, a, b: f"(({a})*({b}))",
    Op.DIV: lambda w, a, b: f"(({a})/({b}))",
    Op.POW: lambda w, a, b: f"_ad_pow({a}, {b})",
    Op.MAX: lambda w, a, b: f"_ad_max({a}, {b})",
    Op.MIN: lambda w, a, b: f"_ad_min({a}, {b})",
    Op.CMPLT: _cmp("<"), Op.CMPLE: _cmp("<="), Op.CMPGT: _cmp(">"),
    Op.CMPGE: _cmp(">="), Op.CMPEQ: _cmp("=="), Op.CMPNE: _cmp("!="),
    Op.WHERE: lambda w, m, a, b: f"select({b}, {a}, ({m}) != 0)",
}

#: names of the one-operand entries of :data:`CODE_FOR_OP`
UNARY_NAMES = frozenset(op.name for op in CODE_FOR_OP
                        if CODE_FOR_OP[op].__code__.co_argcount == 2)

def code(op: Op, args: list[str], w: int = 1, dtype: str = "float32",
         operand: str | None = None) -> str:
    """C expression of elementwise ``op`` on ``args`` (width ``w``, result ``dtype``,
    operands of dtype ``operand``, default ``dtype``); integer, bool and 16-bit float
    dtypes are spelled by :func:`.dtypes.code`.

    Raises:
        NotImplementedError: the op has no entry in the table.
    """
    if op is Op.CAST:
        raise NotImplementedError("CAST is rendered by cast()")
    return D.code(op, args, w, operand or dtype, dtype, CODE_FOR_OP)


def cast(x: str, src: str, dst: str, w: int = 1) -> str:
    """Value conversion ``src`` -> ``dst`` (see :func:`.dtypes.cast`)."""
    return D.cast(x, src, dst, w)


def access(e: Expr) -> str:
    """C index arithmetic of an access expression (``//`` becomes C ``/``; lowering only
    emits non-negative operands, where the two agree)."""
    return _render_access(e, div="/")


def load(index: str, dtype: str = "float32") -> str:
    """A scalar load from the arena ``buf`` at element ``index`` (in ``dtype``'s storage
    units; see :mod:`.dtypes`)."""
    return D.load(index, dtype)
