"""Kernel statements over empty index spaces (a dimension of size 0), for the devices that
render the procedural IR (OpenCL, the numpy procedural executor).

PyTorch's results, with no kernel over an empty space: an empty output needs no work; a
sum or a matmul over an empty reduced extent is 0, its epilogue applied to that 0 (so it
becomes an :class:`~autodiff.procedural.ir.Elementwise` over the output space); a
scatter_add of no updates is zeros. A max over an empty extent never gets here: it is an
error at trace time (:func:`autodiff.graph.ops.reduce`).
"""
from __future__ import annotations

import math
from dataclasses import replace

from ..graph.ir import Op
from ..procedural.access import Var
from ..procedural.ir import (Acc, Apply, Const, Copy, DotProduct, Elementwise, FusedKernel,
                             Gather, Output, Reduce, ScatterAdd, Select)

#: the value of a reduction over nothing, by op
IDENTITY = {Op.SUM: 0.0, Op.RMAX: float("-inf")}


def rewrite(stmt):
    """The kernel to render for ``stmt`` (a kernel statement, or a fused group: its
    single-kernel form): None when it has no work, an :class:`Elementwise` with the
    accumulator replaced by the identity when its reduction is empty, else the kernel."""
    k = stmt.kernel if isinstance(stmt, FusedKernel) else stmt
    if isinstance(k, Elementwise):
        return k if math.prod(k.shape) else None
    if isinstance(k, DotProduct):
        if not math.prod(k.shape):
            return None
        return k if k.k.extent else _epilogue(k.shape, k.vars, k.outs, 0.0)
    if isinstance(k, Reduce):
        kept = tuple(d for i, d in enumerate(k.shape) if i not in k.axes)
        if not math.prod(kept):
            return None
        return k if math.prod(k.shape) else _epilogue(kept, k.kept, k.outs, IDENTITY[k.op])
    if isinstance(k, Gather):
        return k if k.out.size else None
    if isinstance(k, ScatterAdd):
        if not k.out.size:
            return None
        if k.idx.size:
            return k
        i = Var("i", k.out.size)
        return Elementwise((k.out.size,), (i,), (Output(k.out, i, Const(0.0, k.out.dtype)),))
    if isinstance(k, Copy):
        return k if k.src.size else None
    return k


def _epilogue(shape, vars_, outs, acc: float) -> Elementwise:
    return Elementwise(tuple(shape), tuple(vars_),
                       tuple(replace(o, value=_sub_acc(o.value, acc)) for o in outs))


def _sub_acc(v, acc: float):
    """``v`` with every :class:`Acc` replaced by the constant ``acc``."""
    if isinstance(v, Acc):
        return Const(acc, v.dtype)
    if isinstance(v, Apply):
        return replace(v, args=tuple(_sub_acc(a, acc) for a in v.args))
    if isinstance(v, Select):
        return replace(v, a=_sub_acc(v.a, acc), b=_sub_acc(v.b, acc))
    return v
