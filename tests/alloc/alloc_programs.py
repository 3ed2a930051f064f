"""Hand-built procedural programs for the planner tests (no lowering involved)."""
from __future__ import annotations

import numpy as np

from autodiff.graph.ir import FeederSpec, Op, ReceiverSpec, Variable
from autodiff.procedural.access import Var
from autodiff.procedural.ir import (Apply, Buffer, BufferKind, Elementwise, FeederWrite, Load,
                                    Output, Program, ReceiverRead)


def buf(name, n=4, kind=BufferKind.TEMP):
    var = Variable(np.zeros(n, np.float32), name) if kind is BufferKind.PARAM else None
    return Buffer(name, (n,), "float32", kind, var=var)


def ew(out, *srcs, op=Op.ADD):
    """``out[x] = op(srcs[0][x], ...)`` over a 1-d space."""
    x = Var("X", out.shape[0])
    args = tuple(Load(s, x) for s in srcs)
    value = Apply(op, args) if len(args) > 1 else Apply(Op.NEG, args)
    return Elementwise(out.shape, (x,), (Output(out, x, value),))


def feed(b):
    return FeederWrite(FeederSpec(lambda: None, b.shape, b.dtype, b.name), b)


def recv(*bs):
    return ReceiverRead(ReceiverSpec(lambda *a: None, "r"), tuple(bs))


def program(body, *bufs):
    return Program(body, list(bufs))


def partial(out, src):
    """``out[x] = -src[x]`` for the first half of ``out`` only."""
    x = Var("X", out.shape[0] // 2)
    return Elementwise((out.shape[0] // 2,), (x,), (Output(out, x, Apply(Op.NEG, (Load(src, x),))),))
