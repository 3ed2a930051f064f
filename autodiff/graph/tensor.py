"""``Tensor``: the user-facing handle on a graph IR value, spelled like ``torch.Tensor``.

A tensor is either a *variable* (made from data: ``Tensor(array)``, ``zeros``, ``randn``,
parameters, optimizer state; device-resident, outlives programs) or a *traced value* (the
result of an op; its value exists once :func:`autodiff.execute` has run). Traced values
made inside an ``ir_for`` body live for one iteration only; traced values made at the top
level and still referenced when ``execute()`` runs keep their values and become variables.

This module holds the core: identity, autograd, in-place updates and the arithmetic
operators. The op families live in :mod:`autodiff.graph.mixins` (creation, elementwise,
movement, reduce, indexing; tinygrad's layout) and are composed into :class:`Tensor`.
"""
from __future__ import annotations

import math
import numbers
import weakref

import numpy as np

from ..errors import ShapeError
from . import autograd as _autograd, dtypes, grad_state, ops
from .autograd import backward as _backward
from .ir import Node, Op, Variable
from .mixins import (CreationMixin, DTypeMixin, DynamicShapeMixin, ElementwiseMixin,
                     IndexingMixin, LinalgMixin, MetaMixin, MovementMixin, RandomMixin,
                     ReduceMixin, ScanMixin, SpecialMixin, WindowMixin)
from .mixins.creation import default_rng, manual_seed  # noqa: F401  (re-exported)
from .mixins.dtype import binary as _promoted_binary, promoted as _promoted
from .trace import OWNERS, TRACER, no_grad, user_site


def _as_array(data, dtype=None) -> np.ndarray:
    """``data`` as the host array of a tensor of ``dtype`` (default: the data's own dtype
    where autodiff has it, see :func:`~autodiff.graph.dtypes.default_for`).

    Raises:
        TypeError: an unknown dtype.
        OverflowError: int64 data outside the int32 storage.
    """
    if isinstance(data, Tensor):                              # its current value
        data = data.numpy()
    elif type(data).__module__.startswith("torch"):          # a torch tensor
        data = data.detach().cpu()
        if str(data.dtype) == "torch.bfloat16":               # numpy has no bfloat16
            dtype = dtype if dtype is not None else "bfloat16"
            data = data.float()
        data = data.numpy()
    arr = np.asarray(data)
    dt = dtypes.get(dtype) if dtype is not None else dtypes.default_for(arr)
    dtypes.check_range(arr, dt, "tensor data")
    return dtypes.to_host(arr, dt)                             # keeps 0-d arrays 0-d


#: the op-family mixins, in method-resolution order (one line to extend)
MIXINS = (DTypeMixin, CreationMixin, ElementwiseMixin, MovementMixin, ReduceMixin,
          ScanMixin, IndexingMixin, WindowMixin, LinalgMixin, MetaMixin, RandomMixin,
          DynamicShapeMixin, SpecialMixin)


