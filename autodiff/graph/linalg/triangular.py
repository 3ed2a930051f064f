"""Triangular solves and the Cholesky family (``torch.linalg.solve_triangular``,
``cholesky``/``cholesky_ex``, ``torch.cholesky_solve``, ``torch.cholesky_inverse``),
composed from existing graph ops and unrolled over the matrix size ``n`` while tracing,
as :mod:`.lu` is (the shapes are static, the IR has no factorisation op).

* :func:`substitute` is forward (lower) or back (upper) substitution, column-oriented as
  LAPACK's ``trsm`` (Golub & Van Loan, "Matrix Computations", 4th ed., sec. 3.1,
  algorithms 3.1.3/3.1.4, "column" versions): the rows are first divided by the diagonal
  (one op), then step ``j`` takes row ``j`` of the working right-hand side as ``x_j`` and
  subtracts ``A[j+1:, j] x_j`` from the rows below (above, for ``upper``); the working
  block loses a row every step, so the work is ``~n^2 k / 2`` multiply-adds for ``k``
  right-hand columns and the graph grows by 7 traced nodes per step. Only the triangle
  named is read (and the diagonal unless ``unitriangular``), as LAPACK's ``trtrs``.
* the Cholesky factor is the outer-product (right-looking) algorithm (Golub & Van Loan
  sec. 4.2.6, algorithm 4.2.2) on the matrix symmetrised from the triangle LAPACK's
  ``potrf`` reads (the lower one, or the upper one for ``upper=True``): step ``j`` takes
  ``d = S[0, 0]`` of the working Schur complement ``S``, the column ``l = S[:, 0] /
  sqrt(d)``, and continues with ``S[1:, 1:] - l[1:] l[1:]^T`` (exactly symmetric: both
  triangles are the same products). The columns are assembled into ``L`` with one
  ``index_select``. 12 traced nodes per step (19 with the gradient's substitution).
* traced graph sizes at n = 8 / 32 (value only; with the gradient): ``solve_triangular``
  59 / 227 (127 / 295), ``cholesky`` 114 / 402 (223 / 679), ``cholesky_solve`` 125 / 461
  (203 / 539), ``cholesky_inverse`` 71 / 239 (123 / 291).
* ``info`` is ``potrf``'s: the 1-based step of the first ``d`` that is not positive (or is
  NaN), 0 if none. From that column on ``L`` holds what the arithmetic gives (NaN, or
  ``inf`` for ``d = 0``; LAPACK leaves partly updated entries of ``A`` there instead: both
  are unspecified). ``cholesky`` and ``cholesky_ex(check_errors=True)`` raise
  ``LinAlgError`` while tracing when the matrix's values are known then (a tensor made
  from data), from a float32 numpy mirror of the same steps.

Gradients are PyTorch's analytic ones, attached as ``value + L(dA)`` with ``dA = A -
A.detach()`` (exactly 0; the mechanism of :mod:`.lu`), ``L`` the differential whose adjoint
is PyTorch's backward formula; the inverses it needs (``A^-1`` of a triangular matrix,
``L^-1``) are computed without gradient by the same substitution with the identity appended
to the right-hand side:

* ``solve_triangular`` (``X = A^-1 B``): ``dX = A^-1 (dB - tri(dA) X)``, ``tri`` the triangle
  read (strict for ``unitriangular``): the adjoint is ``gB = A^-T G``, ``gA = -tri(gB X^T)``,
  PyTorch's ``linalg_solve_triangular`` backward (the triangular-solve adjoint, Giles,
  "An extended collection of matrix derivative results for forward and reverse mode
  algorithmic differentiation", 2008, sec. 2.3.1, restricted to the triangle).
* ``cholesky``: ``dL = L Phi(L^-1 sym(dA) L^-T)`` with ``sym(X) = (X + X^T) / 2`` and
  ``Phi`` the lower triangle with the diagonal halved (Murray, "Differentiation of the
  Cholesky decomposition", 2016, arXiv:1602.07527, eq. 8); its adjoint ``gA = sym(L^-T
  Phi(L^T gL) L^-1)`` is PyTorch's ``cholesky_backward`` (symmetric: the entries of the
  triangle not read get half of the pair's gradient, as PyTorch's).
* ``cholesky_solve`` (``X = (L L^T)^-1 B``) and ``cholesky_inverse`` (``Y = (L L^T)^-1``):
  ``dX = Y (dB - dA X)``, ``dY = -Y dA Y`` with ``dA = dL L^T + L dL^T`` (``dU^T U + U^T dU``
  for ``upper``), whose adjoints are PyTorch's ``cholesky_solve_backward`` and
  ``cholesky_inverse_backward`` (``gL`` is a full matrix: PyTorch does not restrict it to
  the triangle either).

A result that is not finite (a zero on the diagonal) makes the gradient 0 for its matrix,
as in :mod:`.lu`.
"""
from __future__ import annotations

