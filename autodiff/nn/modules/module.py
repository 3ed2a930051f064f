"""``torch.nn.modules.module``: :class:`Module`, :class:`Parameter` and the hooks of every
module (``register_module_forward_pre_hook``, ``register_module_forward_hook``,
``register_module_full_backward_pre_hook``, ``register_module_full_backward_hook``),
defined in :mod:`autodiff.nn.module`."""
from ..module import (Module, Parameter, register_module_forward_hook,
                      register_module_forward_pre_hook, register_module_full_backward_hook,
                      register_module_full_backward_pre_hook)

__all__ = ["Module", "Parameter", "register_module_forward_pre_hook",
           "register_module_forward_hook", "register_module_full_backward_pre_hook",
           "register_module_full_backward_hook"]