class Tensor(*MIXINS):
    """An n-dimensional array on the device, of one dtype (``autodiff.float32``,
    ``int64``, ``bool``... see :mod:`autodiff.graph.dtypes`).

    Args:
        data: array-like (numpy array, nested lists, a torch tensor). Its dtype is kept
            where autodiff has it (bool, int32, int64, float32, float16, bfloat16); other
            floats (float64) become float32, Python ints int64, other integers int32/int64.
        requires_grad: whether ``backward()`` accumulates a gradient into ``.grad``
            (floating dtypes only).
        dtype: a dtype (``autodiff.int64``, ``"float16"``, ``torch.bool``...).
        name: shown by printers.

    Raises:
        TypeError: an unknown dtype, or ``requires_grad`` on a non-floating dtype.
        OverflowError: int64 data outside the int32 storage.
    """
    __array_priority__ = 1000   # numpy scalars defer to our operators

    def __init__(self, data=None, requires_grad: bool = False, dtype: str | None = None,
                 name: str | None = None, *, _node: Node | None = None):
        self._grad: Tensor | None = None
        self.name = name
        self._node = _node
        self._var: Variable | None = None
        self._scope = TRACER.scope if _node is not None else None
        self._generation = TRACER.generation
        if _node is None:
            self._var = Variable(_as_array(data, dtype), name)
            self._var.owner = weakref.ref(self)
            self.requires_grad = bool(requires_grad)
            if self.requires_grad and not dtypes.is_floating(self._var.dtype):
                raise TypeError("only floating point tensors can require gradients, got "
                                f"{self._var.dtype}")
        else:
            self.requires_grad = _node.requires_grad
            if TRACER.scope is TRACER.root:
                TRACER.outputs.add(self)

    @property
    def grad(self) -> "Tensor | None":
        """The gradient ``backward()`` accumulated (``None`` before any; state that loops
        carry and branches merge as in PyTorch: :mod:`autodiff.graph.grad_state`)."""
        return self._grad

    @grad.setter
    def grad(self, value: "Tensor | None") -> None:
        grad_state.note_write(self)
        self._grad = value

    # -- wrapping (used by the mixins) ------------------------------------------------
    @staticmethod
    def _of_var(var: Variable) -> "Tensor":
        """A tensor reading variable ``var`` (not its owner: gradient carries)."""
        t = Tensor.__new__(Tensor)
        t._grad, t.name, t._node, t._var, t._scope = None, var.name, None, var, None
        t._generation, t.requires_grad = TRACER.generation, False
        return t

    @staticmethod
    def _wrap(node: Node) -> "Tensor":
        """A traced tensor holding graph node ``node``."""
        return Tensor(_node=node)

    @staticmethod
    def _lift(x) -> Node:
        """The graph node of an operand: a Tensor's node, a constant for a Python number,
        a new variable for a numpy array."""
        return _node_of(x)

    # -- identity ---------------------------------------------------------------
    @property
    def node(self) -> Node:
        """The graph IR node holding this tensor's value at this point of the program."""
        if self._var is not None:
            return TRACER.read(self._var, self.requires_grad)
        if self._generation != TRACER.generation or not TRACER.in_scope(self._scope):
            raise RuntimeError(
                "this tensor was computed inside a loop iteration (or a finished program) and "
                "does not outlive it; hand it to a Receiver to see its values")
        return self._node

    @property
    def shape(self) -> tuple[int, ...]:
        return self._var.shape if self._var is not None else self._node.shape

    @property
    def dtype(self) -> dtypes.DType:
        """``autodiff.float32``, ... (equal to the name too: ``t.dtype == "float32"``)."""
        return dtypes.get(self._var.dtype if self._var is not None else self._node.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return math.prod(map(int, self.shape))

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[self._dim(dim)]

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    __hash__ = object.__hash__

    # -- Python values: a variable's host value, never a traced tensor's --------------
    def __bool__(self) -> bool:
        v = self._host_value("bool", "Use autodiff.where(cond, a, b) for a choice that "
                                     "depends on values.")
        if v.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(v.reshape(()))

    def __int__(self) -> int:
        return int(self._host_scalar("int"))

    def __float__(self) -> float:
        return float(self._host_scalar("float"))

    def __index__(self) -> int:
        v = self._host_value("index", "Use .int() and a gather (nn.functional.embedding) "
                                      "to index on the device.")
        if v.size != 1 or v.dtype.kind not in "iu":
            raise TypeError("only integer tensors of a single element can be converted to "
                            "an index")
        return int(v.reshape(()))

    def _host_scalar(self, conversion: str):
        v = self._host_value(conversion, "Use .int() / .float() for a cast on the device.")
        if v.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return v.reshape(()).item()

    def _host_value(self, conversion: str, instead: str) -> np.ndarray:
        """The value for a Python conversion: a variable's host value when it is current,
        else :class:`~autodiff.errors.TracedValueError` (a traced tensor; a variable inside
        an ``ir_for`` body or assigned by the program being traced)."""
        from ..errors import TracedValueError
        if self._var is None:
            what = f"a traced tensor ({self._node!r} traced at {self._node.site})"
        elif TRACER.scope is not TRACER.root:
            what = "a variable inside an ir_for() body (its value changes per iteration)"
        elif self._var in TRACER.root.assigned:
            what = "a variable assigned by the program being traced (its host value is " \
                   "from before that program)"
        else:
            return self.numpy()
        raise TracedValueError(conversion, what, user_site(), instead)

    def numpy(self) -> np.ndarray:
        """The current value (a copy). Traced values have one only after ``execute()``."""
        if self._var is None and self._scope is not None and self._scope.parent is not None:
            raise RuntimeError("this tensor was computed inside a loop iteration and has no "
                               "value outside it; hand it to a Receiver to see its values "
                               f"(traced at {self._node.site})")
        if self._var is None:
            raise RuntimeError("this tensor has no value yet: call autodiff.execute() first "
                               f"(traced at {self._node.site})")
        OWNERS.check(self._var)         # a running execute() owns it: raise or wait
        return self._var.value.copy()

    def item(self) -> float:
        return self.numpy().item()

    def tolist(self):
        return self.numpy().tolist()

    def __repr__(self) -> str:
        if self._var is not None:
            return f"Tensor({self._var.value!r}, requires_grad={self.requires_grad})"
        return f"Tensor(traced {self._node!r} at {self._node.site})"

    # -- autograd -----------------------------------------------------------------
    def backward(self, gradient: "Tensor | None" = None) -> None:
        """Add the backward pass of this tensor to the graph and accumulate ``.grad``.

        A scalar is seeded with 1; any other shape with ones of its shape (the gradient of
        its sum), as the original project did, or with ``gradient`` if given. Calling it
        twice adds to ``.grad`` like PyTorch, also across ``ir_for`` iterations until
        something zeroes it (:mod:`autodiff.graph.grad_state`).

        Raises:
            RuntimeError: the tensor does not require grad.
        """
        root = self.node
        if not root.requires_grad:
            raise RuntimeError("backward(): tensor does not require grad")
        with no_grad():
            seed = (ops.const(1.0, root.shape, root.dtype) if gradient is None
                    else ops.cast(_node_of(gradient), root.dtype))
            if seed.shape != root.shape:
                raise ShapeError("backward", [root.shape, seed.shape], user_site())
            _backward(root, seed, _accumulate)

    def detach(self) -> "Tensor":
        """The same value, cut from the gradient graph."""
        n = self.node
        with no_grad():
            return _wrap(TRACER.emit(n.replace(op=Op.RESHAPE, srcs=(n,), arg=n.shape,
                                               requires_grad=False, site=user_site())))

    def register_post_accumulate_grad_hook(self, hook) -> "_HookHandle":
        """Call ``hook(self)`` each time ``backward()`` has accumulated a gradient into
        this variable's ``.grad`` (``torch.Tensor.register_post_accumulate_grad_hook``;
        hooks run in registration order, while the backward pass is traced). Returns a
        handle whose ``remove()`` unregisters the hook.

        Raises:
            RuntimeError: the tensor is not a variable that requires grad.
        """
        if self._var is None or not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require "
                               "gradient or is not a leaf")
        hooks = self.__dict__.setdefault("_grad_hooks", {})
        handle = _HookHandle(hooks)
        hooks[handle.id] = hook
        return handle

    def register_hook(self, hook) -> "_HookHandle":
        """Call ``hook(grad)`` with this tensor's gradient when ``backward()`` computes it
        (``torch.Tensor.register_hook``). ``grad`` is a traced tensor of this tensor's
        shape and dtype: the hook runs once, while the backward pass is traced (inside an
        ``ir_for`` body: once, and what it traces is part of every iteration). It may
        return a tensor of the same shape and dtype, which replaces the gradient (what
        flows on to this tensor's inputs, or what a leaf accumulates into ``.grad``), or
        ``None``. Hooks run in registration order, each on the previous one's result; a
        leaf's run before its gradient is accumulated (and so before its
        ``register_post_accumulate_grad_hook`` hooks). A hook registered on a traced
        tensor sees the gradient of the value the tensor holds now (PyTorch's rule for a
        tensor later updated in place). Returns a handle whose ``remove()`` unregisters
        the hook (also a context manager).

        Raises:
            RuntimeError: the tensor does not require grad (on registration); later, while
                ``backward()`` is traced, the hook returned a gradient of another shape or
                dtype (the message names both and the ``file:line`` where the hook was
                registered).
            TypeError: (during ``backward()``) the hook returned something other than a
                tensor or ``None``.
        """
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require "
                               "gradient")
        site = user_site()
        if self._var is not None:               # a leaf: run by _accumulate
            hooks = self.__dict__.setdefault("_pre_grad_hooks", {})
            handle = _HookHandle(hooks)
            hooks[handle.id] = (hook, site)
            return handle
        node = self.node
        hooks = _autograd.TENSOR_HOOKS.setdefault(node, {})
        handle = _HookHandle(hooks)
        hooks[handle.id] = lambda g: _run_hook(hook, site, g)
        if _autograd.RETAIN in hooks:           # retain_grad's hook stays last
            hooks[_autograd.RETAIN] = hooks.pop(_autograd.RETAIN)
        return handle

    def retain_grad(self) -> None:
        """Make ``backward()`` fill ``.grad`` of this non-leaf tensor
        (``torch.Tensor.retain_grad``; a no-op on a leaf). ``.grad`` is the gradient after
        the tensor's hooks, and adds up over several ``backward()`` calls. It is a traced
        tensor: read it in the traced program (a ``Receiver``) or, for a tensor traced at
        the top level, with ``.numpy()`` after ``execute()``. After an in-place update it is
        the gradient of the tensor's new value, as in PyTorch.

        Raises:
            RuntimeError: the tensor does not require grad.
        """
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._var is not None:
            return
        self.__dict__["_retains_grad"] = True
        node, ref = self.node, weakref.ref(self)

        def keep(g: Node) -> None:
            t = ref()
            if t is None or t._node is not node:  # gone, or updated in place since
                return
            prev = t._grad
            if prev is not None and prev._var is None and (
                    prev._generation != TRACER.generation or not TRACER.in_scope(prev._scope)):
                prev = None                       # a gradient of a closed loop body
            t.grad = _wrap(g if prev is None else ops.add(prev.node, g))
        _autograd.TENSOR_HOOKS.setdefault(node, {})[_autograd.RETAIN] = keep

    @property
    def retains_grad(self) -> bool:
        """Whether :meth:`retain_grad` was called on this non-leaf tensor."""
        return bool(self.__dict__.get("_retains_grad"))

    def requires_grad_(self, flag: bool = True) -> "Tensor":
        if self._var is None:
            raise RuntimeError("requires_grad_ applies to tensors made from data")
        self.requires_grad = flag
        return self

    # -- in-place updates -----------------------------------------------------------
    def _set(self, value: Node) -> "Tensor":
        """Replace this tensor's value by ``value`` (same shape): a variable gets an
        ``ASSIGN``; a traced tensor simply names the new node from here on (out of place:
        tensors derived from the old value keep it). A view (:meth:`_viewed`: indexing,
        ``view``, a permutation, ``squeeze``...) then writes its new value back into the
        tensor it views, as in PyTorch (``x[0].add_(1)`` changes ``x``)."""
        if value.shape != self.shape:
            raise ShapeError("assign", [self.shape, value.shape], user_site())
        if self._var is not None:
            if self.requires_grad and TRACER.grad_enabled:
                raise RuntimeError("a leaf tensor that requires grad is updated in place; "
                                   "wrap the update in autodiff.no_grad()")
            value = ops.cast(value, self.dtype)
            TRACER.assign(self._var, value, self.requires_grad)
        else:
            self._node, self._scope = value, TRACER.scope
            self._generation = TRACER.generation
            self.requires_grad = value.requires_grad
            if self.__dict__.get("_retains_grad") and value.requires_grad:
                self.retain_grad()              # .grad: the gradient of the new value
        view = self.__dict__.get("_view_of")
        if view is not None:
            base, back = view
            base._set(ops.cast(back(self).node, base.dtype))
        return self

    def _viewed(self, out: "Tensor", back) -> "Tensor":
        """Mark ``out`` as a view of this tensor (what PyTorch returns as a view), with
        ``back(v) -> Tensor``: this tensor's value with the viewed part replaced by ``v``
        (of ``out``'s shape). An in-place update of ``out`` then reaches this tensor
        (:meth:`_set`); other views taken before it keep the values they had."""
        out.__dict__["_view_of"] = (self, back)
        return out

    def copy_(self, src) -> "Tensor":
        return self._set(ops.expand(_node_of(src), self.shape))

    @staticmethod
    def _scaled(other, alpha):
        """``other * alpha`` (``alpha`` of ``add_``/``sub_``), no node when ``alpha`` is 1."""
        if alpha == 1:
            return other
        return (_wrap(ops.scale(other.node, alpha)) if isinstance(other, Tensor)
                and other.is_floating_point() else _bin(Op.MUL, other, alpha))

    def add_(self, other, alpha: float = 1.0) -> "Tensor":
        return self._set_promoted(self + self._scaled(other, alpha))

    def sub_(self, other, alpha: float = 1.0) -> "Tensor":
        return self._set_promoted(self - self._scaled(other, alpha))

    def mul_(self, other) -> "Tensor":
        return self._set_promoted(self * other)

    def div_(self, other) -> "Tensor":
        return self._set_promoted(self / other)

    def zero_(self) -> "Tensor":
        return self._set(ops.const(0, self.shape, self.dtype))

    def fill_(self, value: float) -> "Tensor":
        if dtypes.is_scalar(value):
            return self._set(ops.const(value.item() if hasattr(value, "item") else value,
                                       self.shape, self.dtype))
        return self._set(ops.expand(ops.cast(_node_of(value), self.dtype), self.shape))

    def __iadd__(self, o): return self.add_(o)
    def __isub__(self, o): return self.sub_(o)
    def __imul__(self, o): return self.mul_(o)
    def __itruediv__(self, o): return self.div_(o)

    # -- arithmetic -----------------------------------------------------------------
    def __add__(self, o): return _bin(Op.ADD, self, o)
    def __radd__(self, o): return _bin(Op.ADD, o, self)
    def __sub__(self, o): return _bin(Op.SUB, self, o)
    def __rsub__(self, o): return _bin(Op.SUB, o, self)
    def __mul__(self, o): return _bin(Op.MUL, self, o)
    def __rmul__(self, o): return _bin(Op.MUL, o, self)
    def __truediv__(self, o): return _bin(Op.DIV, self, o)
    def __rtruediv__(self, o): return _bin(Op.DIV, o, self)
    def __pow__(self, o):
        if isinstance(o, numbers.Integral) and not isinstance(o, bool) and o < 0 and \
                dtypes.is_integral(self.dtype):
            raise RuntimeError(f"Integers to negative integer powers are not allowed "
                               f"(traced at {user_site()})")
        return _bin(Op.POW, self, o)
    def __rpow__(self, o): return _bin(Op.POW, o, self)
    def __neg__(self): return _un(Op.NEG, self)
    def __pos__(self): return self.positive()
    def __matmul__(self, o): return matmul(self, o)
    def __rmatmul__(self, o): return matmul(o, self)
    def __lt__(self, o): return _bin(Op.CMPLT, self, o)
    def __le__(self, o): return _bin(Op.CMPLE, self, o)
    def __gt__(self, o): return _bin(Op.CMPGT, self, o)
    def __ge__(self, o): return _bin(Op.CMPGE, self, o)
    def __eq__(self, o): return _bin(Op.CMPEQ, self, o)       # noqa: PLE0307 (torch-like)
    def __ne__(self, o): return _bin(Op.CMPNE, self, o)

    def add(self, o, alpha: float = 1.0):
        return self + (o if alpha == 1 else o * alpha)

    def sub(self, o, alpha: float = 1.0):
        return self - (o if alpha == 1 else o * alpha)

    def addcmul(self, tensor1, tensor2, *, value=1):
        """``self + value * tensor1 * tensor2``."""
        return self + tensor1 * tensor2 * value

    def addcdiv(self, tensor1, tensor2, *, value=1):
        """``self + value * tensor1 / tensor2``."""
        return self + tensor1 / tensor2 * value

    def mul(self, o): return self * o
    def div(self, o, *, rounding_mode=None): return self.divide(o, rounding_mode=rounding_mode)
    def pow(self, o): return self ** o
    def matmul(self, o): return matmul(self, o)
    def lt(self, o): return self < o
    def le(self, o): return self <= o
    def gt(self, o): return self > o
    def ge(self, o): return self >= o
    def eq(self, o): return self == o
    def ne(self, o): return self != o