import collections

import numpy as np

from .. import dtypes, ops
from ..trace import no_grad
from ..mixins.linalg import _SCALAR_NAMES
from .lu import (LinAlgError, MAX_N, _delta, _finite, _grad_wanted, _site, check_square,
                 known_values)

CholeskyExResult = collections.namedtuple("CholeskyExResult", ["L", "info"])


# -- checks ------------------------------------------------------------------------------------
def dtype_check(a, name: str, kernel: str | None = None) -> None:
    """PyTorch's dtype errors for a linear-algebra input other than float32: integers and
    bool raise ``RuntimeError`` (``<name>: Expected a floating point or complex tensor as
    input. Got Long``); float16/bfloat16 raise ``NotImplementedError`` (``"<kernel>" not
    implemented for 'Half'``) where PyTorch's CPU kernel rejects them, else
    ``RuntimeError`` (``Low precision dtypes not supported``)."""
    dt = dtypes.name(a.dtype)
    if dt == "float32":
        return
    scalar = _SCALAR_NAMES.get(dt, dt)
    if dt in ("float16", "bfloat16"):
        if kernel is not None:
            raise NotImplementedError(f"\"{kernel}\" not implemented for '{scalar}'{_site()}")
        raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {scalar}"
                           f"{_site()}")
    raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got "
                       f"{scalar}{_site()}")


def kernel_check(a, kernel: str) -> None:
    """``NotImplementedError`` ``"<kernel>" not implemented for '<dtype>'`` for every dtype
    but float32 (PyTorch's CPU kernels without integer or half versions)."""
    dt = dtypes.name(a.dtype)
    if dt != "float32":
        raise NotImplementedError(f"\"{kernel}\" not implemented for "
                                  f"'{_SCALAR_NAMES.get(dt, dt)}'{_site()}")


def limit(n: int, name: str, per_row: int) -> None:
    """``NotImplementedError`` for ``n`` above :data:`~.lu.MAX_N`."""
    if n > MAX_N:
        raise NotImplementedError(
            f"{name}: {n} by {n} matrices are too large: the algorithm is unrolled over the "
            f"matrix size while tracing (about {per_row} graph nodes per row), up to {MAX_N} "
            f"rows{_site()}")


def operand(a, b):
    """``b`` as a tensor (a number or array lifted next to ``a``)."""
    return b if hasattr(b, "node") else a._wrap(a._lift(b))


def eye_like(a, n: int | None = None):
    """The identity ``[n, n]`` (``n``: ``a``'s last size) broadcast to ``a``'s batch."""
    n = a.shape[-1] if n is None else n
    return a._const(np.eye(n, dtype=np.float32)).broadcast_to(*a.shape[:-2], n, n)


