"""``torch.linalg``'s functions that autodiff has, under PyTorch's names and signatures:
``autodiff.linalg.inv(A)`` is ``torch.linalg.inv(A)``.

Inputs are float32 tensors ``[*B, m, n]`` (batch dims ``*B`` of any rank; the
factorisations need ``min(m, n) <=`` :data:`~autodiff.graph.linalg.lu.MAX_N`, 256, and
``eigh`` ``n <= 64``; a zero size gives PyTorch's empty results). The factorisations are unrolled over the matrix size while
tracing (the graph IR has static shapes and no factorisation op), each attaching PyTorch's
analytic gradient as ``value + L(A - A.detach())``:

* ``inv``, ``inv_ex``, ``det``, ``slogdet``, ``solve``, ``solve_ex``, ``matrix_power``:
  Gauss-Jordan elimination with partial pivoting (Golub & Van Loan, "Matrix
  Computations", 4th ed., sec. 3.2-3.4), :mod:`autodiff.graph.linalg.lu`;
* ``lu_factor``, ``lu_factor_ex``, ``lu``, ``lu_solve``: Gaussian elimination with the same
  pivot choice and LAPACK's ``getrf`` pivots, :mod:`autodiff.graph.linalg.lu_factor`;
* ``cholesky``, ``cholesky_ex``, ``solve_triangular`` (and ``autodiff.cholesky_solve``,
  ``autodiff.cholesky_inverse``): outer-product Cholesky and column-oriented substitution,
  :mod:`autodiff.graph.linalg.triangular`;
* ``qr``: Householder reflections with LAPACK's sign convention,
  :mod:`autodiff.graph.linalg.qr`;
* ``eigh``, ``eigvalsh``: cyclic Jacobi rotations, :mod:`autodiff.graph.linalg.eigh`;
* ``vector_norm``, ``matrix_norm``, ``norm``, ``vecdot``, ``multi_dot``, ``matmul``,
  ``diagonal``, ``cross``, ``vander``, ``cond``, ``tensorinv``, ``tensorsolve``: compositions
  of existing ops, :mod:`autodiff.graph.linalg.norms`.

Missing: ``svd``, ``svdvals``, ``pinv``, ``matrix_rank``, ``eig``, ``eigvals``, ``lstsq``,
``matrix_exp``, ``householder_product``, ``ldl_factor``/``ldl_solve``, the norms that need
singular values (``matrix_norm``/``norm`` with ``ord`` = 2, -2, ``'nuc'``; ``cond`` with ``p`` =
None, 2, -2, ``'nuc'``: ``NotImplementedError``), and ``lu_factor(pivot=False)`` (PyTorch's
CPU lacks it too). Complex dtypes do not exist in autodiff.

Errors, raised while tracing (before anything runs), are PyTorch's types and messages with
the user's ``file:line`` appended: ``RuntimeError`` for wrong ranks, non-square matrices,
sizes or batches that do not fit, integer/bool inputs, unknown orders or modes;
``NotImplementedError`` where PyTorch's CPU kernel rejects a dtype (float16/bfloat16, and
integers for some), and for matrices above ``MAX_N``; :class:`LinAlgError` (a
``RuntimeError``) for a singular (``inv``, ``solve``, ``lu_factor``, ``matrix_power(A, n <
0)``) or not positive-definite (``cholesky``) matrix when its values are known while
tracing (a tensor made from data; the ``_ex`` forms report ``info`` instead).
"""
from __future__ import annotations

from .graph.linalg import eigh as _eigh
from .graph.linalg import lu as _lu
from .graph.linalg import lu_factor as _luf
from .graph.linalg import norms as _norms
from .graph.linalg import qr as _qr
from .graph.linalg import triangular as _tri
from .graph.linalg.lu import LinAlgError, MAX_N  # noqa: F401  (public names)
from .graph.tensor import Tensor, tensor as _tensor

__all__ = ["inv", "inv_ex", "det", "slogdet", "solve", "solve_ex", "matrix_power",
           "LinAlgError", "vector_norm", "matrix_norm", "norm", "vecdot", "multi_dot",
           "matmul", "diagonal", "cross", "vander", "cond", "tensorinv", "tensorsolve",
           "cholesky", "cholesky_ex", "solve_triangular", "lu_factor", "lu_factor_ex", "lu",
           "lu_solve", "qr", "eigh", "eigvalsh"]


