"""Matrix inverse, determinants and linear solves (``torch.linalg.inv``/``inv_ex``,
``det``, ``slogdet``, ``logdet``, ``solve``/``solve_ex``), composed from existing graph ops.

The graph IR has no factorisation op, and its shapes are static, so the factorisation is
Gauss-Jordan elimination with partial pivoting (Golub & Van Loan, "Matrix Computations",
4th ed., sec. 3.2 (LU, Gaussian elimination) and 3.4.1-3.4.3 (partial pivoting)),
unrolled over the matrix size ``n`` while tracing and batched over the leading dims:

* step ``j`` picks, among the rows not yet used as pivot rows, the first one whose entry in
  column ``j`` has the largest magnitude (``amax`` and a comparison with a row-position
  constant; a NaN is picked first, so it propagates), reads that row (a ``where`` and a
  ``sum``: exact), and subtracts multiples of it from every other row (Gauss-Jordan: the
  rows above too, so no back substitution follows). Rows are never moved: the pivot rows'
  order is the permutation, applied once at the end (one ``GATHER``).
* the working matrix drops the eliminated column every step, so the work is
  ``~n^2 (n/2 + k)`` multiply-adds for ``k`` right-hand columns (``k = n`` for the
  inverse), and the graph grows by a fixed number of nodes per step (about 38 as traced,
  33 after the graph passes; see :data:`MAX_N`).
* the pivots are those of LU with partial pivoting (``P A = L U``, ``U``'s diagonal), so
  ``det = sign(P) prod(pivots)`` and ``slogdet = (sign(P) prod(sign(pivots)),
  sum(log|pivots|))``; ``sign(P)`` is the parity of the pivot rows' inversions.

A zero pivot (an exactly singular matrix, as the elimination meets it) gives zero
multipliers, so the elimination goes on as LAPACK's ``getrf`` does: ``det`` is 0,
``slogdet`` ``(0, -inf)``, and ``inv``/``solve`` divide by the zero pivot (``±inf`` or
NaN entries, the values LAPACK leaves). ``info`` (``inv_ex``, ``solve_ex``) is ``getrf``'s:
the 1-based step of the first zero pivot, 0 if none. The singular-input error of
``inv``/``solve`` (``torch.linalg.LinAlgError``) needs values: it is raised while tracing
when the matrix's values are known then (a tensor made from data, see
:func:`~autodiff.graph.linalg.scan.known_values`), else the program runs and gives the
``inf``/NaN entries.

Gradients are PyTorch's analytic ones, attached to the value computed without gradient
as ``value + L(A - A.detach())`` (the mechanism of :mod:`.special`: the added term is
exactly 0, its gradient is the linear map ``L``'s adjoint): ``d inv = -Y dA Y``,
``d det = det tr(Y dA)``, ``d logabsdet = tr(Y dA)``, ``d X = Y (dB - dA X)`` for ``solve``
(``Y = A^-1``). Back-propagating through the elimination itself would also be correct
(the pivot choice is piecewise constant; measured as accurate as the analytic form) but
adds ~24 nodes per step to the backward graph (an inverse with gradient at n = 64: 4,398
traced nodes instead of 2,882), where the analytic forms cost two matrix products.
A matrix whose inverse (or solution) is not finite, as for a matrix the elimination finds
singular, takes gradient 0 (PyTorch: 0 from ``det``, ``inf``/NaN from the others; the
attached term must stay exactly 0, and ``0 * inf`` is NaN), and so do entries of ``A`` or
``B`` that are not finite. The graph IR has first-order gradients only, so nothing is
lost by detaching.
"""
from __future__ import annotations

import collections

import numpy as np

from .. import dtypes, ops
from ..trace import TRACER, no_grad, user_site
from ..mixins.linalg import _SCALAR_NAMES
from ..mixins.scan import known_values

#: The largest matrix size the elimination is unrolled for. Each of the ``n`` steps adds
#: about 38 traced graph nodes (an inverse with its gradient: 365 at n = 8, 1,277 at 32,
#: 2,493 at 64, 4,925 at 128, 9,789 at 256), and every later stage works per node: on
#: the OpenCL device (PoCL, 2 cores) compiling the n = 64 program takes ~8 s, n = 128
#: 9-30 s, n = 256 ~55 s, growing faster than linearly beyond, while the work per step
#: (an ``n x (2n - j)`` update) stays small. Larger matrices raise
#: ``NotImplementedError`` before anything is traced.
MAX_N = 256