#: out-of-place methods whose in-place form ``name_`` PyTorch has (``x.clamp_(0, 1)``): the
#: result is written into the tensor (through a view into its base, :meth:`Tensor._set`)
INPLACE = ("clamp", "clamp_min", "clamp_max", "clip", "relu", "sigmoid", "tanh", "exp", "exp2",
           "expm1", "log", "log1p", "log2", "log10", "sqrt", "rsqrt", "abs", "absolute", "neg",
           "negative", "sign", "sgn", "pow", "square", "reciprocal", "floor", "ceil", "trunc",
           "fix", "frac", "round", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
           "asinh", "acosh", "atanh", "erf", "logit", "fmod", "remainder", "atan2", "arctan2",
           "hypot", "copysign", "lerp", "xlogy", "nan_to_num", "tril", "triu", "masked_fill",
           "scatter", "scatter_add", "index_add", "floor_divide", "logical_not", "bitwise_not",
           "addcmul", "addcdiv")


def _inplace(name: str):
    def method(self, *args, **kwargs):
        return self._set_promoted(getattr(self, name)(*args, **kwargs))
    method.__name__ = method.__qualname__ = name + "_"
    method.__doc__ = (f"In-place :meth:`{name}`: this tensor takes the result (which must "
                      f"cast to its dtype under PyTorch's rules, else ``RuntimeError``).")
    return method