# -- batch folding -----------------------------------------------------------------------------
class Fold:
    """Broadcasts ``a`` ``[*A, n, n]`` against ``b`` ``[*B', n, k]``: the batch dims where
    ``a`` has size 1 (or none) but ``b`` does not are folded into ``b``'s columns, so each
    distinct matrix is factorised once (as :func:`.lu._solve_matrix` does).

    Attributes: ``a`` ``[*K, n, n]``, ``b`` ``[*K, n, k']``, ``full`` (the broadcast batch);
    :meth:`unfold` maps ``[*K, n, k']`` back to ``[*full, n, k]``.
    """

    def __init__(self, a, b, name: str):
        n, k = a.shape[-1], b.shape[-1]
        full = ops.broadcast_shape(name, a.shape[:-2], b.shape[:-2])
        nb = len(full)
        abatch = (1,) * (nb - (a.ndim - 2)) + tuple(a.shape[:-2])
        fold = [i for i in range(nb) if abatch[i] == 1 and full[i] > 1]
        keep = [i for i in range(nb) if i not in fold]
        self.full, self.n, self.k = tuple(full), n, k
        self._keep = [full[i] for i in keep]
        self._fold = [full[i] for i in fold]
        self._perm = keep + [nb] + fold + [nb + 1]
        rows = b.shape[-2]
        bf = b.broadcast_to(*full, rows, k)
        self.b = bf.permute(*self._perm).reshape(*self._keep, rows, -1) if fold else bf
        self.a = a.reshape(*self._keep, *a.shape[-2:])

    def unfold(self, xq):
        if not self._fold:
            return xq
        x = xq.reshape(*self._keep, xq.shape[-2], *self._fold, self.k)
        return x.permute(*[int(i) for i in np.argsort(self._perm)])


# -- substitution ------------------------------------------------------------------------------
def substitute(a, b, *, upper: bool, unit: bool = False):
    """``X`` with ``A X = B`` for triangular ``a`` ``[*K, n, n]`` and ``b`` ``[*K, n, k]``
    (one batch shape, ``n >= 1``), reading only ``a``'s lower (``upper=False``) or upper
    triangle, and its diagonal unless ``unit`` (then taken as 1). Column-oriented
    substitution (module docstring): 7 traced nodes per row. Traces with gradient when
    enabled (callers wrap it in ``no_grad()``)."""
    n = a.shape[-1]
    if not unit:
        d = a.diagonal(0, -2, -1).unsqueeze(-1)            # [*K, n, 1]
        a, b = a / d, b / d                                 # unit diagonal now
    rows = []
    w = b
    if not upper:
        for j in range(n):
            x = w[..., 0:1, :]
            rows.append(x)
            if j < n - 1:
                w = w[..., 1:, :] - a[..., j + 1:, j:j + 1] * x
    else:
        for j in range(n - 1, -1, -1):
            x = w[..., j:j + 1, :]
            rows.append(x)
            if j > 0:
                w = w[..., :j, :] - a[..., :j, j:j + 1] * x
        rows.reverse()
    return rows[0].cat(*rows[1:], dim=-2) if n > 1 else rows[0]


def _tri(x, upper: bool, unit: bool):
    """The triangle of ``x`` that a triangular solve reads (strict for ``unit``)."""
    k = (1 if upper else -1) if unit else 0
    return x.triu(k) if upper else x.tril(k)


def solve_triangular(a, b, *, upper: bool, left: bool = True, unitriangular: bool = False):
    """``X`` with ``A X = B`` (``left=False``: ``X A = B``) for triangular float32 ``A``
    ``[*A, n, n]`` and ``B`` ``[*B, n, k]`` (``[*B, k, n]`` for ``left=False``), batch
    dims broadcast (``torch.linalg.solve_triangular``); see the module docstring."""
    name = "linalg.solve_triangular"
    b = operand(a, b)
    if a.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions."
                           f"{_site()}")
    if b.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor B must have at least 2 dimensions."
                           f"{_site()}")
    check_square(a, name, limit=False)
    n = a.shape[-1]
    if (b.shape[-2] if left else b.shape[-1]) != n:
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {b.shape[-2]}x"
                           f"{b.shape[-1]}){_site()}")
    kernel_check(a, "triangular_solve_cpu")
    limit(n, name, 5)
    if b.dtype != a.dtype:
        b = b.to(a.dtype)                                   # PyTorch computes in A's dtype
    if not left:
        a, b, upper = a.mT, b.mT, not upper
    f = Fold(a, b, name)
    x = _solve_tri(f.a, f.b, upper, unitriangular, a, b)
    x = f.unfold(x)
    return x.mT if not left else x


