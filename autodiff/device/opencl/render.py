"""Render C expressions and whole programs: a table op -> C source string.

``CODE_FOR_OP[op](w, *args)`` is the C expression of the elementwise op on operand
expressions ``args`` of vector width ``w`` (1 for scalars). OpenCL C builtins are generic
over ``float``/``floatN``, so one table serves scalar code, the ``float16`` rows of a matmul
epilogue and the vector loads of a reduction. Comparisons produce 1.0/0.0 like the numpy
reference (a vector comparison in C gives -1/0 integers, hence the conversion).

Slow PoCL builtins (``log``, ``pow``, ``erf``: scalar library calls, 10-100x slower than
``exp`` on PoCL 3.1) map to the inline functions of :mod:`.mathlib`.
"""
from __future__ import annotations

from typing import Callable

from ...graph.ir import Op
from ...procedural.access import Expr, render as _render_access
from .dialect import OPENCL, Dialect
from .kernels import HELPERS, Source
from . import mathlib, philox


def vt(w: int, base: str = "float") -> str:
    """C type of a ``w``-wide vector of ``base``."""
    return base if w == 1 else f"{base}{w}"


def const(value: float, w: int = 1, dtype: str = "float32") -> str:
    """A C literal of ``value`` (inf and nan spelled as the C macros)."""
    if dtype == "int32":
        s = f"{int(value)}"
        return s if w == 1 else f"(({vt(w, 'int')})({s}))"
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
            return f"(({a}) {sym} ({b}) ? 1.0f : 0.0f)"
        return f"convert_{vt(w)}(-(({a}) {sym} ({b})))"
    return f


#: op -> fn(width, *operand expressions) -> C expression (float operands).
CODE_FOR_OP: dict[Op, Callable[..., str]] = {
    Op.NEG: lambda w, x: f"(-({x}))",
    Op.EXP: lambda w, x: f"exp({x})",
    Op.LOG: lambda w, x: f"_ad_log({x})",
    Op.EXP2: lambda w, x: f"exp2({x})",
    Op.LOG2: lambda w, x: f"(_ad_log({x})*1.44269504088896341f)",
    Op.SQRT: lambda w, x: f"sqrt({x})",
    Op.RSQRT: lambda w, x: f"(1.0f/sqrt({x}))",
    Op.RECIP: lambda w, x: f"(1.0f/({x}))",
    Op.SIN: lambda w, x: f"sin({x})",
    Op.COS: lambda w, x: f"cos({x})",
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
    Op.WHERE: lambda w, m, a, b: f"select({b}, {a}, ({m}) != 0.0f)" if w == 1
    else f"select({b}, {a}, ({m}) != ({vt(w)})(0.0f))",
}

#: names of the one-operand entries of :data:`CODE_FOR_OP`
UNARY_NAMES = frozenset(op.name for op in CODE_FOR_OP
                        if CODE_FOR_OP[op].__code__.co_argcount == 2)

#: ops on int32 operands that differ from the float spelling.
CODE_FOR_INT_OP: dict[Op, Callable[..., str]] = {
    Op.NEG: lambda w, x: f"(-({x}))",
    Op.ABS: lambda w, x: f"abs({x})",
    Op.MAX: lambda w, a, b: f"max({a}, {b})",
    Op.MIN: lambda w, a, b: f"min({a}, {b})",
    Op.RELU: lambda w, x: f"max({x}, 0)",
    Op.SIGN: lambda w, x: f"(({x}) > 0 ? 1 : (({x}) < 0 ? -1 : 0))",
    Op.DIV: lambda w, a, b: f"(({a})/({b}))",
    Op.WHERE: lambda w, m, a, b: f"((({m}) != 0.0f) ? ({a}) : ({b}))",
}


def code(op: Op, args: list[str], w: int = 1, dtype: str = "float32") -> str:
    """C expression of elementwise ``op`` on ``args`` (width ``w``, result ``dtype``).

    Raises:
        NotImplementedError: ``op`` has no entry in the table.
    """
    if op is Op.CAST:
        raise NotImplementedError("CAST is rendered by cast()")
    table = CODE_FOR_INT_OP if dtype == "int32" and op in CODE_FOR_INT_OP else CODE_FOR_OP
    if op not in table:
        raise NotImplementedError(f"opencl: no C expression for {op.name}")
    return table[op](w, *args)


def cast(x: str, src: str, dst: str, w: int = 1) -> str:
    """Value conversion between ``float32`` and ``int32`` (truncation toward zero)."""
    if src == dst:
        return x
    return f"convert_{vt(w, 'int' if dst == 'int32' else 'float')}({x})"


def access(e: Expr) -> str:
    """C index arithmetic of an access expression (``//`` becomes C ``/``; lowering only
    emits non-negative operands, where the two agree)."""
    return _render_access(e, div="/")


def load(offset: str, dtype: str = "float32") -> str:
    """A scalar load from the arena ``buf`` at float offset ``offset`` (int32 values are
    stored as their bit patterns)."""
    v = f"buf[{offset}]"
    return f"as_int({v})" if dtype == "int32" else v


def store_value(v: str, dtype: str = "float32") -> str:
    """The float bit pattern to store for value ``v`` of ``dtype``."""
    return f"as_float({v})" if dtype == "int32" else v


def program(sources: list[Source], d: Dialect = OPENCL) -> str:
    """The source of one program holding every kernel; helpers, inline math and the Philox
    generator (with its iteration-word kernel) first."""
    parts = [d.preamble, mathlib.preamble(), HELPERS, philox.SOURCE]
    parts += [s.src for s in sources]
    return "\n".join(p for p in parts if p)
