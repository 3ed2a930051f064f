"""LU factorisation with partial pivoting as ``torch.linalg.lu_factor``/``lu_factor_ex``/
``lu`` give it, and ``lu_solve``: Gaussian elimination unrolled over the columns while
tracing, with the pivot choice of :func:`.lu.pick` (the rows never move; Golub & Van
Loan, "Matrix Computations", 4th ed., sec. 3.2 and 3.4, algorithm 3.4.1).

* step ``j`` of ``A`` ``[*B, m, n]`` (``k = min(m, n)`` steps) picks the pivot row among
  the rows not used yet (:func:`.lu.pick`: the first of the largest magnitude), reads it
  (``U``'s row ``j``), and subtracts multiples of it from the rows not used yet (their
  multipliers are ``L``'s column ``j``); the working matrix drops the eliminated column.
  Unlike :func:`.lu.eliminate` (Gauss-Jordan), the used rows are not updated.
* LAPACK ``getrf`` moves rows as it goes (row ``j`` swapped with the pivot row), and its
  ``pivots`` (1-based) name the positions swapped: an unrolled replay of the swaps turns
  the pivot rows into ``pivots`` and the final row order (``P``), about 12 traced nodes
  per step (the elimination itself takes about 37).
  Where several entries tie for the largest magnitude, LAPACK takes the first in its
  swapped order, this the first in the original order: only exact ties can differ.
* ``L`` is unit lower triangular ``[*B, m, k]``, ``U`` upper ``[*B, k, n]``; ``LU`` packs
  both (``L``'s diagonal omitted), ``P`` is the permutation matrix with ``A = P L U``.
  ``info`` is ``getrf``'s: the 1-based step of the first zero pivot (0 if none); a zero
  pivot gives zero multipliers and the elimination goes on (as ``getrf``).

``lu_solve`` replays ``pivots`` (about 12 nodes per step) and does a forward and a back
substitution (:func:`.triangular.substitute`), with ``A`` or ``A^T`` (``adjoint``) on
either side (``left``).

Traced graph sizes at n = 8 / 32 (value only; with the gradient): ``lu_factor`` 433 /
1,609 (644 / 2,156), ``lu`` 436 / 1,612 (649 / 2,161), ``lu_factor`` then ``lu_solve`` 652
/ 2,428 (966 / 3,078); about 3/4 of that after the graph passes.

Gradients are PyTorch's (``linalg_lu_backward``, ``linalg_lu_solve`` backward), attached as
``value + L(dA)`` (the mechanism of :mod:`.lu`) through the differential of ``P^T A = L U``
(Murray, "Differentiation of the Cholesky decomposition", 2016, sec. 3 gives the LU case;
PyTorch's comments in ``FunctionsManual.cpp`` derive the same): for square ``A``, ``M =
L^-1 P^T dA U^-1``, ``dL = L tril(M, -1)``, ``dU = triu(M) U``; for ``m > n`` the rows
below (``A_2 = L_2 U``) give ``dL_2 = (P^T dA)_2 U^-1 - L_2 dU U^-1``; for ``m < n`` the
columns to the right (``A_2 = P L U_2``) ``dU_2 = L^-1 (P^T dA_2 - dL U_2)``. ``lu_solve``:
``dX = op(A)^-1 (dB - op(dA) X)`` with ``dA = P (tril(dLU, -1) U + L triu(dLU))``. The
triangular inverses are substitutions without gradient; matrices whose inverse is not
finite (a zero pivot) get gradient 0, as in :mod:`.lu`.
"""
from __future__ import annotations

import collections

import numpy as np

from .. import dtypes, ops
from ..trace import no_grad
from ..mixins.linalg import _SCALAR_NAMES
from .lu import _raise_if_singular as _lu_raise_if_singular
from .lu import (_delta, _finite, _grad_wanted, _info, _position, _site, check_rhs,
                 check_square, pick)
from .triangular import Fold, eye_like, kernel_check, limit, operand, substitute

