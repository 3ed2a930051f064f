"""Products with fixed ranks (``mm``, ``bmm``, ``mv``, ``dot``, ``inner``, ``outer``) and
the fused ``add*`` forms, as PyTorch defines them: each checks its operands' ranks and
sizes (PyTorch's ``RuntimeError``, with the user's line) and is one ``DOT`` (or a
broadcast product for ``outer``), so fusion and the arena treat it as ``matmul``.

``kron`` and ``cross`` are broadcast products of views; :func:`cdist` (a module function,
as ``torch.cdist``) is a broadcast difference reduced over the feature dim, or for
``p=2`` with more than 25 rows the ``matmul`` form PyTorch switches to.

``inverse``, ``det``, ``slogdet``, ``logdet`` (and ``matrix_power`` with ``n < 0``) are
LU / Gauss-Jordan elimination with partial pivoting unrolled over the matrix size:
:mod:`.lu`, which also holds ``torch.linalg``'s ``inv_ex``, ``solve`` and ``solve_ex``
(exposed as :mod:`autodiff.linalg`). ``cholesky``, ``cholesky_solve``, ``cholesky_inverse``
are :mod:`.triangular`'s, ``qr`` :mod:`.qr`'s.
"""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from ...errors import ShapeError
from .. import ops
from ..trace import no_grad, user_site
from .dims import norm_dim


#: PyTorch's C++ names of the dtypes (``c10::toString`` and ``ScalarType`` names), as its
#: matmul errors spell them
_CPP_NAMES = {"float32": "float", "int64": "long int", "int32": "int", "bool": "bool",
              "float16": "c10::Half", "bfloat16": "c10::BFloat16"}
_SCALAR_NAMES = {"float32": "Float", "int64": "Long", "int32": "Int", "bool": "Bool",
                 "float16": "Half", "bfloat16": "BFloat16"}


#: PyTorch's deprecation warnings of ``torch.cholesky`` and ``torch.qr``
_CHOLESKY_DEPRECATED = (
    "torch.cholesky is deprecated in favor of torch.linalg.cholesky and will be removed in a "
    "future PyTorch release.\nL = torch.cholesky(A)\nshould be replaced with\nL = "
    "torch.linalg.cholesky(A)\nand\nU = torch.cholesky(A, upper=True)\nshould be replaced "
    "with\nU = torch.linalg.cholesky(A).mH\nThis transform will produce equivalent results "
    "for all valid (symmetric positive definite) inputs.")
_QR_DEPRECATED = (
    "torch.qr is deprecated in favor of torch.linalg.qr and will be removed in a future "
    "PyTorch release.\nThe boolean parameter 'some' has been replaced with a string parameter "
    "'mode'.\nQ, R = torch.qr(A, some)\nshould be replaced with\nQ, R = torch.linalg.qr(A, "
    "'reduced' if some else 'complete')")


def check_same_dtype(a, b) -> None:
    """PyTorch's ``RuntimeError`` for a matrix product (``@``, ``matmul``, ``mm``,
    ``bmm``, ...) of operands ``a`` and ``b`` (tensors or graph nodes) of different dtypes:
    PyTorch does not promote them, so neither do we.

    Raises:
        RuntimeError: the dtypes differ (PyTorch's message for the case: ``dot`` for two
            vectors, ``expected scalar type`` for a batched product, else ``expected m1
            and m2 to have the same dtype``), with both shapes and the user's line.
    """
    da, db = str(getattr(a.dtype, "name", a.dtype)), str(getattr(b.dtype, "name", b.dtype))
    if da == db:
        return
    ra, rb = len(a.shape), len(b.shape)
    if ra == 1 and rb == 1:
        what = (f"dot : expected both vectors to have same dtype, but found "
                f"{_SCALAR_NAMES[da]} and {_SCALAR_NAMES[db]}")
    elif rb >= 3 or (ra >= 3 and rb != 2 and rb != 1):
        what = f"expected scalar type {_SCALAR_NAMES[da]} but found {_SCALAR_NAMES[db]}"
    else:
        what = (f"expected m1 and m2 to have the same dtype, but got: {_CPP_NAMES[da]} != "
                f"{_CPP_NAMES[db]}")
    raise RuntimeError(f"{what} (matrix product of {da} {list(a.shape)} and {db} "
                       f"{list(b.shape)}; PyTorch does not promote them: cast one with "
                       f".to(); traced at {user_site()})")