def _t(x) -> Tensor:
    return x if isinstance(x, Tensor) else _tensor(x)


def inv(A):
    """The inverse ``[*B, n, n]`` of ``A`` ``[*B, n, n]`` (:meth:`Tensor.inverse`).

    Raises:
        RuntimeError: see the module docstring; ``LinAlgError`` (singular, values known:
            ``"linalg.inv: The diagonal element i is zero, ..."``).
    """
    return _t(A).inverse()


def inv_ex(A, *, check_errors: bool = False):
    """``(inverse, info)`` (``torch.linalg.inv_ex``, a named tuple): ``info`` int32 ``[*B]``
    is LAPACK ``getrf``'s, 0 where the elimination met no exactly-zero pivot, else the
    1-based index of the first (the inverse then holds ``±inf``/NaN). ``check_errors=True``
    raises ``LinAlgError`` for a singular matrix whose values are known while tracing
    (a traced matrix is not checked: read ``info``)."""
    return _lu.inv_ex(_t(A), check_errors=check_errors)


def det(A):
    """The determinant ``[*B]`` (:meth:`Tensor.det`)."""
    return _t(A).det()


def slogdet(A):
    """``(sign, logabsdet)``, each ``[*B]`` (:meth:`Tensor.slogdet`, a named tuple)."""
    return _t(A).slogdet()


def solve(A, B, *, left: bool = True):
    """The solution ``X`` of ``A X = B`` (``left=False``: ``X A = B``) (``torch.linalg.
    solve``). ``A`` is ``[*A, n, n]``; ``B`` is a batch of vectors ``[*B, n]`` when it is
    1-D or when its shape is ``A.shape[:-1]`` (left only), else matrices ``[*B, n, k]``
    (``[*B, k, n]`` for ``left=False``); the batch dims broadcast, and ``X`` has ``B``'s
    form with the broadcast batch. Computed by eliminating ``[A | B]`` (not ``A^-1 B``);
    batch dims where ``A`` has size 1 are folded into ``B``'s columns, so one matrix is
    factorised once. Gradients: ``dB = A^-T G``, ``dA = -dB X^T``.

    Raises:
        RuntimeError: an integer/bool ``A``, dtypes that differ, rank < 2, non-square
            ``A``, ``B`` of rank 0, sizes that do not fit (PyTorch's ``Incompatible shapes
            of A and B for the equation AX = B (nxn and rxc)``), batch dims that do not
            broadcast; ``LinAlgError``: a singular ``A`` whose values are known while
            tracing. ``NotImplementedError``: float16/bfloat16, ``n > MAX_N``.
    """
    return _lu.solve(_t(A), B if isinstance(B, Tensor) else _tensor(B), left=left)


def solve_ex(A, B, *, left: bool = True, check_errors: bool = False):
    """``(result, info)`` (``torch.linalg.solve_ex``, a named tuple): :func:`solve`'s
    result and ``info`` int32 of ``A``'s batch shape, as :func:`inv_ex`'s."""
    return _lu.solve_ex(_t(A), B if isinstance(B, Tensor) else _tensor(B), left=left,
                        check_errors=check_errors)


def matrix_power(A, n: int):
    """``A`` to the integer power ``n`` (:meth:`Tensor.matrix_power`; ``n < 0``: the
    inverse's power ``-n``)."""
    return _t(A).matrix_power(n)


# -- norms and products (autodiff/graph/linalg/norms.py) ---------------------------------------
def vector_norm(x, ord=2, dim=None, keepdim: bool = False, *, dtype=None):
    """The vector ``ord``-norm over ``dim`` (all elements when None) (``torch.linalg.
    vector_norm``): ``ord`` any number (``inf``: largest magnitude, ``-inf``: smallest, 0:
    count of nonzeros, else ``(sum |x|^ord)^(1/ord)``). Inputs float32/float16/bfloat16
    (``dtype``: converted first); the result has ``x``'s (or ``dtype``'s) dtype.

    Raises:
        TypeError: a string ``ord``. RuntimeError: integer/bool input or ``dtype``, a
            narrowing ``dtype``, ``ord < 0`` or ``inf`` over an empty dim. IndexError:
            ``dim`` out of range.
    """
    return _norms.vector_norm(_t(x), ord, dim, keepdim, dtype=dtype)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim: bool = False, *, dtype=None):
    """The matrix norm over the two dims ``dim`` (``torch.linalg.matrix_norm``): ``ord``
    ``'fro'``, 1 / -1 (largest / smallest column sum of magnitudes), ``inf`` / ``-inf``
    (row sums); result ``[*B]`` for ``A`` ``[*B, m, n]``.

    Raises:
        RuntimeError: rank < 2, ``dim`` not two different dims, an unknown ``ord``,
            integer/bool input or ``dtype``. NotImplementedError: ``ord`` 2, -2, ``'nuc'``
            (singular values: no SVD in autodiff).
    """
    return _norms.matrix_norm(_t(A), ord, dim, keepdim, dtype=dtype)