def _solve_tri(aq, bq, upper: bool, unit: bool, a, b):
    """``aq^-1 bq`` with the gradient of ``a``/``b`` (the tensors ``aq``/``bq`` are views
    of) attached; empty sizes give empty results."""
    n, k = aq.shape[-1], bq.shape[-1]
    if n == 0 or k == 0:
        return bq * 1.0
    grad = _grad_wanted(a, b)
    with no_grad():
        rhs = bq.cat(eye_like(aq), dim=-1) if grad else bq
        sol = substitute(aq, rhs, upper=upper, unit=unit)
    x = sol[..., :k] if grad else sol
    if grad:
        y, xs = _finite(sol[..., k:]), _finite(x)
        step = _delta(bq) if b.requires_grad else None
        if a.requires_grad:
            da = _tri(_delta(aq), upper, unit) @ xs
            step = -da if step is None else step - da
        x = x + y @ step
    return x


# -- Cholesky ----------------------------------------------------------------------------------
def _symmetric(a, upper: bool):
    """The symmetric matrix whose lower (``upper``: upper) triangle is ``a``'s."""
    if upper:
        return a.triu() + a.triu(1).mT
    return a.tril() + a.tril(-1).mT


def _cholesky_steps(s):
    """The outer-product Cholesky of symmetric ``s`` ``[*B, n, n]``: the columns
    ``[*B, n - j, 1]`` of ``L`` below and on the diagonal, and the pivots ``d``
    ``[*B, 1, 1]`` (``L[j, j]^2``) of every step."""
    n = s.shape[-1]
    cols, ds = [], []
    m = s
    for j in range(n):
        c = m[..., :, 0:1]
        d = c[..., 0:1, :]
        ds.append(d)
        l = c / d.sqrt()
        cols.append(l)
        if j < n - 1:
            r = l[..., 1:, :]
            m = m[..., 1:, 1:] - r * r.mT
    return cols, ds


def _assemble_lower(cols, like):
    """``L`` ``[*B, n, n]`` from its columns ``[*B, n - j, 1]`` (zeros above the
    diagonal): one ``cat``, one ``index_select`` with a constant index, one ``where``."""
    n = len(cols)
    flat = cols[0].cat(*cols[1:], dim=-2) if n > 1 else cols[0]      # [*B, n(n+1)/2, 1]
    flat = flat.squeeze(-1)
    idx = np.zeros((n, n), np.int32)
    off = 0
    for j in range(n):
        idx[j:, j] = off + np.arange(n - j)
        off += n - j
    lower = np.tril(np.ones((n, n), bool))
    got = flat.index_select(-1, like._const(idx.reshape(-1)))
    got = got.reshape(*flat.shape[:-1], n, n)
    return got.where(like._const(lower), 0.0)


def _potrf_info(ds):
    """``potrf``'s info from the pivots ``d``: the 1-based step of the first that is not
    positive (or NaN), 0 if none (int32 ``[*B]``)."""
    n = len(ds)
    d = ds[0].cat(*ds[1:], dim=-2) if n > 1 else ds[0]               # [*B, n, 1]
    rev = d._const(np.arange(n, 0, -1, dtype=np.float32).reshape(-1, 1))
    last = rev.where(~(d > 0), 0.0).amax(-2).squeeze(-1)            # n + 1 - first, or 0
    return ((n + 1.0) - last).masked_fill(last == 0, 0.0).int()


