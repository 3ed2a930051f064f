"""``Module``: parameters, buffers and sub-modules registered in definition order, like
``torch.nn.Module`` (names, traversal order, ``state_dict`` keys and order)."""
from __future__ import annotations

import collections
import warnings
from collections import OrderedDict

import numpy as np

from ..graph.tensor import Tensor, _as_array
from ..graph.trace import OWNERS
from .backward_hooks import BackwardHook


class Parameter(Tensor):
    """A variable that requires grad (float32)."""

    def __init__(self, data, requires_grad: bool = True, name: str | None = None):
        super().__init__(data, requires_grad=requires_grad, dtype="float32", name=name)


class StateDictError(KeyError, RuntimeError):
    """``load_state_dict(strict=True)`` found missing or unexpected keys (a ``RuntimeError``
    as in PyTorch, and a ``KeyError``)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


#: the default of a constructor argument that has none (:func:`bind_arguments`)
REQUIRED = object()


def bind_arguments(owner: str, spec, args, kwargs) -> dict:
    """A constructor's arguments by name: ``spec`` lists ``(name, default)`` in PyTorch's
    positional order (the generated activation and loss modules), :data:`REQUIRED` for
    one without a default.

    Raises:
        TypeError: too many positional arguments, an unknown keyword or a missing required
            argument (Python's messages, as PyTorch's constructors give them).
    """
    names = [a for a, _ in spec]
    if len(args) > len(names):
        raise TypeError(f"{owner}() takes at most {len(names)} arguments")
    values = dict(spec)
    values.update(zip(names, args))
    for k, v in kwargs.items():
        if k not in values:
            raise TypeError(f"{owner}() got an unexpected keyword argument '{k}'")
        values[k] = v
    missing = [k for k, v in values.items() if v is REQUIRED]
    if missing:
        raise TypeError(f"{owner}() missing required argument(s): "
                        + ", ".join(f"'{k}'" for k in missing))
    return values


#: what ``load_state_dict`` returns, as PyTorch's ``_IncompatibleKeys``
IncompatibleKeys = collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


#: a module's hook tables (:meth:`Module.register_forward_hook`...), PyTorch's attributes
_HOOK_DICTS = ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs", "_forward_hooks",
               "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
               "_backward_hooks", "_backward_pre_hooks")

#: hooks of every module (``torch.nn.modules.module``'s globals of these names), run
#: before each module's own: :func:`register_module_forward_pre_hook` ...
_global_forward_pre_hooks: "OrderedDict[int, object]" = OrderedDict()
_global_forward_hooks: "OrderedDict[int, object]" = OrderedDict()
_global_forward_hooks_with_kwargs: "OrderedDict[int, bool]" = OrderedDict()
_global_forward_hooks_always_called: "OrderedDict[int, bool]" = OrderedDict()
_global_backward_pre_hooks: "OrderedDict[int, object]" = OrderedDict()
_global_backward_hooks: "OrderedDict[int, object]" = OrderedDict()


class Module:
    """Base class of layers. Assigning a ``Parameter`` or a ``Module`` attribute registers
    it; ``parameters()`` lists them in definition order (deterministic), a module's own
    before its children's, as PyTorch does."""

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)
        for name in _HOOK_DICTS:                 # PyTorch's names: hook id -> hook / flag
            object.__setattr__(self, name, OrderedDict())

    def __setattr__(self, name, value) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("call Module.__init__() before assigning attributes")
        if name in self._buffers and (value is None or isinstance(value, Tensor)) \
                and not isinstance(value, Parameter):
            self._buffers[name] = value                   # rebinding a registered buffer
            object.__setattr__(self, name, value)
            return
        for d in (self._parameters, self._modules, self._buffers):
            d.pop(name, None)
        self._non_persistent_buffers_set.discard(name)
        if isinstance(value, Parameter):
            self._parameters[name] = value
            value.name = value.name or name
            if value._var is not None and value._var.name is None:
                value._var.name = name
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def __delattr__(self, name) -> None:
        for d in (self._parameters, self._modules, self._buffers):
            d.pop(name, None)
        self._non_persistent_buffers_set.discard(name)
        object.__delattr__(self, name)

    # -- registration ------------------------------------------------------------------
    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """A non-trained tensor of the module (running statistics, constant tables).

        Buffers are variables: updated in place inside a traced loop they are loop-carried,
        like parameters. ``persistent=False`` keeps it out of ``state_dict()``.

        Raises:
            KeyError: ``name`` is empty, dotted, or already a non-buffer attribute.
            TypeError: ``tensor`` is neither a Tensor nor None.
        """
        if not name or "." in name:
            raise KeyError(f"buffer name can't be empty or contain \".\", got {name!r}")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer "
                            f"'{name}' (autodiff Tensor or None required)")
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)
        if tensor is not None and tensor._var is not None and tensor._var.name is None:
            tensor._var.name = name
        object.__setattr__(self, name, tensor)

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add ``param`` (or None: a declared but absent parameter) as ``name``."""
        if param is None:
            self._parameters.pop(name, None)
            object.__setattr__(self, name, None)
            return
        if not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (autodiff.nn.Parameter or None required)")
        setattr(self, name, param)

    def add_module(self, name: str, module: "Module | None") -> None:
        """Add ``module`` as the child ``name`` (``None`` removes nothing, sets None)."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if module is None:
            self._modules.pop(name, None)
            object.__setattr__(self, name, None)
            return
        setattr(self, name, module)

    register_module = add_module

    def get_submodule(self, target: str) -> "Module":
        """The sub-module at dotted path ``target`` (``""``: this module).

        Raises:
            AttributeError: no such sub-module.
        """
        m = self
        for part in target.split(".") if target else []:
            if part not in m._modules:
                raise AttributeError(f"{type(m).__name__} has no attribute `{part}`")
            m = m._modules[part]
        return m

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at dotted path ``target``."""
        mod, _, name = target.rpartition(".")
        m = self.get_submodule(mod)
        if name not in m._parameters:
            raise AttributeError(f"{type(m).__name__} has no parameter `{name}`")
        return m._parameters[name]

    def forward(self, *args, **kwargs):
        raise NotImplementedError

    def __call__(self, *args, **kwargs):
        d = self.__dict__
        if not (d.get("_forward_pre_hooks") or d.get("_forward_hooks")
                or d.get("_backward_hooks") or d.get("_backward_pre_hooks")
                or _global_forward_pre_hooks or _global_forward_hooks
                or _global_backward_pre_hooks or _global_backward_hooks):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args, kwargs):
        """``forward`` between the forward pre-hooks and forward hooks, in PyTorch's order
        and with its rules for what a hook returns (``torch.nn.Module._call_impl``); with
        backward hooks, the positional tensor arguments and the output tensors pass through
        identity nodes whose gradients call them (:class:`~.backward_hooks.BackwardHook`). Hooks run when
        the module is called, i.e. at trace time; global hooks before the module's own."""
        d = self.__dict__
        fw_kw = d.get("_forward_hooks_with_kwargs", {})
        fw_always = d.get("_forward_hooks_always_called", {})
        result, called = None, set()
        try:
            full = [*_global_backward_hooks.values(), *d.get("_backward_hooks", {}).values()]
            pre_bw = [*_global_backward_pre_hooks.values(),
                      *d.get("_backward_pre_hooks", {}).values()]
            for hid, hook in (*_global_forward_pre_hooks.items(),
                              *d.get("_forward_pre_hooks", {}).items()):
                if hid in self._forward_pre_hooks_with_kwargs:
                    new = hook(self, args, kwargs)
                    if new is not None:
                        if not (isinstance(new, tuple) and len(new) == 2):
                            raise RuntimeError("forward pre-hook must return None or a tuple "
                                               f"of (new_args, new_kwargs), but got {new}.")
                        args, kwargs = new
                else:
                    new = hook(self, args)
                    if new is not None:
                        args = new if isinstance(new, tuple) else (new,)
            bw = None
            if full or pre_bw:
                bw = BackwardHook(self, full, pre_bw)
                args = bw.setup_input(args)
            result = self.forward(*args, **kwargs)
            for hid, hook in (*_global_forward_hooks.items(), *d.get("_forward_hooks", {}).items()):
                if hid in fw_always or hid in _global_forward_hooks_always_called:
                    called.add(hid)
                new = (hook(self, args, kwargs, result)
                       if hid in fw_kw or hid in _global_forward_hooks_with_kwargs
                       else hook(self, args, result))
                if new is not None:
                    result = new
            if bw is not None:
                if not isinstance(result, (Tensor, tuple)):
                    warnings.warn("For backward hooks to be called, module output should be a "
                                  "Tensor or a tuple of Tensors but received "
                                  f"{type(result)}", stacklevel=3)
                result = bw.setup_output(result)
            return result
        except Exception:
            for table, always, kw, what in (
                    (_global_forward_hooks, _global_forward_hooks_always_called, {},
                     "global module forward hook"),
                    (d.get("_forward_hooks", {}), fw_always, fw_kw, "module forward hook")):
                for hid, hook in list(table.items()):
                    if hid not in always or hid in called:
                        continue
                    try:
                        new = (hook(self, args, kwargs, result) if hid in kw
                               else hook(self, args, result))
                        if new is not None:
                            result = new
                    except Exception as e:
                        warnings.warn(f"{what} with ``always_call=True`` raised an exception "
                                      "that was silenced as another error was raised in "
                                      f"forward: {e}", stacklevel=2)
            raise

    # -- hooks -----------------------------------------------------------------------
    def register_forward_pre_hook(self, hook, *, prepend: bool = False,
                                  with_kwargs: bool = False):
        """Call ``hook(module, args)`` before each call of :meth:`forward`
        (``torch.nn.Module.register_forward_pre_hook``; ``args``: the positional arguments,
        a tuple). It may return a new ``args`` (a single value is wrapped in a tuple) or
        ``None``. With ``with_kwargs``: ``hook(module, args, kwargs)``, returning ``None``
        or ``(args, kwargs)`` (anything else: ``RuntimeError``). Hooks run in registration
        order (``prepend``: before those registered so far), when the module is called:
        at trace time, once for an ``ir_for`` body, so what they trace is part of every
        iteration. Returns a handle whose ``remove()`` unregisters the hook (also a context
        manager)."""
        return _register(self._forward_pre_hooks, hook, prepend,
                         (self._forward_pre_hooks_with_kwargs, with_kwargs))

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False,
                              always_call: bool = False):
        """Call ``hook(module, args, output)`` after each call of :meth:`forward`
        (``torch.nn.Module.register_forward_hook``; ``args``: the positional arguments as
        the forward pre-hooks left them). It may return a replacement output or ``None``.
        With ``with_kwargs``: ``hook(module, args, kwargs, output)``. ``always_call``: also
        called (output ``None`` if forward raised) when forward or a hook raised, its own
        exception then a warning, the first one re-raised. Order, ``prepend``, trace-time
        calls and the handle as :meth:`register_forward_pre_hook`."""
        return _register(self._forward_hooks, hook, prepend,
                         (self._forward_hooks_with_kwargs, with_kwargs),
                         (self._forward_hooks_always_called, always_call))

    def register_full_backward_pre_hook(self, hook, prepend: bool = False):
        """Call ``hook(module, grad_output) -> new grad_output or None`` when the gradients
        of the module's outputs are computed
        (``torch.nn.Module.register_full_backward_pre_hook``).

        ``grad_output`` is a tuple with one entry per output (a tuple output; else one):
        the gradient of an output tensor (a traced tensor of its shape and dtype), None
        for a non-tensor output, an output that does not require grad or one the loss does
        not reach. A returned tuple (the same length) replaces it: that is what flows back
        into the module (its parameters' gradients and ``grad_input`` change); a None
        entry stops the gradient of that output (zeros here, where PyTorch passes none).

        Hooks run in registration order (``prepend``: first), global ones
        (:func:`register_module_full_backward_pre_hook`) before, each on the previous one's
        result, and before the :meth:`register_full_backward_hook` hooks. They run while
        ``backward()`` is traced (once for an ``ir_for`` body; what they trace is part of
        every iteration), once per call of the module and ``backward()`` reaching it.

        Returns:
            A handle whose ``remove()`` unregisters the hook (also a context manager).

        Raises:
            RuntimeError: (during ``backward()``) the hook returned a tuple of another
                length (PyTorch's message), or a gradient of another shape or dtype.
            TypeError: (during ``backward()``) a returned entry is neither a tensor nor
                None.
        """
        return _register(self._backward_pre_hooks, hook, prepend)

    def register_full_backward_hook(self, hook, prepend: bool = False):
        """Call ``hook(module, grad_input, grad_output) -> new grad_input or None`` when the
        gradients of the module's inputs are computed
        (``torch.nn.Module.register_full_backward_hook``).

        ``grad_input`` has one entry per positional argument of the call (keyword
        arguments are ignored): the gradient flowing out of the module to a tensor
        argument (traced, of its shape and dtype; zeros for a tensor that does not require
        grad or that the module does not use, as PyTorch), None for a non-tensor.
        ``grad_output`` is as :meth:`register_full_backward_pre_hook` gives it (after the
        pre-hooks). A returned tuple (the same length) replaces ``grad_input``: that is
        what flows on to the arguments (the gradients of whatever computed them); the
        module's own parameter gradients do not change.

        When no tensor argument requires grad, the hooks run when the output gradients are
        computed, with ``grad_input`` all None (a ``UserWarning``, as PyTorch) and must
        return None; when no output requires grad they never run. The module's forward
        gets, and its caller receives, an identity view of each tensor (a node that costs
        nothing at run time; several tensors are packed into one vector, one copy).
        Order, ``prepend``, global hooks (:func:`register_module_full_backward_hook`),
        trace-time calls and the handle as :meth:`register_full_backward_pre_hook`.

        Raises:
            RuntimeError: (during ``backward()``) the hook returned a tuple of another
                length, not-None values when no input requires grad (PyTorch's messages),
                or a gradient of another shape or dtype.
            TypeError: (during ``backward()``) a returned entry is neither a tensor nor
                None.
        """
        return _register(self._backward_hooks, hook, prepend)

    # -- traversal -------------------------------------------------------------------
    def named_modules(self, memo: set | None = None, prefix: str = "",
                      remove_duplicate: bool = True):
        """``(dotted name, module)`` pairs, this module first (pre-order); a module
        reachable twice is listed once unless ``remove_duplicate`` is False."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, f"{prefix}.{name}" if prefix else name,
                                           remove_duplicate)

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        return (m for _, m in self.named_children())

    def modules(self):
        return (m for _, m in self.named_modules())

    def _named_members(self, get, prefix: str, recurse: bool, remove_duplicate: bool = True):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for mname, m in mods:
            for name, t in get(m):
                if t is None or (remove_duplicate and id(t) in seen):
                    continue
                seen.add(id(t))
                yield (f"{mname}.{name}" if mname else name), t

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True):
        """``(dotted name, Parameter)`` pairs in definition order, each parameter once."""
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                   remove_duplicate)

    def parameters(self, recurse: bool = True):
        """An iterator over the parameters in definition order (PyTorch's: a generator, so
        ``next(model.parameters())`` works and ``list(...)`` makes a list)."""
        return (p for _, p in self.named_parameters(recurse=recurse))

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True):
        """``(dotted name, buffer)`` pairs, persistent or not."""
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                   remove_duplicate)

    def buffers(self, recurse: bool = True):
        """An iterator over the buffers (PyTorch's: a generator)."""
        return (b for _, b in self.named_buffers(recurse=recurse))

    def apply(self, fn) -> "Module":
        """Call ``fn(module)`` on every child (recursively), then on this module, as
        ``torch.nn.Module.apply`` (e.g. custom initialisation). Returns ``self``."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -- modes -------------------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        """Freeze (``False``) or unfreeze every parameter. A frozen parameter is a constant
        for ``backward()``: no gradient work is traced for it, and optimizers skip it."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """As :meth:`autodiff.optim.Optimizer.zero_grad`, for this module's parameters."""
        from ..optim.optimizer import zero_grads
        zero_grads(self.parameters(), set_to_none)

    def to(self, *args, **kwargs) -> "Module":
        """``model.to(device)`` returns ``self`` (the device is chosen by
        :func:`autodiff.execute`); ``model.to(dtype)`` casts as :meth:`half` does.

        Raises:
            TypeError: a dtype other than float32, float16 or bfloat16.
        """
        for a in list(args) + list(kwargs.values()):
            if type(a).__name__ in ("dtype", "DType") or isinstance(a, type):
                self._cast(str(a).replace("torch.", "").replace("autodiff.", ""), "to")
        return self

    def _cast(self, dtype: str, what: str) -> "Module":
        """Every floating parameter and buffer's value in ``dtype`` (PyTorch's
        ``Module._apply``; the variables keep their identity, so optimizers and views of
        them stay bound)."""
        names = {"float": "float32", "half": "float16", "double": "float64"}
        dtype = names.get(dtype, dtype)
        if dtype not in ("float32", "float16", "bfloat16"):
            raise TypeError(f"Module.{what}: floating parameters can be float32, float16 or "
                            f"bfloat16 here, not {dtype}")
        for t in list(self.parameters()) + list(self.buffers()):
            if t._var is not None and t.dtype.is_floating_point and t.dtype != dtype:
                OWNERS.check(t._var, write=True)
                t._var.value = _as_array(t._var.value.astype(np.float32), dtype)
        return self

    def float(self) -> "Module":
        """Floating parameters and buffers in float32."""
        return self._cast("float32", "float")

    def half(self) -> "Module":
        """Floating parameters and buffers in float16 (inference: optimizers take float32
        parameters)."""
        return self._cast("float16", "half")

    def bfloat16(self) -> "Module":
        """Floating parameters and buffers in bfloat16 (inference, as :meth:`half`)."""
        return self._cast("bfloat16", "bfloat16")

    def double(self) -> "Module":
        """Raises TypeError: there is no float64 here."""
        return self._cast("float64", "double")

    def type(self, dst_type) -> "Module":
        return self._cast(str(dst_type).replace("torch.", ""), "type")

    # -- state ---------------------------------------------------------------------------
    def _state_items(self, prefix: str = ""):
        """``(key, tensor)`` in PyTorch's ``state_dict`` order: a module's parameters,
        then its persistent buffers, then each child's (recursively)."""
        for name, p in self._parameters.items():
            if p is not None:
                yield prefix + name, p
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                yield prefix + name, b
        for name, m in self._modules.items():
            if m is not None:
                yield from m._state_items(f"{prefix}{name}.")

    def state_dict(self, destination=None, prefix: str = "",
                   keep_vars: bool = False) -> "OrderedDict[str, np.ndarray]":
        """Parameter and persistent buffer values by PyTorch's dotted names, in PyTorch's
        order (numpy copies; ``keep_vars=True``: the tensors themselves)."""
        out = OrderedDict() if destination is None else destination
        for k, t in self._state_items(prefix):
            # an uninitialized (lazy) parameter or buffer has no values: itself, as PyTorch
            out[k] = t if keep_vars or _is_lazy(t) else t.numpy()
        return out

    def load_state_dict(self, state, strict: bool = True, assign: bool = False):
        """Set values from ``{name: array}`` (numpy arrays or torch tensors, e.g. a PyTorch
        model's ``state_dict()``), each converted to the buffer's or parameter's dtype.

        Returns:
            ``IncompatibleKeys(missing_keys, unexpected_keys)``.

        A BatchNorm's ``num_batches_tracked`` may be absent (checkpoints from before
        PyTorch had it): it keeps its value and is not reported missing, as in PyTorch.
        An uninitialized parameter or buffer of a lazy module (:mod:`autodiff.nn.lazy`)
        is materialised with the shape of the value given for it, as PyTorch's lazy
        modules do (one given an uninitialized value stays uninitialized).

        Raises:
            StateDictError: with ``strict``, names missing or unexpected (a ``KeyError`` and a
                ``RuntimeError``).
            RuntimeError: a shape differs (PyTorch's "size mismatch" message), before any
                value is set.
        """
        own = OrderedDict(self._state_items())
        # a lazy module's uninitialized parameter takes the shape it is given (PyTorch's
        # LazyModuleMixin._lazy_load_hook); one given another uninitialized one stays so
        both_lazy = {k for k, t in own.items()
                     if k in state and _is_lazy(t) and _is_lazy(state[k])}
        for k, t in own.items():
            if _is_lazy(t) and k in state and k not in both_lazy:
                t.materialize(tuple(getattr(state[k], "shape", np.shape(state[k]))))
        missing = [k for k in own if k not in state
                   and not (k.rsplit(".", 1)[-1] == "num_batches_tracked")]
        extra = [k for k in state if k not in own]
        if strict and (missing or extra):
            raise StateDictError(f"Error(s) in loading state_dict for {type(self).__name__}: "
                                 f"missing {missing}, unexpected {extra}")
        arrays = {k: _as_array(state[k], t.dtype) for k, t in own.items()
                  if k in state and k not in both_lazy}
        bad = [f"size mismatch for {k}: copying a param with shape {list(a.shape)} from "
               f"checkpoint, the shape in current model is {list(own[k].shape)}."
               for k, a in arrays.items() if a.shape != own[k].shape]
        if bad:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(bad))
        for k, arr in arrays.items():
            t = own[k]
            if t._var is None:
                raise RuntimeError(f"load_state_dict: {k} is not a variable")
            OWNERS.check(t._var, write=True)    # a running execute() owns it: raise or wait
            t._var.value = arr.copy()
        return IncompatibleKeys(missing, extra)

    def save(self, path) -> None:
        """Write the state dict to an ``.npz`` file. In a distributed run (several
        processes, :mod:`autodiff.distributed`) rank 0 writes it and every rank returns
        once it is written."""
        from ..distributed import state
        comm = state.active()
        if comm is None or comm.rank == 0:
            np.savez(path, **self.state_dict())
        if comm is not None:
            comm.barrier()

    def load(self, path) -> None:
        """Read a state dict written by :meth:`save`."""
        with np.load(path) as f:
            self.load_state_dict({k: f[k] for k in f.files})

    def __repr__(self) -> str:
        inner = "".join(f"\n  ({n}): " + repr(m).replace("\n", "\n  ")
                        for n, m in self._modules.items())
        return f"{type(self).__name__}({self.extra_repr()}{inner}{chr(10) if inner else ''})"

    def extra_repr(self) -> str:
        return ""