def norm(A, ord=None, dim=None, keepdim: bool = False, *, dtype=None):
    """``torch.linalg.norm``: :func:`matrix_norm` when ``dim`` has two dims (or is None with
    a 2-D ``A`` and ``ord`` given, or ``ord`` is a string), else :func:`vector_norm`
    (``ord=None``: the 2-norm of all elements). Raises as those, and ``RuntimeError`` for a
    ``dim`` of length other than 1 or 2, or ``ord`` without ``dim`` for ``A`` not 1-D/2-D."""
    return _norms.norm(_t(A), ord, dim, keepdim, dtype=dtype)


def vecdot(x, y, *, dim: int = -1):
    """``sum(x * y, dim)``, batch dims broadcast (``torch.linalg.vecdot``).

    Raises:
        RuntimeError: integer/bool ``x``, dtypes that differ, shapes that do not broadcast.
    """
    return _norms.vecdot(_t(x), y, dim=dim)


def multi_dot(tensors):
    """The chained matrix product in the cheapest order (``torch.linalg.multi_dot``;
    Cormen et al.'s matrix-chain order): the first tensor may be 1-D (a row), the last
    1-D (a column), the others 2-D.

    Raises:
        RuntimeError: fewer than 2 tensors, other ranks, dtypes that differ, sizes that
            cannot be multiplied (PyTorch's ``multi_dot():`` messages).
    """
    return _norms.multi_dot([_t(t) for t in tensors])


def matmul(input, other):
    """``input @ other`` (``torch.linalg.matmul``, an alias of ``torch.matmul``)."""
    return _t(input).matmul(other)


def diagonal(A, *, offset: int = 0, dim1: int = -2, dim2: int = -1):
    """The diagonal of each matrix over dims ``dim1``, ``dim2`` (``torch.linalg.diagonal``:
    :meth:`Tensor.diagonal` with the last two dims as defaults)."""
    return _t(A).diagonal(offset, dim1, dim2)


def cross(input, other, *, dim: int = -1):
    """The cross product of 3-vectors along ``dim`` (``torch.linalg.cross``), other dims
    broadcast.

    Raises:
        RuntimeError: ranks that differ, a size other than 3 at ``dim``, dims that do not
            broadcast. IndexError: ``dim`` out of range.
    """
    return _norms.cross(_t(input), other, dim=dim)


def vander(x, *, N=None):
    """The Vandermonde matrices ``[..., n, N]``, ``x[..., i] ** j`` (``torch.linalg.
    vander``: increasing powers, ``N`` defaulting to ``n``), for float32 or integer ``x``.

    Raises:
        RuntimeError: bool/float16/bfloat16 input, ``N < 2``.
    """
    return _norms.vander(_t(x), N=N)


def cond(A, p=None):
    """The condition number ``||A||_p ||A^-1||_p`` ``[*B]`` (``torch.linalg.cond``) for ``p``
    in ``'fro'``, 1, -1, ``inf``, ``-inf`` (``inf`` where ``A`` is singular to the
    elimination); its gradient is the composition's (PyTorch's ``cond`` cannot be
    differentiated: it modifies the inverse in place).

    Raises:
        RuntimeError: rank < 2, an unknown ``p``, non-square matrices, a dtype other than
            float32. NotImplementedError: ``p`` None (PyTorch's default), 2, -2, ``'nuc'``
            (singular values: no SVD in autodiff).
    """
    return _norms.cond(_t(A), p)


def tensorinv(A, ind: int = 2):
    """The inverse of ``A`` seen as a square matrix ``[prod(shape[:ind]),
    prod(shape[ind:])]``, shaped ``shape[ind:] + shape[:ind]`` (``torch.linalg.tensorinv``).

    Raises:
        RuntimeError: ``ind <= 0``, the two products differ, and :func:`inv`'s errors.
    """
    return _norms.tensorinv(_t(A), ind)