SlogdetResult = collections.namedtuple("SlogdetResult", ["sign", "logabsdet"])
InvExResult = collections.namedtuple("InvExResult", ["inverse", "info"])
SolveExResult = collections.namedtuple("SolveExResult", ["result", "info"])


class LinAlgError(RuntimeError):
    """``torch.linalg.LinAlgError``: a singular matrix met by ``inv``/``solve`` (or by
    ``inv_ex``/``solve_ex`` with ``check_errors=True``), raised while tracing when the
    matrix's values are known then. A ``RuntimeError``, as PyTorch's."""


# -- checks (before anything is traced) --------------------------------------------------
def _site() -> str:
    return f" (traced at {user_site()})"


def check_rhs(b, n: int, left: bool, name: str) -> None:
    """PyTorch's ``RuntimeError`` s for the right-hand side ``B`` of ``A X = B`` (``left``,
    ``B`` ``[*, n, k]``) or ``X A = B`` (``B`` ``[*, k, n]``) with ``A`` ``n x n``: rank
    below 2, or the wrong length along the equation's axis."""
    if b.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor B must have at least 2 dimensions."
                           f"{_site()}")
    if (b.shape[-2] if left else b.shape[-1]) != n:
        raise RuntimeError(f"{name}: Incompatible shapes of A and B for the equation "
                           f"{'AX = B' if left else 'XA = B'} ({n}x{n} and {b.shape[-2]}x"
                           f"{b.shape[-1]}){_site()}")


def check_square(a, name: str, limit: bool = True) -> None:
    """PyTorch's ``RuntimeError`` for a tensor of rank < 2 or non-square matrices, and
    (with ``limit``) ``NotImplementedError`` above :data:`MAX_N`."""
    if a.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions."
                           f"{_site()}")
    r, c = a.shape[-2:]
    if r != c:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are {r} "
                           f"by {c} matrices{_site()}")
    if limit and r > MAX_N:
        raise NotImplementedError(
            f"{name}: {r} by {r} matrices are too large: the LU factorisation is unrolled "
            f"over the matrix size while tracing (about 40 graph nodes per row), up to "
            f"{MAX_N} rows{_site()}")


def check_float(a, name: str, lu_kernel: bool = False) -> None:
    """PyTorch's errors for a non-float32 input: integers and bool raise ``RuntimeError``;
    float16/bfloat16 ``RuntimeError`` ("Low precision dtypes not supported"), or, for the
    ops PyTorch sends straight to its LU kernel (``det``, ``solve``),
    ``NotImplementedError``."""
    dt = dtypes.name(a.dtype)
    if dt == "float32":
        return
    what = _SCALAR_NAMES.get(dt, dt)
    if dt in ("float16", "bfloat16"):
        if lu_kernel:
            raise NotImplementedError(f"\"lu_cpu\" not implemented for '{what}'{_site()}")
        raise RuntimeError(f"{name}: Low precision dtypes not supported. Got {what}{_site()}")
    raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got "
                       f"{what}{_site()}")


# -- the elimination -----------------------------------------------------------------------
def _position(a, values):
    """A float32 constant column ``[n, 1]`` of ``values``."""
    return a._const(np.asarray(values, np.float32).reshape(-1, 1))


def pick(col, used, pos, rev):
    """The pivot row of one step of partial pivoting: among the rows not ``used`` (a bool
    ``[*B, m, 1]`` mask, or None), the first whose entry of ``col`` ``[*B, m, 1]`` has the
    largest magnitude (a NaN is picked first, so it propagates). ``pos``/``rev`` are the
    constants ``0 .. m-1`` and ``m .. 1`` (:func:`_position`). Returns the row's original
    index ``[*B, 1, 1]`` (float32) and its one-hot mask ``[*B, m, 1]``."""
    m = col.shape[-2]
    score = col.abs()
    if used is not None:
        score = score.where(~used, -1.0)
    top = score.amax(-2, keepdim=True)
    hit = (score == top) | (score != score)            # a NaN is picked, and propagates
    idx = m - rev.where(hit, 0.0).amax(-2, keepdim=True)          # [*B, 1, 1]
    return idx, pos == idx                                # the one-hot pivot row


