"""Lazy modules: ``LazyLinear``, ``LazyConv1d/2d/3d``, ``LazyConvTranspose1d/2d/3d``,
``LazyBatchNorm1d/2d/3d``, ``LazyInstanceNorm1d/2d/3d`` and their base
:class:`LazyModuleMixin`, with PyTorch's constructors (the input size left out) and
semantics.

A lazy module's parameters (and running statistics) start as
:class:`~autodiff.nn.parameter.UninitializedParameter` /
:class:`~autodiff.nn.parameter.UninitializedBuffer`. Its first call infers the missing size
from the input (``in_features = input.shape[-1]``, ``in_channels`` / ``num_features`` the
channel dim), materialises them in place (the same objects), initialises them as the
regular module's constructor would (drawing from the global generator,
:func:`autodiff.manual_seed`), and the module becomes its regular class
(``cls_to_become``: ``LazyLinear`` -> ``Linear``...). ``has_uninitialized_params()`` says
whether that is still to come. Loading a ``state_dict`` into a lazy module materialises
its parameters with the loaded shapes.

Tracing: the first call happens while the program is traced (at the top level, or inside
an ``ir_for`` body, traced once): that is when the parameters come into being, as host
values, before any program runs; the traced program reads them like any parameter. As in
PyTorch, an optimizer built before the first call holds the uninitialized objects, which
the first call turns into the real parameters, so it updates them (its state is created
at its first ``step()``, after the call). What cannot work before the first call is what
needs a shape: ``parameters()``' shapes, ``state_dict()`` values (uninitialized entries
are the placeholders themselves, as PyTorch's), ``nn.init`` on them, ``zero_grad(
set_to_none=False)``. PyTorch recommends a dry run with a dummy batch before building the
optimizer; here the dry run only traces (its ops are never run unless their results are
used).
"""
from __future__ import annotations

import numpy as np

from ..graph.tensor import Tensor
from .conv import (Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d,
                   _ConvTranspose, _Conv)
from .layers import Linear
from .normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d, InstanceNorm1d,
                            InstanceNorm2d, InstanceNorm3d, _BatchNorm, _InstanceNorm)
from .parameter import UninitializedBuffer, UninitializedParameter, is_lazy


class LazyModuleMixin:
    """A mixin for modules whose parameter shapes come from their first input
    (``torch.nn.modules.lazy.LazyModuleMixin``).

    Subclasses implement :meth:`initialize_parameters` and set :attr:`cls_to_become`. A
    forward pre-hook (registered first, so it runs before hooks registered later) calls
    :meth:`initialize_parameters` with the call's arguments, then removes itself and
    changes the module's class to :attr:`cls_to_become`.
    """
    cls_to_become: type | None = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters,
                                                               with_kwargs=True)

    def initialize_parameters(self, *args, **kwargs) -> None:
        """Infer the missing sizes from the first call's arguments and materialise the
        parameters (subclasses).

        Raises:
            NotImplementedError: not overridden.
        """
        raise NotImplementedError(f"initialize_parameters is not implemented for "
                                  f"{type(self).__name__}")

    def has_uninitialized_params(self) -> bool:
        """Whether a parameter or buffer of this module (not its children) is still
        uninitialized."""
        return any(is_lazy(t) for t in (*self._parameters.values(), *self._buffers.values()))

    def _infer_parameters(self, module, args, kwargs=None):
        kwargs = kwargs or {}
        module.initialize_parameters(*args, **kwargs)
        if module.has_uninitialized_params():
            raise RuntimeError(f"module {type(self).__name__} has not been fully initialized")
        module._initialize_hook.remove()
        delattr(module, "_initialize_hook")
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become


def _dtype(dtype):
    return None if dtype is None else str(dtype).replace("torch.", "")


