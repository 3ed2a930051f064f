"""``Tensor``: the user-facing handle on a graph IR value, spelled like ``torch.Tensor``.

A tensor is either a *variable* (made from data: ``Tensor(array)``, ``zeros``, ``randn``,
parameters, optimizer state; device-resident, outlives programs) or a *traced value* (the
result of an op; its value exists once :func:`autodiff.execute` has run). Traced values
made inside an ``ir_for`` body live for one iteration only; traced values made at the top
level and still referenced when ``execute()`` runs keep their values and become variables.
"""
from __future__ import annotations

import collections
import numbers
import weakref

import numpy as np

from ..errors import ShapeError
from . import ops
from .autograd import backward as _backward
from .ir import Node, Op, Variable
from .trace import OWNERS, TRACER, no_grad, user_site

_DTYPES = {"float32": np.float32, "int32": np.int32}
_rng = [np.random.default_rng(0)]

MaxResult = collections.namedtuple("MaxResult", ["values", "indices"])


def manual_seed(seed: int) -> None:
    """Seed the generator used by ``randn``/``uniform``/module initialisation."""
    _rng[0] = np.random.default_rng(seed)


def default_rng() -> np.random.Generator:
    return _rng[0]


def _as_array(data, dtype=None) -> np.ndarray:
    if hasattr(data, "detach") and hasattr(data, "cpu"):      # a torch tensor
        data = data.detach().cpu().numpy()
    arr = np.asarray(data)
    if dtype is None:
        dtype = "int32" if np.issubdtype(arr.dtype, np.integer) else "float32"
    if dtype not in _DTYPES:
        raise TypeError(f"dtype must be one of {sorted(_DTYPES)}, got {dtype!r}")
    return np.asarray(arr, dtype=_DTYPES[dtype], order="C")   # keeps 0-d arrays 0-d


