"""``torch.linalg``'s functions that autodiff has, under PyTorch's names and signatures:
``autodiff.linalg.inv(A)`` is ``torch.linalg.inv(A)``.

Inputs are float32 tensors ``[*B, n, n]`` (batch dims ``*B`` of any rank, ``1 <= n <=``
:data:`~autodiff.graph.mixins.lu.MAX_N`; ``n = 0`` gives PyTorch's empty results). The
factorisation is Gauss-Jordan elimination with partial pivoting, unrolled over ``n``
while tracing (Golub & Van Loan, "Matrix Computations", 4th ed., sec. 3.2-3.4); the
algorithm, the singular-matrix behaviour and the gradients are described in
:mod:`autodiff.graph.mixins.lu`. There is no ``pinv``, ``svd``, ``qr``, ``eig``,
``cholesky`` or ``lstsq``.

Errors, raised while tracing (before anything runs), as PyTorch's: ``RuntimeError`` for
rank < 2, non-square matrices, integer/bool inputs (float16/bfloat16: ``RuntimeError``, or
``NotImplementedError`` where PyTorch's LU kernel rejects them), shapes of ``B`` that do
not fit; :class:`LinAlgError` (a ``RuntimeError``) for a singular matrix in ``inv``,
``solve`` and ``matrix_power(A, n < 0)`` when its values are known while tracing (a tensor
made from data); ``NotImplementedError`` for ``n > MAX_N``.
"""
from __future__ import annotations

from .graph.mixins import lu as _lu
from .graph.mixins.lu import LinAlgError, MAX_N  # noqa: F401  (public names)
from .graph.tensor import Tensor, tensor as _tensor

__all__ = ["inv", "inv_ex", "det", "slogdet", "solve", "solve_ex", "matrix_power",
           "LinAlgError"]


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