# -- Linear -----------------------------------------------------------------------------------
class LazyLinear(LazyModuleMixin, Linear):
    """``torch.nn.LazyLinear(out_features, bias=True)``: a :class:`~autodiff.nn.Linear`
    whose ``in_features`` is the first input's last dim; becomes a ``Linear`` at that
    call (parameters initialised as ``Linear``'s)."""
    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(dtype=_dtype(dtype))
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(dtype=_dtype(dtype))

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input, *args, **kwargs) -> None:
        """``in_features = input.shape[-1]``; ``weight [out, in]``, ``bias [out]``."""
        if self.has_uninitialized_params():
            self.in_features = input.shape[-1]
            self.weight.materialize((self.out_features, self.in_features))
            if self.bias is not None:
                self.bias.materialize((self.out_features,))
            self.reset_parameters()
        if self.in_features == 0:                      # loaded from a state_dict
            self.in_features = self.weight.shape[-1]


# -- convolutions -----------------------------------------------------------------------------
class _LazyConvMixin(LazyModuleMixin):
    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _in_channels(self, input) -> int:
        n = self.nsp
        if input.ndim not in (n + 1, n + 2):
            raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to "
                               f"{type(self).__name__}, but got input of size: "
                               f"{list(input.shape)}")
        return input.shape[1] if input.ndim == n + 2 else input.shape[0]

    def initialize_parameters(self, input, *args, **kwargs) -> None:
        """``in_channels`` from the input's channel dim (dim 1, or 0 unbatched); the weight
        ``[out, in / groups, *kernel]`` (transposed: ``[in, out / groups, *kernel]``).

        Raises:
            RuntimeError: an input of the wrong rank. ValueError: channels not divisible by
                ``groups``.
        """
        if self.has_uninitialized_params():
            self.in_channels = self._in_channels(input)
            if self.in_channels % self.groups:
                raise ValueError("in_channels must be divisible by groups")
            if self.out_channels % self.groups:
                raise ValueError("out_channels must be divisible by groups")
            if self.transposed:
                shape = (self.in_channels, self.out_channels // self.groups, *self.kernel_size)
            else:
                shape = (self.out_channels, self.in_channels // self.groups, *self.kernel_size)
            self.weight.materialize(shape)
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()
        if self.in_channels == 0:                      # loaded from a state_dict
            w = self.weight.shape
            self.in_channels = w[0] if self.transposed else w[1] * self.groups


class _LazyConv(_LazyConvMixin, _Conv):
    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None,
                 dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False,
                         padding_mode)
        self.weight = UninitializedParameter(dtype=_dtype(dtype))
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(dtype=_dtype(dtype))


class _LazyConvTranspose(_LazyConvMixin, _ConvTranspose):
    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros",
                 device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False,
                         dilation, padding_mode)
        self.weight = UninitializedParameter(dtype=_dtype(dtype))
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(dtype=_dtype(dtype))


class LazyConv1d(_LazyConv):
    """``torch.nn.LazyConv1d(out_channels, kernel_size, stride=1, padding=0, dilation=1,
    groups=1, bias=True, padding_mode="zeros")``: a :class:`~autodiff.nn.Conv1d` whose
    ``in_channels`` comes from the first input; becomes a ``Conv1d`` at that call."""
    nsp, cls_to_become = 1, Conv1d


class LazyConv2d(_LazyConv):
    """``torch.nn.LazyConv2d``: see :class:`LazyConv1d`; becomes a ``Conv2d``."""
    nsp, cls_to_become = 2, Conv2d


class LazyConv3d(_LazyConv):
    """``torch.nn.LazyConv3d``: see :class:`LazyConv1d`; becomes a ``Conv3d``."""
    nsp, cls_to_become = 3, Conv3d


class LazyConvTranspose1d(_LazyConvTranspose):
    """``torch.nn.LazyConvTranspose1d(out_channels, kernel_size, stride=1, padding=0,
    output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros")``: a
    :class:`~autodiff.nn.ConvTranspose1d` whose ``in_channels`` comes from the first
    input; becomes a ``ConvTranspose1d`` at that call."""
    nsp, cls_to_become = 1, ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTranspose):
    """``torch.nn.LazyConvTranspose2d``: see :class:`LazyConvTranspose1d`."""
    nsp, cls_to_become = 2, ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTranspose):
    """``torch.nn.LazyConvTranspose3d``: see :class:`LazyConvTranspose1d`."""
    nsp, cls_to_become = 3, ConvTranspose3d