class Tensor:
    """An n-dimensional float32 (or int32) array on the device.

    Args:
        data: array-like (numpy array, nested lists, a torch tensor); float data becomes
            float32, integer data int32 unless ``dtype`` says otherwise.
        requires_grad: whether ``backward()`` accumulates a gradient into ``.grad``.
        dtype: ``"float32"`` or ``"int32"``.
        name: shown by printers.
    """
    __array_priority__ = 1000   # numpy scalars defer to our operators

    def __init__(self, data=None, requires_grad: bool = False, dtype: str | None = None,
                 name: str | None = None, *, _node: Node | None = None):
        self.grad: Tensor | None = None
        self.name = name
        self._node = _node
        self._var: Variable | None = None
        self._scope = TRACER.scope if _node is not None else None
        self._generation = TRACER.generation
        if _node is None:
            self._var = Variable(_as_array(data, dtype), name)
            self._var.owner = weakref.ref(self)
            self.requires_grad = bool(requires_grad)
            if self.requires_grad and self._var.dtype != "float32":
                raise TypeError("only float32 tensors can require gradients")
        else:
            self.requires_grad = _node.requires_grad
            if TRACER.scope is TRACER.root:
                TRACER.outputs.add(self)

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
    def dtype(self) -> str:
        return self._var.dtype if self._var is not None else self._node.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return self.ndim

    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def __len__(self) -> int:
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
        twice adds to ``.grad`` like PyTorch. Gradients do not outlive a loop iteration:
        ``.grad`` set inside an ``ir_for`` body is the current iteration's.

        Raises:
            RuntimeError: the tensor does not require grad.
        """
        root = self.node
        if not root.requires_grad:
            raise RuntimeError("backward(): tensor does not require grad")
        with no_grad():
            seed = ops.const(1.0, root.shape) if gradient is None else _node_of(gradient)
            if seed.shape != root.shape:
                raise ShapeError("backward", [root.shape, seed.shape], user_site())
            _backward(root, seed, _accumulate)

    def detach(self) -> "Tensor":
        """The same value, cut from the gradient graph."""
        n = self.node
        with no_grad():
            return _wrap(TRACER.emit(n.replace(op=Op.RESHAPE, srcs=(n,), arg=n.shape,
                                               requires_grad=False, site=user_site())))

    def requires_grad_(self, flag: bool = True) -> "Tensor":
        if self._var is None:
            raise RuntimeError("requires_grad_ applies to tensors made from data")
        self.requires_grad = flag
        return self

    # -- in-place updates -----------------------------------------------------------
    def _set(self, value: Node) -> "Tensor":
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
            self.requires_grad = value.requires_grad
        return self

    def copy_(self, src) -> "Tensor":
        return self._set(ops.expand(_node_of(src), self.shape))

    def add_(self, other, alpha: float = 1.0) -> "Tensor":
        o = _node_of(other)
        return self._set(ops.add(self.node, o if alpha == 1 else ops.scale(o, alpha)))

    def sub_(self, other, alpha: float = 1.0) -> "Tensor":
        return self.add_(other, -alpha)

    def mul_(self, other) -> "Tensor":
        return self._set(ops.mul(self.node, _node_of(other)))

    def div_(self, other) -> "Tensor":
        return self._set(ops.div(self.node, _node_of(other)))

    def zero_(self) -> "Tensor":
        return self._set(ops.const(0.0, self.shape))

    def fill_(self, value: float) -> "Tensor":
        return self._set(ops.const(value, self.shape))

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
    def __pow__(self, o): return _bin(Op.POW, self, o)
    def __rpow__(self, o): return _bin(Op.POW, o, self)
    def __neg__(self): return _un(Op.NEG, self)
    def __pos__(self): return self
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

    def mul(self, o): return self * o
    def div(self, o): return self / o
    def pow(self, o): return self ** o
    def matmul(self, o): return matmul(self, o)
    def maximum(self, o): return _bin(Op.MAX, self, o)
    def minimum(self, o): return _bin(Op.MIN, self, o)
    def lt(self, o): return self < o
    def le(self, o): return self <= o
    def gt(self, o): return self > o
    def ge(self, o): return self >= o
    def eq(self, o): return self == o
    def ne(self, o): return self != o

    def exp(self): return _un(Op.EXP, self)
    def log(self): return _un(Op.LOG, self)
    def exp2(self): return _un(Op.EXP2, self)
    def log2(self): return _un(Op.LOG2, self)
    def sqrt(self): return _un(Op.SQRT, self)
    def rsqrt(self): return _un(Op.RSQRT, self)
    def reciprocal(self): return _un(Op.RECIP, self)
    def sin(self): return _un(Op.SIN, self)
    def cos(self): return _un(Op.COS, self)
    def tanh(self): return _un(Op.TANH, self)
    def sigmoid(self): return _un(Op.SIGMOID, self)
    def relu(self): return _un(Op.RELU, self)
    def abs(self): return _un(Op.ABS, self)
    def erf(self): return _un(Op.ERF, self)
    def sign(self): return _un(Op.SIGN, self)
    def neg(self): return -self
    def square(self): return self * self

    def clamp(self, min=None, max=None):
        out = self
        if min is not None:
            out = out.maximum(min)
        if max is not None:
            out = out.minimum(max)
        return out

    clip = clamp

    def float(self) -> "Tensor":
        return _wrap(ops.cast(self.node, "float32"))

    def int(self) -> "Tensor":
        return _wrap(ops.cast(self.node, "int32"))

    def to(self, dtype) -> "Tensor":
        return _wrap(ops.cast(self.node, str(np.dtype(dtype)) if dtype is not None else self.dtype))

    # -- reductions -----------------------------------------------------------------
    def sum(self, dim=None, keepdim: bool = False) -> "Tensor":
        """Sum over ``dim`` (an int, a tuple, or None for all dims)."""
        return _reduce(Op.SUM, self, dim, keepdim)

    def mean(self, dim=None, keepdim: bool = False) -> "Tensor":
        s = self.sum(dim, keepdim)
        return s * (s.numel() / self.numel()) if self.numel() else s * float("nan")

    def var(self, dim=None, keepdim: bool = False, unbiased: bool = True,
            correction: int | None = None) -> "Tensor":
        corr = correction if correction is not None else (1 if unbiased else 0)
        n = self.numel() // max(self.mean(dim, keepdim=True).numel(), 1)
        d = self - self.mean(dim, keepdim=True)
        return (d * d).sum(dim, keepdim) * (1.0 / (n - corr) if n > corr else float("nan"))

    def amax(self, dim=None, keepdim: bool = False) -> "Tensor":
        return _reduce(Op.RMAX, self, dim, keepdim)

    def amin(self, dim=None, keepdim: bool = False) -> "Tensor":
        return -(-self).amax(dim, keepdim)

    def max(self, dim=None, keepdim: bool = False):
        """Maximum of all elements (``dim=None``, a scalar tensor), or ``(values, indices)``
        along ``dim`` like ``torch.max`` (indices: int32, first maximal position)."""
        if dim is None:
            return self.amax()
        if isinstance(dim, Tensor):
            return self.maximum(dim)
        return _select(self, self.amax(dim, keepdim=True), dim, keepdim)

    def min(self, dim=None, keepdim: bool = False):
        if dim is None:
            return self.amin()
        if isinstance(dim, Tensor):
            return self.minimum(dim)
        return _select(self, self.amin(dim, keepdim=True), dim, keepdim)

    def argmax(self, dim: int, keepdim: bool = False) -> "Tensor":
        return _argext(self, self.amax(dim, keepdim=True), dim, keepdim)

    # -- movement -------------------------------------------------------------------
    def reshape(self, *shape) -> "Tensor":
        return _wrap(ops.reshape(self.node, _shape_args(shape)))

    view = reshape

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> "Tensor":
        s = list(self.shape)
        if not s:
            return self.reshape(1)
        a, b = start_dim % len(s), end_dim % len(s)
        return self.reshape(*s[:a], -1, *s[b + 1:])

    def permute(self, *dims) -> "Tensor":
        return _wrap(ops.permute(self.node, _shape_args(dims)))

    def transpose(self, dim0: int, dim1: int) -> "Tensor":
        perm = list(range(self.ndim))
        perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
        return self.permute(*perm)

    @property
    def T(self) -> "Tensor":
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self) -> "Tensor":
        return self.transpose(-2, -1)

    def t(self) -> "Tensor":
        return self.T

    def broadcast_to(self, *shape) -> "Tensor":
        return _wrap(ops.expand(self.node, _shape_args(shape)))

    expand = broadcast_to

    def expand_as(self, other: "Tensor") -> "Tensor":
        return self.broadcast_to(other.shape)

    def unsqueeze(self, dim: int) -> "Tensor":
        s = list(self.shape)
        s.insert(dim % (len(s) + 1), 1)
        return self.reshape(*s)

    def squeeze(self, dim=None) -> "Tensor":
        s = list(self.shape)
        if dim is None:
            return self.reshape(*[d for d in s if d != 1])
        dims = {d % len(s) for d in ((dim,) if isinstance(dim, int) else dim)}
        return self.reshape(*[d for i, d in enumerate(s) if not (i in dims and d == 1)])

    def contiguous(self) -> "Tensor":
        return self

    def index(self, dim: int, start: int, stop: int) -> "Tensor":
        """Elements ``start:stop`` of dim ``dim`` (the original project's ``index``)."""
        spec = [(0, d, 1) for d in self.shape]
        spec[dim % self.ndim] = (start, stop, 1)
        return _wrap(ops.slice_(self.node, spec))

    def __getitem__(self, key) -> "Tensor":
        if isinstance(key, Tensor):
            return _wrap(ops.gather(self.node, key.node))
        key = key if isinstance(key, tuple) else (key,)
        if sum(k is Ellipsis for k in key) > 1:
            raise IndexError("only one Ellipsis allowed")
        n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
        if n_real > self.ndim:
            raise ShapeError("getitem", [self.shape], user_site(), f"too many indices: {key}")
        if any(k is Ellipsis for k in key):
            i = next(j for j, k in enumerate(key) if k is Ellipsis)
            key = key[:i] + (slice(None),) * (self.ndim - n_real) + key[i + 1:]
        else:
            key = key + (slice(None),) * (self.ndim - n_real)
        spec, out_shape, d = [], [], 0
        for k in key:
            if k is None:
                out_shape.append(1)
                continue
            size = self.shape[d]
            if isinstance(k, slice):
                if k.step not in (None, 1):
                    raise ShapeError("getitem", [self.shape], user_site(),
                                     f"slice step {k.step} is not supported")
                a, b, _ = k.indices(size)
                b = max(a, b)
                spec.append((a, b, 1))
                out_shape.append(b - a)
            elif isinstance(k, numbers.Integral):
                i = int(k) + size if k < 0 else int(k)
                if not 0 <= i < size:
                    raise ShapeError("getitem", [self.shape], user_site(),
                                     f"index {k} out of range for dim {d} of size {size}")
                spec.append((i, i + 1, 1))
            else:
                raise TypeError(f"unsupported index {k!r}")
            d += 1
        return _wrap(ops.reshape(ops.slice_(self.node, spec), out_shape))

    # -- activations and helpers used by nn ---------------------------------------------
    def softmax(self, dim: int = -1) -> "Tensor":
        e = (self - self.amax(dim, keepdim=True).detach()).exp()
        return e / e.sum(dim, keepdim=True)

    def log_softmax(self, dim: int = -1) -> "Tensor":
        z = self - self.amax(dim, keepdim=True).detach()
        return z - z.exp().sum(dim, keepdim=True).log()


# -- module-level helpers --------------------------------------------------------------
def _wrap(node: Node) -> Tensor:
    return Tensor(_node=node)


def _node_of(x, like: Node | None = None) -> Node:
    if isinstance(x, Tensor):
        return x.node
    if isinstance(x, (numbers.Number, np.number)) or (isinstance(x, np.ndarray) and x.ndim == 0):
        return ops.const(float(x), ())
    if isinstance(x, np.ndarray):
        return Tensor(x).node
    raise TypeError(f"expected a Tensor or a number, got {type(x).__name__}")


def _bin(op: Op, a, b) -> Tensor:
    return _wrap(ops.binary(op, _node_of(a), _node_of(b)))


def _un(op: Op, a: Tensor) -> Tensor:
    return _wrap(ops.unary(op, a.node))


def _dims(t: Tensor, dim) -> list[int]:
    if dim is None:
        return list(range(t.ndim))
    return [dim] if isinstance(dim, int) else list(dim)


def _reduce(op: Op, t: Tensor, dim, keepdim: bool) -> Tensor:
    dims = _dims(t, dim)
    node = ops.reduce(op, t.node, dims)
    if not keepdim:
        keep = {d % max(t.ndim, 1) for d in dims}
        node = ops.reshape(node, [d for i, d in enumerate(t.shape) if i not in keep])
    return _wrap(node)


def _argext(t: Tensor, values: Tensor, dim: int, keepdim: bool) -> Tensor:
    """Index of the first element equal to ``values`` along ``dim`` (int32)."""
    n = t.shape[dim]
    shape = [1] * t.ndim
    shape[dim % t.ndim] = n
    rev = Tensor(np.arange(n, 0, -1, dtype=np.float32).reshape(shape))   # n .. 1
    with no_grad():
        hit = where(t == values, rev, 0.0)
        first = (n - hit.amax(dim, keepdim=keepdim))
    return first.int()


def _select(t: Tensor, values: Tensor, dim: int, keepdim: bool) -> MaxResult:
    """``(values, indices)`` of ``torch.max/min(t, dim)`` given the extreme ``values``
    (keepdim). As in torch, the gradient reaches only the element at the returned index,
    not every tied element (``amax`` splits it among ties)."""
    idx = _argext(t, values, dim, keepdim=True)
    shape = [1] * t.ndim
    shape[dim % t.ndim] = t.shape[dim]
    pos = Tensor(np.arange(t.shape[dim], dtype=np.float32).reshape(shape))
    with no_grad():
        hit = pos == idx.float()
    picked = where(hit, t, 0.0).sum(dim, keepdim=keepdim)   # one element plus zeros: exact
    return MaxResult(picked, idx if keepdim else idx.squeeze(dim))


def _shape_args(args) -> tuple:
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)


