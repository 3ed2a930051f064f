"""``torch.linalg``'s composite functions: ``vector_norm``, ``matrix_norm``, ``norm``,
``vecdot``, ``multi_dot``, ``matmul``, ``diagonal``, ``cross``, ``vander`` (and
``torch.vander``), ``cond``, ``tensorinv``, ``tensorsolve``, built from existing graph ops
(their gradients are those of the ops), with PyTorch's argument checks and messages.

The norms need no factorisation except ``matrix_norm``'s ``ord`` = 2, -2 and ``'nuc'``
(the largest/smallest singular value, their sum), which need an SVD autodiff lacks: they
raise ``NotImplementedError``, as do ``cond``'s ``p`` = None (PyTorch's default, the 2-norm
condition number), 2, -2 and ``'nuc'``. ``cond`` for ``p`` in ``'fro'``, ±1, ±inf is
``matrix_norm(A, p) * matrix_norm(inv(A), p)`` as PyTorch computes it (``inf`` where the
elimination finds ``A`` singular).
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import dtypes, ops
from ..trace import no_grad
from ..mixins.dims import norm_dim
from ..mixins.linalg import _CPP_NAMES, _SCALAR_NAMES
from .lu import _site

_FLOATS = ("float32", "float16", "bfloat16")
#: the dtypes each dtype converts to without narrowing (PyTorch's ``canCast`` for the
#: ``dtype=`` argument of the norms)
_WIDER = {"float16": ("float16", "float32"), "bfloat16": ("bfloat16", "float32"),
          "float32": ("float32",)}


def _scalar(dt) -> str:
    n = dtypes.name(dt)
    return _SCALAR_NAMES.get(n, n)


def _float_input(x, name: str) -> None:
    if dtypes.name(x.dtype) not in _FLOATS:
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got "
                           f"{_scalar(x.dtype)}{_site()}")


def _with_dtype(x, dtype, name: str):
    """``x`` converted to ``dtype`` (None: as it is), PyTorch's checks of the argument."""
    if dtype is None:
        return x
    dt = dtypes.name(dtypes.get(dtype))
    if dt not in _FLOATS:
        raise RuntimeError(f"{name}: dtype should be floating point or complex, but got "
                           f"{_SCALAR_NAMES.get(dt, dt)}{_site()}")
    if dt not in _WIDER[dtypes.name(x.dtype)]:
        raise RuntimeError(f"{name}: the dtype of the input ({_scalar(x.dtype)}) should be "
                           f"convertible without narrowing to the specified dtype "
                           f"({_SCALAR_NAMES[dt]}){_site()}")
    return x.to(dtypes.get(dtype))


def _ord_text(o) -> str:
    if isinstance(o, float) and o.is_integer():
        return str(int(o))
    return str(o)


def _dims(x, dim):
    """``dim`` (None, an int, or a sequence; empty = all) as a sorted tuple of
    non-negative dims."""
    if dim is None:
        return tuple(range(x.ndim))
    if isinstance(dim, numbers.Integral):
        dim = (int(dim),)
    dim = tuple(int(d) for d in dim)
    if not dim:
        return tuple(range(x.ndim))
    return tuple(sorted(norm_dim(d, max(x.ndim, 1), x.shape) for d in dim))


