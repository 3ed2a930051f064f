"""Creation: tensors made from data, shapes and random draws (``zeros``, ``arange``, ...).

Creation functions make *variables*: device-resident data uploaded once, never a
per-iteration host transfer. They are class methods of ``Tensor`` exported as
``autodiff.zeros`` etc., like ``torch.zeros``. Exceptions, each traced instead of stored:
``*_like`` of a traced tensor is a constant fill (``zeros_like``, ``full_like``) or a
counter-based draw that is new in every loop iteration (``rand_like``, ``randn_like``, like
:func:`autodiff.nn.functional.dropout`); ``tril``/``triu`` masks are comparisons of two
index vectors (no ``n x m`` buffer).
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import dtypes, ops

_rng = [np.random.default_rng(0)]
_CONSTS: dict = {}      # (dtype, shape, bytes) -> Tensor: internal constants, shared
_CONSTS_MAX = 512


def manual_seed(seed: int) -> None:
    """Seed the generator used by ``randn``/``uniform``/module initialisation."""
    _rng[0] = np.random.default_rng(seed)


def default_rng() -> np.random.Generator:
    return _rng[0]


def shape_args(args) -> tuple:
    """``f(2, 3)``, ``f((2, 3))`` and ``f([2, 3])`` all mean shape ``(2, 3)``."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(int(d) for d in args[0])
    return tuple(int(d) for d in args)


def _dtype_of(dtype, *values) -> str:
    """``dtype``, else as PyTorch infers it from Python values: bool if every value is a
    bool, int64 if every value is an integer, else float32."""
    if dtype is not None:
        return dtypes.name(dtype)
    if all(isinstance(v, (bool, np.bool_)) for v in values):
        return "bool"
    ints = all(isinstance(v, numbers.Integral) for v in values)
    return "int64" if ints else "float32"