for _name in INPLACE:
    setattr(Tensor, _name + "_", _inplace(_name))


# -- module-level helpers --------------------------------------------------------------
def _wrap(node: Node) -> Tensor:
    return Tensor(_node=node)


def _node_of(x, like: Node | None = None) -> Node:
    if isinstance(x, Tensor):
        return x.node
    if dtypes.is_scalar(x):
        x = x.item() if isinstance(x, (np.ndarray, np.generic)) else x
        return ops.const(x, (), dtypes.scalar_dtype(x))
    if isinstance(x, np.ndarray):
        return Tensor(x).node
    raise TypeError(f"expected a Tensor or a number, got {type(x).__name__}")


def _bin(op: Op, a, b) -> Tensor:
    """``op(a, b)`` with PyTorch's type promotion (Python scalars are weak)."""
    return _promoted_binary(op, a, b)


def _un(op: Op, a: Tensor) -> Tensor:
    return _wrap(ops.unary(op, a.node))


def _accumulate(leaf: Node, g: Node) -> None:
    t = leaf.arg.owner() if leaf.arg.owner is not None else None
    if t is None:
        return
    for hook, site in list(t.__dict__.get("_pre_grad_hooks", {}).values()):
        g = _run_hook(hook, site, g)
    prev = grad_state.base(t)
    t.grad = _wrap(g if prev is None else ops.add(prev, g))
    for hook in list(t.__dict__.get("_grad_hooks", {}).values()):
        hook(t)


