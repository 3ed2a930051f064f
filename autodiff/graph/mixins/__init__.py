"""The op families of :class:`~autodiff.graph.tensor.Tensor`, one mixin per file
(tinygrad's layout): each op is a few lines composing graph IR nodes from
:mod:`autodiff.graph.ops`.

A mixin method reaches the core through three members of ``Tensor``: ``self.node`` (the
graph node), ``self._wrap(node)`` (a traced tensor) and ``self._lift(x)`` (the node of an
operand: a tensor, a Python number, a numpy array).
"""
from .creation import CreationMixin
from .dtype import DTypeMixin
from .dynamic import DynamicShapeMixin
from .elementwise import ElementwiseMixin
from .indexing import IndexingMixin
from .linalg import LinalgMixin
from .meta import MetaMixin
from .movement import MovementMixin
from .random import RandomMixin
from .reduce import ReduceMixin
from .scan import ScanMixin
from .special import SpecialMixin
from .window import WindowMixin

__all__ = ["CreationMixin", "DTypeMixin", "DynamicShapeMixin", "ElementwiseMixin",
           "IndexingMixin", "LinalgMixin", "MetaMixin", "MovementMixin", "RandomMixin",
           "ReduceMixin", "ScanMixin", "SpecialMixin", "WindowMixin"]
