"""autodiff: an ahead-of-time reverse-mode autodiff compiler for whole training loops.

Pipeline (one package per stage): graph -> opt -> procedural -> fusion -> alloc -> device.
"""
from __future__ import annotations

import numpy as np

from .errors import DTypeError, FeederError, ReceiverError, ShapeError
from .graph import Feeder, Receiver, Tensor, ir_for, no_grad, to_networkx
from .graph.tensor import (concat, full, manual_seed, matmul, ones, randn, stack, tensor,
                           uniform, where, zeros)
from .graph.trace import TRACER
from .graph import dtypes as _dtypes
from .graph.dtypes import (DType as dtype, bfloat16, can_cast, float16, float32, int32, int64,
                           promote_types, result_type)
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

def is_floating_point(x) -> bool:
    """``torch.is_floating_point``: whether tensor ``x`` has a floating dtype."""
    return x.is_floating_point()


def get_default_dtype():
    """The dtype Python floats and float data become: always ``autodiff.float32``."""
    return float32


def finfo(dt):
    """``torch.finfo``: machine limits of a floating dtype (numpy's / ml_dtypes' finfo:
    ``eps``, ``max``, ``min``, ``tiny``, ``bits``...)."""
    import ml_dtypes
    return ml_dtypes.finfo(_dtypes.host(_dtypes.get(dt)))


def iinfo(dt):
    """``torch.iinfo``: limits of an integer dtype, as PyTorch gives them (int64: 64-bit,
    although its values must fit the int32 storage to enter a program)."""
    return np.iinfo(_dtypes.host(_dtypes.get(dt)))


# torch's dtype names; ``bool``, ``float``, ``int`` shadow the builtins only as attributes
globals().update({"bool": _dtypes.bool_, "float": float32, "int": int32, "long": int64,
                  "half": float16})

__all__ = ["Tensor", "Feeder", "Receiver", "ir_for", "execute", "print_graph", "no_grad",
           "ShapeError", "FeederError", "ReceiverError", "Report", "concat", "cat", "stack",
           "where", "matmul", "zeros", "ones", "full", "randn", "uniform", "tensor",
           "manual_seed", "to_networkx", "reset", "DTypeError", "dtype", "bool", "int32", "int64",
           "float32", "float16", "bfloat16", "float", "long", "int", "half", "result_type",
           "promote_types", "can_cast", "is_floating_point", "get_default_dtype", "finfo",
           "iinfo"]
