"""Normalisation layers with PyTorch's parameter and buffer names, layouts and defaults:
``LayerNorm``, ``BatchNorm1d/2d/3d``, ``GroupNorm``, ``InstanceNorm1d/2d/3d``, ``RMSNorm``, and
the functional forms ``batch_norm``, ``group_norm``, ``instance_norm``, ``rms_norm``.

Statistics are reductions of the traced input; running statistics are buffers (variables)
updated in place under ``no_grad``, so inside ``ir_for`` they are loop-carried device state.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..graph.tensor import Tensor
from ..graph.trace import no_grad
from . import functional as F
from .module import Module, Parameter


class LayerNorm(Module):
    """Normalise over the trailing ``normalized_shape`` dims (``torch.nn.LayerNorm``).

    ``y = (x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance.

    Args:
        normalized_shape: int or tuple: the trailing dims of the input.
        eps: added to the variance.
        elementwise_affine: learn ``weight`` (ones) and ``bias`` (zeros) of
            ``normalized_shape``.
        bias: with ``elementwise_affine``, also learn ``bias``.

    Input ``[..., *normalized_shape]`` float32 -> same shape.
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) \
            else tuple(normalized_shape)
        self.normalized_shape = tuple(int(d) for d in shape)
        self.eps, self.elementwise_affine = float(eps), elementwise_affine
        self.weight = Parameter(np.ones(self.normalized_shape)) if elementwise_affine else None
        self.bias = Parameter(np.zeros(self.normalized_shape)) \
            if elementwise_affine and bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, " \
               f"elementwise_affine={self.elementwise_affine}"


# -- batch, group, instance and RMS normalisation ---------------------------------------------
def _channel_shape(x: Tensor) -> list[int]:
    """Broadcast shape of a per-channel ``[C]`` tensor against ``x [N, C, *]``."""
    return [x.shape[1]] + [1] * (x.ndim - 2)


def _affine(y: Tensor, weight, bias, shape) -> Tensor:
    if weight is not None:
        y = y * weight.reshape(*shape)
    if bias is not None:
        y = y + bias.reshape(*shape)
    return y


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float | None = 0.1, eps: float = 1e-5) -> Tensor:
    """Batch normalisation, as ``torch.nn.functional.batch_norm``.

    ``y = (x - mean) / sqrt(var + eps) * weight + bias`` per channel (dim 1), with
    ``mean``/``var`` (biased) over the batch and spatial dims when ``training``, else the
    running statistics. In training, ``running_mean``/``running_var`` (variables, when
    given) are updated in place with the detached batch statistics
    (``running = (1 - momentum) * running + momentum * stat``, the variance unbiased), so
    inside ``ir_for`` they are loop-carried state updated on the device.

    Args:
        input: float32 ``[N, C]``, ``[N, C, L]`` or ``[N, C, H, W]`` (any ``[N, C, *]``).
        running_mean, running_var: ``[C]`` variables or None (required unless training).
        weight, bias: optional ``[C]``.
        momentum: a float, or a float32 0-d tensor (the cumulative average's
            ``1 / num_batches_tracked``, computed on the device).

    Raises:
        ValueError: fewer than 2 dims, one value per channel in training, or missing
            running statistics in evaluation.
    """
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected at least 2-D input, got {list(input.shape)}")
    dims = (0,) + tuple(range(2, input.ndim))
    shape = _channel_shape(input)
    if training:
        count = input.numel() // input.shape[1]
        if count <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got "
                             f"input size {list(input.shape)}")
        mean = input.mean(dims, keepdim=True)
        d = input - mean
        var = (d * d).mean(dims, keepdim=True)
        y = d * (var + eps).rsqrt()
        if running_mean is not None or running_var is not None:
            with no_grad():
                m = momentum
                if running_mean is not None:
                    running_mean.copy_(running_mean * (1.0 - m) + mean.reshape(-1) * m)
                if running_var is not None:
                    unbiased = var.reshape(-1) * (count / (count - 1))
                    running_var.copy_(running_var * (1.0 - m) + unbiased * m)
    else:
        if running_mean is None or running_var is None:
            raise ValueError("batch_norm: running_mean and running_var are needed when not "
                             "training")
        y = (input - running_mean.reshape(*shape)) * (running_var.reshape(*shape) + eps).rsqrt()
    return _affine(y, weight, bias, shape)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Group normalisation (Wu and He, 2018), as ``torch.nn.functional.group_norm``:
    channels split into ``num_groups`` groups, each normalised over its channels and the
    spatial dims per sample; then a per-channel affine.

    Raises:
        ValueError: channels not divisible by ``num_groups``.
    """
    if input.ndim < 2 or input.shape[1] % num_groups:
        raise ValueError(f"group_norm: expected [N, C, *] with C divisible by num_groups "
                         f"{num_groups}, got {list(input.shape)}")
    n, c = input.shape[:2]
    x = input.reshape(n, num_groups, -1)
    d = x - x.mean(-1, keepdim=True)
    y = (d * ((d * d).mean(-1, keepdim=True) + eps).rsqrt()).reshape(*input.shape)
    return _affine(y, weight, bias, _channel_shape(input))


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Instance normalisation (Ulyanov et al., 2016), as
    ``torch.nn.functional.instance_norm``: each sample's channel normalised over its spatial
    dims. With running statistics and ``use_input_stats``, they are updated with the
    batch-averaged instance statistics (variance unbiased), as PyTorch does.

    Raises:
        ValueError: fewer than 3 dims, or a single spatial value.
    """
    if input.ndim < 3:
        raise ValueError(f"instance_norm: expected [N, C, *] input, got {list(input.shape)}")
    shape = _channel_shape(input)
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ValueError("instance_norm: running statistics are needed without input "
                             "statistics")
        y = (input - running_mean.reshape(*shape)) * (running_var.reshape(*shape) + eps).rsqrt()
        return _affine(y, weight, bias, shape)
    dims = tuple(range(2, input.ndim))
    count = input.numel() // (input.shape[0] * input.shape[1])
    if count <= 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input "
                         f"size {list(input.shape)}")
    mean = input.mean(dims, keepdim=True)
    d = input - mean
    var = (d * d).mean(dims, keepdim=True)
    y = d * (var + eps).rsqrt()
    with no_grad():
        if running_mean is not None:
            bm = mean.reshape(input.shape[0], -1).mean(0)
            running_mean.copy_(running_mean * (1.0 - momentum) + bm * momentum)
        if running_var is not None:
            bv = var.reshape(input.shape[0], -1).mean(0) * (count / (count - 1))
            running_var.copy_(running_var * (1.0 - momentum) + bv * momentum)
    return _affine(y, weight, bias, shape)


def rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
             eps: float | None = None) -> Tensor:
    """Root-mean-square normalisation (Zhang and Sennrich, 2019), as
    ``torch.nn.functional.rms_norm``: ``x / sqrt(mean(x^2) + eps) * weight`` over the
    trailing ``normalized_shape`` dims; ``eps`` defaults to float32's machine epsilon.

    Raises:
        ValueError: the trailing dims of ``input`` are not ``normalized_shape``.
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) \
        else tuple(normalized_shape)
    if len(shape) > input.ndim or tuple(input.shape[input.ndim - len(shape):]) != shape:
        raise ValueError(f"rms_norm: input shape {list(input.shape)} does not end with "
                         f"normalized_shape {list(shape)}")
    eps = float(np.finfo(np.float32).eps) if eps is None else eps
    dims = tuple(range(input.ndim - len(shape), input.ndim))
    y = input * ((input * input).mean(dims, keepdim=True) + eps).rsqrt()
    return y * weight if weight is not None else y


class _NormBase(Module):
    """What BatchNorm and InstanceNorm share (PyTorch's ``_NormBase``): ``weight`` and
    ``bias`` of shape ``[num_features]`` (float32) with ``affine``; with
    ``track_running_stats`` the buffers ``running_mean``, ``running_var`` ([num_features],
    float32) and ``num_batches_tracked`` (int64 scalar), else those three None."""

    def __init__(self, num_features: int, eps: float, momentum: float | None, affine: bool,
                 track_running_stats: bool):
        super().__init__()
        self.num_features, self.eps, self.momentum = int(num_features), float(eps), momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        c = self.num_features
        self.weight = Parameter(np.ones(c)) if affine else None
        self.bias = Parameter(np.zeros(c)) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", Tensor(np.zeros(c, np.float32)))
            self.register_buffer("running_var", Tensor(np.ones(c, np.float32)))
            self.register_buffer("num_batches_tracked", Tensor(np.zeros((), np.int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self) -> None:
        """Zero mean, unit variance, no batches tracked (with ``track_running_stats``; host
        values, set now)."""
        from . import init
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self) -> None:
        """:meth:`reset_running_stats`, then ``weight`` ones and ``bias`` zeros (PyTorch's
        ``_NormBase.reset_parameters``)."""
        from . import init
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class _BatchNorm(_NormBase):
    """Base of ``BatchNorm1d/2d/3d``: see :class:`BatchNorm2d`."""
    ranks = (2, 3)

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def forward(self, input: Tensor) -> Tensor:
        if input.ndim not in self.ranks:
            raise ValueError(f"{type(self).__name__}: expected "
                             f"{' or '.join(f'{r}D' for r in self.ranks)} input (got "
                             f"{input.ndim}D input)")
        if input.shape[1] != self.num_features:
            raise ValueError(f"{type(self).__name__}: expected {self.num_features} channels "
                             f"in dim 1, got input of shape {list(input.shape)}")
        momentum = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with no_grad():
                nbt = self.num_batches_tracked
                nbt.add_(1)                                  # int64 (torch's), on the device
                if self.momentum is None:                    # cumulative moving average
                    momentum = 1.0 / nbt.float()
        use_batch = self.training or not self.track_running_stats
        stats = not self.training or self.track_running_stats
        return batch_norm(input, self.running_mean if stats else None,
                          self.running_var if stats else None, self.weight, self.bias,
                          use_batch, momentum, self.eps)


class BatchNorm1d(_BatchNorm):
    """``torch.nn.BatchNorm1d`` over ``[N, C]`` or ``[N, C, L]``; see :class:`BatchNorm2d`."""
    ranks = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation (Ioffe and Szegedy, 2015) over ``[N, C, H, W]``
    (``torch.nn.BatchNorm2d``).

    Parameters ``weight`` (ones) and ``bias`` (zeros) ``[C]`` with ``affine``; buffers
    ``running_mean`` (zeros), ``running_var`` (ones) ``[C]`` and ``num_batches_tracked``
    (int32 0-d; int64 in PyTorch, converted on load) with ``track_running_stats``: PyTorch's
    state_dict keys, so a PyTorch state_dict loads unchanged.

    In ``train()`` mode the batch statistics normalise, and the running statistics and the
    count are updated in place on the device (inside ``ir_for``: every iteration, as
    loop-carried state); ``momentum=None`` uses the cumulative average
    ``1 / num_batches_tracked``. In ``eval()`` mode the running statistics normalise. Train
    or eval mode is fixed when the program is traced.

    Raises:
        ValueError: the input rank or channel count does not fit (at trace time).
    """
    ranks = (4,)


class BatchNorm3d(_BatchNorm):
    """``torch.nn.BatchNorm3d`` over ``[N, C, D, H, W]``; see :class:`BatchNorm2d`."""
    ranks = (5,)


class GroupNorm(Module):
    """``torch.nn.GroupNorm(num_groups, num_channels, eps, affine)``: :func:`group_norm` with
    ``weight`` (ones) and ``bias`` (zeros) ``[C]``.

    Raises:
        ValueError: ``num_channels`` not divisible by ``num_groups``.
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = \
            num_groups, num_channels, eps, affine
        self.weight = Parameter(np.ones(num_channels)) if affine else None
        self.bias = Parameter(np.zeros(num_channels)) if affine else None

    def forward(self, x: Tensor) -> Tensor:
        return group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"


class _InstanceNorm(_NormBase):
    nsp = 2

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1,
                 affine: bool = False, track_running_stats: bool = False):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in (self.nsp + 1, self.nsp + 2):
            raise ValueError(f"{type(self).__name__}: expected {self.nsp + 1}D or "
                             f"{self.nsp + 2}D input (got {x.ndim}D input)")
        unbatched = x.ndim == self.nsp + 1
        if unbatched:
            x = x.unsqueeze(0)
        use_input = self.training or not self.track_running_stats
        y = instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                          use_input, self.momentum, self.eps)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """``torch.nn.InstanceNorm1d`` over ``[N, C, L]`` (or ``[C, L]``); see
    :class:`InstanceNorm2d`."""
    nsp = 1


class InstanceNorm2d(_InstanceNorm):
    """``torch.nn.InstanceNorm2d`` over ``[N, C, H, W]`` (or ``[C, H, W]``):
    :func:`instance_norm`; ``affine`` (default False) adds ``weight``/``bias [C]``;
    ``track_running_stats`` (default False) keeps running statistics, updated in training
    and used in ``eval()``.

    Raises:
        ValueError: wrong input rank.
    """
    nsp = 2


class InstanceNorm3d(_InstanceNorm):
    """``torch.nn.InstanceNorm3d`` over ``[N, C, D, H, W]`` (or ``[C, D, H, W]``); see
    :class:`InstanceNorm2d`."""
    nsp = 3


class RMSNorm(Module):
    """``torch.nn.RMSNorm(normalized_shape, eps=None, elementwise_affine=True)``:
    :func:`rms_norm` with ``weight`` (ones) of ``normalized_shape``."""

    def __init__(self, normalized_shape, eps: float | None = None,
                 elementwise_affine: bool = True):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) \
            else tuple(normalized_shape)
        self.normalized_shape = tuple(int(d) for d in shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self.weight = Parameter(np.ones(self.normalized_shape)) if elementwise_affine else None

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, " \
               f"elementwise_affine={self.elementwise_affine}"
