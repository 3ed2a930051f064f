"""Reference device: interprets the graph IR directly with numpy, in float32.

Every later backend and pass is checked against it. The graph is compiled once into a list
of steps (one closure per node, ``For`` nodes nesting their bodies); running it walks the
steps. Values are never modified in place, so views (``EXPAND``) are shared safely.
"""
from __future__ import annotations

import numpy as np
from scipy import special

from ...graph.ir import COMPARE, Graph, Node, Op
from ..host import call_feeder, call_receiver
from ...graph.rng import philox_uniform

F32 = np.float32


def _sigmoid(x):
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, F32(1) / (F32(1) + e), e / (F32(1) + e)).astype(F32)


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


#: op -> function(node) -> kernel(*operand arrays); the renderer-table idea of tinygrad.
KERNELS = {
    Op.NEG: lambda n: np.negative, Op.EXP: lambda n: np.exp, Op.LOG: lambda n: np.log,
    Op.EXP2: lambda n: np.exp2, Op.LOG2: lambda n: np.log2, Op.SQRT: lambda n: np.sqrt,
    Op.RSQRT: lambda n: lambda x: F32(1) / np.sqrt(x),
    Op.RECIP: lambda n: lambda x: F32(1) / x,
    Op.SIN: lambda n: np.sin, Op.COS: lambda n: np.cos, Op.TANH: lambda n: np.tanh,
    Op.SIGMOID: lambda n: _sigmoid,
    Op.RELU: lambda n: lambda x: np.maximum(x, F32(0)),
    Op.ABS: lambda n: np.abs, Op.ERF: lambda n: special.erf, Op.SIGN: lambda n: np.sign,
    Op.CAST: lambda n: lambda x: x.astype(n.dtype),
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
    Op.SLICE: lambda n: lambda x: x[tuple(slice(a, b, s) for a, b, s in n.arg)],
    Op.PAD: lambda n: lambda x: np.pad(x, n.arg),
    Op.CONCAT: lambda n: lambda *xs: np.concatenate(xs, axis=n.arg),
    Op.GATHER: lambda n: _gather,
    Op.SCATTER_ADD: lambda n: _scatter_add(n.arg),
}
assert COMPARE <= KERNELS.keys()


class Interpreter:
    """A compiled graph: ``run(store)`` executes it against variable values in ``store``.

    ``store`` maps :class:`~autodiff.graph.ir.Variable` -> numpy array and is updated in
    place by ``ASSIGN`` nodes. If an iteration fails, ``store`` is restored to its values at
    the start of that iteration before the error propagates.
    """

    def __init__(self, graph: Graph):
        self.graph = graph
        self.steps = self._compile(graph)
        self.vals: dict[int, np.ndarray] = {}
        self.iters: list[int] = []

    def _compile(self, graph: Graph):
        return [self._step(n) for n in graph.nodes]

    def _step(self, n: Node):
        if n.op is Op.FOR:
            return ("for", n, self._compile(n.arg.body))
        if n.op in KERNELS:
            return ("op", n, KERNELS[n.op](n), tuple(s.id for s in n.srcs))
        return (n.op.name.lower(), n)

    def run(self, store: dict) -> None:
        self.vals = {}
        self.iters = []
        self._run(self.steps, store)

    def _run(self, steps, store) -> None:
        vals = self.vals
        for step in steps:
            kind, n = step[0], step[1]
            if kind == "op":
                r = step[2](*[vals[i] for i in step[3]])
                if r.dtype != n.dtype:
                    r = r.astype(n.dtype)
                vals[n.id] = r
            elif kind == "const":
                vals[n.id] = np.full(n.shape, n.arg, dtype=n.dtype)
            elif kind == "load":
                vals[n.id] = store[n.arg]
            elif kind == "assign":
                vals[n.id] = store[n.arg] = vals[n.srcs[0].id]
            elif kind == "feeder":
                vals[n.id] = self._feed(n)
            elif kind == "rand":
                vals[n.id] = philox_uniform(*n.arg, self.iters, n.shape)
            elif kind == "receiver":
                self._receive(n, [vals[s.id] for s in n.srcs])
            elif kind == "for":
                self._loop(n, step[2], store)
            else:
                raise NotImplementedError(f"numpy device: no kernel for {n.op.name}")

    def _loop(self, n: Node, body, store) -> None:
        self.iters.append(0)
        for k, _ in enumerate(n.arg.range):
            self.iters[-1] = k
            snapshot = dict(store)
            try:
                self._run(body, store)
            except BaseException:
                store.clear()
                store.update(snapshot)
                raise
        self.iters.pop()

    def _feed(self, n: Node) -> np.ndarray:
        return call_feeder(n.arg, tuple(self.iters))

    def _receive(self, n: Node, args) -> None:
        call_receiver(n.arg, tuple(self.iters), args)