def _run_hook(hook, site: str, g: Node) -> Node:
    """``hook``'s replacement for gradient ``g`` (``g`` itself when it returns None).

    Raises:
        TypeError: the hook returned something other than a tensor or None.
        RuntimeError: a tensor of another shape or dtype than ``g``'s.
    """
    out = hook(_wrap(g))
    if out is None:
        return g
    name = getattr(hook, "__name__", type(hook).__name__)
    if not isinstance(out, Tensor):
        raise TypeError(f"expected Tensor, but hook '{name}' (registered at {site}) "
                        f"returned '{type(out).__name__}'")
    if out.shape != g.shape:
        raise RuntimeError(f"hook '{name}' (registered at {site}) has changed the size of "
                           f"value: the gradient has shape {list(g.shape)}, the hook "
                           f"returned shape {list(out.shape)}")
    if out.dtype != g.dtype:
        raise RuntimeError(f"hook '{name}' (registered at {site}) has changed the type of "
                           f"value (was {g.dtype} got {out.dtype.name})")
    return out.node


class _HookHandle:
    """What the ``register_*hook`` methods return (``torch.utils.hooks.RemovableHandle``):
    ``remove()`` unregisters the hook (from ``hooks`` and the ``extra`` dicts keyed by the
    handle's ``id``); ``with handle:`` removes it at the end of the block."""
    _next = 0

    def __init__(self, hooks: dict, *extra: dict) -> None:
        self.hooks, self.extra, self.id = hooks, extra, _HookHandle._next
        _HookHandle._next += 1

    def remove(self) -> None:
        for d in (self.hooks, *self.extra):
            d.pop(self.id, None)

    def __enter__(self) -> "_HookHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


