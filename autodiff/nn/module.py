"""``Module``: parameters and sub-modules registered in definition order, like ``torch.nn``."""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from ..graph.tensor import Tensor, _as_array
from ..graph.trace import OWNERS


class Parameter(Tensor):
    """A variable that requires grad (float32)."""

    def __init__(self, data, requires_grad: bool = True, name: str | None = None):
        super().__init__(data, requires_grad=requires_grad, dtype="float32", name=name)


class Module:
    """Base class of layers. Assigning a ``Parameter`` or a ``Module`` attribute registers
    it; ``parameters()`` lists them in definition order (deterministic)."""

    def __init__(self) -> None:
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("call Module.__init__() before assigning attributes")
        for d in (self._parameters, self._modules, self._buffers):
            d.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
            value.name = value.name or name
            if value._var is not None and value._var.name is None:
                value._var.name = name
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def register_buffer(self, name: str, value: Tensor) -> None:
        """A non-trained tensor saved in the state dict (e.g. running statistics)."""
        self._buffers[name] = value
        object.__setattr__(self, name, value)

    def forward(self, *args, **kwargs):
        raise NotImplementedError

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    # -- traversal -------------------------------------------------------------------
    def named_modules(self, prefix: str = ""):
        yield prefix, self
        for name, m in self._modules.items():
            yield from m.named_modules(f"{prefix}.{name}" if prefix else name)

    def children(self):
        return iter(self._modules.values())

    def modules(self):
        return (m for _, m in self.named_modules())

    def named_parameters(self, prefix: str = ""):
        """``(dotted name, Parameter)`` pairs in definition order, each parameter once."""
        seen = set()
        for mname, m in self.named_modules(prefix):
            for pname, p in m._parameters.items():
                if id(p) not in seen:
                    seen.add(id(p))
                    yield (f"{mname}.{pname}" if mname else pname), p

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    def named_buffers(self):
        for mname, m in self.named_modules():
            for bname, b in m._buffers.items():
                yield (f"{mname}.{bname}" if mname else bname), b

    # -- modes -------------------------------------------------------------------------
    def train(self, mode: bool = True) -> "Module":
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> "Module":
        return self.train(False)

    def zero_grad(self) -> None:
        for p in self.parameters():
            p.grad = None

    # -- state ---------------------------------------------------------------------------
    def state_dict(self) -> "OrderedDict[str, np.ndarray]":
        """Parameter and buffer values by PyTorch-style dotted name (numpy copies)."""
        out = OrderedDict((n, p.numpy()) for n, p in self.named_parameters())
        out.update((n, b.numpy()) for n, b in self.named_buffers())
        return out

    def load_state_dict(self, state, strict: bool = True) -> None:
        """Set values from ``{name: array}`` (numpy arrays or torch tensors).

        Raises:
            KeyError: with ``strict``, names missing or unexpected.
            ValueError: a shape differs.
        """
        own = dict(self.named_parameters())
        own.update(self.named_buffers())
        missing = [k for k in own if k not in state]
        extra = [k for k in state if k not in own]
        if strict and (missing or extra):
            raise KeyError(f"load_state_dict: missing {missing}, unexpected {extra}")
        for k, t in own.items():
            if k not in state:
                continue
            arr = _as_array(state[k], t.dtype)
            if arr.shape != t.shape:
                raise ValueError(f"load_state_dict: {k} has shape {list(arr.shape)}, "
                                 f"expected {list(t.shape)}")
            if t._var is None:
                raise RuntimeError(f"load_state_dict: {k} is not a variable")
            OWNERS.check(t._var, write=True)    # a running execute() owns it: raise or wait
            t._var.value = arr.copy()

    def save(self, path) -> None:
        """Write the state dict to an ``.npz`` file."""
        np.savez(path, **self.state_dict())

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
