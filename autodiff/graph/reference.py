"""Reference semantics of every elementwise, contraction, reduction, movement and indexing
op of the graph IR, as numpy functions.

``KERNELS[op](node)`` returns a function of the operand arrays, in their compute dtypes
(:data:`~autodiff.graph.dtypes.COMPUTE`: float32 for float16/bfloat16, int32 for int64),
computing ``node``'s value; :func:`kernel` wraps it to take and return arrays in the
device storage dtypes (:data:`~autodiff.graph.dtypes.STORAGE`), rounding 16-bit float
results once. It sits below both the graph passes (:mod:`autodiff.opt.simplify` folds
constants with it) and the devices (the numpy reference device interprets the graph IR with
it; the others are tested against that device), so that there is one definition of what an
op computes.

Integer semantics: arithmetic wraps at 32 bits; ``//`` and ``%`` floor (Python, PyTorch);
division by a zero computed on the device gives 0 (PyTorch raises ``ZeroDivisionError``, as
tracing does for a zero it knows: a number or a tensor made from data); shifts by a count outside
``[0, 32)`` give 0 (``<<``) or the sign (``>>``), as in PyTorch; an integer to a negative
integer power is ``1 // a ** -b`` (0 unless ``a`` is 1 or -1), as in PyTorch.
"""
from __future__ import annotations

import numpy as np

from . import dtypes
from .ir import COMPARE, ELEMENTWISE, Op

F32 = np.float32


def _erf():
    """``scipy.special.erf``, imported at first use: ``scipy.special`` adds ~18 MB to a
    process's resident memory, and most programs never evaluate ``erf`` on the host."""
    from scipy import special
    return special.erf


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, F32(1) / (F32(1) + e), e / (F32(1) + e)).astype(F32)


def _relu(x):
    return np.maximum(x, x.dtype.type(0))


def _sign(x):
    """torch.sign: -1, 0 or 1, and 0 for NaN (numpy's sign gives NaN); bool unchanged."""
    if x.dtype.kind != "f":
        return x if x.dtype == np.bool_ else np.sign(x)
    return np.where(np.isnan(x), F32(0), np.sign(x)).astype(x.dtype)


def _pow(a, b):
    if a.dtype.kind == "f":
        return np.power(a, b)
    return _ipow(a, b)


def _ipow(a, b):
    """Integer power by squaring, wrapping (PyTorch's ``powi``); a negative exponent gives
    0 unless the base is 1 or -1."""
    a, b = np.broadcast_arrays(a, b)
    out, base, e = np.ones(a.shape, a.dtype), a.copy(), np.maximum(b, 0).astype(np.int64)
    while e.any():
        out = np.where(e & 1, out * base, out)
        base, e = base * base, e >> 1
    neg = np.where(a == 1, 1, np.where(a == -1, 1 - 2 * (b & 1), 0)).astype(a.dtype)
    return np.where(b < 0, neg, out)


def _gather(table, idx):
    if idx.size and (idx.min() < 0 or idx.max() >= table.shape[0]):
        raise IndexError(f"gather: index out of range [0, {table.shape[0]}) "
                         f"(min {idx.min()}, max {idx.max()})")
    return table[idx]


def _scatter_add(n):
    def run(upd, idx):
        out = np.zeros((n,) + upd.shape[idx.ndim:], upd.dtype)
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
    Op.RELU: lambda n: _relu,
    Op.ABS: lambda n: np.abs, Op.ERF: lambda n: _erf(), Op.SIGN: lambda n: _sign,
    Op.CAST: lambda n: lambda x: x,              # the conversion is :func:`kernel`'s
    Op.NOT: lambda n: np.invert,
    Op.ATAN: lambda n: np.arctan, Op.LOG1P: lambda n: np.log1p, Op.EXPM1: lambda n: np.expm1,
    Op.ADD: lambda n: np.add, Op.SUB: lambda n: np.subtract, Op.MUL: lambda n: np.multiply,
    Op.DIV: lambda n: np.divide, Op.POW: lambda n: _pow,
    Op.MAX: lambda n: np.maximum, Op.MIN: lambda n: np.minimum,
    Op.FLOORDIV: lambda n: np.floor_divide, Op.MOD: lambda n: np.remainder,
    Op.AND: lambda n: np.bitwise_and, Op.OR: lambda n: np.bitwise_or,
    Op.XOR: lambda n: np.bitwise_xor, Op.SHL: lambda n: np.left_shift,
    Op.SHR: lambda n: np.right_shift,
    Op.CMPLT: lambda n: np.less, Op.CMPLE: lambda n: np.less_equal,
    Op.CMPGT: lambda n: np.greater, Op.CMPGE: lambda n: np.greater_equal,
    Op.CMPEQ: lambda n: np.equal, Op.CMPNE: lambda n: np.not_equal,
    Op.WHERE: lambda n: lambda m, a, b: np.where(m, a, b),
    Op.DOT: lambda n: np.matmul,
    Op.SUM: lambda n: lambda x: np.sum(x, axis=n.arg, keepdims=True, dtype=x.dtype),
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
assert COMPARE <= KERNELS.keys() and ELEMENTWISE <= KERNELS.keys()

#: ops whose operands are converted to their compute dtype and whose result is rounded to
#: the node's storage dtype (movement and indexing ops move storage values as they are)
ARITHMETIC = ELEMENTWISE | {Op.DOT, Op.SUM, Op.RMAX, Op.SCATTER_ADD}
_WIDEN = (np.dtype(np.float16), dtypes.STORAGE["bfloat16"])


def kernel(node):
    """``KERNELS[node.op](node)`` taking and returning device storage arrays: 16-bit float
    operands are widened to float32, the result converted to ``node.dtype``'s storage dtype
    (rounding to nearest even; float to integer truncates toward zero). ``node`` needs
    ``op``, ``dtype`` and ``arg``."""
    f = KERNELS[node.op](node)
    if node.op not in ARITHMETIC:
        return f
    out = dtypes.storage(node.dtype)

    def run(*xs):
        xs = [x.astype(F32) if x.dtype in _WIDEN else x for x in xs]
        with np.errstate(all="ignore"):
            r = np.asarray(f(*xs))
            return r if r.dtype == out else r.astype(out)
    return run