def _operand(t, x):
    return x if hasattr(x, "node") else t._wrap(t._lift(x))


def _ranks(name: str, tensors, ranks) -> None:
    for i, (t, r) in enumerate(zip(tensors, ranks)):
        if t.ndim != r:
            raise RuntimeError(f"{name}: operand {i} must be {r}-D, got shape {list(t.shape)} "
                               f"(traced at {user_site()})")


def _inner_sizes(name: str, a, b, da: int, db: int) -> None:
    if a.shape[da] != b.shape[db]:
        raise ShapeError(name, [a.shape, b.shape], user_site(),
                         f"sizes {a.shape[da]} and {b.shape[db]} cannot be multiplied")


def _scaled_sum(inp, prod, beta, alpha):
    """``beta * inp + alpha * prod``; with ``beta == 0`` ``inp`` is ignored (NaN and inf
    in it do not propagate, as in PyTorch) but still gives the broadcast shape."""
    prod = prod if alpha == 1 else prod * alpha
    if beta == 0:
        return prod.broadcast_to(np.broadcast_shapes(tuple(inp.shape), tuple(prod.shape)))
    return (inp if beta == 1 else inp * beta) + prod


def _product(name: str, a, other, ranks: tuple, dims: tuple, batch: bool = False):
    """``a @ other`` after ``name``'s checks: the operands' ``ranks``, the contracted sizes
    (dims ``dims`` of each) equal, and with ``batch`` the leading (batch) sizes too.

    Raises:
        RuntimeError: a rank other than ``ranks``; ``ShapeError`` (a ``RuntimeError``):
            sizes that cannot be multiplied, or batches that differ.
    """
    b = _operand(a, other)
    _ranks(name, (a, b), ranks)
    if batch and a.shape[0] != b.shape[0]:
        raise ShapeError("bmm", [a.shape, b.shape], user_site(),
                         "batch sizes differ (bmm does not broadcast)")
    _inner_sizes(name, a, b, *dims)
    return a @ b


