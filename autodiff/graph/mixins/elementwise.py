"""Elementwise math: unary functions, ``maximum``/``minimum``, ``clamp``, casts."""
from __future__ import annotations

import numpy as np

from .. import ops
from ..ir import Op


class ElementwiseMixin:
    def _un(self, op: Op):
        return self._wrap(ops.unary(op, self.node))

    def _bin(self, op: Op, other, reverse: bool = False):
        a, b = self.node, self._lift(other)
        return self._wrap(ops.binary(op, b, a) if reverse else ops.binary(op, a, b))

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
    def neg(self): return -self
    def square(self): return self * self

    def maximum(self, other): return self._bin(Op.MAX, other)
    def minimum(self, other): return self._bin(Op.MIN, other)

    def clamp(self, min=None, max=None):
        out = self
        if min is not None:
            out = out.maximum(min)
        if max is not None:
            out = out.minimum(max)
        return out

    clip = clamp

    def where(self, condition, other):
        """``self`` where ``condition`` is nonzero, else ``other`` (``Tensor.where``)."""
        return self._wrap(ops.where(self._lift(condition), self.node, self._lift(other)))

    # -- casts (the dtype mixin, earlier in Tensor's bases, refines these) ---------------
    def float(self):
        return self._wrap(ops.cast(self.node, "float32"))

    def int(self):
        return self._wrap(ops.cast(self.node, "int32"))

    def to(self, dtype):
        return self._wrap(ops.cast(self.node, str(np.dtype(dtype)) if dtype is not None
                                   else self.dtype))
