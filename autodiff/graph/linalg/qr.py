"""QR decomposition (``torch.linalg.qr``, ``torch.qr``, ``Tensor.qr``) by Householder
reflections unrolled over the columns while tracing (Golub & Van Loan, "Matrix
Computations", 4th ed., sec. 5.1.2-5.1.3 and 5.2.1, algorithm 5.2.1), batched over the
leading dims.

* step ``j`` of ``A`` ``[*B, m, n]`` (``k = min(m, n)`` steps) takes the column ``x`` of the
  working block (rows and columns ``j..``) and the reflector ``H = I - s u u^T`` with
  LAPACK ``dlarfg``'s choice: ``beta = -sign(x_0) ||x||`` (``sign(0) = +``), ``u = x - beta
  e_1``, ``s = 1 / (beta (beta - x_0))`` (``dlarfg``'s ``tau v v^T`` with ``v = u / u_0``);
  where ``x``'s entries below the first are all exactly 0 (always so for a last column of
  one row), ``H = I`` and ``beta = x_0`` (``tau = 0``): the sign of ``R``'s diagonal is
  LAPACK's, so ``Q`` and ``R`` are ``geqrf`` + ``orgqr``'s (PyTorch's) up to rounding.
  ``H`` is applied to the block's other columns (``C - u (s u^T C)``), ``R``'s row ``j`` is
  ``(beta, (H C)[0])``, and the block loses its first row and column.
* ``Q`` (``mode='reduced'``: ``[*B, m, k]``, ``'complete'``: ``[*B, m, m]``) is accumulated
  backwards as ``orgqr`` does, ``H_0 (H_1 (... H_{k-1} I))``, the block growing by a row
  and a column per reflector. ``mode='r'`` skips it (``Q`` is an empty tensor ``[0]``).
* about 40 traced nodes per column for ``R`` and 12 for ``Q`` (7 more with the gradient):
  ``qr`` of n x n at n = 8 / 32: 378 / 1,626 traced nodes (523 / 1,939 with the
  gradient; ``mode='r'``: 291 / 1,251).

Gradients (``mode='reduced'``, and ``'complete'`` where it equals ``'reduced'``, ``m <= n``)
are PyTorch's ``linalg_qr_backward`` (Walter & Lehmann, "Algorithmic differentiation of
linear algebra functions with application in optimum experimental design (extended
version)", 2018, arXiv:1001.1654, sec. 3.4; the ``m < n`` case as PyTorch splits ``A = [X |
Y]``), attached as ``value + L(dA)`` (the mechanism of :mod:`.lu`): for ``m >= n``, ``C =
Q^T dA R^-1``, ``W = tril(C, -1) - tril(C, -1)^T``, ``dR = (C - W) R``, ``dQ = dA R^-1 - Q
(C - W)``; for ``m < n`` the same on the first ``m`` columns and ``dR_Y = dQ^T Y + Q^T dY``.
``R^-1`` is a back substitution without gradient; a matrix whose ``R^-1`` is not finite
(rank-deficient) gets gradient 0. As in PyTorch, back-propagating through ``mode='r'``, or
through ``mode='complete'`` with ``m > n``, raises ``RuntimeError`` (a hook on the results,
raised while ``backward()`` is traced).
"""
from __future__ import annotations

import collections

import numpy as np

from .. import ops
from ..trace import no_grad
from .lu import _delta, _finite, _grad_wanted, _site
from .lu_factor import _pad, _upper_from_rows
from .triangular import dtype_check, eye_like, limit, substitute

QRResult = collections.namedtuple("QRResult", ["Q", "R"])

_MODES = ("reduced", "complete", "r")


def _reflectors(a):
    """The Householder steps of ``a`` ``[*B, m, n]``: ``R``'s rows ``[*B, 1, n - j]`` and
    the reflectors ``(u [*B, m - j, 1], s [*B, 1, 1])`` (None for ``H = I`` statically)."""
    m, n = a.shape[-2:]
    k = min(m, n)
    w = a
    rows, refl = [], []
    for j in range(k):
        x = w[..., :, 0:1]                                     # [*B, m - j, 1]
        alpha = x[..., 0:1, :]
        rest = w[..., :, 1:]
        if m - j == 1:                                         # H = I: beta = alpha
            rows.append(w)
            refl.append(None)
            continue
        tail = x[..., 1:, :]
        xn2 = (tail * tail).sum(-2, keepdim=True)
        zero = xn2 == 0
        nrm = (alpha * alpha + xn2).sqrt()
        beta = (-nrm).where(alpha >= 0, nrm).where(~zero, alpha)
        s = (1.0 / (nrm * (nrm + alpha.abs()))).where(~zero, 0.0)
        e1 = a._const(np.eye(m - j, 1, dtype=np.float32))
        u = x - beta * e1
        refl.append((u, s))
        if n - j > 1:
            rest = rest - u * (s * (u.mT @ rest))
            rows.append(beta.cat(rest[..., 0:1, :], dim=-1))
            if j < k - 1:
                w = rest[..., 1:, :]
        else:
            rows.append(beta)
    return rows, refl


