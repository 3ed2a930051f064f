"""Reference semantics of every elementwise, contraction, reduction, movement and indexing
op of the graph IR, as numpy functions in float32 (int32 where the node says so).

``KERNELS[op](node)`` returns a function of the operand arrays computing ``node``'s value.
It sits below both the graph passes (:mod:`autodiff.opt.simplify` folds constants with it)
and the devices (the numpy reference device interprets the graph IR with it; the others are
tested against that device), so that there is one definition of what an op computes.
"""
from __future__ import annotations

import numpy as np
from scipy import special

from .ir import COMPARE, Op

F32 = np.float32


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, F32(1) / (F32(1) + e), e / (F32(1) + e)).astype(F32)


def _sign(x):
    """torch.sign: -1, 0 or 1, and 0 for NaN (numpy's sign gives NaN)."""
    return np.where(np.isnan(x), F32(0), np.sign(x)).astype(x.dtype)


def _cmp(f):
    return lambda a, b: f(a, b).astype(F32)


def _gather(table, idx):
    if idx.size and (idx.min() < 0 or idx.max() >= table.shape[0]):
        raise IndexError(f"gather: index out of range [0, {table.shape[0]}) "
                         f"(min {idx.min()}, max {idx.max()})")
    return table[idx]


def _scatter_add(n):
    def run(upd, idx):
        out = np.zeros((n,) + upd.shape[idx.ndim:], F32)
        np.add.at(out, idx, upd)
        return out
    return run


def _slice(start: int, step: int, size: int) -> slice:
    """The Python slice of ``size`` elements ``start + step*j`` (a negative ``step`` may
    run down to element 0, where Python needs ``stop=None``)."""
    stop = start + step * size
    return slice(start, None if stop < 0 else stop, step)


def _window(n):
    dim, size, step, dil = n.arg
    idx = np.arange(n.shape[dim])[:, None] * step + np.arange(size)[None, :] * dil

    def run(x):
        return np.moveaxis(np.take(x, idx, axis=dim), dim + 1, -1)
    return run


#: op -> function(node) -> kernel(*operand arrays); the renderer-table idea of tinygrad.
KERNELS = {
    Op.NEG: lambda n: np.negative, Op.EXP: lambda n: np.exp, Op.LOG: lambda n: np.log,
    Op.EXP2: lambda n: np.exp2, Op.LOG2: lambda n: np.log2, Op.SQRT: lambda n: np.sqrt,
    Op.RSQRT: lambda n: lambda x: F32(1) / np.sqrt(x),
    Op.RECIP: lambda n: lambda x: F32(1) / x,
    Op.SIN: lambda n: np.sin, Op.COS: lambda n: np.cos, Op.TANH: lambda n: np.tanh,
    Op.SIGMOID: lambda n: _sigmoid,
    Op.RELU: lambda n: lambda x: np.maximum(x, F32(0)),
    Op.ABS: lambda n: np.abs, Op.ERF: lambda n: special.erf, Op.SIGN: lambda n: _sign,
    Op.CAST: lambda n: lambda x: x.astype(n.dtype),
    Op.ATAN: lambda n: np.arctan, Op.LOG1P: lambda n: np.log1p, Op.EXPM1: lambda n: np.expm1,
    Op.ADD: lambda n: np.add, Op.SUB: lambda n: np.subtract, Op.MUL: lambda n: np.multiply,
    Op.DIV: lambda n: np.divide, Op.POW: lambda n: np.power,
    Op.MAX: lambda n: np.maximum, Op.MIN: lambda n: np.minimum,
    Op.CMPLT: lambda n: _cmp(np.less), Op.CMPLE: lambda n: _cmp(np.less_equal),
    Op.CMPGT: lambda n: _cmp(np.greater), Op.CMPGE: lambda n: _cmp(np.greater_equal),
    Op.CMPEQ: lambda n: _cmp(np.equal), Op.CMPNE: lambda n: _cmp(np.not_equal),
    Op.WHERE: lambda n: lambda m, a, b: np.where(m != 0, a, b),
    Op.DOT: lambda n: np.matmul,
    Op.SUM: lambda n: lambda x: np.sum(x, axis=n.arg, keepdims=True, dtype=F32),
    Op.RMAX: lambda n: lambda x: np.max(x, axis=n.arg, keepdims=True),
    Op.RESHAPE: lambda n: lambda x: x.reshape(n.arg),
    Op.PERMUTE: lambda n: lambda x: x.transpose(n.arg),
    Op.EXPAND: lambda n: lambda x: np.broadcast_to(x, n.arg),
    Op.SLICE: lambda n: lambda x: x[tuple(_slice(a, s, m) for (a, _, s), m in zip(n.arg, n.shape))],
    Op.PAD: lambda n: lambda x: np.pad(x, n.arg),
    Op.CONCAT: lambda n: lambda *xs: np.concatenate(xs, axis=n.arg),
    Op.WINDOW: _window,
    Op.GATHER: lambda n: _gather,
    Op.SCATTER_ADD: lambda n: _scatter_add(n.arg),
}
assert COMPARE <= KERNELS.keys()
