"""autodiff: an ahead-of-time reverse-mode autodiff compiler for whole training loops.

Pipeline (one package per stage): graph -> opt -> procedural -> fusion -> alloc -> device.
"""
from __future__ import annotations

from .errors import FeederError, ReceiverError, ShapeError
from .graph import Feeder, Receiver, Tensor, ir_for, no_grad, to_networkx
from .graph.control import checkpoint, ir_if, ir_while, scan
from .graph.tensor import (concat, full, manual_seed, matmul, ones, randn, stack, tensor,
                           uniform, where, zeros)
from .graph.trace import TRACER
from .runtime import Report, execute, print_graph

cat = concat


def reset() -> None:
    """Drop the program being traced (variables keep their values)."""
    TRACER.reset()


def _fn(name):
    def f(x, *a, **k):
        return getattr(x, name)(*a, **k)
    f.__name__ = name
    f.__doc__ = f"``x.{name}(...)`` as a function, like ``torch.{name}``."
    return f


for _name in ("exp", "log", "exp2", "log2", "sqrt", "rsqrt", "reciprocal", "sin", "cos",
              "tanh", "sigmoid", "relu", "abs", "erf", "sign", "sum", "mean", "amax", "amin",
              "maximum", "minimum", "reshape", "permute", "transpose", "softmax",
              "log_softmax", "clamp", "square", "var"):
    globals()[_name] = _fn(_name)

__all__ = ["Tensor", "Feeder", "Receiver", "ir_for", "ir_if", "ir_while", "scan", "checkpoint",
           "execute", "print_graph", "no_grad",
           "ShapeError", "FeederError", "ReceiverError", "Report", "concat", "cat", "stack",
           "where", "matmul", "zeros", "ones", "full", "randn", "uniform", "tensor",
           "manual_seed", "to_networkx", "reset"]
