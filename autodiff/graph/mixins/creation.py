"""Creation: tensors made from data, shapes and random draws (``zeros``, ``randn``, ...).

Every creation function makes a *variable* (device-resident data uploaded once, never a
per-iteration host transfer). They are class methods of ``Tensor`` exported as
``autodiff.zeros`` etc., like ``torch.zeros``.
"""
from __future__ import annotations

import numpy as np

_rng = [np.random.default_rng(0)]


def manual_seed(seed: int) -> None:
    """Seed the generator used by ``randn``/``uniform``/module initialisation."""
    _rng[0] = np.random.default_rng(seed)


def default_rng() -> np.random.Generator:
    return _rng[0]


def shape_args(args) -> tuple:
    """``f(2, 3)``, ``f((2, 3))`` and ``f([2, 3])`` all mean shape ``(2, 3)``."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(int(d) for d in args[0])
    return tuple(int(d) for d in args)


class CreationMixin:
    @classmethod
    def zeros(cls, *shape, requires_grad: bool = False, dtype: str = "float32"):
        """A variable of zeros (``torch.zeros``)."""
        return cls(np.zeros(shape_args(shape)), requires_grad, dtype)

    @classmethod
    def ones(cls, *shape, requires_grad: bool = False, dtype: str = "float32"):
        """A variable of ones (``torch.ones``)."""
        return cls(np.ones(shape_args(shape)), requires_grad, dtype)

    @classmethod
    def full(cls, shape, value: float, requires_grad: bool = False, dtype: str = "float32"):
        """A variable of ``shape`` filled with ``value`` (``torch.full``)."""
        return cls(np.full(tuple(shape), value), requires_grad, dtype)

    @classmethod
    def randn(cls, *shape, requires_grad: bool = False, seed: int | None = None):
        """Standard normal samples; ``seed`` or the global generator (:func:`manual_seed`)."""
        rng = np.random.default_rng(seed) if seed is not None else _rng[0]
        return cls(rng.standard_normal(shape_args(shape)), requires_grad)

    @classmethod
    def uniform(cls, *shape, low: float = 0.0, high: float = 1.0, requires_grad: bool = False,
                seed: int | None = None):
        """Samples from U[low, high); ``seed`` or the global generator."""
        rng = np.random.default_rng(seed) if seed is not None else _rng[0]
        return cls(rng.uniform(low, high, shape_args(shape)), requires_grad)
