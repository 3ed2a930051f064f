"""How each dtype lives in the arena and in registers: loads, stores, casts, and the
C spellings of ops on integers and bool.

The arena is one ``float`` buffer ``buf``; a buffer's offset is in floats (every buffer
starts on a 64-byte boundary), and its elements are stored as below. An element index is
counted in the storage type from the arena's start: ``offset * (4 // itemsize) + i``.

========  ========================  =====================  ================================
dtype     storage                   register               load / store
========  ========================  =====================  ================================
float32   float                     ``float``              ``buf[i]``
int32     int bit pattern           ``int``                ``as_int(buf[i])`` / ``as_float``
int64     int32 bit pattern         ``int`` (wraps)        as int32
bool      ``uchar`` 0/1             ``int`` 0/1            ``((uchar*)buf)[i]``
float16   IEEE half                 ``float``, on halves   ``vload_half`` / ``vstore_half_rte``
bfloat16  ``ushort``: a float's     ``float``, on          ``as_float(u << 16)`` / rounded to
          upper 16 bits             bfloat16 values        nearest even, upper half stored
========  ========================  =====================  ================================

A 16-bit float register always holds a value of its type: every op whose result is float16 or
bfloat16 computes in float32 and rounds (:func:`round_to`), as the numpy reference does. Only
float32 values (and comparisons of them, bool masks turned into float32, ``where`` on them)
are rendered as ``float{w}`` vectors; everything else is built lane by lane. Bool registers
hold 0 or 1 in scalar and vector form alike.

Integer semantics match :mod:`autodiff.graph.reference`: arithmetic wraps (computed on
``uint``, where C defines wrapping), ``//`` and ``%`` floor, division by zero gives 0, shifts
outside ``[0, 32)`` give 0 or the sign.
"""
from __future__ import annotations

from typing import Callable

from ...graph import dtypes
from ...graph.ir import COMPARE, Op

#: register base type of each dtype
CTYPE = {"float32": "float", "float16": "float", "bfloat16": "float", "int32": "int",
         "int64": "int", "bool": "int"}

#: 16-bit float dtypes: float registers rounded to the storage type
HALF = frozenset({"float16", "bfloat16"})

#: storage C type of the dtypes whose element is not a 4-byte word
_NARROW = {"bool": "uchar", "bfloat16": "ushort"}


def ctype(dtype: str, w: int = 1) -> str:
    """C type of a ``w``-wide register of ``dtype``."""
    base = CTYPE[dtype]
    return base if w == 1 else f"{base}{w}"


def per_float(dtype: str) -> int:
    """Elements of ``dtype``'s storage per arena float (4, 2 or 1)."""
    return 4 // dtypes.itemsize(dtype)


def is_word(dtype: str) -> bool:
    """Whether an element is one arena float (float32, int32, int64)."""
    return dtypes.itemsize(dtype) == 4


def load(index: str, dtype: str, buf: str = "buf") -> str:
    """C expression reading element ``index`` (in storage units from the arena start)."""
    if dtype == "float32":
        return f"{buf}[{index}]"
    if dtype in ("int32", "int64"):
        return f"as_int({buf}[{index}])"
    if dtype == "bool":
        return f"((int)((__global const uchar*){buf})[{index}])"
    if dtype == "float16":
        return f"vload_half({index}, (__global const half*){buf})"
    if dtype == "bfloat16":
        return f"as_float((uint)((__global const ushort*){buf})[{index}] << 16)"
    raise NotImplementedError(f"codegen: no storage for dtype {dtype}")


def store(index: str, value: str, dtype: str, buf: str = "buf") -> str:
    """C statement writing register ``value`` to element ``index``."""
    if dtype == "float32":
        return f"{buf}[{index}] = {value};"
    if dtype in ("int32", "int64"):
        return f"{buf}[{index}] = as_float({value});"
    if dtype == "bool":
        return f"((__global uchar*){buf})[{index}] = (uchar)(({value}) != 0);"
    if dtype == "float16":
        return f"vstore_half_rte({value}, {index}, (__global half*){buf});"
    if dtype == "bfloat16":
        return f"((__global ushort*){buf})[{index}] = _ad_bf16_bits({value});"
    raise NotImplementedError(f"codegen: no storage for dtype {dtype}")


def const(value, dtype: str, w: int = 1) -> str | None:
    """C literal of an integer or bool constant (None for floats: :func:`.render.const`)."""
    if CTYPE[dtype] != "int":
        return None
    v = int(value)
    s = "(-2147483647-1)" if v == -2**31 else str(v)    # -2147483648 is a 64-bit literal in C
    return s if w == 1 else f"(({ctype(dtype, w)})({s}))"