def _accumulate(refl, m: int, cols: int, like):
    """``Q[:, :cols] = H_0 ... H_{k-1} I[:, :cols]`` ``[*B, m, cols]`` (``orgqr``)."""
    k = len(refl)
    q = like._const(np.eye(m - k + 1, cols - k + 1, dtype=np.float32))
    for j in range(k - 1, -1, -1):
        if j < k - 1:
            size = q.shape[-1] + 1
            batch = tuple(q.shape[:-2])
            top = like._const(np.eye(1, size, dtype=np.float32)).broadcast_to(*batch, 1, size)
            zcol = like._const(np.zeros((q.shape[-2], 1), np.float32)).broadcast_to(
                *batch, q.shape[-2], 1)
            q = top.cat(zcol.cat(q, dim=-1), dim=-2)
        if refl[j] is not None:
            u, s = refl[j]
            q = q - u * (s * (u.mT @ q))
    return q


def _raising_hook(message: str):
    def hook(grad):
        raise RuntimeError(message)
    return hook


_NO_GRAD_R = ("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
              "Please use linalg.qr(A, mode='reduced') if you are going to differentiate "
              "through linalg.qr.")
_NO_GRAD_COMPLETE = ("The QR decomposition is not differentiable when mode='complete' and "
                     "nrows > ncols.")


def qr(a, mode: str = "reduced"):
    """``(Q, R)`` with ``A = Q R`` of float32 ``a`` ``[*B, m, n]`` (``torch.linalg.qr``):
    ``mode='reduced'``: ``Q`` ``[*B, m, k]``, ``R`` ``[*B, k, n]`` (``k = min(m, n)``);
    ``'complete'``: ``Q`` ``[*B, m, m]``, ``R`` ``[*B, m, n]``; ``'r'``: ``Q`` empty ``[0]``,
    ``R`` as ``'reduced'``. See the module docstring."""
    name = "linalg.qr"
    if mode not in _MODES:
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           f"'reduced' (default), 'r', or 'complete'{_site()}")
    if a.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions."
                           f"{_site()}")
    dtype_check(a, name, kernel="geqrf_cpu")
    m, n = a.shape[-2:]
    k = min(m, n)
    limit(k, name, 30)
    batch = tuple(a.shape[:-2])
    qcols = m if mode == "complete" else k
    if k == 0:
        q = eye_like(a._wrap(ops.const(0.0, batch + (m, m), "float32")))[..., :qcols]
        r = a._wrap(ops.const(0.0, batch + (m if mode == "complete" else k, n), "float32"))
        if mode == "r":
            q = a._wrap(ops.const(0.0, (0,), "float32"))
        return QRResult(q * 1.0, r)
    grad = _grad_wanted(a)
    differentiable = mode == "reduced" or (mode == "complete" and m <= n)
    with no_grad():
        rows, refl = _reflectors(a)
        r = _upper_from_rows(rows, a, n)                       # [*B, k, n]
        q = _accumulate(refl, m, qcols if mode != "r" else k, a) if mode != "r" or (
            grad and differentiable) else None
        if q is not None and q.ndim - 2 < len(batch):
            q = q.broadcast_to(*batch, *q.shape[-2:])
    if grad and differentiable:
        q, r = _attach(a, q, r)
    elif grad:
        zero = _delta(a).sum((-2, -1), keepdim=True) * 0.0    # requires grad, exactly 0
        msg = _NO_GRAD_R if mode == "r" else _NO_GRAD_COMPLETE
        r = r + zero
        r.register_hook(_raising_hook(msg))
        if q is not None:
            q = q + zero
            q.register_hook(_raising_hook(msg))
    if mode == "complete" and m > k:
        r = _pad(r, m, n)
    if mode == "r":
        q = a._wrap(ops.const(0.0, (0,), "float32"))
    return QRResult(q, r)


def _attach(a, q, r):
    """``(Q, R)`` with ``A``'s gradient attached (module docstring); ``q`` is ``[*B, m,
    k]`` (square when ``m <= n``)."""
    m, n = a.shape[-2:]
    k = min(m, n)
    with no_grad():
        r1 = r[..., :, :k]
        rinv = _finite(substitute(r1, eye_like(r1), upper=True))
        qs, rs = _finite(q), _finite(r)
    da = _delta(a)
    c = qs.mT @ da[..., :, :k] @ rinv
    low = c.tril(-1)
    cw = c.triu() + low.mT                                     # C - W
    dq = da[..., :, :k] @ rinv - qs @ cw
    dr = cw @ rs[..., :, :k]
    if n > m:
        dr = dr.cat(dq.mT @ a.detach()[..., :, k:] + qs.mT @ da[..., :, k:], dim=-1)
    return q + dq, r + dr
