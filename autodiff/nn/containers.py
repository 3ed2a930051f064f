"""Containers: ``ModuleList``, ``Sequential``, ``ModuleDict``, ``ParameterList``,
``ParameterDict``, with PyTorch's child names (``0``, ``1``, ... or the dict keys)."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from ..graph.tensor import Tensor
from .module import Module, Parameter


class ModuleList(Module):
    """Sub-modules in a list, children named ``0``, ``1``, ... (``torch.nn.ModuleList``).

    Supports ``append``, ``extend``, ``insert``, indexing (negative too), slicing (a new
    ``ModuleList`` of the same modules), ``len``, iteration and ``+``.
    """

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def _items(self) -> list:
        return list(self._modules.values())

    def _reset(self, mods) -> None:
        for k in list(self._modules):
            delattr(self, k)
        for i, m in enumerate(mods):
            setattr(self, str(i), m)

    def append(self, module: Module) -> "ModuleList":
        setattr(self, str(len(self._modules)), module)
        return self

    def extend(self, modules) -> "ModuleList":
        for m in modules:
            self.append(m)
        return self

    def insert(self, index: int, module: Module) -> None:
        mods = self._items()
        mods.insert(index, module)
        self._reset(mods)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return type(self)(self._items()[i]) if type(self) is ModuleList \
                else ModuleList(self._items()[i])
        return self._items()[i]

    def __setitem__(self, i: int, module: Module) -> None:
        mods = self._items()
        mods[i] = module
        self._reset(mods)

    def __delitem__(self, i) -> None:
        mods = self._items()
        del mods[i]
        self._reset(mods)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __add__(self, other) -> "ModuleList":
        return ModuleList(self._items() + list(other))


class Sequential(ModuleList):
    """Modules applied in order (``torch.nn.Sequential``): children are named ``0``, ``1``,
    ... or by the keys of a single ``OrderedDict`` argument."""

    def __init__(self, *mods):
        if len(mods) == 1 and isinstance(mods[0], OrderedDict):
            Module.__init__(self)
            for k, m in mods[0].items():
                setattr(self, k, m)
            return
        super().__init__(mods)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return Sequential(OrderedDict(list(self._modules.items())[i]))
        return self._items()[i]

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class ModuleDict(Module):
    """Sub-modules by name, in insertion order (``torch.nn.ModuleDict``)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        return self._modules[key]

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key) -> bool:
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def pop(self, key: str) -> Module:
        m = self._modules[key]
        delattr(self, key)
        return m

    def clear(self) -> None:
        for k in list(self._modules):
            delattr(self, k)

    def update(self, modules) -> None:
        items = modules.items() if hasattr(modules, "items") else modules
        for k, m in items:
            self[k] = m


def _as_parameter(value) -> Parameter:
    if isinstance(value, Parameter):
        return value
    if isinstance(value, Tensor):
        return Parameter(value.numpy())
    return Parameter(np.asarray(value, np.float32))


class ParameterList(Module):
    """Parameters in a list, named ``0``, ``1``, ... (``torch.nn.ParameterList``); plain
    tensors and arrays are wrapped in ``Parameter``."""

    def __init__(self, values=None):
        super().__init__()
        for v in values or ():
            self.append(v)

    def append(self, value) -> "ParameterList":
        setattr(self, str(len(self._parameters)), _as_parameter(value))
        return self

    def extend(self, values) -> "ParameterList":
        for v in values:
            self.append(v)
        return self

    def __getitem__(self, i):
        items = list(self._parameters.values())
        return ParameterList(items[i]) if isinstance(i, slice) else items[i]

    def __setitem__(self, i: int, value) -> None:
        i = i % len(self)
        setattr(self, str(i), _as_parameter(value))

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())


class ParameterDict(Module):
    """Parameters by name, in insertion order (``torch.nn.ParameterDict``)."""

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key: str) -> Parameter:
        return self._parameters[key]

    def __setitem__(self, key: str, value) -> None:
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key: str) -> None:
        delattr(self, key)

    def __len__(self) -> int:
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters)

    def __contains__(self, key) -> bool:
        return key in self._parameters

    def keys(self):
        return self._parameters.keys()

    def values(self):
        return self._parameters.values()

    def items(self):
        return self._parameters.items()

    def pop(self, key: str) -> Parameter:
        p = self._parameters[key]
        delattr(self, key)
        return p

    def update(self, parameters) -> None:
        items = parameters.items() if hasattr(parameters, "items") else parameters
        for k, v in items:
            self[k] = v