def round_to(x: str, dtype: str) -> str:
    """A float32 expression rounded to ``dtype``'s values (16-bit floats), else ``x``."""
    if dtype == "float16":
        return f"_ad_round_half({x})"
    if dtype == "bfloat16":
        return f"_ad_round_bf16({x})"
    return x


def cast(x: str, src: str, dst: str, w: int = 1) -> str:
    """Register conversion ``src`` -> ``dst``: float -> integer truncates toward zero,
    anything -> bool is ``!= 0``, float -> 16-bit float rounds to nearest even."""
    if src == dst or (CTYPE[src] == CTYPE[dst] == "int" and "bool" not in (src, dst)):
        return x
    if dst == "bool":
        zero = "0.0f" if CTYPE[src] == "float" else "0"
        return f"(({x}) != {zero})" if w == 1 else f"(-(({x}) != {zero}))"
    if CTYPE[src] == CTYPE[dst]:                  # float <-> float: round if narrowing
        return round_to(x, dst)
    return round_to(f"convert_{ctype(dst, w)}({x})", dst)


def _u(op: str) -> Callable[..., str]:
    """Wrapping int arithmetic: computed on ``uint``, where C defines overflow (scalars)."""
    return lambda w, a, b: f"((int)((uint)({a}) {op} (uint)({b})))"


#: op -> fn(width, *operands) -> C expression, for int32/int64 operands (scalar code only)
CODE_FOR_INT_OP: dict[Op, Callable[..., str]] = {
    Op.NEG: lambda w, x: f"((int)(0u - (uint)({x})))",
    Op.ABS: lambda w, x: f"((int)(({x}) < 0 ? 0u - (uint)({x}) : (uint)({x})))",
    Op.SIGN: lambda w, x: f"((({x}) > 0) - (({x}) < 0))",
    Op.RELU: lambda w, x: f"max({x}, 0)",
    Op.ADD: _u("+"), Op.SUB: _u("-"), Op.MUL: _u("*"),
    Op.POW: lambda w, a, b: f"_ad_ipow({a}, {b})",
    Op.MAX: lambda w, a, b: f"max({a}, {b})",
    Op.MIN: lambda w, a, b: f"min({a}, {b})",
    Op.FLOORDIV: lambda w, a, b: f"_ad_floordiv_i({a}, {b})",
    Op.MOD: lambda w, a, b: f"_ad_mod_i({a}, {b})",
    Op.AND: lambda w, a, b: f"(({a}) & ({b}))",
    Op.OR: lambda w, a, b: f"(({a}) | ({b}))",
    Op.XOR: lambda w, a, b: f"(({a}) ^ ({b}))",
    Op.NOT: lambda w, x: f"(~({x}))",
    Op.SHL: lambda w, a, b: f"_ad_shl({a}, {b})",
    Op.SHR: lambda w, a, b: f"_ad_shr({a}, {b})",
}

#: ops on bool operands (0/1 ints) that differ from the int spelling
CODE_FOR_BOOL_OP: dict[Op, Callable[..., str]] = {
    Op.ADD: lambda w, a, b: f"(({a}) | ({b}))",
    Op.MUL: lambda w, a, b: f"(({a}) & ({b}))",
    Op.NOT: lambda w, x: f"(({x}) ^ 1)",
    Op.SIGN: lambda w, x: f"({x})",
}

#: float ops with no builtin (scalar helpers of :data:`HELPERS`)
CODE_FOR_FLOAT_OP: dict[Op, Callable[..., str]] = {
    Op.FLOORDIV: lambda w, a, b: f"_ad_floordiv_f({a}, {b})",
    Op.MOD: lambda w, a, b: f"_ad_mod_f({a}, {b})",
}


def code(op: Op, args: list[str], w: int, operand: str, result: str,
         float_table: dict) -> str:
    """C expression of elementwise ``op`` on operands of dtype ``operand`` (``WHERE``: of
    its branches) giving ``result``; float operands use ``float_table`` (the shared
    :data:`.render.CODE_FOR_OP`) except for :data:`CODE_FOR_FLOAT_OP`. 16-bit float
    results are rounded.

    Raises:
        NotImplementedError: no spelling for ``op`` on ``operand``.
    """
    kind = CTYPE[operand]
    table = None
    if operand == "bool" and op in CODE_FOR_BOOL_OP:
        table = CODE_FOR_BOOL_OP
    elif kind == "int" and op in CODE_FOR_INT_OP:
        table = CODE_FOR_INT_OP
    elif kind == "float" and op in CODE_FOR_FLOAT_OP:
        table = CODE_FOR_FLOAT_OP
    elif op in float_table and (kind == "float" or op in COMPARE or op is Op.WHERE):
        table = float_table
    if table is None:
        raise NotImplementedError(f"codegen: no C expression for {op.name} on {operand}")
    return round_to(table[op](w, *args), result)