# -- norms -------------------------------------------------------------------------------------
def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None):
    """The vector ``ord``-norm of ``x`` over ``dim`` (``torch.linalg.vector_norm``): all
    elements as one vector when ``dim`` is None (or ``()``); ``ord`` any number: ``inf``
    (largest magnitude), ``-inf`` (smallest), 0 (count of nonzeros), else ``(sum
    |x|^ord)^(1/ord)``. float32/float16/bfloat16 (``dtype``: computed in that dtype);
    gradients those of the composition (0 at a zero vector for ``ord`` = 2, as PyTorch's).

    Raises:
        TypeError: a string ``ord``. RuntimeError: an integer or bool input or ``dtype``,
            a ``dtype`` narrower than the input's; ``ord`` < 0 or ``inf`` over an empty
            dim. IndexError: ``dim`` out of range.
    """
    name = "linalg.vector_norm"
    if isinstance(ord, str) or not isinstance(ord, numbers.Real):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' must be Number, not "
                        f"{type(ord).__name__}")
    _float_input(x, name)
    x = _with_dtype(x, dtype, name)
    dims = _dims(x, dim)
    ord = float(ord)
    if ord < 0 or ord == math.inf:
        if dim is None or (not isinstance(dim, numbers.Integral) and not tuple(dim)):
            if x.numel() == 0:
                raise RuntimeError(f"{name} cannot compute the {_ord_text(ord)} norm on an "
                                   f"empty tensor because the operation does not have an "
                                   f"identity{_site()}")
        else:
            for d in dims:
                if x.shape[d] == 0:
                    raise RuntimeError(f"{name} cannot compute the {_ord_text(ord)} norm on "
                                       f"the dimension {d}because this dimension is empty and "
                                       f"the operation does not have an identity{_site()}")
    if x.ndim == 0:                                  # a number: its magnitude
        out = x.reshape(1).norm(ord, 0, False)
        return out.reshape(())
    return x.norm(ord, dims, keepdim)


_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)


def _matrix_dims(a, dim, name: str):
    if isinstance(dim, numbers.Integral) or len(tuple(dim)) != 2:
        got = dim if isinstance(dim, numbers.Integral) else tuple(dim)
        shown = got if isinstance(got, numbers.Integral) else (got[0] if len(got) == 1
                                                                else list(got))
        raise RuntimeError(f"{name}: dim must be a 2-tuple. Got {shown}{_site()}")
    d0, d1 = (norm_dim(int(d), a.ndim, a.shape) for d in dim)
    if d0 == d1:
        raise RuntimeError(f"{name}: dims must be different. Got ({dim[0]}, {dim[1]})"
                           f"{_site()}")
    return d0, d1


