"""Parametrizations, as ``torch.nn.utils.parametrize``: a module's parameter (or buffer)
``name`` recomputed from unconstrained originals by a chain of modules each time it is
read.

:func:`register_parametrization` swaps the module's class for a generated subclass
(``Parametrized<Class>``) whose ``name`` is a property, and moves the original tensor to
``module.parametrizations[name].original`` (``original0``, ``original1``... when the first
parametrization's ``right_inverse`` returns several tensors): PyTorch's attribute names, so
``state_dict`` keys (``parametrizations.weight.original``) and checkpoints match.

Reading ``module.weight`` traces the parametrization, so inside an ``ir_for`` body it is
recomputed every iteration from the trained originals and gradients flow to them.
Assigning ``module.weight = value`` writes ``right_inverse(value)`` into the originals in
place (traced, without gradient).

A value computed at registration time (``right_inverse`` of the current value, the
parametrized value left by :func:`remove_parametrizations`) is computed and set on the
host at once, as in PyTorch, so ``state_dict()`` is right before any ``execute()``: the
traced ops are evaluated with their reference (numpy) semantics from the variables'
current values. Only where that value is not known while tracing (inside an ``ir_for``
body, or from a variable the traced program writes) is it a traced in-place write,
performed by the next ``execute()`` in program order. Assigning ``module.<name> = value``
is always a traced write (in program order, like ``Tensor.copy_``).
"""
from __future__ import annotations

import contextlib

import numpy as np

from ...errors import TracedValueError
from ...graph.tensor import Tensor
from ...graph import dtypes
from ...graph.ir import Op
from ...graph.reference import KERNELS, kernel
from ...graph.trace import TRACER, no_grad
from ..containers import ModuleDict, ModuleList
from ..module import Module, Parameter

__all__ = ["register_parametrization", "remove_parametrizations", "is_parametrized",
           "cached", "type_before_parametrizations", "ParametrizationList"]

_cache_enabled = 0
_cache: dict = {}
#: True while :class:`ParametrizationList` checks a new parametrization (its forward runs
#: once then, as PyTorch's consistency check does): built-in parametrizations do their
#: side effects on the host then
_registering = [False]


@contextlib.contextmanager
def cached():
    """Within this context, each parametrized tensor is computed once (the first time it
    is read) and reused, as ``torch.nn.utils.parametrize.cached``."""
    global _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache.clear()


class _NoHostValue(Exception):
    pass


def _evaluate(node, memo: dict) -> np.ndarray:
    """``node``'s value computed on the host with the ops' reference (numpy) semantics,
    from constants and variables' current values (:mod:`autodiff.graph.reference`)."""
    r = memo.get(node.id)
    if r is not None:
        return r
    if node.op is Op.CONST:
        r = np.full(node.shape, node.arg, dtype=dtypes.storage(node.dtype))
    elif node.op is Op.LOAD:
        if node.arg in TRACER.root.assigned:    # written by the program: not known yet
            raise _NoHostValue
        r = node.arg.value
    elif node.op in KERNELS:
        r = kernel(node)(*[_evaluate(s, memo) for s in node.srcs])
    else:
        raise _NoHostValue
    r = np.asarray(r).reshape(node.shape)
    memo[node.id] = r
    return r


def host_value(t) -> np.ndarray | None:
    """``t``'s value on the host when it is known while tracing, else None: a variable
    outside an ``ir_for`` body, not assigned by the program being traced, or a value traced
    outside a loop from such variables and constants only (computed here with the ops'
    reference semantics)."""
    if not isinstance(t, Tensor):
        return None
    if t._var is not None:
        try:
            return t._host_value("parametrization", "")
        except TracedValueError:
            return None
    if TRACER.scope is not TRACER.root:
        return None
    try:
        return np.array(_evaluate(t._node, {}), copy=True)
    except (_NoHostValue, RecursionError):
        return None