def eliminate(a, rhs=None):
    """Gauss-Jordan elimination with partial pivoting of ``[a | rhs]``.

    Args:
        a: float32 ``[*B, n, n]``, ``n >= 1``.
        rhs: None, or float32 ``[*B, n, k]`` (the same batch shape).

    Returns:
        ``(pivots, rows, solution)``: the pivots in step order ``[*B, n, 1]`` (LU's
        ``U`` diagonal), the original row index of each step's pivot row ``[*B, n, 1]``
        (float32), and ``a^-1 rhs`` ``[*B, n, k]`` (None without ``rhs``).

    Traces with gradient when enabled (callers wrap it in ``no_grad()``).
    """
    n = a.shape[-1]
    pos = _position(a, np.arange(n))
    rev = _position(a, np.arange(n, 0, -1))              # n .. 1: the first hit is the largest
    m = a if rhs is None else a.cat(rhs, dim=-1)
    used = None
    pivots, rows = [], []
    for j in range(n):
        col = m[..., 0:1]                                  # [*B, n, 1], column j
        idx, one = pick(col, used, pos, rev)
        row = m.where(one, 0.0).sum(-2, keepdim=True)                 # [*B, 1, w], exact
        piv = row[..., 0:1]
        pivots.append(piv)
        rows.append(idx)
        if j < n - 1 or rhs is not None:
            # multipliers; 0 for the pivot row itself and for a zero pivot (getrf goes on)
            f = (col / piv).where(~(one | (piv == 0)), 0.0)
            m = m[..., 1:] - f * row[..., 1:]
        used = one if used is None else used | one
    piv = pivots[0].cat(*pivots[1:], dim=-2)
    idx = rows[0].cat(*rows[1:], dim=-2)
    if rhs is None:
        return piv, idx, None
    k = rhs.shape[-1]
    take = idx.int().broadcast_to(*idx.shape[:-1], k)
    return piv, idx, m.gather(-2, take) / piv


def _info(piv):
    """``getrf``'s info from the pivots ``[*B, n, 1]``: the 1-based step of the first zero
    pivot, 0 if none (int32 ``[*B]``)."""
    n = piv.shape[-2]
    rev = _position(piv, np.arange(n, 0, -1))
    last = rev.where(piv == 0, 0.0).amax(-2).squeeze(-1)    # n + 1 - first, or 0
    return ((n + 1.0) - last).masked_fill(last == 0, 0.0).int()


def _perm_sign(idx):
    """The sign of the permutation of pivot rows ``idx`` ``[*B, n, 1]``: ``(-1)^inversions``
    (float32 ``[*B]``)."""
    n = idx.shape[-2]
    upper = idx._const(np.triu(np.ones((n, n), np.float32), 1))
    inversions = ((idx > idx.mT).float() * upper).sum((-2, -1))
    return 1.0 - 2.0 * inversions.remainder(2.0)


# -- numpy mirror for the singular-input errors --------------------------------------------
def host_info(a: np.ndarray) -> np.ndarray:
    """:func:`eliminate`'s ``info`` (see :func:`_info`) computed on the host in float32 for
    known values ``a`` ``[*B, n, n]``: int ``[*B]``."""
    m = np.array(a, np.float32, copy=True)
    n = m.shape[-1]
    batch = m.shape[:-2]
    used = np.zeros(batch + (n,), bool)
    info = np.zeros(batch, np.int64)
    with np.errstate(all="ignore"):
        for j in range(n):
            col = m[..., :, 0]
            score = np.where(used, -1.0, np.abs(col))
            top = score.max(-1, keepdims=True)
            hit = (score == top) | np.isnan(score)
            p = np.argmax(hit, -1)
            one = np.arange(n) == p[..., None]
            row = np.take_along_axis(m, p[..., None, None], -2)      # [*B, 1, w]
            piv = row[..., 0, 0]
            info = np.where((info == 0) & (piv == 0), j + 1, info)
            f = np.where(one | (piv == 0)[..., None], 0.0, col / piv[..., None])
            m = (m[..., 1:] - f[..., None] * row[..., 1:]).astype(np.float32)
            used |= one
    return info


def _raise_if_singular(a, name: str, batched_msg, check: bool = True,
                       host=host_info) -> None:
    """Raise ``LinAlgError`` when ``a``'s values are known while tracing and the
    elimination meets a zero pivot (``host(values)``: LAPACK's ``info`` per matrix, as
    :func:`host_info`); ``batched_msg(info)`` is the text after the batch element."""
    if not check or 0 in a.shape[-2:]:
        return
    v = known_values(a)
    if v is None:
        return
    info = host(np.asarray(v, np.float32)).reshape(-1)
    bad = np.flatnonzero(info)
    if bad.size:
        b = int(bad[0])
        where = f"(Batch element {b}): " if a.ndim > 2 else ""
        raise LinAlgError(f"{name}: {where}{batched_msg(int(info[b]))}{_site()}")