class LinalgMixin:
    def mm(self, mat2):
        """``[n, k] @ [k, m]`` (2-D operands only)."""
        return _product("mm", self, mat2, (2, 2), (1, 0))

    def bmm(self, mat2):
        """``[B, n, k] @ [B, k, m]`` (3-D operands, the same batch; no broadcasting)."""
        return _product("bmm", self, mat2, (3, 3), (2, 1), batch=True)

    def mv(self, vec):
        """``[n, k] @ [k]`` -> ``[n]``."""
        return _product("mv", self, vec, (2, 1), (1, 0))

    def dot(self, other):
        """Sum of the products of two 1-D tensors of one length (a 0-d tensor)."""
        return _product("dot", self, other, (1, 1), (0, 0))

    vdot = dot          # real tensors: no conjugate

    def inner(self, other):
        """Products summed over the last dim of both: ``[*a, k], [*b, k] -> [*a, *b]``
        (a 0-d operand multiplies)."""
        o = _operand(self, other)
        if self.ndim == 0 or o.ndim == 0:
            return self * o
        _inner_sizes("inner", self, o, -1, -1)
        k = self.shape[-1]
        out = self.reshape(-1, k) @ o.reshape(-1, k).T
        return out.reshape(*self.shape[:-1], *o.shape[:-1])

    def outer(self, vec2):
        """``[n] x [m] -> [n, m]``: every product of the two 1-D tensors."""
        v = _operand(self, vec2)
        _ranks("outer", (self, v), (1, 1))
        return self.unsqueeze(1) * v.unsqueeze(0)

    ger = outer

    def addmm(self, mat1, mat2, *, beta=1, alpha=1):
        """``beta * self + alpha * (mat1 @ mat2)`` (``self`` broadcast to ``[n, m]``;
        ignored when ``beta`` is 0)."""
        return _scaled_sum(self, _operand(self, mat1).mm(mat2), beta, alpha)

    def addmv(self, mat, vec, *, beta=1, alpha=1):
        """``beta * self + alpha * (mat @ vec)``."""
        return _scaled_sum(self, _operand(self, mat).mv(vec), beta, alpha)

    def baddbmm(self, batch1, batch2, *, beta=1, alpha=1):
        """``beta * self + alpha * bmm(batch1, batch2)``."""
        return _scaled_sum(self, _operand(self, batch1).bmm(batch2), beta, alpha)

    def addbmm(self, batch1, batch2, *, beta=1, alpha=1):
        """``beta * self + alpha * sum_b batch1[b] @ batch2[b]``."""
        return _scaled_sum(self, _operand(self, batch1).bmm(batch2).sum(0), beta, alpha)

    def trace(self):
        """The sum of the main diagonal of a 2-D tensor (integers and bool give int64).

        Raises:
            RuntimeError: not 2-D.
        """
        if self.ndim != 2:
            raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {self.ndim}")
        return self.diagonal().sum()

    def matrix_power(self, n: int):
        """The matrix (or batch of matrices) multiplied by itself ``n`` times
        (``torch.matrix_power``, ``torch.linalg.matrix_power``): the identity for ``n = 0``,
        else repeated squaring (``ceil(log2 n)`` squarings and at most as many products);
        for ``n < 0`` the power ``-n`` of :meth:`inverse` (as PyTorch computes it).

        Raises:
            RuntimeError: rank < 2 or non-square matrices; for ``n < 0`` the errors of
                :meth:`inverse` (a dtype other than float32; ``LinAlgError``, a
                ``RuntimeError``, for a singular matrix whose values are known while
                tracing).
        """
        from ..linalg.lu import check_square
        check_square(self, "linalg.matrix_power", limit=False)
        r = self.shape[-1]
        n = int(n)
        if n < 0:
            return self.inverse().matrix_power(-n)
        if n == 0:
            eye = self._const(np.eye(r, dtype=np.float32)).to(self.dtype)
            return eye.broadcast_to(self.shape)
        out, base = None, self
        while n:
            if n & 1:
                out = base if out is None else out @ base
            n >>= 1
            if n:
                base = base @ base
        return out

    # -- inverse, determinants (autodiff/graph/linalg/lu.py) ------------------------------
    def inverse(self):
        """The inverse of a float32 matrix or batch ``[*B, n, n]`` (``torch.inverse``,
        ``torch.linalg.inv``): Gauss-Jordan elimination with partial pivoting unrolled over
        ``n`` (Golub & Van Loan, "Matrix Computations", sec. 3.2-3.4;
        :mod:`~autodiff.graph.linalg.lu`), gradient ``-A^-T G A^-T``. A singular matrix
        gives ``±inf``/NaN entries when it runs.

        Raises:
            RuntimeError: rank < 2, non-square matrices, a dtype other than float32
                (PyTorch's messages); ``LinAlgError`` (a ``RuntimeError``): a singular
                matrix whose values are known while tracing. ``NotImplementedError``:
                ``n`` above ``lu.MAX_N`` (256).
        """
        from ..linalg.lu import inv
        return inv(self)

    def det(self):
        """The determinant ``[*B]`` of float32 ``[*B, n, n]`` (``torch.det``,
        ``torch.linalg.det``): the sign of the pivoting permutation times the product of
        LU's pivots (partial pivoting, :mod:`~autodiff.graph.linalg.lu`); 0 for a matrix
        the elimination finds exactly singular. Gradient ``det(A) A^-T`` (0 where ``A^-1``
        is not finite).

        Raises:
            RuntimeError: rank < 2, non-square, integer or bool input.
            NotImplementedError: float16/bfloat16 (PyTorch's ``"lu_cpu" not implemented``),
                ``n`` above ``lu.MAX_N``.
        """
        from ..linalg.lu import det
        return det(self)

    def slogdet(self):
        """``(sign, logabsdet)`` of float32 ``[*B, n, n]``, each ``[*B]`` float32
        (``torch.slogdet``, ``torch.linalg.slogdet``; a named tuple): the sign of the
        determinant (0 if singular; it takes no gradient) and ``log|det|`` as the sum of
        ``log|pivot|`` (no overflow for large ``n``), gradient ``A^-T``.

        Raises:
            RuntimeError: rank < 2, non-square, a dtype other than float32.
            NotImplementedError: ``n`` above ``lu.MAX_N``.
        """
        from ..linalg.lu import slogdet
        return slogdet(self, name="linalg.slogdet")

    def logdet(self):
        """``log det`` ``[*B]`` of float32 ``[*B, n, n]`` (``torch.logdet``): NaN where the
        determinant is negative (gradient 0 there), ``-inf`` where it is 0; gradient
        ``A^-T``. Raises as :meth:`slogdet` (PyTorch's ``logdet:`` messages)."""
        from ..linalg.lu import logdet
        return logdet(self)

    # -- Cholesky and QR (autodiff/graph/linalg/triangular.py, qr.py) --------------------
    def cholesky(self, upper: bool = False):
        """The Cholesky factor of a symmetric positive-definite float32 matrix or batch
        ``[*B, n, n]`` (the deprecated ``torch.cholesky``/``Tensor.cholesky``, which warn
        as PyTorch's do): ``L`` with ``A = L L^T`` read from the lower triangle, or ``U``
        with ``A = U^T U`` from the upper one (``upper=True``). Outer-product Cholesky
        unrolled over ``n`` (:mod:`~autodiff.graph.linalg.triangular`), gradient Murray's
        (2016), PyTorch's ``cholesky_backward``.

        Raises:
            RuntimeError: rank < 2 or non-square; ``LinAlgError`` (a ``RuntimeError``): a
                matrix whose values are known while tracing that is not positive definite.
            NotImplementedError: a dtype other than float32 (``"cholesky_cpu" not
                implemented``), ``n`` above ``lu.MAX_N``.
        """
        from ..linalg.triangular import cholesky
        warnings.warn(_CHOLESKY_DEPRECATED, UserWarning, stacklevel=2)
        return cholesky(self, upper=upper, name="cholesky")

    def cholesky_solve(self, input2, upper: bool = False):
        """``X`` with ``A X = self`` for ``A = L L^T`` (``upper``: ``U^T U``) given its
        Cholesky factor ``input2`` ``[*A, n, n]`` (only its triangle is read); ``self`` is
        ``[*B, n, k]``, batch dims broadcast (``torch.cholesky_solve``). Gradients
        PyTorch's (``cholesky_solve_backward``).

        Raises:
            RuntimeError: rank < 2, dtypes that differ, a non-square factor, sizes that do
                not fit, batches that do not broadcast. NotImplementedError: a dtype other
                than float32, ``n`` above ``lu.MAX_N``.
        """
        from ..linalg.triangular import cholesky_solve
        return cholesky_solve(self, input2, upper)

    def cholesky_inverse(self, upper: bool = False):
        """``A^-1`` for ``A = L L^T`` (``upper``: ``U^T U``) given its Cholesky factor
        ``self`` ``[*B, n, n]`` (only its triangle is read) (``torch.cholesky_inverse``).

        Raises:
            RuntimeError: rank < 2, non-square. NotImplementedError: a dtype other than
                float32, ``n`` above ``lu.MAX_N``.
        """
        from ..linalg.triangular import cholesky_inverse
        return cholesky_inverse(self, upper)

    def qr(self, some: bool = True):
        """``(Q, R)`` of ``self`` ``[*B, m, n]`` (the deprecated ``torch.qr``/
        ``Tensor.qr``, which warn as PyTorch's do): ``torch.linalg.qr(A, 'reduced' if some
        else 'complete')``, Householder reflections unrolled over the columns
        (:mod:`~autodiff.graph.linalg.qr`).

        Raises:
            RuntimeError: rank < 2, an integer/bool input. NotImplementedError:
                float16/bfloat16, ``min(m, n)`` above ``lu.MAX_N``.
        """
        from ..linalg.qr import qr
        warnings.warn(_QR_DEPRECATED, UserWarning, stacklevel=2)
        return qr(self, "reduced" if some else "complete")

    # -- Kronecker and cross products ----------------------------------------------------
    def kron(self, other):
        """The Kronecker product (``torch.kron``): the ranks padded with leading 1s to the
        larger, ``out[i * b.shape + j] = a[i] * b[j]`` per dim, shape ``a.shape * b.shape``
        elementwise. Dtypes promote as ``*``."""
        b = _operand(self, other)
        nd = max(self.ndim, b.ndim)
        sa = (1,) * (nd - self.ndim) + tuple(self.shape)
        sb = (1,) * (nd - b.ndim) + tuple(b.shape)
        a2 = self.reshape(*[v for s in sa for v in (s, 1)])
        b2 = b.reshape(*[v for s in sb for v in (1, s)])
        return (a2 * b2).reshape(*[x * y for x, y in zip(sa, sb)])

    def cross(self, other, dim=None):
        """The cross product of 3-vectors along ``dim`` (``torch.cross``), the other dims
        broadcast. ``dim=None`` takes this tensor's first dim of size 3 and warns, as
        PyTorch 2.13 does (deprecated: its default will become -1).

        Raises:
            RuntimeError: no dim of size 3 (``dim=None``); ranks that differ; a size other
                than 3 at ``dim``; ``ShapeError`` (a ``RuntimeError``): other dims that do
                not broadcast. ``IndexError``: ``dim`` out of range.
        """
        b = _operand(self, other)
        if dim is None:
            warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\n"
                          "Please either pass the dim explicitly or simply use "
                          "torch.linalg.cross.\nThe default value of dim will change to "
                          "agree with that of linalg.cross in a future release.",
                          UserWarning, stacklevel=2)
            dim = next((i for i, n in enumerate(self.shape) if n == 3), None)
            if dim is None:
                raise RuntimeError(f"cross: no dimension of size 3 in input (shape "
                                   f"{list(self.shape)}, traced at {user_site()})")
        if self.ndim != b.ndim:
            raise RuntimeError(f"linalg.cross: inputs must have the same number of "
                               f"dimensions (shapes {list(self.shape)} and {list(b.shape)}, "
                               f"traced at {user_site()})")
        d = norm_dim(dim, self.ndim, self.shape)
        if self.shape[d] != 3 or b.shape[d] != 3:
            raise RuntimeError(f"linalg.cross: inputs dimension {d} must have length 3. Got "
                               f"{self.shape[d]} and {b.shape[d]} (shapes "
                               f"{list(self.shape)} and {list(b.shape)}, traced at "
                               f"{user_site()})")
        ops.broadcast_shape("cross", self.shape, b.shape)
        return self.roll(-1, d) * b.roll(-2, d) - self.roll(-2, d) * b.roll(-1, d)


