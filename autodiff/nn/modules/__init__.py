"""``autodiff.nn.modules``: where PyTorch keeps ``torch.nn.modules.module`` and its global
hook registration functions (``register_module_forward_hook`` ...); the layers themselves
are in :mod:`autodiff.nn`."""
from . import module
from .module import Module

__all__ = ["Module", "module"]