def _inv_msg(i):
    return (f"The diagonal element {i} is zero, the inversion could not be completed because "
            f"the input matrix is singular.")


def _solve_msg(i):
    return "The solver failed because the input matrix is singular."


# -- gradient attachment -------------------------------------------------------------------
def _grad_wanted(*xs) -> bool:
    return TRACER.grad_enabled and any(x.requires_grad for x in xs)


def _delta(x):
    """``x - x.detach()`` with the non-finite entries zeroed: exactly 0, gradient 1 where
    ``x`` is finite (0 elsewhere)."""
    with no_grad():
        ok = x.isfinite()
    xs = x.masked_fill(~ok, 0.0)
    return xs - xs.detach()


def _finite(y):
    """``y`` ``[*B, r, c]`` (no gradient), with every matrix that holds a non-finite entry
    replaced by zeros."""
    with no_grad():
        ok = (y * 0.0).sum((-2, -1), keepdim=True) == 0          # NaN where any is not
        return y.where(ok, 0.0)


def _eye_like(a):
    n = a.shape[-1]
    return a._const(np.eye(n, dtype=np.float32)).broadcast_to(a.shape)


def _empty_batch(a, value, dtype="float32"):
    return a._wrap(ops.const(value, tuple(a.shape[:-2]), dtype))


# -- the operations ------------------------------------------------------------------------
def inv(a, name: str = "linalg.inv", check_errors: bool = True):
    """``A^-1`` of float32 ``[*B, n, n]`` (``torch.linalg.inv``); see :func:`inv_ex`."""
    return inv_ex(a, name=name, check_errors=check_errors, want_info=False).inverse


def inv_ex(a, *, check_errors: bool = False, name: str = "linalg.inv",
           want_info: bool = True):
    """``(A^-1, info)`` (``torch.linalg.inv_ex``): ``info`` int32 ``[*B]``, 0 where the
    elimination met no zero pivot, else the 1-based step of the first one."""
    check_square(a, name)
    check_float(a, name)
    ex_name = "linalg.inv_ex" if want_info and name == "linalg.inv" else name
    _raise_if_singular(a, ex_name, _inv_msg, check_errors)
    n = a.shape[-1]
    if n == 0:
        info = _empty_batch(a, 0, "int32") if want_info else None
        return InvExResult(a * 1.0, info)
    with no_grad():
        piv, _, y = eliminate(a, _eye_like(a))
        info = _info(piv) if want_info else None
    if _grad_wanted(a):
        ys = _finite(y)
        y = y - ys @ _delta(a) @ ys
    return InvExResult(y, info)


def _logabs_grad(a, y, out):
    """``out + tr(Y (A - A.detach()))``: gradient ``Y^T`` (``d log|det A|``)."""
    return out + (_finite(y).mT * _delta(a)).sum((-2, -1))


def _factor(a, with_inverse: bool):
    """(pivots ``[*B, n]``, permutation sign ``[*B]``, the inverse or None), no gradient."""
    with no_grad():
        piv, idx, y = eliminate(a, _eye_like(a) if with_inverse else None)
        return piv.squeeze(-1), _perm_sign(idx), y


def det(a, name: str = "linalg.det"):
    """``det A`` ``[*B]`` (``torch.linalg.det``): ``sign(P) prod(pivots)``."""
    check_square(a, name)
    check_float(a, name, lu_kernel=True)
    if a.shape[-1] == 0:
        return a.sum((-2, -1)) * 0.0 + 1.0                  # 1 for every empty matrix
    grad = _grad_wanted(a)
    piv, sign, y = _factor(a, grad)
    with no_grad():
        d = piv.prod(-1) * sign
    if grad:
        with no_grad():
            ds = d.where(d.isfinite(), 0.0)
        d = d + ds * (_finite(y).mT * _delta(a)).sum((-2, -1))
    return d


def slogdet(a, name: str = "linalg.slogdet"):
    """``(sign, log|det A|)``, each ``[*B]`` (``torch.linalg.slogdet``); ``sign`` takes no
    gradient."""
    check_square(a, name)
    check_float(a, name)
    if a.shape[-1] == 0:
        zero = a.sum((-2, -1)) * 0.0
        return SlogdetResult(_empty_batch(a, 1.0), zero)
    grad = _grad_wanted(a)
    piv, sign, y = _factor(a, grad)
    with no_grad():
        s = piv.sign().prod(-1) * sign
        logabs = piv.abs().log().sum(-1)
    if grad:
        logabs = _logabs_grad(a, y, logabs)
    return SlogdetResult(s, logabs)