def host_potrf_info(a: np.ndarray, upper: bool) -> np.ndarray:
    """:func:`_cholesky_steps`' ``info`` computed on the host in float32 for known values
    ``a`` ``[*B, n, n]``: int ``[*B]``."""
    a = np.asarray(a, np.float32)
    tri = np.triu(a) if upper else np.tril(a)
    strict = np.triu(a, 1) if upper else np.tril(a, -1)
    m = (tri + np.swapaxes(strict, -1, -2)).astype(np.float32)
    n = m.shape[-1]
    info = np.zeros(m.shape[:-2], np.int64)
    with np.errstate(all="ignore"):
        for j in range(n):
            c = m[..., :, 0:1]
            d = c[..., 0:1, :]
            info = np.where((info == 0) & ~(d[..., 0, 0] > 0), j + 1, info)
            l = (c / np.sqrt(d)).astype(np.float32)
            r = l[..., 1:, :]
            m = (m[..., 1:, 1:] - r * np.swapaxes(r, -1, -2)).astype(np.float32)
    return info


def _raise_if_not_pd(a, name: str, upper: bool) -> None:
    if a.shape[-1] == 0:
        return
    v = known_values(a)
    if v is None:
        return
    info = host_potrf_info(np.asarray(v, np.float32), upper).reshape(-1)
    bad = np.flatnonzero(info)
    if bad.size:
        b = int(bad[0])
        where = f"(Batch element {b}): " if a.ndim > 2 else ""
        raise LinAlgError(f"{name}: {where}The factorization could not be completed because "
                          f"the input is not positive-definite (the leading minor of order "
                          f"{int(info[b])} is not positive-definite).{_site()}")


def cholesky_ex(a, *, upper: bool = False, check_errors: bool = False,
                name: str = "linalg.cholesky_ex", want_info: bool = True,
                shown: str = "linalg.cholesky"):
    """``(L, info)`` of symmetric positive-definite float32 ``a`` ``[*B, n, n]``
    (``torch.linalg.cholesky_ex``): ``A = L L^T`` from ``A``'s lower triangle, or
    ``A = U^T U`` from its upper one (``upper=True``, ``U`` returned); ``info`` int32
    ``[*B]`` as LAPACK ``potrf``'s (module docstring). ``shown``: the name the shape and
    dtype errors give (``"cholesky"``: the deprecated ``torch.cholesky``, whose kernel
    rejects integers with ``NotImplementedError``)."""
    check_square(a, shown, limit=False)
    if shown == "cholesky":
        kernel_check(a, "cholesky_cpu")
    dtype_check(a, shown, kernel="cholesky_cpu")
    n = a.shape[-1]
    limit(n, shown, 14)
    if check_errors:
        _raise_if_not_pd(a, name, upper)
    if n == 0:
        info = a._wrap(ops.const(0, tuple(a.shape[:-2]), "int32")) if want_info else None
        return CholeskyExResult(a * 1.0, info)
    grad = _grad_wanted(a)
    with no_grad():
        cols, ds = _cholesky_steps(_symmetric(a, upper))
        low = _assemble_lower(cols, a)
        info = _potrf_info(ds) if want_info else None
        if grad:
            linv = _finite(substitute(low, eye_like(low), upper=False))
            low_s = _finite(low)
    if grad:
        da = _delta(a)
        inner = linv @ ((da + da.mT) * 0.5) @ linv.mT
        w = np.tril(np.ones((n, n), np.float32)) - 0.5 * np.eye(n, dtype=np.float32)
        low = low + low_s @ (inner * a._const(w))
    return CholeskyExResult(low.mT if upper else low, info)


def cholesky(a, *, upper: bool = False, name: str = "linalg.cholesky"):
    """``L`` (``upper``: ``U``) of :func:`cholesky_ex`; a matrix whose values are known
    while tracing and that is not positive definite raises ``LinAlgError``."""
    return cholesky_ex(a, upper=upper, check_errors=True, name=name, want_info=False,
                       shown=name).L


