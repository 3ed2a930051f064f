"""autodiff: an ahead-of-time reverse-mode autodiff compiler for whole training loops.

Pipeline (one package per stage): graph -> opt -> procedural -> fusion -> alloc -> device.
"""
from __future__ import annotations

import numpy as np

from .errors import (CallbackError, DimError, DistributedError, DTypeError, FeederError,
                     ReceiverError, ShapeError)
from .graph import Feeder, Receiver, Tensor, host_callback, ir_for, no_grad, to_networkx
from .graph.control import checkpoint, ir_if, ir_while, scan
from .graph.mixins.linalg import cdist
from .graph.linalg.norms import torch_vander as vander
from .graph.mixins.reduce import einsum
from .graph.tensor import (concat, full, manual_seed, matmul, ones, randn, stack, tensor,
                           uniform, where, zeros)
from .graph.trace import TRACER
from .graph import dtypes as _dtypes
from .graph.dtypes import (DType as dtype, bfloat16, can_cast, float16, float32, int32, int64,
                           promote_types, result_type)
from .runtime import Report, execute, print_graph
from . import linalg, special
from .special import polygamma

cat = concatenate = concat
arange, linspace, eye, empty, rand, meshgrid = (Tensor.arange, Tensor.linspace, Tensor.eye,
                                                Tensor.empty, Tensor.rand, Tensor.meshgrid)


def reset() -> None:
    """Drop the program being traced (variables keep their values)."""
    TRACER.reset()


def _fn(name):
    def f(x, *a, **k):
        return getattr(x, name)(*a, **k)
    f.__name__ = name
    f.__doc__ = f"``x.{name}(...)`` as a function, like ``torch.{name}``."
    return f


#: ``torch.<name>(x, ...)`` functions that are ``x.<name>(...)``
METHOD_FUNCTIONS = (
    # elementwise
    "exp", "log", "exp2", "log2", "log10", "log1p", "expm1", "sqrt", "rsqrt", "reciprocal",
    "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "arcsin", "arccos", "arctan",
    "arctan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "arcsinh", "arccosh",
    "arctanh", "sigmoid", "relu", "abs", "absolute", "erf", "sign", "sgn", "neg", "negative",
    "square", "floor", "ceil", "round", "trunc", "fix", "frac", "clamp", "clip", "clamp_min",
    "clamp_max", "maximum", "minimum", "fmax", "fmin", "fmod", "remainder", "copysign",
    "hypot", "lerp", "logaddexp", "logaddexp2", "xlogy", "isnan", "isinf", "isposinf",
    "isneginf", "isfinite", "nan_to_num", "isclose",
    # reductions and scans
    "sum", "mean", "var", "std", "var_mean", "std_mean", "prod", "amax", "amin", "max", "min",
    "argmax", "argmin", "logsumexp", "any", "all", "norm", "count_nonzero", "softmax",
    "log_softmax", "cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "sort",
    "argsort", "msort", "topk", "kthvalue", "median", "nanmedian", "quantile", "nanquantile",
    # movement
    "reshape", "flatten", "unflatten", "permute", "transpose", "swapaxes", "swapdims",
    "movedim", "moveaxis", "t", "broadcast_to", "squeeze", "unsqueeze", "narrow", "flip",
    "fliplr", "flipud", "roll", "tile", "repeat_interleave", "split", "chunk", "unbind",
    "diagonal", "diag", "diag_embed", "tril", "triu",
    # indexing
    "index_select", "gather", "take_along_dim", "scatter", "scatter_add", "scatter_reduce",
    "index_add", "masked_fill", "index_fill", "masked_scatter",
    # arithmetic and comparisons under PyTorch's names (``torch.div`` is below)
    "add", "sub", "subtract", "mul", "multiply", "divide", "true_divide", "pow", "eq", "ne",
    "not_equal", "lt", "less", "le", "less_equal", "gt", "greater", "ge", "greater_equal",
    # dtypes: integer division, bitwise and logical ops
    "floor_divide", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    "bitwise_left_shift", "bitwise_right_shift", "logical_and", "logical_or", "logical_xor",
    "logical_not",
    # products and extras
    "mm", "bmm", "mv", "dot", "vdot", "inner", "outer", "ger", "addmm", "addmv", "baddbmm",
    "addbmm", "clone", "nansum", "nanmean", "aminmax", "logit", "diff", "addcmul", "addcdiv",
    "kron", "cross", "inverse", "det", "logdet", "slogdet", "cholesky", "cholesky_solve",
    "cholesky_inverse", "qr",
    # creation from a tensor
    "zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like",
    # more elementwise, shape, linear algebra and index updates
    "deg2rad", "rad2deg", "sinc", "signbit", "heaviside", "erfc", "ravel", "select", "rot90",
    "tensor_split", "take", "trace", "dist", "renorm", "matrix_power", "index_copy",
    "index_put", "select_scatter", "slice_scatter", "diagonal_scatter", "bernoulli",
    # value-dependent shapes (values known while tracing), and histc
    "nonzero", "argwhere", "masked_select", "unique", "unique_consecutive", "bincount",
    "histc",
    # special functions (autodiff/graph/mixins/special.py; ``polygamma(n, x)`` is below)
    "lgamma", "digamma", "erfinv", "mvlgamma", "i0",
)
for _name in METHOD_FUNCTIONS:
    globals()[_name] = _fn(_name)

# ``torch.div`` takes ``rounding_mode=``, which ``Tensor.divide`` reads (``Tensor.div`` is ``/``)
div = _fn("divide")
div.__name__ = "div"

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

__all__ = ["Tensor", "Feeder", "Receiver", "host_callback", "ir_for", "ir_if", "ir_while",
           "scan", "checkpoint", "execute", "print_graph", "no_grad",
           "ShapeError", "DimError", "DTypeError", "FeederError", "ReceiverError",
           "CallbackError", "DistributedError", "Report",
           "concat", "cat", "concatenate", "stack", "where", "matmul", "zeros", "ones", "full",
           "randn", "uniform", "tensor", "manual_seed", "to_networkx", "reset", "arange",
           "linspace", "eye", "empty", "rand", "meshgrid", "einsum", "cdist", "vander",
           *METHOD_FUNCTIONS,
           "div", "special", "linalg", "polygamma",
           "dtype", "bool", "int32", "int64", "float32", "float16", "bfloat16", "float", "long",
           "int", "half", "result_type", "promote_types", "can_cast", "is_floating_point",
           "get_default_dtype", "finfo", "iinfo"]