def logdet(a):
    """``log det A`` ``[*B]`` (``torch.logdet``): NaN where the determinant is negative,
    ``-inf`` where it is 0."""
    s, logabs = slogdet(a, name="logdet")
    with no_grad():
        neg = s < 0
    return logabs.masked_fill(neg, float("nan"))


def _solve_shapes(a, b, left: bool, name: str):
    """PyTorch's checks of ``solve``; returns ``(a, b as a matrix, vector_case)``."""
    b = b if hasattr(b, "node") else a._wrap(a._lift(b))
    if dtypes.name(a.dtype) not in ("float32", "float16", "bfloat16"):
        check_float(a, name)
    if a.dtype != b.dtype:
        raise RuntimeError(f"{name}: Expected A and B to have the same dtype, but found A of "
                           f"type {_SCALAR_NAMES[dtypes.name(a.dtype)]} and B of type "
                           f"{_SCALAR_NAMES[dtypes.name(b.dtype)]} instead{_site()}")
    check_square(a, name)
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and tuple(b.shape) == tuple(a.shape[:-1]))
    bm = b.unsqueeze(-1) if vector else b
    check_rhs(bm, a.shape[-1], left, name)
    check_float(a, name, lu_kernel=True)
    ops.broadcast_shape(name, a.shape[:-2], bm.shape[:-2])
    return a, b, bm, vector


def solve_ex(a, b, *, left: bool = True, check_errors: bool = False,
             name: str = "linalg.solve_ex", want_info: bool = True):
    """``(X, info)`` with ``A X = B`` (``XA = B`` for ``left=False``) (``torch.linalg.
    solve_ex``): ``info`` int32 of ``A``'s batch shape, as :func:`inv_ex`'s."""
    shown = "linalg.solve"
    a, b, bm, vector = _solve_shapes(a, b, left, shown)
    _raise_if_singular(a, "torch." + name, _solve_msg, check_errors)
    if not left:
        a, bm = a.mT, bm.mT
    x, info = _solve_matrix(a, bm, want_info)
    if not left:
        x = x.mT
    return SolveExResult(x.squeeze(-1) if vector else x, info)


def solve(a, b, *, left: bool = True):
    """``X`` with ``A X = B`` (``torch.linalg.solve``); see :func:`solve_ex`."""
    return solve_ex(a, b, left=left, check_errors=True, name="linalg.solve",
                    want_info=False).result


def _solve_matrix(a, b, want_info: bool):
    """``A^-1 B`` for ``a`` ``[*A, n, n]`` and ``b`` ``[*B', n, k]`` (batches broadcast),
    and ``info`` of ``A``'s batch. Batch dims where ``A`` has size 1 (or none) but ``B``
    does not are folded into ``B``'s columns: one elimination per distinct matrix."""
    n, k = a.shape[-1], b.shape[-1]
    full = ops.broadcast_shape("linalg.solve", a.shape[:-2], b.shape[:-2])
    nb = len(full)
    abatch = (1,) * (nb - (a.ndim - 2)) + tuple(a.shape[:-2])
    fold = [i for i in range(nb) if abatch[i] == 1 and full[i] > 1]
    keep = [i for i in range(nb) if i not in fold]
    if n == 0 or k == 0:
        x = b.broadcast_to(*full, n, k) * 1.0
        info = _empty_batch(a, 0, "int32")
        return x, info
    bf = b.broadcast_to(*full, n, k)
    perm = keep + [nb] + fold + [nb + 1]
    bq = bf.permute(*perm).reshape(*[full[i] for i in keep], n, -1)
    aq = a.reshape(*[full[i] for i in keep], n, n)
    grad = _grad_wanted(a, b)
    with no_grad():
        rhs = bq.cat(_eye_like(aq), dim=-1) if grad else bq
        piv, _, sol = eliminate(aq, rhs)
        info = _info(piv).reshape(a.shape[:-2]) if want_info else None
    xq = sol[..., :bq.shape[-1]]
    x = xq.reshape(*[full[i] for i in keep], n, *[full[i] for i in fold], k)
    inv_perm = list(np.argsort(perm))
    x = x.permute(*inv_perm)                                 # [*full, n, k]
    if grad:
        y = sol[..., bq.shape[-1]:].reshape(*abatch, n, n)   # A^-1, A's batch padded
        ys, xs = _finite(y), _finite(x)
        step = None
        if b.requires_grad:
            step = _delta(b)
        if a.requires_grad:
            da = _delta(a) @ xs
            step = -da if step is None else step - da
        x = x + ys @ step
    return x, info