def _factor_product(lo, dl, upper: bool):
    """``dA`` of ``A = L L^T`` (``U^T U`` for ``upper``) for a change ``dl`` of the
    factor."""
    if upper:
        return dl.mT @ lo + lo.mT @ dl
    return dl @ lo.mT + lo @ dl.mT


def cholesky_solve(b, lo, upper: bool = False):
    """``X`` with ``A X = B``, ``A = L L^T`` (``upper``: ``U^T U``) given the factor ``lo``
    ``[*A, n, n]`` (only its triangle is read) and ``B`` ``[*B, n, k]``, batches
    broadcast (``torch.cholesky_solve``): a forward and a back substitution."""
    lo = operand(b, lo)
    if b.ndim < 2:
        raise RuntimeError(f"b should have at least 2 dimensions, but has {b.ndim} dimensions "
                           f"instead{_site()}")
    if lo.ndim < 2:
        raise RuntimeError(f"u should have at least 2 dimensions, but has {lo.ndim} dimensions "
                           f"instead{_site()}")
    if b.dtype != lo.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{_SCALAR_NAMES[dtypes.name(b.dtype)]} and A of type "
                           f"{_SCALAR_NAMES[dtypes.name(lo.dtype)]} instead.{_site()}")
    r, c = lo.shape[-2:]
    if r != c:
        raise RuntimeError(f"A must be batches of square matrices, but they are {r} by {c} "
                           f"matrices{_site()}")
    if b.shape[-2] != r:
        raise RuntimeError(f"Incompatible matrix sizes for cholesky_solve: each A matrix is {r} "
                           f"by {r} but each b matrix is {b.shape[-2]} by {b.shape[-1]}"
                           f"{_site()}")
    kernel_check(lo, "cholesky_solve_cpu")
    limit(r, "cholesky_solve", 10)
    f = Fold(lo, b, "cholesky_solve")
    aq, bq = f.a, f.b
    n, k = r, bq.shape[-1]
    if n == 0 or k == 0:
        return f.unfold(bq * 1.0)
    grad = _grad_wanted(lo, b)
    with no_grad():
        rhs = bq.cat(eye_like(aq), dim=-1) if grad else bq
        first, second = (aq.mT, aq) if upper else (aq, aq.mT)
        sol = substitute(second, substitute(first, rhs, upper=False), upper=True)
    x = sol[..., :k] if grad else sol
    if grad:
        y, xs = _finite(sol[..., k:]), _finite(x)
        step = _delta(bq) if b.requires_grad else None
        if lo.requires_grad:
            with no_grad():
                los = _finite(aq)
            da = _factor_product(los, _delta(aq), upper) @ xs
            step = -da if step is None else step - da
        x = x + y @ step
    return f.unfold(x)


def cholesky_inverse(lo, upper: bool = False):
    """``A^-1`` ``[*B, n, n]`` for ``A = L L^T`` (``upper``: ``U^T U``) given the factor
    ``lo`` (only its triangle is read) (``torch.cholesky_inverse``): ``L^-T L^-1`` with
    ``L^-1`` by substitution."""
    name = "cholesky_inverse"
    if lo.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions."
                           f"{_site()}")
    check_square(lo, name, limit=False)
    kernel_check(lo, "cholesky_inverse_out_cpu")
    n = lo.shape[-1]
    limit(n, name, 6)
    if n == 0:
        return lo * 1.0
    grad = _grad_wanted(lo)
    with no_grad():
        inv = substitute(lo, eye_like(lo), upper=upper)
        y = inv @ inv.mT if upper else inv.mT @ inv
    if grad:
        with no_grad():
            ys, los = _finite(y), _finite(lo)
        y = y - ys @ _factor_product(los, _delta(lo), upper) @ ys
    return y