def matmul(a, b) -> Tensor:
    """``a @ b`` (2-D, batched N-D with broadcast batch dims, or 1-D like numpy).

    Raises:
        RuntimeError: operands of different dtypes (PyTorch does not promote them:
            :func:`autodiff.graph.mixins.linalg.check_same_dtype`).
    """
    from .mixins.linalg import check_same_dtype
    x, y = _node_of(a), _node_of(b)
    check_same_dtype(x, y)
    return _wrap(ops.dot(x, y))


def where(condition, input, other) -> Tensor:
    """``input`` where ``condition`` (a bool tensor) is true, else ``other``; all three
    broadcast together, ``input`` and ``other`` promoted to one dtype (``torch.where``).
    Either branch may be a Python number.

    Raises:
        DTypeError: ``condition`` is not bool.
    """
    _, (x, y) = _promoted(input, other)
    return _wrap(ops.where(_node_of(condition), x, y))


def concat(tensors, dim: int = 0) -> Tensor:
    """Tensors joined along ``dim`` (``torch.cat``)."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("cat(): expected a non-empty list of Tensors")
    return tensors[0].cat(*tensors[1:], dim=dim)


def stack(tensors, dim: int = 0) -> Tensor:
    """Tensors of one shape joined along a new dim ``dim`` (``torch.stack``)."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack(): expected a non-empty list of Tensors")
    return tensors[0].stack(*tensors[1:], dim=dim)


# torch.* creation functions, bound from the creation mixin's class methods
zeros, ones, full, randn, uniform = Tensor.zeros, Tensor.ones, Tensor.full, Tensor.randn, \
    Tensor.uniform


def tensor(data, requires_grad: bool = False, dtype: str | None = None) -> Tensor:
    """A variable holding a copy of ``data`` (``torch.tensor``)."""
    return Tensor(data, requires_grad, dtype)
