"""The legacy ``torch.nn.utils.weight_norm`` / ``remove_weight_norm`` (a forward pre-hook
recomputing the weight from the parameters ``<name>_g`` and ``<name>_v``). PyTorch
deprecates it for :func:`autodiff.nn.utils.parametrizations.weight_norm`; it is here for
models and checkpoints that use its ``weight_g`` / ``weight_v`` keys."""
from __future__ import annotations

import warnings

import numpy as np

from ...graph.tensor import Tensor
from ..module import Module, Parameter
from . import parametrize
from .parametrizations import norm_except_dim

__all__ = ["weight_norm", "remove_weight_norm", "WeightNorm"]


class WeightNorm:
    """The forward pre-hook: sets ``module.<name> = g * v / ||v||`` before each forward
    (traced at each call, so inside an ``ir_for`` body it is recomputed each iteration)."""

    def __init__(self, name: str, dim: int | None) -> None:
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module: Module) -> Tensor:
        g = getattr(module, self.name + "_g")
        v = getattr(module, self.name + "_v")
        return v * (g / norm_except_dim(v, self.dim))

    @staticmethod
    def apply(module: Module, name: str, dim: int | None) -> "WeightNorm":
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError("Cannot register two weight_norm hooks on the same "
                                   f"parameter {name}")
        fn = WeightNorm(name, dim)
        weight = module._parameters.get(name)
        if weight is None:
            raise AttributeError(f"'{type(module).__name__}' object has no parameter "
                                 f"'{name}'")
        w = parametrize.host_value(weight)
        if w is None:
            raise RuntimeError("weight_norm: the weight's value must be known when it is "
                               "applied (call it outside an ir_for body)")
        del module._parameters[name]
        g = parametrize.host_value(norm_except_dim(weight, fn.dim))
        module.register_parameter(name + "_g", Parameter(g))
        module.register_parameter(name + "_v", Parameter(np.array(w, np.float32)))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module: Module) -> None:
        w = self.compute_weight(module)
        value = parametrize.host_value(w)
        if value is not None:
            weight = Parameter(value.astype(np.float32))
        else:                                   # inside a traced body: a traced copy
            weight = Parameter(np.zeros(w.shape, np.float32))
            parametrize._set_value(weight, w)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        object.__delattr__(module, self.name + "_g")
        object.__delattr__(module, self.name + "_v")
        setattr(module, self.name, weight)

    def __call__(self, module: Module, inputs) -> None:
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Weight normalisation with a forward pre-hook, as the deprecated
    ``torch.nn.utils.weight_norm`` (a ``FutureWarning`` as PyTorch): the parameter
    ``name`` is replaced by ``<name>_g`` (its norm over every dim but ``dim``, size 1 on
    the others; ``dim=None``: the norm of all of it, 0-d) and ``<name>_v`` (its value), in
    that order after the module's other parameters (PyTorch's ``state_dict`` keys and
    order). ``module.<name>`` is recomputed as ``g * v / ||v||`` before each forward. Build
    the optimizer after this call.

    Returns:
        ``module``.

    Raises:
        RuntimeError: ``name`` is already weight-normalised.
        AttributeError: ``module`` has no parameter ``name``.
    """
    warnings.warn("`torch.nn.utils.weight_norm` is deprecated in favor of "
                  "`torch.nn.utils.parametrizations.weight_norm`.", FutureWarning,
                  stacklevel=2)
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module: Module, name: str = "weight") -> Module:
    """Undo :func:`weight_norm`: ``module.<name>`` becomes a parameter again holding
    ``g * v / ||v||`` (a new parameter, as in PyTorch).

    Raises:
        ValueError: ``name`` is not weight-normalised (PyTorch's message).
    """
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            module._forward_pre_hooks_with_kwargs.pop(k, None)
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
