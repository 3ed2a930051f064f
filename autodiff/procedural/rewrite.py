"""Statements with every access expression mapped: ``map_exprs(stmt, fn)``.

A device that keeps loop counters somewhere of its own (the OpenCL arena) renames the
counter variables of every access expression (:class:`~.access.Var` named like a loop's
``var``) before rendering a kernel; this module does the walk over values and statements.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from .access import Expr, variables
from .ir import (Acc, Apply, Const, Copy, DotProduct, Elementwise, FusedKernel, Gather,
                 IndexValue, Load, Local, Output, Rand, Reduce, ScatterAdd, Select, Stmt,
                 Value)


def map_value(v: Value, fn: Callable[[Expr], Expr]) -> Value:
    """``v`` with ``fn`` applied to every access expression in it (loads, random draws,
    select conditions, index values)."""
    t = type(v)
    if t is Load:
        return Load(v.buffer, fn(v.index))
    if t is Rand:
        return replace(v, index=fn(v.index))
    if t is IndexValue:
        return IndexValue(fn(v.expr), v.dtype)
    if t is Select:
        return Select(fn(v.cond), map_value(v.a, fn), map_value(v.b, fn))
    if t is Apply:
        return Apply(v.op, tuple(map_value(a, fn) for a in v.args), v.dtype, v.arg)
    if t in (Const, Acc, Local):
        return v
    raise TypeError(f"not a value: {v!r}")


def map_exprs(s: Stmt, fn: Callable[[Expr], Expr]) -> Stmt:
    """Kernel statement ``s`` with ``fn`` applied to every access expression (a copy; ``s``
    itself when it has none: ``Copy``, ``Gather``, ``ScatterAdd``)."""
    outs = lambda outs: tuple(Output(o.buffer, fn(o.index), map_value(o.value, fn))  # noqa
                              for o in outs)
    if isinstance(s, Elementwise):
        return Elementwise(s.shape, s.vars, outs(s.outs))
    if isinstance(s, DotProduct):
        return DotProduct(s.shape, s.vars, s.k, map_value(s.a, fn), map_value(s.b, fn),
                          outs(s.outs))
    if isinstance(s, Reduce):
        return Reduce(s.op, s.shape, s.vars, s.axes, map_value(s.src, fn), outs(s.outs))
    if isinstance(s, FusedKernel):
        return FusedKernel(s.name, tuple(map_exprs(m, fn) for m in s.members),
                           map_exprs(s.kernel, fn), s.internal)
    if isinstance(s, (Copy, Gather, ScatterAdd)):
        return s
    raise TypeError(f"not a kernel statement: {s!r}")


def expr_vars(s: Stmt) -> set:
    """Every :class:`~.access.Var` in the access expressions of kernel statement ``s``."""
    found: set = set()

    def note(e: Expr) -> Expr:
        found.update(variables(e))
        return e
    map_exprs(s, note)
    return found
