"""Metadata and autograd flags: ``nelement``, ``ndimension``, ``is_leaf``, ``data``,
``detach_``, ``type_as``, ``cpu``/``cuda``.

Devices: a program runs where :func:`autodiff.execute` puts it (``device=``), every tensor
with it, so ``cpu()`` and ``cuda()`` return the tensor itself (as ``to("cuda")`` ignores
the device).
"""
from __future__ import annotations

from .. import ops
from ..trace import TRACER, no_grad


class _DataBase:
    """The tensor ``x.data`` writes back into: an in-place update of ``x.data``
    (``p.data.add_(...)``, ``p.data.copy_(...)``) changes ``x`` without recording a
    gradient, as in PyTorch; a tensor computed by the program keeps its gradient path
    (its value changes, its gradient passes through unchanged)."""

    def __init__(self, t) -> None:
        self.t = t

    @property
    def dtype(self):
        return self.t.dtype

    def _set(self, value):
        t = self.t
        if t._var is not None:
            with no_grad():
                return t._set(value)
        prev = TRACER.grad_enabled
        TRACER.grad_enabled = True
        try:                                   # the new value, t's gradient path kept
            new = t + (t._wrap(value) - t.detach())
        finally:
            TRACER.grad_enabled = prev
        with no_grad():
            return t._set(ops.cast(new.node, t.dtype))


class MetaMixin:
    def nelement(self) -> int:
        """The number of elements (``numel``)."""
        return self.numel()

    def ndimension(self) -> int:
        """The number of dims (``dim``)."""
        return self.ndim

    @property
    def is_leaf(self) -> bool:
        """Whether this is a leaf of the gradient graph, as PyTorch counts them: a tensor
        made from data (a variable), or any tensor that does not require grad; a tensor
        computed from one that requires grad is not."""
        return self._var is not None or not self.requires_grad

    @property
    def data(self):
        """The value without gradient tracking (``detach()``), through which in-place
        updates reach this tensor without recording a gradient (``p.data.mul_(0.9)``,
        also outside ``no_grad``, as in PyTorch)."""
        out = self.detach()
        out.__dict__["_view_of"] = (_DataBase(self), lambda v: v)
        return out

    @data.setter
    def data(self, value) -> None:
        """``x.data = v``: ``x`` takes ``v``'s value without recording a gradient.

        Raises:
            TypeError: ``v`` is not a tensor.
            RuntimeError: ``v`` has another shape or dtype (PyTorch would change ``x``'s;
                a variable's are fixed here).
        """
        if not hasattr(value, "node"):
            raise TypeError(f"data: expected a Tensor, got {type(value).__name__}")
        if tuple(value.shape) != tuple(self.shape) or value.dtype != self.dtype:
            raise RuntimeError(f"data: autodiff cannot change a tensor's shape or dtype (from "
                               f"{self.dtype}{list(self.shape)} to {value.dtype}"
                               f"{list(value.shape)}); use x = v, or x.data.copy_(v)")
        with no_grad():
            _DataBase(self)._set(value.detach().node)

    def detach_(self):
        """This tensor, cut from the gradient graph in place (``requires_grad`` becomes
        False): a variable stops requiring grad, a traced tensor names its detached value
        from here on.

        Raises:
            RuntimeError: a view (basic indexing, ``view``, ``permute``...), as PyTorch.
        """
        view = self.__dict__.get("_view_of")
        if view is not None and not isinstance(view[0], _DataBase):
            raise RuntimeError("Can't detach views in-place. Use detach() instead.")
        if self._var is not None:
            self.requires_grad = False
            return self
        node = self.detach().node
        self._node, self._scope = node, TRACER.scope
        self._generation, self.requires_grad = TRACER.generation, False
        return self

    def type_as(self, other):
        """This tensor cast to ``other``'s dtype (itself when it already has it)."""
        return self.to(other.dtype)

    def cpu(self, memory_format=None):
        """This tensor: where it lives is ``execute(device=...)``'s choice, for every tensor
        of a program (the module docstring)."""
        return self

    def cuda(self, device=None, non_blocking: bool = False, memory_format=None):
        """This tensor (see :meth:`cpu`: ``execute(device="cuda")`` runs on the GPU)."""
        return self