def matrix_norm(a, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None):
    """The matrix ``ord``-norm of ``a`` ``[..., m, n]`` over the two dims ``dim``
    (``torch.linalg.matrix_norm``): ``'fro'`` (the Frobenius norm), 1 / -1 (the
    largest / smallest column sum of magnitudes), ``inf`` / ``-inf`` (row sums).

    Raises:
        RuntimeError: rank < 2, ``dim`` not two different dims, an unknown ``ord``, an
            integer/bool input or ``dtype``. NotImplementedError: ``ord`` = 2, -2, ``'nuc'``
            (they need singular values; autodiff has no SVD).
    """
    name = "linalg.matrix_norm"
    if a.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions."
                           f"{_site()}")
    d0, d1 = _matrix_dims(a, dim, name)
    if isinstance(ord, str):
        if ord not in ("fro", "nuc"):
            raise RuntimeError(f"{name}: Order {ord} not supported.{_site()}")
    elif ord not in _MATRIX_ORDS:
        raise RuntimeError(f"{name}: Order {_ord_text(ord)} not supported.{_site()}")
    _float_input(a, name)
    a = _with_dtype(a, dtype, name)
    if ord == "fro":
        return vector_norm(a, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        raise NotImplementedError(f"{name}: ord={ord!r} needs the singular values, and "
                                  f"autodiff has no SVD{_site()}")
    inner, outer = (d0, d1) if abs(ord) == 1 else (d1, d0)
    s = a.abs().sum(inner, keepdim=True)
    out = s.amax(outer, keepdim=True) if ord > 0 else s.amin(outer, keepdim=True)
    return out if keepdim else out.squeeze((d0, d1))


def norm(a, ord=None, dim=None, keepdim: bool = False, *, dtype=None):
    """``torch.linalg.norm``: a matrix norm (:func:`matrix_norm`) where ``dim`` has two
    dims, or ``dim`` is None and ``a`` is 2-D with ``ord`` given, or ``ord`` is a string;
    else a vector norm (:func:`vector_norm`; ``ord`` None: the 2-norm of every element).

    Raises:
        RuntimeError: ``dim`` of length other than 1 or 2; ``ord`` given without ``dim``
            for an input that is not 1-D or 2-D; the errors of the norm chosen.
    """
    name = "linalg.norm"
    if dim is not None:
        dl = [int(dim)] if isinstance(dim, numbers.Integral) else [int(d) for d in dim]
        if len(dl) not in (1, 2):
            raise RuntimeError(f"{name}: If dim is specified, it must be of length 1 or 2. Got "
                               f"{dl}{_site()}")
    elif ord is not None and a.ndim not in (1, 2):
        raise RuntimeError(f"{name}: If dim is not specified but ord is, the input must be 1D "
                           f"or 2D. Got {a.ndim}D.{_site()}")
    if isinstance(ord, str):
        return matrix_norm(a, ord, (0, 1) if dim is None else dim, keepdim, dtype=dtype)
    if ord is not None and ((dim is not None and len(dl) == 2) or (dim is None and a.ndim == 2)):
        return matrix_norm(a, ord, (0, 1) if dim is None else dim, keepdim, dtype=dtype)
    return vector_norm(a, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


# -- products ----------------------------------------------------------------------------------
def vecdot(x, y, *, dim: int = -1):
    """``sum(x * y, dim)`` with the batch dims broadcast (``torch.linalg.vecdot``; real
    tensors: no conjugate).

    Raises:
        RuntimeError: an integer/bool ``x``, dtypes that differ, shapes that do not
            broadcast.
    """
    y = y if hasattr(y, "node") else x._wrap(x._lift(y))
    _float_input(x, "linalg.vecdot")
    if x.dtype != y.dtype:
        raise RuntimeError(f"linalg.vecdot: Expected x and y to have the same dtype, but found x "
                           f"of type {_scalar(x.dtype)} and y of type {_scalar(y.dtype)} "
                           f"instead{_site()}")
    return (x * y).sum(dim)


def _chain_order(sizes):
    """The matrix-chain split table (Cormen et al., "Introduction to Algorithms", sec. 15.2)
    for matrices ``sizes[i] x sizes[i + 1]``."""
    n = len(sizes) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + sizes[i] * sizes[k + 1] * sizes[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def multi_dot(tensors):
    """The product of two or more matrices in the cheapest order (``torch.linalg.
    multi_dot``): the first may be 1-D (a row vector) and the last 1-D (a column
    vector), whose dims are dropped from the result; the others are 2-D.

    Raises:
        RuntimeError: fewer than 2 tensors, ranks as above violated, dtypes that differ,
            sizes that cannot be multiplied.
    """
    ts = list(tensors)
    n = len(ts)
    if n < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {n}{_site()}")
    first, last = ts[0].ndim, ts[-1].ndim
    if first not in (1, 2):
        raise RuntimeError(f"multi_dot(): the first tensor must be 1D or 2D but got {first}D"
                           f"{_site()}")
    if last not in (1, 2):
        raise RuntimeError(f"multi_dot(): the last tensor must be 1D or 2D but got {last}D"
                           f"{_site()}")
    for i in range(1, n - 1):
        if ts[i].ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {i} must be 2D but got {ts[i].ndim}D"
                               f"{_site()}")
    d0 = dtypes.name(ts[0].dtype)
    for i, t in enumerate(ts[1:], 1):
        di = dtypes.name(t.dtype)
        if di != d0:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but tensor "
                               f"0 is {_CPP_NAMES.get(d0, d0)} and tensor {i} "
                               f"{_CPP_NAMES.get(di, di)}{_site()}")
    mats = list(ts)
    if first == 1:
        mats[0] = mats[0].unsqueeze(0)
    if last == 1:
        mats[-1] = mats[-1].unsqueeze(-1)
    for i in range(n - 1):
        if mats[i].shape[-1] != mats[i + 1].shape[0]:
            raise RuntimeError(f"multi_dot(): tensors {i} and {i + 1} with shapes "
                               f"{list(ts[i].shape)} and {list(ts[i + 1].shape)} cannot be "
                               f"multiplied{_site()}")
    if n == 2:
        out = mats[0] @ mats[1]
    elif n == 3:
        a, b = mats[0].shape
        c, d = mats[2].shape[0], mats[2].shape[1]
        cost1 = a * c * (b + d)                  # (AB)C
        cost2 = b * d * (a + c)                  # A(BC)
        out = (mats[0] @ mats[1]) @ mats[2] if cost1 <= cost2 else \
            mats[0] @ (mats[1] @ mats[2])
    else:
        split = _chain_order([mats[0].shape[0]] + [m.shape[1] for m in mats])

        def product(i, j):
            if i == j:
                return mats[i]
            k = split[i][j]
            return product(i, k) @ product(k + 1, j)
        out = product(0, n - 1)
    if first == 1 and last == 1:
        return out.reshape(())
    if first == 1:
        return out.squeeze(0)
    if last == 1:
        return out.squeeze(-1)
    return out


def cross(x, y, *, dim: int = -1):
    """The cross product of 3-vectors along ``dim`` (``torch.linalg.cross``; default
    ``dim=-1``), the other dims broadcast.

    Raises:
        RuntimeError: ranks that differ, a size other than 3 at ``dim``, dims that do not
            broadcast. IndexError: ``dim`` out of range.
    """
    y = y if hasattr(y, "node") else x._wrap(x._lift(y))
    if x.ndim != y.ndim:
        raise RuntimeError(f"linalg.cross: inputs must have the same number of dimensions."
                           f"{_site()}")
    d = norm_dim(dim, x.ndim, x.shape)
    if x.shape[d] != 3 or y.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{x.shape[d]} and {y.shape[d]}{_site()}")
    ops.broadcast_shape("linalg.cross", x.shape, y.shape)
    return x.cross(y, dim=d)


# -- Vandermonde matrices ----------------------------------------------------------------------
def vander(x, *, N: int | None = None):
    """``[..., n, N]`` with ``out[..., i, j] = x[..., i]^j`` (``torch.linalg.vander``:
    increasing powers; ``N`` defaults to ``n``), computed as PyTorch does (a cumulative
    product after a column of ones, so the gradient is the product's).

    Raises:
        RuntimeError: bool/float16/bfloat16 input, ``N`` < 2 (or a 0-d ``x`` without it).
    """
    dt = dtypes.name(x.dtype)
    if dt in ("bool", "float16", "bfloat16"):
        raise RuntimeError(f"linalg.vander supports floating point, complex, and integer "
                           f"tensors, but got {_SCALAR_NAMES[dt]}{_site()}")
    x = x.unsqueeze(-1) if x.ndim == 0 else x
    n = x.shape[-1] if N is None else int(N)
    if n <= 1:
        raise RuntimeError(f"N must be greater than 1.{_site()}")
    pw = x.unsqueeze(-1).broadcast_to(*x.shape, n - 1).cumprod(-1)
    ones = x._wrap(ops.const(1, tuple(x.shape) + (1,), dtypes.name(pw.dtype)))
    return ones.cat(pw, dim=-1)


def torch_vander(x, N: int | None = None, increasing: bool = False):
    """``torch.vander``: ``[n, N]`` powers of the 1-D ``x`` (decreasing, or increasing
    with ``increasing=True``; ``N`` defaults to ``n``); integer and bool inputs give int64.

    Raises:
        RuntimeError: ``x`` not 1-D, ``N`` < 0.
    """
    if x.ndim != 1:
        raise RuntimeError(f"x must be a one-dimensional tensor.{_site()}")
    n = x.shape[0] if N is None else int(N)
    if n < 0:
        raise RuntimeError(f"N must be non-negative.{_site()}")
    dt = dtypes.name(x.dtype)
    out_dt = dt if dt in _FLOATS else "int64"
    if n == 0:
        return x._wrap(ops.const(0, (x.shape[0], 0), out_dt))
    ones = x._wrap(ops.const(1, (x.shape[0], 1), out_dt))
    if n == 1:
        return ones
    xs = x.to(dtypes.get(out_dt)) if dt != out_dt else x
    out = ones.cat(xs.unsqueeze(-1).broadcast_to(x.shape[0], n - 1).cumprod(-1), dim=-1)
    return out if increasing else out.flip(-1)


# -- condition numbers, tensor inverses and solves ---------------------------------------------
def cond(a, p=None):
    """The condition number ``||A||_p ||A^-1||_p`` ``[*B]`` of ``a`` ``[*B, n, n]``
    (``torch.linalg.cond``) for ``p`` in ``'fro'``, 1, -1, ``inf``, ``-inf``: computed as
    PyTorch does, ``inf`` where the elimination meets a zero pivot; 0 for empty matrices.

    Raises:
        RuntimeError: rank < 2, an unknown ``p``, non-square matrices, a dtype other than
            float32 (PyTorch's ``linalg.inv`` messages). NotImplementedError: ``p`` None, 2,
            -2 or ``'nuc'`` (singular values; autodiff has no SVD).
    """
    from .lu import inv_ex
    if a.ndim < 2:
        raise RuntimeError(f"linalg.cond: The input tensor must have at least 2 dimensions."
                           f"{_site()}")
    valid = ("fro", "nuc") if isinstance(p, str) else (None, 2, -2, 1, -1, math.inf, -math.inf)
    if p not in valid:
        raise RuntimeError(f"linalg.cond got an invalid norm type: {_ord_text(p)}{_site()}")
    if a.numel() == 0:
        return a._wrap(ops.const(0.0, tuple(a.shape[:-2]), "float32"))
    if p in (None, 2, -2):
        raise NotImplementedError(f"linalg.cond: p={p!r} needs the singular values, and "
                                  f"autodiff has no SVD{_site()}")
    r, c = a.shape[-2:]
    if r != c:
        shown = f"{float(p):f}" if isinstance(p, float) and math.isfinite(p) else str(p)
        raise RuntimeError(f"linalg.cond(ord={shown}): A must be batches of square matrices, "
                           f"but they are {r} by {c} matrices{_site()}")
    if p == "nuc":
        raise NotImplementedError(f"linalg.cond: p='nuc' needs the singular values, and "
                                  f"autodiff has no SVD{_site()}")
    y, info = inv_ex(a, name="linalg.inv")
    with no_grad():
        bad = (info > 0).unsqueeze(-1).unsqueeze(-1)
    y = y.masked_fill(bad, math.inf)
    out = matrix_norm(a, p) * matrix_norm(y, p)
    return out.nan_to_num(math.inf, math.inf, -math.inf)


def tensorinv(a, ind: int = 2):
    """The tensor ``X`` ``[*a.shape[ind:], *a.shape[:ind]]`` with ``tensordot(X, a, ind)``
    the identity (``torch.linalg.tensorinv``): :func:`~.lu.inv` of ``a`` reshaped to a
    square matrix.

    Raises:
        RuntimeError: ``ind`` <= 0, ``prod(shape[ind:]) != prod(shape[:ind])``, and
            ``linalg.inv``'s errors.
    """
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}"
                           f"{_site()}")
    end, start = tuple(a.shape[ind:]), tuple(a.shape[:ind])
    pe, ps = int(np.prod(end, dtype=np.int64)), int(np.prod(start, dtype=np.int64))
    if pe != ps:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) == "
                           f"prod(self.shape[:ind]), but got {pe} != {ps}{_site()}")
    if a.numel() == 0:
        return a._wrap(ops.const(0.0, end + start, dtypes.name(a.dtype)))
    return a.reshape(pe, pe).inverse().reshape(*end, *start)