def tensorsolve(A, B, dims=None):
    """``X`` with ``tensordot(A, X, X.ndim) = B`` (``torch.linalg.tensorsolve``; ``dims`` of
    ``A`` moved to the end first).

    Raises:
        RuntimeError: ``prod(A.shape[B.ndim:]) != B.numel()``, and :func:`solve`'s errors.
    """
    return _norms.tensorsolve(_t(A), _t(B), dims)


# -- Cholesky and triangular solves (autodiff/graph/linalg/triangular.py) ----------------------
def cholesky(A, *, upper: bool = False):
    """The Cholesky factor of symmetric positive-definite ``A`` ``[*B, n, n]``
    (``torch.linalg.cholesky``): lower ``L`` with ``A = L L^T`` from ``A``'s lower triangle,
    or (``upper=True``) ``U = L^T`` from its upper triangle. Outer-product algorithm (Golub
    & Van Loan sec. 4.2.6) unrolled over ``n``; gradient Murray's (2016), as PyTorch's
    (symmetric).

    Raises:
        RuntimeError: rank < 2, non-square, integer/bool input; ``LinAlgError``: a matrix
            whose values are known while tracing that is not positive definite (PyTorch's
            ``the leading minor of order i is not positive-definite``).
            NotImplementedError: float16/bfloat16, ``n > MAX_N``.
    """
    return _tri.cholesky(_t(A), upper=upper)


def cholesky_ex(A, *, upper: bool = False, check_errors: bool = False):
    """``(L, info)`` (``torch.linalg.cholesky_ex``, a named tuple): :func:`cholesky`'s factor
    and ``info`` int32 ``[*B]``, LAPACK ``potrf``'s (0, or the order of the first leading
    minor that is not positive definite; ``L`` is not finite from that column on).
    ``check_errors=True`` raises ``LinAlgError`` when the values are known while tracing."""
    return _tri.cholesky_ex(_t(A), upper=upper, check_errors=check_errors)


def solve_triangular(A, B, *, upper: bool, left: bool = True, unitriangular: bool = False):
    """``X`` with ``A X = B`` (``left=False``: ``X A = B``) for upper (``upper=True``) or
    lower triangular ``A`` ``[*A, n, n]`` (only that triangle is read; its diagonal taken
    as ones with ``unitriangular``), ``B`` ``[*B, n, k]`` (``[*B, k, n]`` for
    ``left=False``), batches broadcast (``torch.linalg.solve_triangular``). Column-oriented
    substitution unrolled over ``n``; gradients ``gB = A^-T G``, ``gA = -tri(gB X^T)``.

    Raises:
        RuntimeError: rank < 2 (of ``A`` or ``B``), non-square ``A``, sizes that do not fit
            (``Incompatible shapes of A and B for the equation AX = B``), batches that do not
            broadcast. NotImplementedError: ``A`` not float32 (``"triangular_solve_cpu"``),
            ``n > MAX_N``. TypeError: ``upper`` missing.
    """
    return _tri.solve_triangular(_t(A), B, upper=upper, left=left, unitriangular=unitriangular)


# -- LU (autodiff/graph/linalg/lu_factor.py) ---------------------------------------------------
def lu_factor(A, *, pivot: bool = True):
    """``(LU, pivots)`` (``torch.linalg.lu_factor``, a named tuple) of ``A`` ``[*B, m, n]``:
    ``L`` (unit diagonal omitted) and ``U`` packed ``[*B, m, n]``, and LAPACK ``getrf``'s
    1-based ``pivots`` int32 ``[*B, min(m, n)]``. Gaussian elimination with partial
    pivoting unrolled over the columns; gradient PyTorch's (``lu_factor_ex_backward``).

    Raises:
        RuntimeError: rank < 2, ``pivot=False`` (PyTorch's CPU has no unpivoted LU);
            ``LinAlgError``: a zero pivot in a matrix whose values are known while tracing.
            NotImplementedError: a dtype other than float32 (``"lu_cpu"``), ``min(m, n) >
            MAX_N``.
    """
    return _luf.lu_factor(_t(A), pivot=pivot)


def lu_factor_ex(A, *, pivot: bool = True, check_errors: bool = False):
    """``(LU, pivots, info)`` (``torch.linalg.lu_factor_ex``, a named tuple): :func:`lu_factor`
    and ``info`` int32 ``[*B]`` (``getrf``'s: the first zero pivot, 1-based, or 0)."""
    return _luf.lu_factor_ex(_t(A), pivot=pivot, check_errors=check_errors)


