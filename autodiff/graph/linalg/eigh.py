"""Symmetric eigendecomposition (``torch.linalg.eigh``, ``eigvalsh``) by the cyclic Jacobi
method with a fixed number of sweeps, unrolled while tracing (Golub & Van Loan, "Matrix
Computations", 4th ed., sec. 8.5.2-8.5.5: algorithm 8.5.1 ``symSchur2`` for each rotation,
and the parallel ordering of sec. 8.5.5, Brent & Luk 1985).

* the matrix is symmetrised from the triangle LAPACK reads (``UPLO='L'``: the lower one,
  ``'U'``: the upper one); a sweep is ``n - 1`` rounds (``n`` even; ``n`` rounds with one
  index idle in each for odd ``n``) of the round-robin ordering, each round ``n / 2``
  disjoint rotations applied at once: the pairs' ``(a_pp, a_qq, a_pq)`` are read with
  constant indices, ``symSchur2``'s ``(c, s)`` computed for all of them (no rotation where
  ``a_pq`` is exactly 0), the round's rotation ``J`` built with one product by a constant
  0/±1 matrix (exact), and ``A <- J^T A J``, ``V <- V J``.
* :func:`sweeps_for` sweeps, ``ceil(log2 n) + 3`` (n = 8: 6, n = 32: 8, n = 64: 9), are
  unrolled whatever the input (shapes are static: no convergence test). Jacobi converges
  quadratically once the off-diagonal part is small; ``ceil(log2 n) + 2`` sweeps sufficed on
  every spectrum measured, the extra one is margin. The eigenvalues are then the Rayleigh
  quotients ``v^T A v`` of the normalised columns of ``V`` with the input matrix (the
  diagonal left by the rotations carries the rounding of all of them, ~20x LAPACK's
  error at n = 64; the quotients are as accurate as LAPACK's).
* measured against float64 LAPACK on random symmetric float32 matrices (uniform entries,
  and ``Q diag(w) Q^T`` with graded ``|w|`` in [1e-4, 1], two clusters 1e-3 apart, one
  outlier; n = 3 to 64): eigenvalues within 5.1e-7 of ``||A||_2`` (PyTorch's float32:
  1.4e-6), residual ``||A V - V diag(w)||`` within 9e-7 of ``||A||_2``, ``V^T V - I``
  within 1.2e-6, eigenvectors (signs aligned) within 5.5e-6 at n = 32 and 1.4e-5 at n = 64
  where the eigenvalue gaps are at least 1e-2 of ``||A||_2`` (the error grows as
  ``eps / gap``, as LAPACK's).
* eigenvalues are sorted ascending (a sort network on values without gradient, then one
  gather of ``V``'s columns); the eigenvectors are unit columns whose signs are whatever the
  rotations give: eigenvectors are only defined up to sign, and LAPACK's are not
  reproduced.
* about 45 traced nodes per round (``sweeps_for(n) * (n - 1)`` rounds): ``eigh`` at n = 8
  / 32 / 64 traces 2,028 / 11,030 / ~25,000 nodes (2,108 / 11,110 with the gradient; 3/4
  of that after the graph passes), the largest graphs of :mod:`autodiff.linalg` (tracing,
  compiling and running ``eigh`` on the OpenCL device, PoCL on 2 cores: n = 16 ~6 s, n = 32
  ~13 s): :data:`MAX_N` is 64.

Gradients are PyTorch's ``linalg_eig_backward`` for Hermitian input (Giles 2008, sec.
3.1; distinct eigenvalues), attached as ``value + L(dA)`` (the mechanism of :mod:`.lu`):
with ``S = (dA + dA^T) / 2`` and ``M = V^T S V``, ``dw = diag(M)`` and ``dV = V (F o M)``,
``F_ij = 1 / (w_j - w_i)`` off the diagonal; the adjoint is ``gA = V (diag(gw) + F o
skew(V^T gV)) V^T``, PyTorch's (symmetric). Where two eigenvalues are equal ``F`` is
infinite: those entries are set to 0 (PyTorch's gradient is ``inf``/NaN there; a loss that
does not depend on the choice of basis of the eigenspace gets the right gradient).
"""
from __future__ import annotations

import collections
import math

import numpy as np

from ..trace import no_grad
from .lu import _delta, _grad_wanted, _site, check_square
from .triangular import _symmetric, kernel_check

EighResult = collections.namedtuple("EighResult", ["eigenvalues", "eigenvectors"])

#: sweeps beyond ``ceil(log2 n)`` (:func:`sweeps_for`)
EXTRA = 3
#: the largest matrix size: ``sweeps_for(n) * (n - 1)`` rounds of ~45 traced nodes each
MAX_N = 64


def sweeps_for(n: int) -> int:
    """The sweeps unrolled for ``n x n`` matrices: ``ceil(log2 n) + EXTRA`` (a 1x1 needs
    none, a 2x2 one rotation)."""
    if n <= 1:
        return 0
    if n == 2:
        return 1
    return math.ceil(math.log2(n)) + EXTRA