class CreationMixin:
    @classmethod
    def _const(cls, array):
        """A variable holding the internal constant ``array`` (positions, masks, index
        offsets), one per distinct value: uploaded once, and equal constants are one node,
        so CSE merges the ops built on them."""
        a = np.ascontiguousarray(array)
        key = (a.dtype.str, a.shape, a.tobytes())
        t = _CONSTS.get(key)
        if t is None:
            if len(_CONSTS) >= _CONSTS_MAX:
                _CONSTS.clear()
            t = _CONSTS[key] = cls(a, name="const")
        return t

    @classmethod
    def zeros(cls, *shape, requires_grad: bool = False, dtype: str = "float32"):
        """A variable of zeros (``torch.zeros``)."""
        return cls(np.zeros(shape_args(shape)), requires_grad, dtype)

    @classmethod
    def ones(cls, *shape, requires_grad: bool = False, dtype: str = "float32"):
        """A variable of ones (``torch.ones``)."""
        return cls(np.ones(shape_args(shape)), requires_grad, dtype)

    @classmethod
    def empty(cls, *shape, requires_grad: bool = False, dtype: str = "float32"):
        """A variable of ``shape`` (zeros: uninitialised memory is never exposed)."""
        return cls.zeros(*shape, requires_grad=requires_grad, dtype=dtype)

    @classmethod
    def full(cls, shape, fill_value, requires_grad: bool = False, dtype: str | None = None):
        """A variable of ``shape`` filled with ``fill_value`` (``torch.full``; int64 for an
        integer ``fill_value``, bool for a bool, unless ``dtype`` is given)."""
        shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
        return cls(np.full(shape, fill_value), requires_grad, _dtype_of(dtype, fill_value))

    @classmethod
    def arange(cls, start, end=None, step=1, *, dtype=None, requires_grad: bool = False):
        """``start, start + step, ...`` below ``end`` (``torch.arange``; one argument is
        ``end``). int64 when every argument is an integer, else float32.

        Raises:
            RuntimeError: ``step`` is zero or has the wrong sign.
        """
        if end is None:
            start, end = 0, start
        if step == 0 or (end - start) * step < 0:
            raise RuntimeError(f"arange: upper bound and larger bound inconsistent with step "
                               f"sign (start={start}, end={end}, step={step})")
        dt = _dtype_of(dtype, start, end, step)
        n = max(math.ceil((end - start) / step), 0)
        return cls(start + np.arange(n, dtype=np.float64) * step, requires_grad, dt)

    @classmethod
    def linspace(cls, start, end, steps: int, *, dtype=None, requires_grad: bool = False):
        """``steps`` evenly spaced values from ``start`` to ``end`` inclusive, computed as
        PyTorch does (the second half counted back from ``end``)."""
        steps = int(steps)
        if steps < 0:
            raise RuntimeError("linspace: number of steps must be non-negative")
        i = np.arange(steps, dtype=np.float64)
        step = (end - start) / (steps - 1) if steps > 1 else 0.0
        v = np.where(i < steps // 2, start + i * step, end - (steps - 1 - i) * step)
        return cls(v, requires_grad, _dtype_of(dtype if dtype is not None else "float32"))

    @classmethod
    def eye(cls, n: int, m: int | None = None, *, dtype=None, requires_grad: bool = False):
        """The ``n x m`` identity matrix (``m`` defaults to ``n``)."""
        return cls(np.eye(n, n if m is None else m), requires_grad,
                   _dtype_of(dtype if dtype is not None else "float32"))

    @classmethod
    def rand(cls, *shape, requires_grad: bool = False, seed: int | None = None):
        """Samples from U[0, 1) (data, drawn now; see :meth:`rand_like` for draws that are
        new in every loop iteration)."""
        return cls.uniform(*shape, requires_grad=requires_grad, seed=seed)

    @classmethod
    def randn(cls, *shape, requires_grad: bool = False, seed: int | None = None):
        """Standard normal samples; ``seed`` or the global generator (:func:`manual_seed`)."""
        rng = np.random.default_rng(seed) if seed is not None else _rng[0]
        return cls(rng.standard_normal(shape_args(shape)), requires_grad)

    @classmethod
    def uniform(cls, *shape, low: float = 0.0, high: float = 1.0, requires_grad: bool = False,
                seed: int | None = None):
        """Samples from U[low, high); ``seed`` or the global generator."""
        rng = np.random.default_rng(seed) if seed is not None else _rng[0]
        return cls(rng.uniform(low, high, shape_args(shape)), requires_grad)

    @classmethod
    def meshgrid(cls, *tensors, indexing: str = "ij"):
        """Coordinate grids of 1-D (or 0-d) tensors, each expanded to the grid shape (views);
        ``indexing="xy"`` swaps the first two grid dims, as ``numpy.meshgrid``."""
        if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
            tensors = tuple(tensors[0])
        if indexing not in ("ij", "xy"):
            raise RuntimeError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
        ts = [t.reshape(-1) for t in tensors]
        swap = indexing == "xy" and len(ts) >= 2
        if swap:
            ts[0], ts[1] = ts[1], ts[0]
        shape = tuple(t.shape[0] for t in ts)
        out = []
        for i, t in enumerate(ts):
            view = [1] * len(ts)
            view[i] = shape[i]
            out.append(t.reshape(view).expand(shape))
        if swap:
            out[0], out[1] = out[1], out[0]
        return tuple(out)

    # -- *_like --------------------------------------------------------------------------
    def _fill(self, value, dtype=None):
        dt = _dtype_of(dtype, value) if dtype is not None else self.dtype
        return self._wrap(ops.const(value, self.shape, dt))

    def zeros_like(self, dtype=None):
        """Zeros of this tensor's shape (a constant fill; ``torch.zeros_like``)."""
        return self._fill(0, dtype)

    def ones_like(self, dtype=None):
        return self._fill(1, dtype)

    def full_like(self, fill_value, dtype=None):
        return self._fill(fill_value, dtype)

    empty_like = zeros_like

    def rand_like(self, *, seed: int | None = None, stream: int = 0):
        """U[0, 1) samples of this shape, new in every loop iteration (a Philox draw keyed
        by ``seed``, default from the global generator, as :func:`~autodiff.nn.functional.dropout`)."""
        if seed is None:
            seed = int(_rng[0].integers(0, 2 ** 32))
        return self._wrap(ops.rand(self.shape, seed, stream))

    def randn_like(self, *, seed: int | None = None, stream: int = 0):
        """Standard normal samples of this shape, new in every loop iteration (Box-Muller on
        two Philox draws: ``sqrt(-2 log(1 - u1)) cos(2 pi u2)``)."""
        if seed is None:
            seed = int(_rng[0].integers(0, 2 ** 32))
        u1 = self._wrap(ops.rand(self.shape, seed, 2 * stream))
        u2 = self._wrap(ops.rand(self.shape, seed, 2 * stream + 1))
        return ((1.0 - u1).log() * -2.0).sqrt() * (u2 * (2.0 * math.pi)).cos()

    # -- new_* ----------------------------------------------------------------------------
    def _new(self, shape, value, dtype, requires_grad: bool):
        """A new tensor of ``shape`` filled with ``value``, of ``dtype`` (default: this
        tensor's), like ``torch.full(shape, value, dtype=...)``: a variable at the top level
        of a program (data, as :meth:`zeros`), a constant fill inside a loop or branch body
        (fresh in every iteration, where PyTorch would allocate it in every iteration too)
        unless it requires grad."""
        from ..trace import TRACER
        dt = dtypes.name(dtype) if dtype is not None else self.dtype.name
        shape = tuple(int(d) for d in shape)
        if requires_grad or TRACER.scope is TRACER.root:
            return type(self)(np.full(shape, value), requires_grad, dt)
        return self._wrap(ops.const(value, shape, dt))

    def new_zeros(self, *size, dtype=None, device=None, requires_grad: bool = False,
                  layout=None, pin_memory: bool = False):
        """Zeros of ``size`` (``x.new_zeros(2, 3)`` or ``((2, 3))``) of this tensor's dtype
        unless ``dtype`` is given (``torch.Tensor.new_zeros``; see :meth:`_new`)."""
        return self._new(shape_args(size), 0, dtype, requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad: bool = False,
                 layout=None, pin_memory: bool = False):
        """Ones of ``size`` of this tensor's dtype unless ``dtype`` is given."""
        return self._new(shape_args(size), 1, dtype, requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad: bool = False,
                  layout=None, pin_memory: bool = False):
        """A tensor of ``size`` (zeros: uninitialised memory is never exposed)."""
        return self._new(shape_args(size), 0, dtype, requires_grad)

    def new_full(self, size, fill_value, *, dtype=None, device=None,
                 requires_grad: bool = False, layout=None, pin_memory: bool = False):
        """``fill_value`` in a tensor of ``size``, of this tensor's dtype unless ``dtype`` is
        given (a float into an integer dtype truncates, as PyTorch)."""
        size = (size,) if isinstance(size, numbers.Integral) else tuple(size)
        return self._new(size, fill_value, dtype, requires_grad)

    def new_tensor(self, data, dtype=None, device=None, requires_grad: bool = False,
                   layout=None, pin_memory: bool = False):
        """A tensor made from ``data`` (a copy), of this tensor's dtype unless ``dtype`` is
        given (``torch.Tensor.new_tensor``: ``int_tensor.new_tensor([1.5])`` is ``[1]``).
        A traced tensor as ``data`` gives its detached value (``clone().detach()``)."""
        dt = dtype if dtype is not None else self.dtype
        if hasattr(data, "node") and hasattr(data, "_var"):
            from .scan import known_values
            known = known_values(data)
            if known is None:
                if requires_grad:
                    raise RuntimeError("new_tensor(requires_grad=True): the data is a traced "
                                       "tensor, whose values exist only when the program "
                                       "runs; a tensor that requires grad is made from data")
                return data.detach().to(dt)
            data = known
        return type(self)(data, requires_grad, dt)

    # -- triangles -----------------------------------------------------------------------
    def _tri_mask(self, diagonal: int, upper: bool):
        if self.ndim < 2:
            raise RuntimeError(f"tril/triu: input tensor must have at least 2 dimensions, got "
                               f"{self.ndim}")
        n, m = self.shape[-2:]
        rows = self._const(np.arange(n, dtype=np.float32).reshape(n, 1) + diagonal)
        cols = self._const(np.arange(m, dtype=np.float32).reshape(1, m))
        return cols >= rows if upper else cols <= rows

    def tril(self, diagonal: int = 0):
        """Elements on and below diagonal ``diagonal`` of the last two dims; zeros above."""
        return self.where(self._tri_mask(diagonal, False), self._zero())

    def triu(self, diagonal: int = 0):
        """Elements on and above diagonal ``diagonal`` of the last two dims; zeros below."""
        return self.where(self._tri_mask(diagonal, True), self._zero())

    def _zero(self):
        return self._wrap(ops.const(0, (), self.dtype))