def tensorsolve(a, b, dims=None):
    """``X`` ``[*a.shape[b.ndim:]]`` with ``tensordot(a, X, X.ndim) = b``
    (``torch.linalg.tensorsolve``): ``dims`` of ``a`` are first moved to the end, then
    :func:`~.lu.solve` of the reshaped square system.

    Raises:
        RuntimeError: ``prod(a.shape[b.ndim:]) != b.numel()``, and ``linalg.solve``'s errors.
        IndexError: ``dims`` out of range.
    """
    from .lu import solve
    b = b if hasattr(b, "node") else a._wrap(a._lift(b))
    if dims is not None:
        dl = [norm_dim(int(d), a.ndim, a.shape) for d in
              ([dims] if isinstance(dims, numbers.Integral) else dims)]
        a = a.movedim(tuple(dl), tuple(range(a.ndim - len(dl), a.ndim)))
    res = tuple(a.shape[b.ndim:])
    pr = int(np.prod(res, dtype=np.int64))
    pb = int(np.prod(tuple(b.shape), dtype=np.int64))
    if pr != pb:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[other.ndim:])"
                           f" == prod(self.shape[:other.ndim]), but got {pr} != {pb}{_site()}")
    return solve(a.reshape(pr, pr), b.reshape(pb)).reshape(*res)