def _set_value(t: Tensor, value) -> None:
    """Write ``value`` into the variable ``t``: on the host when ``value`` is a numpy array
    or a tensor with a known host value, else as a traced in-place copy."""
    arr = value if isinstance(value, np.ndarray) else host_value(value)
    if arr is not None and host_value(t) is not None:
        if tuple(arr.shape) != tuple(t.shape):
            raise RuntimeError(f"parametrization: a value of shape {list(arr.shape)} for a "
                               f"tensor of shape {list(t.shape)}")
        from ...graph.tensor import _as_array
        t._var.value = _as_array(np.array(arr, copy=True), t.dtype)
        return
    with no_grad():
        t.copy_(value)


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor (children ``0``, ``1``...) and its originals
    (``original``, or ``original0``... when ``right_inverse`` returns a sequence), as
    ``torch.nn.utils.parametrize.ParametrizationList``. Calling it computes the
    parametrized tensor."""

    def __init__(self, modules, original: Tensor, unsafe: bool = False) -> None:
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        is_param = isinstance(original, Parameter)
        new, host = original, host_value(original)
        for m in reversed(list(self)):          # right_inverse of the chain, last first
            if hasattr(m, "right_inverse"):
                try:
                    if host is not None and hasattr(m, "_host_right_inverse"):
                        host = m._host_right_inverse(host)
                        new = host
                        continue
                    new = m.right_inverse(new)
                    host = None
                except NotImplementedError:
                    pass
        self.is_tensor = isinstance(new, (Tensor, np.ndarray))
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if new is not original:
                if tuple(new.shape) != tuple(original.shape) and not unsafe:
                    raise ValueError("When `right_inverse` outputs one tensor, it may not "
                                     "change the shape.\n"
                                     f"original.shape: {tuple(original.shape)}\n"
                                     f"right_inverse(original).shape: {tuple(new.shape)}")
                _set_value(original, new)       # the same variable: optimizers keep it
            self._register("original", original, is_param)
        else:
            for i, t in enumerate(new):
                if not isinstance(t, (Tensor, np.ndarray)):
                    raise ValueError("'right_inverse' must return a Tensor or a Sequence "
                                     f"of tensors (list, tuple...). Got element {i} of "
                                     f"type {type(t).__name__}")
                arr = t if isinstance(t, np.ndarray) else host_value(t)
                if arr is not None:
                    var = (Parameter(arr, requires_grad=original.requires_grad) if is_param
                           else Tensor(arr))
                else:                           # a traced value: written by the program
                    var = (Parameter(np.zeros(t.shape, np.float32),
                                     requires_grad=original.requires_grad)
                           if is_param else Tensor(np.zeros(t.shape), dtype=t.dtype))
                    _set_value(var, t)
                self._register(f"original{i}", var, is_param)
        if not unsafe:
            _registering[0] = True
            try:
                z = self()
            finally:
                _registering[0] = False
            if not isinstance(z, Tensor):
                raise ValueError("A parametrization must return a tensor. Got "
                                 f"{type(z).__name__}.")
            if z.dtype != original.dtype:
                raise ValueError("Registering a parametrization may not change the dtype "
                                 f"of the tensor, unless `unsafe` flag is enabled.\n"
                                 f"unparametrized dtype: {original.dtype}\n"
                                 f"parametrized dtype: {z.dtype}")
            if tuple(z.shape) != tuple(original.shape):
                raise ValueError("Registering a parametrization may not change the shape "
                                 f"of the tensor, unless `unsafe` flag is enabled.\n"
                                 f"unparametrized shape: {tuple(original.shape)}\n"
                                 f"parametrized shape: {tuple(z.shape)}")

    def _register(self, name: str, t: Tensor, is_param: bool) -> None:
        if is_param:
            self.register_parameter(name, t)
        else:
            self.register_buffer(name, t)

    def originals(self) -> list:
        if self.is_tensor:
            return [self.original]
        return [getattr(self, f"original{i}") for i in range(self.ntensors)]

    def right_inverse(self, value) -> None:
        """Write ``right_inverse(value)`` (through the chain, last module first) into the
        originals, in place and without gradient (``module.name = value``)."""
        with no_grad():
            for m in reversed(list(self)):
                if hasattr(m, "right_inverse"):
                    value = m.right_inverse(value)
                else:
                    raise RuntimeError(f"parametrization {type(m).__name__} does not "
                                       "implement right_inverse.")
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got "
                                     f"{type(value).__name__}")
                with no_grad():                 # in program order, as ``p.copy_``
                    self.original.copy_(value)
            else:
                if not isinstance(value, (list, tuple)) or len(value) != self.ntensors:
                    raise ValueError(f"'right_inverse' must return a sequence of "
                                     f"{self.ntensors} tensors")
                for orig, v in zip(self.originals(), value):
                    orig.copy_(v)

    def forward(self) -> Tensor:
        mods = list(self)
        x = mods[0](*self.originals())
        for m in mods[1:]:
            x = m(x)
        return x

    def _host_forward(self):
        """The parametrized value computed on the host (numpy), or None when a module has
        no host form or an original's value is not known while tracing."""
        vals = [host_value(t) for t in self.originals()]
        mods = list(self)
        if any(v is None for v in vals) or not all(hasattr(m, "_host_forward") for m in mods):
            return None
        x = mods[0]._host_forward(*vals)
        for m in mods[1:]:
            if x is None:
                break
            x = m._host_forward(x)
        return x


def _parametrized_getter(name: str):
    def get(self):
        plist = self.parametrizations[name]
        if _cache_enabled:
            key = (id(self), name)
            if key not in _cache:
                _cache[key] = plist()
            return _cache[key]
        return plist()
    return get


