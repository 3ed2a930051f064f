"""Reductions: sums, means, extremes with their indices, softmax."""
from __future__ import annotations

import collections

import numpy as np

from .. import ops
from ..ir import Op
from ..trace import no_grad

MaxResult = collections.namedtuple("MaxResult", ["values", "indices"])


class ReduceMixin:
    def _reduce(self, op: Op, dim, keepdim: bool):
        dims = [dim] if isinstance(dim, int) else list(range(self.ndim)) if dim is None \
            else list(dim)
        node = ops.reduce(op, self.node, dims)
        if not keepdim:
            keep = {d % max(self.ndim, 1) for d in dims}
            node = ops.reshape(node, [d for i, d in enumerate(self.shape) if i not in keep])
        return self._wrap(node)

    def sum(self, dim=None, keepdim: bool = False):
        """Sum over ``dim`` (an int, a tuple, or None for all dims)."""
        return self._reduce(Op.SUM, dim, keepdim)

    def mean(self, dim=None, keepdim: bool = False):
        s = self.sum(dim, keepdim)
        return s * (s.numel() / self.numel()) if self.numel() else s

    def var(self, dim=None, keepdim: bool = False, unbiased: bool = True,
            correction: int | None = None):
        corr = correction if correction is not None else (1 if unbiased else 0)
        n = self.numel() // max(self.mean(dim, keepdim=True).numel(), 1)
        d = self - self.mean(dim, keepdim=True)
        return (d * d).sum(dim, keepdim) * (1.0 / max(n - corr, 1))

    def amax(self, dim=None, keepdim: bool = False):
        return self._reduce(Op.RMAX, dim, keepdim)

    def amin(self, dim=None, keepdim: bool = False):
        return -(-self).amax(dim, keepdim)

    def max(self, dim=None, keepdim: bool = False):
        """Maximum of all elements (``dim=None``, a scalar tensor), or ``(values, indices)``
        along ``dim`` like ``torch.max`` (indices: int32, first maximal position)."""
        if dim is None:
            return self.amax()
        if not isinstance(dim, int):
            return self.maximum(dim)
        return self._select(self.amax(dim, keepdim=True), dim, keepdim)

    def min(self, dim=None, keepdim: bool = False):
        if dim is None:
            return self.amin()
        if not isinstance(dim, int):
            return self.minimum(dim)
        return self._select(self.amin(dim, keepdim=True), dim, keepdim)

    def argmax(self, dim: int, keepdim: bool = False):
        return self._argext(self.amax(dim, keepdim=True), dim, keepdim)

    def _argext(self, values, dim: int, keepdim: bool):
        """Index of the first element equal to ``values`` along ``dim`` (int32)."""
        n = self.shape[dim]
        shape = [1] * self.ndim
        shape[dim % self.ndim] = n
        rev = type(self)(np.arange(n, 0, -1, dtype=np.float32).reshape(shape))   # n .. 1
        with no_grad():
            hit = rev.where(self == values, 0.0)
            first = (n - hit.amax(dim, keepdim=keepdim))
        return first.int()

    def _select(self, values, dim: int, keepdim: bool):
        """``(values, indices)`` of ``torch.max/min(t, dim)`` given the extreme ``values``
        (keepdim). As in torch, the gradient reaches only the element at the returned
        index, not every tied element (``amax`` splits it among ties)."""
        idx = self._argext(values, dim, keepdim=True)
        shape = [1] * self.ndim
        shape[dim % self.ndim] = self.shape[dim]
        pos = type(self)(np.arange(self.shape[dim], dtype=np.float32).reshape(shape))
        with no_grad():
            hit = pos == idx.float()
        picked = self.where(hit, 0.0).sum(dim, keepdim=keepdim)   # one element plus zeros
        return MaxResult(picked, idx if keepdim else idx.squeeze(dim))

    def softmax(self, dim: int = -1):
        e = (self - self.amax(dim, keepdim=True).detach()).exp()
        return e / e.sum(dim, keepdim=True)

    def log_softmax(self, dim: int = -1):
        z = self - self.amax(dim, keepdim=True).detach()
        return z - z.exp().sum(dim, keepdim=True).log()
