"""``torch.nn.modules.lazy``: :class:`LazyModuleMixin`, defined in :mod:`autodiff.nn.lazy`."""
from ..lazy import LazyModuleMixin

__all__ = ["LazyModuleMixin"]