def _rounds(n: int):
    """The round-robin rounds (Brent & Luk's parallel ordering, as a tournament schedule):
    each a list of disjoint pairs ``(p, q)``, ``p < q``, every pair once per sweep."""
    m = n + (n % 2)                                  # a dummy player m - 1 for odd n
    players = list(range(m))
    rounds = []
    for _ in range(m - 1):
        pairs = []
        for i in range(m // 2):
            p, q = players[i], players[m - 1 - i]
            if p < n and q < n:
                pairs.append((min(p, q), max(p, q)))
        rounds.append(pairs)
        players = [players[0]] + [players[-1]] + players[1:-1]
    return rounds


class _Round:
    """The constants of one round on ``n x n`` matrices: the flat positions of ``a_pp``,
    ``a_qq``, ``a_pq`` of its ``k`` pairs, and ``sel`` ``[2k, n * n]`` with ``J = (c, s) @
    sel + idle`` the round's rotation (``J[p, p] = J[q, q] = c``, ``J[p, q] = s``, ``J[q, p]
    = -s``; ``idle``: the identity's entry of an index in no pair)."""

    def __init__(self, pairs, n: int, like):
        p = np.array([a for a, _ in pairs], np.int64)
        q = np.array([b for _, b in pairs], np.int64)
        k = len(pairs)
        self.pp = like._const((p * n + p).astype(np.int32))
        self.qq = like._const((q * n + q).astype(np.int32))
        self.pq = like._const((p * n + q).astype(np.int32))
        sel = np.zeros((2 * k, n * n), np.float32)
        sel[np.arange(k), p * n + p] = 1.0
        sel[np.arange(k), q * n + q] = 1.0
        sel[k + np.arange(k), p * n + q] = 1.0
        sel[k + np.arange(k), q * n + p] = -1.0
        self.sel = like._const(sel)
        idle = np.setdiff1d(np.arange(n), np.concatenate([p, q]))
        eye = np.zeros((n, n), np.float32)
        eye[idle, idle] = 1.0
        self.idle = like._const(eye) if idle.size else None


def _rotate(a, v, r: _Round):
    """One round of rotations ``A <- J^T A J``, ``V <- V J`` on ``a`` ``[*B, n, n]`` and
    ``v`` (or None): ``symSchur2`` (Golub & Van Loan, algorithm 8.5.1) for every pair."""
    n = a.shape[-1]
    flat = a.reshape(*a.shape[:-2], n * n)
    app, aqq, apq = (flat.index_select(-1, i) for i in (r.pp, r.qq, r.pq))
    zero = apq == 0
    tau = (aqq - app) / (apq.where(~zero, 1.0) * 2.0)
    t = 1.0 / (tau.abs() + (1.0 + tau * tau).sqrt())
    t = t.where(tau >= 0, -t).where(~zero, 0.0)
    c = (1.0 + t * t).rsqrt()
    j = (c.cat(t * c, dim=-1) @ r.sel).reshape(*a.shape)
    if r.idle is not None:
        j = j + r.idle
    a = j.mT @ a @ j
    return a, (v @ j if v is not None else None)


def jacobi(a):
    """The eigenvectors ``[*B, n, n]`` (unnormalised columns, unsorted) of symmetric ``a``
    ``[*B, n, n]`` after :func:`sweeps_for` sweeps. Traces with gradient when enabled
    (callers wrap it in ``no_grad()``)."""
    n = a.shape[-1]
    rounds = [_Round(pairs, n, a) for pairs in _rounds(n)] if n > 1 else []
    v = a._const(np.eye(n, dtype=np.float32)).broadcast_to(*a.shape) * 1.0
    for _ in range(sweeps_for(n)):
        for r in rounds:
            a, v = _rotate(a, v, r)
    return v


def _check(a, name: str, uplo: str) -> None:
    if uplo not in ("L", "U", "l", "u"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {uplo}{_site()}")
    check_square(a, name, limit=False)
    kernel_check(a, "linalg_eigh_cpu")
    n = a.shape[-1]
    if n > MAX_N:
        raise NotImplementedError(
            f"{name}: {n} by {n} matrices are too large: the Jacobi sweeps are unrolled "
            f"while tracing ({sweeps_for(n)} sweeps of n - 1 rounds, about 45 graph nodes "
            f"each), up to {MAX_N} rows{_site()}")


def eigh(a, uplo: str = "L", *, name: str = "linalg.eigh", vectors: bool = True):
    """``(eigenvalues [*B, n] ascending, eigenvectors [*B, n, n])`` of the symmetric matrix
    whose lower (``uplo='L'``) or upper triangle is ``a``'s (``torch.linalg.eigh``); see the
    module docstring."""
    _check(a, name, uplo)
    upper = uplo in ("U", "u")
    n = a.shape[-1]
    if n == 0:
        w = a.sum(-1) * 1.0
        return EighResult(w, a * 1.0 if vectors else None)
    grad = _grad_wanted(a)
    with no_grad():
        sym = _symmetric(a, upper)
        v = jacobi(sym)
        v = v * (v * v).sum(-2, keepdim=True).rsqrt()          # unit columns
        w = (v * (sym @ v)).sum(-2)                             # Rayleigh quotients
        w, order = w.sort(-1)
        v = v.gather(-1, order.unsqueeze(-2).broadcast_to(*v.shape))
    if grad:
        with no_grad():
            gap = w.unsqueeze(-2) - w.unsqueeze(-1)                  # w_j - w_i
            f = (1.0 / gap.where(gap != 0, 1.0)).where(gap != 0, 0.0)
            f = f.where(f.isfinite(), 0.0)
            vs = v.where(v.isfinite(), 0.0)
        da = _delta(a)
        m = vs.mT @ ((da + da.mT) * 0.5) @ vs
        w = w + m.diagonal(0, -2, -1)
        if vectors:
            v = v + vs @ (f * m)
    return EighResult(w, v if vectors else None)


def eigvalsh(a, uplo: str = "L"):
    """The eigenvalues ``[*B, n]`` (ascending) of :func:`eigh` (``torch.linalg.eigvalsh``);
    gradient ``V diag(g) V^T``."""
    return eigh(a, uplo, name="linalg.eigh", vectors=False).eigenvalues