LUFactorResult = collections.namedtuple("LUFactorResult", ["LU", "pivots"])
LUFactorExResult = collections.namedtuple("LUFactorExResult", ["LU", "pivots", "info"])
LUResult = collections.namedtuple("LUResult", ["P", "L", "U"])


# -- the elimination ---------------------------------------------------------------------------
def _steps(a):
    """Gaussian elimination with partial pivoting of ``a`` ``[*B, m, n]`` (``k = min(m, n)
    >= 1`` steps). Returns ``(urows, lcols, idx, pivs)``: ``U``'s rows ``[*B, 1, n - j]``,
    the multipliers ``[*B, m, 1]`` (original row order, 0 in the rows used before and in
    the pivot row), the pivot rows' original indices ``[*B, 1, 1]`` and the pivots
    ``[*B, 1, 1]``, one per step."""
    m, n = a.shape[-2:]
    k = min(m, n)
    pos = _position(a, np.arange(m))
    rev = _position(a, np.arange(m, 0, -1))
    w, used = a, None
    urows, lcols, idx, pivs = [], [], [], []
    for j in range(k):
        col = w[..., 0:1]
        r, one = pick(col, used, pos, rev)
        row = w.where(one, 0.0).sum(-2, keepdim=True)
        piv = row[..., 0:1]
        used = one if used is None else used | one
        f = (col / piv).where(~(used | (piv == 0)), 0.0)
        urows.append(row)
        lcols.append(f)
        idx.append(r)
        pivs.append(piv)
        if j < k - 1:
            w = w[..., 1:] - f * row[..., 1:]
    return urows, lcols, idx, pivs


def _replay(idx, m: int, like):
    """LAPACK's ``pivots`` from the pivot rows ``idx`` (original indices ``[*B, 1, 1]``,
    one per step): replays the row swaps of ``getrf``. Returns the 0-based positions
    swapped ``[*B, k, 1]`` (float32) and the final row order ``[*B, m, 1]`` (position ->
    original row)."""
    pos = _position(like, np.arange(m))
    cur = pos
    swaps = []
    for j, r in enumerate(idx):
        hit = cur == r
        swaps.append(pos.where(hit, 0.0).sum(-2, keepdim=True))
        at = like._const(np.arange(m).reshape(-1, 1) == j)
        cur = r.where(at, cur[..., j:j + 1, :].where(hit, cur))
    return swaps[0].cat(*swaps[1:], dim=-2) if len(swaps) > 1 else swaps[0], cur


def _order_from_pivots(pivots, m: int, like):
    """The row order (position -> original row) ``[*B, m, 1]`` float32 that LAPACK
    ``pivots`` (1-based, ``[*B, k]``, traced) describe: the swaps replayed."""
    pos = _position(like, np.arange(m))
    p = pivots.float().unsqueeze(-1) - 1.0                   # [*B, k, 1]
    cur = pos
    for j in range(pivots.shape[-1]):
        pj = p[..., j:j + 1, :]                              # [*B, 1, 1]
        at_p = pos == pj
        at_j = like._const(np.arange(m).reshape(-1, 1) == j)
        vj = cur[..., j:j + 1, :]
        vp = cur.where(at_p, 0.0).sum(-2, keepdim=True)
        cur = vp.where(at_j, vj.where(at_p, cur))
    return cur


def _rows(x, order):
    """``x`` ``[*B, m, c]`` with its rows taken in ``order`` ``[*B, m, 1]`` (float32):
    ``P^T x``."""
    take = order.int().broadcast_to(*order.shape[:-1], x.shape[-1])
    bs = ops.broadcast_shape("lu", x.shape[:-2], take.shape[:-2])
    return x.broadcast_to(*bs, *x.shape[-2:]).gather(-2, take.broadcast_to(
        *bs, *take.shape[-2:]))


def _perm_matrix(order, like):
    """``P`` ``[*B, m, m]`` with ``P[r, i] = 1`` where ``order[i] == r`` (``A = P L U``)."""
    m = order.shape[-2]
    return (_position(like, np.arange(m)) == order.mT).float()