# -- pairwise distances -------------------------------------------------------------------
_MM_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
             "donot_use_mm_for_euclid_dist")


def cdist(x1, x2, p: float = 2.0, compute_mode: str = "use_mm_for_euclid_dist_if_necessary"):
    """The ``p``-norm distance of every row pair (``torch.cdist``): ``[*B, P, M]`` and
    ``[*B, R, M]`` (batch dims broadcast) give ``[*B, P, R]``, ``out[.., i, j] =
    ||x1[.., i, :] - x2[.., j, :]||_p`` for ``p`` >= 0 (0 counts the differing features,
    ``inf`` is the largest difference). As in PyTorch, ``p=2`` uses
    ``sqrt(|a|^2 + |b|^2 - 2 a.b)`` (one ``matmul``, clamped at 0) when a side has more than
    25 rows (``compute_mode="use_mm_for_euclid_dist_if_necessary"``) or always
    (``"use_mm_for_euclid_dist"``), the direct difference otherwise. Gradients are
    PyTorch's: 0 where a distance is 0 (or for ``p=0``), and for ``p=inf`` the full
    gradient to every feature tied for the largest difference.

    Raises:
        RuntimeError: an operand of rank < 2, a non-floating dtype, dtypes that differ,
            feature sizes that differ, ``p`` < 0 or NaN; ``ShapeError`` (a
            ``RuntimeError``): batch dims that do not broadcast. ``ValueError``: an unknown
            ``compute_mode``.
    """
    x2 = _operand(x1, x2)
    for name, t in (("X1", x1), ("X2", x2)):
        if t.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: "
                               f"{t.ndim}D (traced at {user_site()})")
        if not t.is_floating_point():
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: "
                               f"{t.dtype}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1.shape[-1]} X2: {x2.shape[-1]} (shapes {list(x1.shape)} and "
                           f"{list(x2.shape)}, traced at {user_site()})")
    if not isinstance(p, numbers.Real) or not p >= 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got {p}")
    if compute_mode not in _MM_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    batch = ops.broadcast_shape("cdist", x1.shape[:-2], x2.shape[:-2])
    if x1.dtype != x2.dtype:
        raise RuntimeError(f"cdist: expected scalar type {x1.dtype} but found {x2.dtype} "
                           f"(X1 and X2 must have one dtype)")
    if x1.shape[-1] == 0:
        return x1._wrap(ops.const(0.0, batch + (x1.shape[-2], x2.shape[-2]), x1.dtype))
    if p == 2 and (compute_mode == _MM_MODES[1] or (
            compute_mode == _MM_MODES[0] and (x1.shape[-2] > 25 or x2.shape[-2] > 25))):
        sq = ((x1 * x1).sum(-1, keepdim=True) + (x2 * x2).sum(-1).unsqueeze(-2)
              - (x1 @ x2.mT) * 2.0).clamp_min(0.0)
        return _root(sq, 0.5)
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)                    # [*B, P, R, M]
    if p == 0:                  # a count: no gradient, but connected like PyTorch's
        none = x1._wrap(ops.const(False, (), "bool"))
        return (diff != 0).to(diff.dtype).sum(-1) + diff.where(none, 0.0).sum(-1)
    a = diff.abs()
    if p == 1:
        return a.sum(-1)
    if p == 2:
        return _root((diff * diff).sum(-1), 0.5)
    if p == math.inf:
        m = a.amax(-1, keepdim=True).detach()
        with no_grad():
            hit = (a == m) & (m < math.inf)
        z = a.where(hit, 0.0)                  # value m; gradient 1 to every tied feature
        return (m + (z - z.detach()).sum(-1, keepdim=True)).squeeze(-1)
    return _root(_power(a, float(p)).sum(-1), 1.0 / float(p))


def _power(a, e: float):
    """``a ** e`` for ``a >= 0``, 0 with gradient 0 where ``a`` is 0."""
    pos = a > 0
    return (a.where(pos, 1.0) ** e).where(pos, 0.0)


def _root(s, e: float):
    """``s ** e`` (``sqrt`` for 0.5) of sums ``s >= 0``; 0 with gradient 0 where ``s`` is 0
    (PyTorch's cdist gradient at a zero distance)."""
    pos = s > 0
    safe = s.where(pos, 1.0)
    return (safe.sqrt() if e == 0.5 else safe ** e).where(pos, 0.0)