# -- normalisation ---------------------------------------------------------------------------
class _LazyNormBase(LazyModuleMixin):
    """PyTorch's ``_LazyNormBase``: ``affine`` and ``track_running_stats`` default to True
    for every lazy normalisation, the instance norms included (unlike ``InstanceNorm*d``'s
    own defaults, as in PyTorch)."""

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *,
                 bias: bool = True):
        super().__init__(0, eps, momentum, False, False)
        self.affine, self.track_running_stats = affine, track_running_stats
        dt = _dtype(dtype)
        if affine:
            self.weight = UninitializedParameter(dtype=dt)
            if bias:
                self.bias = UninitializedParameter(dtype=dt)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(dtype=dt)
            self.running_var = UninitializedBuffer(dtype=dt)
            self.num_batches_tracked = Tensor(np.zeros((), np.int64))

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def _channels(self, input) -> int:
        return input.shape[1]

    def initialize_parameters(self, input, *args, **kwargs) -> None:
        """``num_features`` from the input's channel dim; ``weight``/``bias``/running
        statistics ``[C]``, initialised as the regular module's (ones, zeros; zero mean,
        unit variance)."""
        if self.num_features == 0:
            if self.has_uninitialized_params():
                self.num_features = self._channels(input)
            else:                                      # loaded, or nothing to learn
                held = [t for t in (self.weight, self.running_mean) if t is not None]
                self.num_features = held[0].shape[0] if held else self._channels(input)
        if self.has_uninitialized_params():
            c = (self.num_features,)
            for t in (*self._parameters.values(), *self._buffers.values()):
                if is_lazy(t):
                    t.materialize(c)
            self.reset_parameters()


class _LazyBatchNorm(_LazyNormBase, _BatchNorm):
    pass


class _LazyInstanceNorm(_LazyNormBase, _InstanceNorm):
    def _channels(self, input) -> int:
        # the channel dim of a batched or an unbatched input (PyTorch's lazy instance norms
        # read dim 1, which is wrong for an unbatched input)
        return input.shape[-self.nsp - 1]


class LazyBatchNorm1d(_LazyBatchNorm):
    """``torch.nn.LazyBatchNorm1d(eps=1e-5, momentum=0.1, affine=True,
    track_running_stats=True)``: a :class:`~autodiff.nn.BatchNorm1d` whose
    ``num_features`` is the first input's dim 1; becomes a ``BatchNorm1d`` at that call."""
    ranks, cls_to_become = (2, 3), BatchNorm1d


class LazyBatchNorm2d(_LazyBatchNorm):
    """``torch.nn.LazyBatchNorm2d``: see :class:`LazyBatchNorm1d`."""
    ranks, cls_to_become = (4,), BatchNorm2d


class LazyBatchNorm3d(_LazyBatchNorm):
    """``torch.nn.LazyBatchNorm3d``: see :class:`LazyBatchNorm1d`."""
    ranks, cls_to_become = (5,), BatchNorm3d


class LazyInstanceNorm1d(_LazyInstanceNorm):
    """``torch.nn.LazyInstanceNorm1d(eps=1e-5, momentum=0.1, affine=True,
    track_running_stats=True)`` (PyTorch's defaults for the lazy form): an
    :class:`~autodiff.nn.InstanceNorm1d` whose ``num_features`` is the first input's
    channel dim; becomes an ``InstanceNorm1d`` at that call."""
    nsp, cls_to_become = 1, InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNorm):
    """``torch.nn.LazyInstanceNorm2d``: see :class:`LazyInstanceNorm1d`."""
    nsp, cls_to_become = 2, InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNorm):
    """``torch.nn.LazyInstanceNorm3d``: see :class:`LazyInstanceNorm1d`."""
    nsp, cls_to_become = 3, InstanceNorm3d


__all__ = ["LazyModuleMixin", "LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d",
           "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d",
           "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d", "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d"]
