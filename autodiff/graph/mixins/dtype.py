"""The dtype side of ``Tensor``: conversions, dtype queries, integer and bitwise operators.

PyTorch's type promotion is :func:`promoted`: tensors and Python scalars are promoted
together with :func:`autodiff.graph.dtypes.result_type` (a Python scalar, like a 0-d
tensor, only widens the category: ``int32_tensor + 2`` stays int32, ``int32_tensor + 2.5``
is float32, ``half_tensor * 2.5`` stays float16) and cast to that dtype before the graph
op is traced. Every operator of ``Tensor`` goes through it.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes, ops
from ..ir import Node, Op

#: ``Tensor.type()`` names, as PyTorch spells them
_TYPE_NAMES = {"float32": "FloatTensor", "float16": "HalfTensor", "bfloat16": "BFloat16Tensor",
               "int32": "IntTensor", "int64": "LongTensor", "bool": "BoolTensor"}


def _tensor_cls():
    from ..tensor import Tensor
    return Tensor


def promoted(*xs, dtype=None) -> tuple[str, list[Node]]:
    """``(dtype name, nodes)``: tensors and Python/numpy scalars ``xs`` as graph nodes of
    one dtype, ``dtype`` if given, else ``torch.result_type`` of ``xs``.

    Raises:
        TypeError: an operand that is neither a tensor nor a real number (or a numpy array
            of a dtype autodiff lacks).
        OverflowError: an integer scalar outside the int32 storage of an integer result.
    """
    T = _tensor_cls()
    xs = [T(x) if isinstance(x, np.ndarray) and x.ndim else x for x in xs]
    for x in xs:
        if not isinstance(x, T) and not dtypes.is_scalar(x):
            raise TypeError(f"expected a Tensor or a number, got {type(x).__name__}")
    dt = dtypes.name(dtype) if dtype is not None else dtypes.result_type(*xs).name
    # a scalar becomes a constant of the tensors' broadcast shape: no reshape/expand nodes
    shapes = {tuple(x.shape) for x in xs if isinstance(x, T)}
    if len(shapes) == 1:                # the common case: no broadcast to work out
        shape = tuple(int(d) for d in next(iter(shapes)))
    else:
        try:
            shape = tuple(np.broadcast_shapes(*shapes))
        except ValueError:              # the op itself reports the shapes that do not fit
            shape = ()
    return dt, [ops.cast(x.node, dt) if isinstance(x, T) else
                ops.const(x.item() if isinstance(x, (np.ndarray, np.generic)) else x, shape,
                          dt)
                for x in xs]


def known_values(t) -> np.ndarray | None:
    """The values of operand ``t`` while tracing, if they are known: a numpy array or
    number as it is, a tensor made from data (a variable) whose host value is current (not
    inside an ``ir_for`` body, not assigned by the program being traced); else None (a
    traced tensor's values exist only when the program runs)."""
    from ..trace import TRACER
    if isinstance(t, np.ndarray) or dtypes.is_scalar(t):
        return np.asarray(t)
    var = getattr(t, "_var", None)
    if var is None or TRACER.scope is not TRACER.root or var in TRACER.root.assigned:
        return None
    return var.value


def check_divisor(name: str, dt, a, b) -> None:
    """PyTorch's ``RuntimeError: ZeroDivisionError`` for an integer division (``//``,
    ``%``, ``fmod``, ``div`` with a rounding mode; result dtype ``dt``) of ``a`` by ``b``
    where ``b`` holds a 0 that is known while tracing: a Python/numpy number or array, or
    a tensor made from data. A traced divisor's values exist only on the device, where an
    integer division by 0 gives 0 (:mod:`autodiff.graph.reference`), unchecked."""
    if not dtypes.is_integral(dt):             # bool: the op rejects it (PyTorch too)
        return
    if any(0 in tuple(getattr(x, "shape", ())) for x in (a, b)):
        return                                        # no element is divided
    v = known_values(b)
    if v is not None and v.size and not np.all(v):
        raise RuntimeError(f"ZeroDivisionError: {name}: integer division by zero (a "
                           f"divisor of {dtypes.name(dt)} values holds 0; traced at "
                           f"{ops.user_site()})")


#: the torch op name a ZeroDivisionError names, per integer-division graph op
_DIVISION = {Op.FLOORDIV: "floor_divide", Op.MOD: "remainder"}


def binary(op: Op, a, b, name: str | None = None):
    """``op(a, b)`` on promoted operands, as a Tensor.

    Raises:
        DTypeError: ``-`` with a bool operand (PyTorch rejects it whatever the other is),
            or the op on the promoted dtype (:func:`autodiff.graph.ops.result_dtype`).
        RuntimeError: ``ZeroDivisionError``, an integer ``//`` or ``%`` by a divisor
            holding 0 known while tracing (:func:`check_divisor`; ``name`` is the op it
            names).
    """
    if op is Op.SUB and any(isinstance(x, (bool, np.bool_)) or getattr(x, "dtype", None) ==
                            "bool" for x in (a, b)):
        raise ops.DTypeError(f"sub: subtraction with a bool tensor is not supported, use ~ "
                             f"or logical_not (traced at {ops.user_site()})")
    dt, (x, y) = promoted(a, b)
    if op in _DIVISION:
        check_divisor(name or _DIVISION[op], dt, a, b)
    if dt in ("float16", "bfloat16") and (
            (op is Op.MUL and (dtypes.is_scalar(a) or dtypes.is_scalar(b)))
            or (op in (Op.DIV, Op.FLOORDIV) and dtypes.is_scalar(b))):
        # PyTorch's CPU kernels multiply, divide and floor-divide 16-bit floats by a
        # Python scalar in float32 without rounding the scalar to the tensor's dtype;
        # + - ** % and comparisons round it first (as above)
        _, (x, y) = promoted(a, b, dtype="float32")
        return _tensor_cls()(_node=ops.cast(ops.binary(op, x, y), dt))
    return _tensor_cls()(_node=ops.binary(op, x, y))


def _dtype_and_device(args, kwargs):
    """The dtype named in ``Tensor.to``'s arguments (None: keep), devices ignored."""
    dtype = kwargs.get("dtype")
    for a in args:
        if hasattr(a, "dtype") and hasattr(a, "shape"):       # .to(other_tensor)
            dtype = a.dtype
            continue
        try:
            dtype = dtypes.get(a)
        except TypeError:
            if not isinstance(a, str) or not a.split(":")[0] in ("cpu", "cuda", "mps", "meta"):
                raise
    return dtype


class DTypeMixin:
    """Tensor methods about dtypes (mixed into :class:`autodiff.Tensor`)."""

    # -- queries -----------------------------------------------------------------------
    def is_floating_point(self) -> bool:
        """Whether the dtype is float32, float16 or bfloat16."""
        return self.dtype.is_floating_point

    def is_signed(self) -> bool:
        return self.dtype.is_signed

    def is_complex(self) -> bool:
        return False

    def element_size(self) -> int:
        """Bytes per element as PyTorch counts them (8 for int64, though devices store it
        in 4)."""
        return self.dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    # -- conversions -------------------------------------------------------------------
    def to(self, *args, **kwargs):
        """``x.to(dtype)``, ``x.to(other)`` (its dtype), ``x.to("cpu", dtype)``; device
        arguments are accepted and ignored (where a program runs is ``execute``'s
        ``device``). Returns ``self`` when the dtype does not change, as PyTorch does.

        Raises:
            TypeError: an unknown dtype.
        """
        dtype = _dtype_and_device(args, kwargs)
        if dtype is None or dtypes.get(dtype) == self.dtype:
            return self
        return type(self)(_node=ops.cast(self.node, dtype))

    def type(self, dtype=None):
        """``x.type()``: the type name (``"autodiff.FloatTensor"``); ``x.type(dtype)``:
        ``x.to(dtype)`` (also for names like ``"torch.LongTensor"``)."""
        if dtype is None:
            return f"autodiff.{_TYPE_NAMES[self.dtype.name]}"
        if isinstance(dtype, str) and dtype.split(".")[-1] in _TYPE_NAMES.values():
            dtype = next(k for k, v in _TYPE_NAMES.items() if v == dtype.split(".")[-1])
        return self.to(dtype)

    def float(self): return self.to(dtypes.float32)
    def half(self): return self.to(dtypes.float16)
    def bfloat16(self): return self.to(dtypes.bfloat16)
    def int(self): return self.to(dtypes.int32)
    def long(self): return self.to(dtypes.int64)
    def bool(self): return self.to(dtypes.bool_)

    # -- integer division, bitwise operators ---------------------------------------------
    def __floordiv__(self, o): return binary(Op.FLOORDIV, self, o)
    def __rfloordiv__(self, o): return binary(Op.FLOORDIV, o, self)
    def __mod__(self, o): return binary(Op.MOD, self, o)
    def __rmod__(self, o): return binary(Op.MOD, o, self)
    def __and__(self, o): return binary(Op.AND, self, o)
    def __rand__(self, o): return binary(Op.AND, o, self)
    def __or__(self, o): return binary(Op.OR, self, o)
    def __ror__(self, o): return binary(Op.OR, o, self)
    def __xor__(self, o): return binary(Op.XOR, self, o)
    def __rxor__(self, o): return binary(Op.XOR, o, self)
    def __lshift__(self, o): return binary(Op.SHL, self, o)
    def __rlshift__(self, o): return binary(Op.SHL, o, self)
    def __rshift__(self, o): return binary(Op.SHR, self, o)
    def __rrshift__(self, o): return binary(Op.SHR, o, self)

    def __invert__(self):
        """``~x``: bitwise not (logical not on bool); integer and bool tensors only."""
        return type(self)(_node=ops.unary(Op.NOT, self.node))

    def floor_divide(self, o):
        """``x // o``: ``floor(x / o)`` (integer division rounds toward -inf, as in
        Python and PyTorch).

        Raises:
            RuntimeError: ``ZeroDivisionError``, as PyTorch, for an integer division by a
                0 known while tracing (a number, or a tensor made from data); a traced
                integer divisor's zeros give 0 on the device instead.
        """
        return binary(Op.FLOORDIV, self, o, "floor_divide")

    def remainder(self, o):
        """``x % o``: the remainder with the sign of ``o`` (Python, ``torch.remainder``).

        Raises:
            RuntimeError: ``ZeroDivisionError`` as :meth:`floor_divide` (a traced integer
                divisor's zeros give 0).
        """
        return binary(Op.MOD, self, o, "remainder")

    def fmod(self, o):
        """C's ``fmod``, the remainder with the sign of ``x``, exactly: on floats
        ``sign(x) * (|x| % |o|)`` (the remainder of positive values has no rounding), on
        integers ``x % o`` minus ``o`` where the signs differ. Gradients: 1 for ``x``,
        ``-trunc(x / o)`` for ``o``.

        Raises:
            RuntimeError: ``ZeroDivisionError`` as :meth:`floor_divide` (a traced integer
                divisor's zeros give 0).
        """
        dt = dtypes.result_type(self, o)
        check_divisor("fmod", dt, self, o)
        x, o = self.to(dt), o.to(dt) if isinstance(o, DTypeMixin) else o
        if dt.is_floating_point:
            r = x.abs() % (o.abs() if isinstance(o, DTypeMixin) else abs(o))
            return type(self)._wrap(ops.where((x < 0).node, (-r).node, r.node))
        r = x % o
        fix = (r != 0) & ((x < 0) ^ (o < 0))
        return type(self)._wrap(ops.where(fix.node, (r - o).node, r.node))

    def _rounded(self, name: str, rounding):
        """Rounding an integer tensor changes nothing (PyTorch keeps its dtype); bool and
        ``frac`` of integers are rejected, as in PyTorch."""
        if self.dtype in ("float16", "bfloat16"):    # exact in float32, then back
            return getattr(self.float(), name)().to(self.dtype)
        if self.is_floating_point():
            return rounding()
        if self.dtype == "bool" or name == "frac":
            raise ops.DTypeError(f"{name}: not supported on {self.dtype.name} tensors "
                                 f"(traced at {ops.user_site()})")
        return self

    def floor(self): return self._rounded("floor", super().floor)
    def ceil(self): return self._rounded("ceil", super().ceil)
    def trunc(self): return self._rounded("trunc", super().trunc)
    def frac(self): return self._rounded("frac", super().frac)

    def round(self, decimals: int = 0):
        return self._rounded("round", lambda: super(DTypeMixin, self).round(decimals))

    fix = trunc

    def bitwise_and(self, o): return self & o
    def bitwise_or(self, o): return self | o
    def bitwise_xor(self, o): return self ^ o
    def bitwise_not(self): return ~self
    def bitwise_left_shift(self, o): return self << o
    def bitwise_right_shift(self, o): return self >> o

    def logical_not(self): return ~self.bool()
    def logical_and(self, o): return self.bool() & _as_bool(o)
    def logical_or(self, o): return self.bool() | _as_bool(o)
    def logical_xor(self, o): return self.bool() ^ _as_bool(o)

    def __ifloordiv__(self, o): return self._set_promoted(self // o)
    def __imod__(self, o): return self._set_promoted(self % o)
    def __iand__(self, o): return self._set_promoted(self & o)
    def __ior__(self, o): return self._set_promoted(self | o)
    def __ixor__(self, o): return self._set_promoted(self ^ o)
    def __ilshift__(self, o): return self._set_promoted(self << o)
    def __irshift__(self, o): return self._set_promoted(self >> o)

    def _set_promoted(self, value):
        """In-place update with ``value``, which must cast to our dtype under PyTorch's
        rules (:func:`~autodiff.graph.dtypes.can_cast`)."""
        if not dtypes.can_cast(value.dtype, self.dtype):
            raise RuntimeError(f"result type {value.dtype} can't be cast to the desired "
                               f"output type {self.dtype}")
        return self._set(ops.cast(value.node, self.dtype))


def _as_bool(o):
    if isinstance(o, DTypeMixin):
        return o.bool()
    return bool(o) if dtypes.is_scalar(o) else _tensor_cls()(np.asarray(o)).bool()
