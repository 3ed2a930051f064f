"""``torch.nn.parameter``: :class:`Parameter`, and the placeholders of lazy modules,
:class:`UninitializedParameter` and :class:`UninitializedBuffer`.

An uninitialized tensor holds no values and has no shape yet: a lazy module
(:mod:`autodiff.nn.lazy`) calls :meth:`~UninitializedTensorMixin.materialize` with the shape
it infers from its first input, which turns the *same object* into a regular
:class:`Parameter` (or buffer :class:`~autodiff.Tensor`), as PyTorch's ``cls_to_become``.
Whatever held it (the module, an optimizer built before the first call) keeps it.

Until then it has a dtype and ``requires_grad``, and an empty placeholder variable, so that
an optimizer accepts it; reading its shape or values, or using it in an op, raises
:class:`UninitializedError` (PyTorch raises ``RuntimeError`` for the shape, ``ValueError``
for an op; it is both).
"""
from __future__ import annotations

import numpy as np

from ..graph.tensor import Tensor
from .module import Parameter


class UninitializedError(ValueError, RuntimeError):
    """An uninitialized parameter or buffer was used (its shape, its values, an op)."""


class UninitializedTensorMixin:
    """What :class:`UninitializedParameter` and :class:`UninitializedBuffer` share."""
    cls_to_become: type = Tensor

    def _lazy_init(self, requires_grad: bool, dtype) -> None:
        # an empty placeholder variable: a dtype, requires_grad, an identity for optimizers
        Tensor.__init__(self, np.zeros(0, np.float32), requires_grad=requires_grad,
                        dtype=dtype if dtype is not None else "float32")

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Become a :attr:`cls_to_become` of ``shape`` (zeros; the owning module then
        initialises it), of ``dtype`` (default: this placeholder's, which ``half()`` and
        ``to(dtype)`` change). ``device`` is accepted for PyTorch compatibility (devices
        are chosen by :func:`autodiff.execute`)."""
        dtype = self.dtype if dtype is None else dtype
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else \
            tuple(int(s) for s in shape)
        var_name = self._var.name
        Tensor.__init__(self, np.zeros(shape, np.float32), requires_grad=self.requires_grad,
                        dtype=dtype, name=self.name)
        if self._var.name is None:
            self._var.name = var_name
        self.__class__ = self.cls_to_become

    @property
    def shape(self):
        raise UninitializedError(
            "Can't access the shape of an uninitialized parameter or buffer. This error "
            "usually happens in `load_state_dict` when trying to load an uninitialized "
            "parameter into an initialized one. Call `forward` to initialize the parameters "
            "before accessing their attributes.")

    @property
    def node(self):
        raise UninitializedError(
            f"Attempted to use an uninitialized parameter ({type(self).__name__}). This "
            "error happens when you are using a `LazyModule` or explicitly manipulating "
            f"`autodiff.nn.parameter.{type(self).__name__}` objects. When using LazyModules "
            "call `forward` with a dummy batch to initialize the parameters before using "
            "them")

    def numpy(self):
        return self.node            # raises

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"


def is_lazy(param) -> bool:
    """Whether ``param`` is an :class:`UninitializedParameter` or
    :class:`UninitializedBuffer` (``torch.nn.parameter.is_lazy``)."""
    return isinstance(param, UninitializedTensorMixin)


class UninitializedParameter(UninitializedTensorMixin, Parameter):
    """A :class:`Parameter` whose shape is not known yet
    (``torch.nn.parameter.UninitializedParameter``); see the module docstring.

    Args:
        requires_grad: of the parameter it becomes.
        device: accepted for PyTorch compatibility.
        dtype: of the parameter it becomes (default float32).
    """
    cls_to_become = Parameter

    def __init__(self, requires_grad: bool = True, device=None, dtype=None):
        self._lazy_init(requires_grad, dtype)


class UninitializedBuffer(UninitializedTensorMixin, Tensor):
    """A buffer whose shape is not known yet (``torch.nn.parameter.UninitializedBuffer``):
    it becomes a plain :class:`~autodiff.Tensor` (a variable)."""
    cls_to_become = Tensor

    def __init__(self, requires_grad: bool = False, device=None, dtype=None):
        self._lazy_init(requires_grad, dtype)


__all__ = ["Parameter", "UninitializedParameter", "UninitializedBuffer", "is_lazy",
           "UninitializedTensorMixin", "UninitializedError"]