def _upper_from_rows(urows, like, n: int):
    """``U`` ``[*B, k, n]`` from its rows ``[*B, 1, n - j]``."""
    k = len(urows)
    flat = urows[0].cat(*urows[1:], dim=-1) if k > 1 else urows[0]     # [*B, 1, total]
    flat = flat.squeeze(-2)
    idx = np.zeros((k, n), np.int32)
    off = 0
    for j in range(k):
        idx[j, j:] = off + np.arange(n - j)
        off += n - j
    got = flat.index_select(-1, like._const(idx.reshape(-1))).reshape(*flat.shape[:-1], k, n)
    return got.where(like._const(np.triu(np.ones((k, n), bool))), 0.0)


def _pad(x, rows: int, cols: int):
    """``x`` ``[*B, r, c]`` with zero rows and columns appended to ``[*B, rows, cols]``."""
    r, c = x.shape[-2:]
    if cols > c:
        x = x.cat(x._const(np.zeros((1,) * (x.ndim - 2) + (r, cols - c), np.float32))
                  .broadcast_to(*x.shape[:-1], cols - c), dim=-1)
    if rows > r:
        x = x.cat(x._const(np.zeros((1,) * (x.ndim - 2) + (rows - r, cols), np.float32))
                  .broadcast_to(*x.shape[:-2], rows - r, cols), dim=-2)
    return x


class _Factors:
    """The factorisation of ``a`` ``[*B, m, n]`` without gradient: ``L`` ``[*B, m, k]``,
    ``U`` ``[*B, k, n]``, the row order ``[*B, m, 1]``, LAPACK's pivots (int32 ``[*B,
    k]``), the pivots of ``U`` ``[*B, k, 1]``."""

    def __init__(self, a):
        m, n = a.shape[-2:]
        with no_grad():
            urows, lcols, idx, pivs = _steps(a)
            self.k = k = len(urows)
            swaps, order = _replay(idx, m, a)
            self.order = order
            self.pivots = (swaps.squeeze(-1) + 1.0).int()
            f = lcols[0].cat(*lcols[1:], dim=-1) if k > 1 else lcols[0]   # [*B, m, k]
            self.L = _rows(f, order) + a._const(np.eye(m, k, dtype=np.float32))
            self.U = _upper_from_rows(urows, a, n)
            self.piv = pivs[0].cat(*pivs[1:], dim=-2) if k > 1 else pivs[0]


def _with_grad(a, fac):
    """``(L, U)`` with ``A``'s gradient attached (module docstring)."""
    lo, up, k = fac.L, fac.U, fac.k
    m, n = a.shape[-2:]
    with no_grad():
        l1, u1 = lo[..., :k, :], up[..., :, :k]
        eye = eye_like(l1)
        l1inv = _finite(substitute(l1, eye, upper=False, unit=True))
        u1inv = _finite(substitute(u1, eye, upper=True))
        los, ups = _finite(lo), _finite(up)
    pda = _rows(_delta(a), fac.order)                           # P^T dA, [*B, m, n]
    mm = l1inv @ pda[..., :k, :k] @ u1inv
    dl1 = los[..., :k, :] @ mm.tril(-1)
    du1 = mm.triu() @ ups[..., :, :k]
    dl, du = dl1, du1
    if m > n:
        dl2 = (pda[..., k:, :] - los[..., k:, :] @ du1) @ u1inv
        dl = dl1.cat(dl2, dim=-2)
    if n > m:
        du2 = l1inv @ (pda[..., :, k:] - dl1 @ ups[..., :, k:])
        du = du1.cat(du2, dim=-1)
    return lo + dl, up + du


def _check(a, name: str) -> None:
    if a.ndim < 2:
        raise RuntimeError(f"{name}: Expected tensor with 2 or more dimensions. Got size: "
                           f"{list(a.shape)} instead{_site()}")
    kernel_check(a, "lu_cpu")
    limit(min(a.shape[-2:]), name.replace("torch.", ""), 25)


def _check_pivot(pivot: bool) -> None:
    if not pivot:
        raise RuntimeError(f"linalg.lu_factor: LU without pivoting is not implemented on the "
                           f"CPU{_site()}")


