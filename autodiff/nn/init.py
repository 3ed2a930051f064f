"""Parameter initialisation, spelled like ``torch.nn.init``.

Each function sets the *current value* of a variable (a parameter or buffer: any tensor made
from data) on the host, in place, and returns the tensor, as PyTorch's do under
``no_grad``; nothing is traced. Random draws come from the global generator
(:func:`autodiff.manual_seed`) or ``generator`` (a ``numpy.random.Generator``). Fans follow
PyTorch's ``_calculate_fan_in_and_fan_out``: ``fan_in = size(1) * receptive field``,
``fan_out = size(0) * receptive field``.

Raises (every function): ``RuntimeError`` for a traced value (not a variable);
``ValueError`` where PyTorch raises it (fewer than 2 dims for fans, an unknown mode or
nonlinearity).
"""
from __future__ import annotations

import math

import numpy as np

from ..graph.tensor import Tensor, default_rng

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_",
           "kaiming_normal_", "orthogonal_"]


def _set(tensor: Tensor, value) -> Tensor:
    if not isinstance(tensor, Tensor) or tensor._var is None:
        raise RuntimeError("nn.init: expected a tensor made from data (a parameter or "
                           "buffer), not a traced value")
    v = tensor._var
    v.value = np.asarray(np.broadcast_to(value, v.shape), dtype=v.value.dtype).copy()
    return tensor


def _rng(generator):
    return generator if generator is not None else default_rng()


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain for ``nonlinearity`` (``torch.nn.init.calculate_gain``):
    1 for linear/conv/sigmoid, 5/3 tanh, sqrt(2) relu, sqrt(2 / (1 + slope^2)) leaky_relu
    (slope ``param``, default 0.01), 3/4 selu."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _fans(tensor: Tensor) -> tuple[int, int]:
    shape = tensor.shape
    if len(shape) < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than "
                         "2 dimensions")
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Values from U(a, b)."""
    return _set(tensor, _rng(generator).uniform(a, b, tensor.shape))


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Values from N(mean, std^2)."""
    return _set(tensor, _rng(generator).normal(mean, std, tensor.shape))


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator=None) -> Tensor:
    """Values from N(mean, std^2) truncated to ``[a, b]`` (inverse-CDF sampling, as
    PyTorch)."""
    cdf = lambda x: (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0
    lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
    u = _rng(generator).uniform(2 * lo - 1, 2 * hi - 1, tensor.shape)
    from scipy import special            # here: ~18 MB of resident memory, rarely needed
    x = special.erfinv(u) * std * math.sqrt(2.0) + mean
    return _set(tensor, np.clip(x, a, b))


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Every value ``val``."""
    return _set(tensor, val)


def ones_(tensor: Tensor) -> Tensor:
    return _set(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    return _set(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    """The identity matrix (2-D tensors only).

    Raises:
        ValueError: not 2-D.
    """
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return _set(tensor, np.eye(*tensor.shape))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """The Dirac delta of a 3-5-D convolution weight: identity on channels, per group."""
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    shape = tensor.shape
    if shape[0] % groups:
        raise ValueError("dim 0 must be divisible by groups")
    out_g = shape[0] // groups
    w = np.zeros(shape)
    centre = tuple(s // 2 for s in shape[2:])
    for g in range(groups):
        for d in range(min(out_g, shape[1])):
            w[(g * out_g + d, d) + centre] = 1.0
    return _set(tensor, w)


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))`` (Glorot and Bengio, 2010)."""
    fan_in, fan_out = _fans(tensor)
    a = gain * math.sqrt(6.0 / float(fan_in + fan_out))
    return uniform_(tensor, -a, a, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """N(0, std^2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor, a, mode, nonlinearity) -> float:
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _fans(tensor)
    fan = fan_in if mode == "fan_in" else fan_out
    return calculate_gain(nonlinearity, a) / math.sqrt(fan) if fan else 0.0


def kaiming_uniform_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """U(-b, b) with ``b = gain * sqrt(3 / fan)`` (He et al., 2015)."""
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0.0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """N(0, std^2) with ``std = gain / sqrt(fan)``."""
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def orthogonal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """A (semi-)orthogonal matrix of the tensor flattened to ``[size(0), rest]`` (Saxe et
    al., 2013): the Q of a Gaussian matrix's QR, signs fixed by R's diagonal, times ``gain``.

    Raises:
        ValueError: fewer than 2 dims.
    """
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    rows = tensor.shape[0]
    cols = tensor.numel() // max(rows, 1)
    flat = _rng(generator).standard_normal((rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    return _set(tensor, (gain * q).reshape(tensor.shape))