def _accumulate(leaf: Node, g: Node) -> None:
    t = leaf.arg.owner() if leaf.arg.owner is not None else None
    if t is None:
        return
    if t.grad is not None and t.grad._var is None and TRACER.in_scope(t.grad._scope) \
            and t.grad._generation == TRACER.generation:
        t.grad = _wrap(ops.add(t.grad.node, g))
    else:
        t.grad = _wrap(g)


def matmul(a, b) -> Tensor:
    """``a @ b`` (2-D, batched N-D with broadcast batch dims, or 1-D like numpy)."""
    return _wrap(ops.dot(_node_of(a), _node_of(b)))


def where(cond, a, b) -> Tensor:
    """``a`` where ``cond`` is nonzero, else ``b``; all three broadcast together."""
    return _wrap(ops.where(_node_of(cond), _node_of(a), _node_of(b)))


def concat(tensors, dim: int = 0) -> Tensor:
    """Tensors joined along ``dim`` (``torch.cat``)."""
    return _wrap(ops.concat([t.node for t in tensors], dim))


def stack(tensors, dim: int = 0) -> Tensor:
    return concat([t.unsqueeze(dim) for t in tensors], dim)


def zeros(*shape, requires_grad: bool = False, dtype: str = "float32") -> Tensor:
    return Tensor(np.zeros(_shape_args(shape)), requires_grad, dtype)


def ones(*shape, requires_grad: bool = False, dtype: str = "float32") -> Tensor:
    return Tensor(np.ones(_shape_args(shape)), requires_grad, dtype)


def full(shape, value: float, requires_grad: bool = False, dtype: str = "float32") -> Tensor:
    return Tensor(np.full(tuple(shape), value), requires_grad, dtype)


def randn(*shape, requires_grad: bool = False, seed: int | None = None) -> Tensor:
    """Standard normal samples; ``seed`` or the global generator (:func:`manual_seed`)."""
    rng = np.random.default_rng(seed) if seed is not None else _rng[0]
    return Tensor(rng.standard_normal(_shape_args(shape)), requires_grad)


def uniform(*shape, low: float = 0.0, high: float = 1.0, requires_grad: bool = False,
            seed: int | None = None) -> Tensor:
    """Samples from U[low, high); ``seed`` or the global generator."""
    rng = np.random.default_rng(seed) if seed is not None else _rng[0]
    return Tensor(rng.uniform(low, high, _shape_args(shape)), requires_grad)


def tensor(data, requires_grad: bool = False, dtype: str | None = None) -> Tensor:
    return Tensor(data, requires_grad, dtype)