def _empty(a):
    """The results for a matrix with a zero size."""
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = tuple(a.shape[:-2])
    piv = a._wrap(ops.const(0, batch + (k,), "int32"))
    info = a._wrap(ops.const(0, batch, "int32"))
    return piv, info


def host_lu_info(a: np.ndarray) -> np.ndarray:
    """:func:`_steps`' ``info`` (the first zero pivot, 1-based) computed on the host in
    float32 for known values ``a`` ``[*B, m, n]``: int ``[*B]``."""
    w = np.array(a, np.float32, copy=True)
    m, n = w.shape[-2:]
    used = np.zeros(w.shape[:-2] + (m,), bool)
    info = np.zeros(w.shape[:-2], np.int64)
    with np.errstate(all="ignore"):
        for j in range(min(m, n)):
            col = w[..., :, 0]
            score = np.where(used, -1.0, np.abs(col))
            hit = (score == score.max(-1, keepdims=True)) | np.isnan(score)
            p = np.argmax(hit, -1)
            one = np.arange(m) == p[..., None]
            row = np.take_along_axis(w, p[..., None, None], -2)
            piv = row[..., 0, 0]
            info = np.where((info == 0) & (piv == 0), j + 1, info)
            used |= one
            f = np.where(used | (piv == 0)[..., None], 0.0, col / piv[..., None])
            w = (w[..., 1:] - f[..., None] * row[..., 1:]).astype(np.float32)
    return info


def _raise_if_singular(a, name: str) -> None:
    _lu_raise_if_singular(a, name, lambda i: (
        f"U[{i},{i}] is zero and using it on lu_solve would result in a division by zero. "
        f"If you still want to perform the factorization, consider calling "
        f"linalg.lu(A, pivot) or linalg.lu_factor_ex(A, pivot)"), host=host_lu_info)


# -- the operations ----------------------------------------------------------------------------
def lu_factor_ex(a, *, pivot: bool = True, check_errors: bool = False,
                 name: str = "torch.linalg.lu_factor_ex", want_info: bool = True):
    """``(LU, pivots, info)`` of float32 ``a`` ``[*B, m, n]`` (``torch.linalg.
    lu_factor_ex``; module docstring)."""
    _check(a, "torch.lu_factor")
    _check_pivot(pivot)
    if check_errors:
        _raise_if_singular(a, name)
    m, n = a.shape[-2:]
    if m == 0 or n == 0:
        piv, info = _empty(a)
        return LUFactorExResult(a * 1.0, piv, info)
    fac = _Factors(a)
    with no_grad():
        info = _info(fac.piv) if want_info else None
    lo, up = _with_grad(a, fac) if _grad_wanted(a) else (fac.L, fac.U)
    packed = _pad(lo, m, n).tril(-1) + _pad(up, m, n)
    return LUFactorExResult(packed, fac.pivots, info)


def lu_factor(a, *, pivot: bool = True):
    """``(LU, pivots)`` (``torch.linalg.lu_factor``): :func:`lu_factor_ex`, and
    ``LinAlgError`` for a singular matrix whose values are known while tracing."""
    r = lu_factor_ex(a, pivot=pivot, check_errors=True, name="torch.linalg.lu_factor",
                     want_info=False)
    return LUFactorResult(r.LU, r.pivots)


def lu(a, *, pivot: bool = True):
    """``(P, L, U)`` with ``A = P L U`` (``torch.linalg.lu``; module docstring)."""
    _check(a, "linalg.lu")
    _check_pivot(pivot)
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = tuple(a.shape[:-2])
    if m == 0 or n == 0:
        p = eye_like(a._wrap(ops.const(0.0, batch + (m, m), "float32")))
        return LUResult(p * 1.0, a._wrap(ops.const(0.0, batch + (m, k), "float32")),
                        a._wrap(ops.const(0.0, batch + (k, n), "float32")))
    fac = _Factors(a)
    with no_grad():
        p = _perm_matrix(fac.order, a).broadcast_to(*batch, m, m)
    lo, up = _with_grad(a, fac) if _grad_wanted(a) else (fac.L, fac.U)
    return LUResult(p, lo, up)