def lu(A, *, pivot: bool = True):
    """``(P, L, U)`` with ``A = P L U`` (``torch.linalg.lu``, a named tuple): ``P``
    ``[*B, m, m]``, unit lower ``L`` ``[*B, m, k]``, upper ``U`` ``[*B, k, n]``,
    ``k = min(m, n)``. Raises as :func:`lu_factor` (but not for singular matrices)."""
    return _luf.lu(_t(A), pivot=pivot)


def lu_solve(LU, pivots, B, *, left: bool = True, adjoint: bool = False):
    """``X`` with ``A X = B`` (``adjoint``: ``A^T X = B``; ``left=False``: ``X A = B`` /
    ``X A^T = B``) for ``A`` given by :func:`lu_factor`'s ``(LU, pivots)``
    (``torch.linalg.lu_solve``); batches broadcast. Gradients for ``LU`` and ``B``
    (PyTorch's).

    Raises:
        RuntimeError: ranks < 2, non-square ``LU``, sizes that do not fit, ``pivots`` not
            int32 or of the wrong shape, dtypes that differ. NotImplementedError: float16/
            bfloat16, ``n > MAX_N``.
    """
    return _luf.lu_solve(_t(LU), pivots if isinstance(pivots, Tensor) else _tensor(pivots),
                         B if isinstance(B, Tensor) else _tensor(B), left=left,
                         adjoint=adjoint)


# -- QR (autodiff/graph/linalg/qr.py) ----------------------------------------------------------
def qr(A, mode: str = "reduced"):
    """``(Q, R)`` with ``A = Q R`` (``torch.linalg.qr``, a named tuple) of ``A`` ``[*B, m,
    n]``: ``mode='reduced'`` ``Q`` ``[*B, m, k]``, ``R`` ``[*B, k, n]``; ``'complete'`` ``Q``
    ``[*B, m, m]``, ``R`` ``[*B, m, n]``; ``'r'`` ``R`` only (``Q`` empty). Householder
    reflections (Golub & Van Loan sec. 5.2.1) with LAPACK's signs. Gradients for
    ``'reduced'`` (and ``'complete'`` with ``m <= n``), PyTorch's; back-propagating through
    ``'r'``, or ``'complete'`` with ``m > n``, raises ``RuntimeError`` as PyTorch does.

    Raises:
        RuntimeError: an unknown ``mode``, rank < 2, integer/bool input.
            NotImplementedError: float16/bfloat16 (``"geqrf_cpu"``), ``min(m, n) > MAX_N``.
    """
    return _qr.qr(_t(A), mode)


# -- symmetric eigendecomposition (autodiff/graph/linalg/eigh.py) ------------------------------
def eigh(A, UPLO: str = "L"):
    """``(eigenvalues, eigenvectors)`` (``torch.linalg.eigh``, a named tuple) of the symmetric
    matrix ``[*B, n, n]`` whose lower (``UPLO='L'``) or upper (``'U'``) triangle is ``A``'s:
    eigenvalues ``[*B, n]`` ascending, orthonormal eigenvectors as the columns of ``[*B, n,
    n]`` (their signs are not LAPACK's: eigenvectors are defined up to sign). Cyclic Jacobi
    with ``ceil(log2 n) + 3`` sweeps unrolled (Golub & Van Loan sec. 8.5), eigenvalues as
    Rayleigh quotients: within ~5e-7 of ``||A||_2`` (measured, n <= 64). Gradients
    PyTorch's (distinct eigenvalues; 0 where two are equal, PyTorch's is inf/NaN).

    Raises:
        RuntimeError: ``UPLO`` other than ``'L'``/``'U'``, rank < 2, non-square.
            NotImplementedError: a dtype other than float32 (``"linalg_eigh_cpu"``), ``n``
            above :data:`autodiff.graph.linalg.eigh.MAX_N` (64).
    """
    return _eigh.eigh(_t(A), UPLO)


def eigvalsh(A, UPLO: str = "L"):
    """The eigenvalues ``[*B, n]`` (ascending) of :func:`eigh` (``torch.linalg.eigvalsh``),
    gradient ``V diag(g) V^T``; raises as :func:`eigh`."""
    return _eigh.eigvalsh(_t(A), UPLO)