def _inject(module: Module) -> None:
    """Swap ``module``'s class for a ``Parametrized<Class>`` subclass (once)."""
    cls = module.__class__

    def __setattr__(self, name, value):
        plists = self.__dict__["_modules"].get("parametrizations")
        if plists is not None and name in plists:
            if isinstance(value, Parameter):
                raise KeyError(f"attribute '{name}' already exists")
            plists[name].right_inverse(value)
            return
        cls.__setattr__(self, name, value)

    param_cls = type(f"Parametrized{cls.__name__}", (cls,),
                     {"__setattr__": __setattr__, "_unparametrized_class": cls})
    object.__setattr__(module, "__class__", param_cls)


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has a parametrization (on ``tensor_name``, when given)."""
    plists = module.__dict__.get("_modules", {}).get("parametrizations")
    if plists is None or not isinstance(plists, ModuleDict):
        return False
    return len(plists) > 0 if tensor_name is None else tensor_name in plists


def type_before_parametrizations(module: Module) -> type:
    """The module's class before :func:`register_parametrization` replaced it."""
    return type(module).__dict__.get("_unparametrized_class", type(module)) \
        if is_parametrized(module) else type(module)


def register_parametrization(module: Module, tensor_name: str, parametrization: Module, *,
                             unsafe: bool = False) -> Module:
    """Parametrize ``module.<tensor_name>`` (a parameter or buffer) by ``parametrization``,
    as ``torch.nn.utils.parametrize.register_parametrization``.

    Afterwards reading ``module.<tensor_name>`` returns ``parametrization(original)``
    (traced at each read), where ``original`` is
    ``module.parametrizations[tensor_name].original``: the same variable as the old
    parameter (so an optimizer built before keeps training it), its value set to
    ``parametrization.right_inverse(value)`` when the parametrization has one. A
    ``right_inverse`` returning a sequence of tensors makes originals ``original0``,
    ``original1``..., new parameters (build the optimizer afterwards), and the
    parametrization's ``forward`` then takes them as arguments. Registering on an already
    parametrized tensor appends to its chain.

    Args:
        module: the module.
        tensor_name: a parameter or buffer of ``module`` (or an already parametrized one).
        parametrization: a module mapping the original(s) to a tensor of the same shape and
            dtype (checked by calling it once unless ``unsafe``).
        unsafe: skip the checks of shape and dtype.

    Returns:
        ``module``.

    Raises:
        ValueError: ``tensor_name`` is neither a parameter, a buffer nor parametrized, or
            the checks fail (PyTorch's messages).
    """
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            if not isinstance(x, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got "
                                 f"{type(x).__name__}.")
            if x.dtype != y.dtype or tuple(x.shape) != tuple(y.shape):
                raise ValueError("Registering a parametrization may not change the shape "
                                 "or dtype of the tensor, unless `unsafe` flag is enabled.")
        plist.append(parametrization)
        plist.unsafe |= unsafe
    elif tensor_name in module._buffers or tensor_name in module._parameters:
        original = getattr(module, tensor_name)
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject(module)
            Module.__setattr__(module, "parametrizations", ModuleDict())
        module.parametrizations[tensor_name] = plist
        setattr(type(module), tensor_name, property(_parametrized_getter(tensor_name)))
    else:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a "
                         f"parametrized element with name '{tensor_name}'")
    return module


def remove_parametrizations(module: Module, tensor_name: str,
                            leave_parametrized: bool = True) -> Module:
    """Undo :func:`register_parametrization` on ``tensor_name``, as
    ``torch.nn.utils.parametrize.remove_parametrizations``: ``module.<tensor_name>``
    becomes a parameter (or buffer) again, holding the parametrized value
    (``leave_parametrized``) or the original.

    With one original, the parameter is that same variable (its value set to the
    parametrized value); with several, a new parameter. The value is computed on the host
    for the built-in parametrizations, else written by a traced copy (see the module's
    docstring).

    Raises:
        ValueError: ``tensor_name`` is not parametrized, or ``leave_parametrized=False``
            with several originals (PyTorch's messages).
    """
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    is_param = isinstance(plist.originals()[0], Parameter)
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            host = plist._host_forward()
            _set_value(original, host if host is not None else plist())
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a "
                             "tensor that is parametrized in terms of a sequence of tensors.")
        host = plist._host_forward()
        if host is None:
            t = plist()
            o = plist.originals()[0]
            original = (Parameter(np.zeros(t.shape, np.float32), requires_grad=o.requires_grad)
                        if is_param else Tensor(np.zeros(t.shape), dtype=t.dtype))
            _set_value(original, t)
        else:
            requires = plist.originals()[0].requires_grad
            original = (Parameter(host, requires_grad=requires) if is_param else Tensor(host))
    cls = type(module)
    delattr(cls, tensor_name)
    del module.parametrizations[tensor_name]
    if is_param:
        module.register_parameter(tensor_name, original)
    else:
        module.register_buffer(tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        object.__setattr__(module, "__class__", cls._unparametrized_class)
    return module