def vector_ok(op: Op, operand: str, result: str) -> bool:
    """Whether an Apply renders as a ``float{w}`` vector expression: float32 arithmetic
    (no helper calls), comparisons of float32, bool -> float32 casts, ``where`` on float32."""
    if op in CODE_FOR_FLOAT_OP:
        return False
    if op is Op.CAST:
        return operand in ("float32", "bool") and result == "float32"
    return operand == "float32" and result in ("float32", "bool")


#: inline helpers every program includes
HELPERS = r"""
inline float _ad_round_half(float x) {
  ushort h; vstore_half_rte(x, 0, (half*)&h); return vload_half(0, (const half*)&h);
}
inline ushort _ad_bf16_bits(float x) {
  uint u = as_uint(x);
  if (isnan(x)) return (ushort)((u >> 16) | 0x40u);
  return (ushort)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
inline float _ad_round_bf16(float x) { return as_float((uint)_ad_bf16_bits(x) << 16); }
inline float _ad_floordiv_f(float a, float b) {
  if (b == 0.0f) return a / b;
  const float m = fmod(a, b);
  float d = (a - m) / b;
  if (m != 0.0f && ((b < 0.0f) != (m < 0.0f))) d -= 1.0f;
  if (d == 0.0f) return copysign(0.0f, a / b);
  float f = floor(d);
  return d - f > 0.5f ? f + 1.0f : f;
}
inline float _ad_mod_f(float a, float b) {
  float m = fmod(a, b);
  if (b == 0.0f) return m;
  if (m != 0.0f) { if ((b < 0.0f) != (m < 0.0f)) m += b; }
  else m = copysign(0.0f, b);
  return m;
}
inline int _ad_floordiv_i(int a, int b) {
  if (b == 0) return 0;
  if (b == -1) return (int)(0u - (uint)a);
  const int q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int _ad_mod_i(int a, int b) {
  if (b == 0 || b == -1) return 0;
  const int r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
inline int _ad_shl(int a, int b) { return (b < 0 || b >= 32) ? 0 : (int)((uint)a << b); }
inline int _ad_shr(int a, int b) { return (b < 0 || b >= 32) ? (a < 0 ? -1 : 0) : a >> b; }
inline int _ad_ipow(int a, int b) {
  if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
  uint r = 1u, x = (uint)a;
  while (b) { if (b & 1) r *= x; x *= x; b >>= 1; }
  return (int)r;
}
"""


def int_reduce(name: str, rows: int, length: int, x: Callable[[str], str],
               out: Callable[[str], list[str]], op: str, signature: str, index: str,
               local: int = 16):
    """Source lines of a row reduction with an ``int`` accumulator (integer and bool
    sources): one work-item per row ``r``, columns ``j`` in order. ``x(j)`` is the C
    expression of column ``j``; ``out(s)`` the statements storing the result ``s``."""
    ident = "0" if op == "sum" else "(-2147483647 - 1)"
    comb = "(int)((uint)s + (uint)v)" if op == "sum" else "max(s, v)"
    L = [signature + " {", f"  const int r = {index};", f"  if (r >= {rows}) return;",
         f"  int s = {ident};",
         f"  for (int j = 0; j < {length}; j++) {{ const int v = {x('j')}; s = {comb}; }}"]
    L += [f"  {st}" for st in out("s")] + ["}"]
    return "\n".join(L), local


#: half <-> float in integer code (round to nearest even, subnormals, inf and NaN kept), for
#: targets without ``vload_half``/``vstore_half_rte`` (the CUDA prelude; C and C++ alike)
PORTABLE_HALF = r"""
inline float _ad_h2f(ushort h) {
  const uint s = (uint)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1fu) return as_float(s | 0x7f800000u | (m << 13));
  if (e) return as_float(s | ((e + 112u) << 23) | (m << 13));
  const float f = (float)m * 5.9604644775390625e-08f;
  return s ? -f : f;
}
inline ushort _ad_f2h(float f) {
  const uint u = as_uint(f), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a >= 0x7f800000u) return (ushort)(s | (a > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (a >= 0x477ff000u) return (ushort)(s | 0x7c00u);
  if (a < 0x38800000u) return (ushort)(s | (uint)rint(as_float(a) * 16777216.0f));
  const uint r = a - 0x38000000u;
  return (ushort)(s | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
}
"""

#: what a C++ target (the CUDA prelude) adds for these spellings: the OpenCL address-space
#: word, byte and short element types, half loads and stores, then :data:`HELPERS`
CPP_PRELUDE = r"""
#define __global
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned short half;
""" + PORTABLE_HALF + r"""
inline float vload_half(size_t i, const half* p) { return _ad_h2f(p[i]); }
inline void vstore_half_rte(float v, size_t i, half* p) { p[i] = _ad_f2h(v); }
""" + HELPERS
