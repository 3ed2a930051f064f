"""Products with fixed ranks (``mm``, ``bmm``, ``mv``, ``dot``, ``inner``, ``outer``) and
the fused ``add*`` forms, as PyTorch defines them: each checks its operands' ranks and
sizes (PyTorch's ``RuntimeError``, with the user's line) and is one ``DOT`` (or a
broadcast product for ``outer``), so fusion and the arena treat it as ``matmul``.
"""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ..trace import user_site


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