def _is_lazy(t) -> bool:
    from .parameter import is_lazy
    return is_lazy(t)


def register_module_forward_pre_hook(hook):
    """A forward pre-hook of every module, run before each module's own
    (``torch.nn.modules.module.register_module_forward_pre_hook``): ``hook(module, args)``
    as :meth:`Module.register_forward_pre_hook`. Returns its removable handle."""
    return _register(_global_forward_pre_hooks, hook, False)


def register_module_forward_hook(hook, *, with_kwargs: bool = False,
                                 always_call: bool = False):
    """A forward hook of every module, run before each module's own
    (``torch.nn.modules.module.register_module_forward_hook``): ``hook(module, args,
    output)`` (``with_kwargs``: ``hook(module, args, kwargs, output)``), ``always_call``
    as :meth:`Module.register_forward_hook`. Returns its removable handle."""
    return _register(_global_forward_hooks, hook, False,
                     (_global_forward_hooks_with_kwargs, with_kwargs),
                     (_global_forward_hooks_always_called, always_call))


def register_module_full_backward_pre_hook(hook):
    """A backward pre-hook of every module, run before each module's own
    (``torch.nn.modules.module.register_module_full_backward_pre_hook``): see
    :meth:`Module.register_full_backward_pre_hook`. Returns its removable handle."""
    return _register(_global_backward_pre_hooks, hook, False)


def register_module_full_backward_hook(hook):
    """A full backward hook of every module, run before each module's own
    (``torch.nn.modules.module.register_module_full_backward_hook``): see
    :meth:`Module.register_full_backward_hook`. Returns its removable handle."""
    return _register(_global_backward_hooks, hook, False)


def _register(hooks, hook, prepend: bool, *flags) -> "_HookHandle":
    """Put ``hook`` in the ordered table ``hooks`` (first with ``prepend``), set its entry
    in each ``(flag table, on)`` pair that is on, and return the handle that removes it from
    all of them."""
    from ..graph.tensor import _HookHandle
    handle = _HookHandle(hooks, *(table for table, _ in flags))
    hooks[handle.id] = hook
    for table, on in flags:
        if on:
            table[handle.id] = True
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    return handle


from . import modules as _modules  # noqa: E402,F401  (autodiff.nn.modules.module, as torch)