def lu_solve(lu_, pivots, b, *, left: bool = True, adjoint: bool = False):
    """``X`` with ``A X = B`` (``adjoint``: ``A^T X = B``; ``left=False``: ``X A = B`` or
    ``X A^T = B``) for ``A = P L U`` given as :func:`lu_factor`'s ``(LU, pivots)``
    (``torch.linalg.lu_solve``); ``LU`` ``[*A, n, n]``, ``pivots`` int32 ``[*A, n]``, ``B``
    ``[*B, n, k]`` (``[*B, k, n]`` for ``left=False``), batch dims broadcast."""
    name = "linalg.lu_solve"
    b = operand(lu_, b)
    pivots = operand(lu_, pivots)
    check_square(lu_, "torch." + name, limit=False)
    n = lu_.shape[-1]
    check_rhs(b, n, left, name)
    if dtypes.name(pivots.dtype) != "int32":
        raise RuntimeError(f"{name}: pivots should be a Tensor of scalar type torch.int32"
                           f"{_site()}")
    if tuple(pivots.shape) != tuple(lu_.shape[:-1]):
        if pivots.shape[-1:] != lu_.shape[-1:]:
            raise RuntimeError(f"{name}: Number of pivots per batch should be same as the "
                               f"dimension of the matrix{_site()}")
        raise RuntimeError(f"{name}: Expected LU.shape[:-1] and pivots.shape to be the same, "
                           f"but got pivots with shape {list(pivots.shape)} instead{_site()}")
    dt = dtypes.name(lu_.dtype)
    if dt not in ("float32", "float16", "bfloat16"):
        raise RuntimeError(f"torch.{name}: Expected a floating point or complex tensor as "
                           f"input. Got {_SCALAR_NAMES.get(dt, dt)}{_site()}")
    if b.dtype != lu_.dtype:
        raise RuntimeError(f"{name}: Expected LU and B to have the same dtype, but found LU "
                           f"of type {_SCALAR_NAMES[dt]} and B of type "
                           f"{_SCALAR_NAMES[dtypes.name(b.dtype)]} instead{_site()}")
    kernel_check(lu_, "linalg.lu_solve_cpu")
    limit(n, name, 17)
    # op(A) X' = B' on the left: X' = X, B' = B (left), or X' = X^T, B' = B^T (right)
    transposed = adjoint if left else not adjoint           # op is A^T
    bb = b if left else b.mT
    f = Fold(lu_, bb, name)
    piv_q = pivots.reshape(*f.a.shape[:-1])
    x = _lu_solve(f.a, piv_q, f.b, transposed, lu_, b)
    x = f.unfold(x)
    return x if left else x.mT


def _lu_solve(lq, pq, bq, transposed: bool, lu_, b):
    n, k = lq.shape[-1], bq.shape[-1]
    if n == 0 or k == 0:
        return bq * 1.0
    grad = _grad_wanted(lu_, b)
    with no_grad():
        order = _order_from_pivots(pq, n, lq)                 # [*K, n, 1]
        rhs = bq.cat(eye_like(lq), dim=-1) if grad else bq
        if not transposed:                                     # U^-1 L^-1 P^T B
            y = substitute(lq, _rows(rhs, order), upper=False, unit=True)
            sol = substitute(lq, y, upper=True)
        else:                                                  # P L^-T U^-T B
            y = substitute(lq.mT, rhs, upper=False)
            y = substitute(lq.mT, y, upper=True, unit=True)
            sol = _perm_matrix(order, lq) @ y
    x = sol[..., :k] if grad else sol
    if grad:
        with no_grad():
            ainv, xs = _finite(sol[..., k:]), _finite(x)
            pm = _perm_matrix(order, lq)
            lo = lq.tril(-1) + eye_like(lq)
            up = lq.triu()
        step = _delta(bq) if b.requires_grad else None
        if lu_.requires_grad:
            d = _delta(lq)
            da = pm @ (d.tril(-1) @ up + lo @ d.triu())
            da = (da.mT if transposed else da) @ xs
            step = -da if step is None else step - da
        x = x + ainv @ step
    return x
