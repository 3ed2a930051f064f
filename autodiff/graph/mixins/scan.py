"""Scans and sorting along one dim, all lowered to existing graph ops.

* ``cumsum``, ``cumprod``, ``cummax``/``cummin``, ``logcumsumexp``: log-depth doubling (Hillis and
  Steele, "Data parallel algorithms", 1986): ``ceil(log2 n)`` steps, each combining every
  element with the one ``2**k`` before it (a shifted view padded with the identity).
* ``sort``/``argsort``/``topk``: Batcher's bitonic sorting network ("Sorting networks and
  their applications", 1968) over the dim padded to a power of two with ``+inf``:
  ``log2 n (log2 n + 1) / 2`` compare-exchange stages of views and ``where``. Keys are
  ``(value, original index)`` pairs, so the order is stable (PyTorch's ``stable=True``).

Values move through ``where`` selections, so gradients reach exactly the elements the
result came from (PyTorch's convention for ``sort``, ``cummax`` and ``topk``).
"""
from __future__ import annotations

import collections
import math

import numpy as np

from .. import ops
from ..trace import no_grad
from .reduce import as_index

SortResult = collections.namedtuple("SortResult", ["values", "indices"])
TopKResult = collections.namedtuple("TopKResult", ["values", "indices"])
CumResult = collections.namedtuple("CumResult", ["values", "indices"])


def _or(a, b):
    return (a.float() + b.float()) > 0


def _and(a, b):
    return (a.float() * b.float()) > 0


class ScanMixin:
    def _last(self, dim):
        """(this tensor with ``dim`` moved last, normalized dim)."""
        d = self._dim(dim)
        return (self.movedim(d, -1) if self.ndim else self.reshape(1)), d

    def _back(self, d: int, ndim: int):
        return self.movedim(-1, d) if ndim else self.reshape(())

    def _shift(self, s: int, fill):
        """Along the last dim: ``s`` copies of ``fill`` then all but the last ``s`` elements."""
        n = self.shape[-1]
        pad = self._wrap(ops.const(fill, self.shape[:-1] + (min(s, n),), self.dtype))
        return pad.cat(self[..., :max(n - s, 0)], dim=-1) if n > s else pad

    # -- cumulative sums -----------------------------------------------------------------
    def cumsum(self, dim: int, *, dtype=None):
        """Running sum along ``dim``: ``out[i] = x[0] + ... + x[i]``."""
        x, d = self._as(dtype)._last(dim)
        return x._cumsum_last()._back(d, self.ndim)

    def _cumsum_last(self):
        """Doubling with adds: each element sums only elements at or before it, so an
        ``inf`` or NaN reaches the positions after it alone (a product with a triangular
        ones matrix, the form before, multiplied it by the zeros above the diagonal:
        ``cumsum([1, inf, 2])`` was ``[nan, inf, inf]``); integers stay exact."""
        x, s = self, 1
        while s < x.shape[-1]:
            x = x + x._shift(s, 0)
            s *= 2
        return x

    def cumprod(self, dim: int, *, dtype=None):
        """Running product along ``dim`` (log-depth doubling; exact with zeros)."""
        x, d = self._as(dtype)._last(dim)
        s = 1
        while s < x.shape[-1]:
            x = x * x._shift(s, 1.0)
            s *= 2
        return x._back(d, self.ndim)

    def logcumsumexp(self, dim: int):
        """``log(cumsum(exp(x)))`` along ``dim`` without overflow: doubling with
        :meth:`logaddexp`."""
        x, d = self._last(dim)
        s = 1
        while s < x.shape[-1]:
            x = x.logaddexp(x._shift(s, -math.inf))
            s *= 2
        return x._back(d, self.ndim)

    def _cumext(self, dim: int, sign: float):
        x, d = (self * sign)._last(dim)
        n = x.shape[-1]
        idx = x._index_grid()
        s = 1
        while s < n:
            px, pi = x._shift(s, -math.inf), idx._shift(s, -1.0)
            with no_grad():                    # ties keep the later index, as PyTorch;
                take = (px > x) | ((px != px) & (x == x))   # NaN is the extreme
            x, idx = px.where(take, x), pi.where(take, idx)
            s *= 2
        return CumResult((x * sign)._back(d, self.ndim), as_index(idx._back(d, self.ndim)))

    def _index_grid(self):
        """``0, 1, ..`` along the last dim, float32, broadcast to this shape (a constant)."""
        n = self.shape[-1]
        return self._const(np.arange(n, dtype=np.float32)).broadcast_to(self.shape)

    def cummax(self, dim: int):
        """``(values, indices)``: running maximum along ``dim`` and where it was (the last
        position among ties, as PyTorch; from a NaN on, NaN and the last NaN's index)."""
        return self._cumext(dim, 1.0)

    def cummin(self, dim: int):
        """``(values, indices)``: running minimum along ``dim``."""
        return self._cumext(dim, -1.0)

    # -- sorting -------------------------------------------------------------------------
    def sort(self, dim: int = -1, descending: bool = False, *, stable: bool = False):
        """``(values, indices)`` sorted along ``dim``, equal values in their original order.

        NaN is not ordered (PyTorch puts it last); the gradient of ``values`` goes to the
        element each value came from.
        """
        x, d = self._last(dim)
        n = x.shape[-1]
        if n <= 1:
            idx = self._const(np.zeros(x.shape, np.float32))
            return SortResult(x._back(d, self.ndim), as_index(idx._back(d, self.ndim)))
        key = -x if descending else x
        p = 1 << (n - 1).bit_length()
        idx = self._const(np.arange(p, dtype=np.float32)).broadcast_to(x.shape[:-1] + (p,))
        if p > n:
            key = key.cat(self._wrap(ops.const(math.inf, x.shape[:-1] + (p - n,))), dim=-1)
        k = 2
        while k <= p:
            key, idx = _compare_exchange(key, idx, k, True)
            j = k // 4
            while j >= 1:
                key, idx = _compare_exchange(key, idx, 2 * j, False)
                j //= 2
            k *= 2
        key, idx = key[..., :n], idx[..., :n]
        values = -key if descending else key
        return SortResult(values._back(d, self.ndim), as_index(idx._back(d, self.ndim)))

    def argsort(self, dim: int = -1, descending: bool = False, *, stable: bool = False):
        """Indices that sort along ``dim`` (``sort(...).indices``)."""
        with no_grad():
            return self.sort(dim, descending).indices

    def msort(self):
        return self.sort(0).values

    def topk(self, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
        """``(values, indices)`` of the ``k`` largest (or smallest) elements along ``dim``,
        in sorted order.

        Raises:
            RuntimeError: ``k`` is out of range for the dim.
        """
        d = self._dim(dim)
        n = self.shape[d] if self.ndim else 1
        if not 0 <= k <= n:
            raise RuntimeError(f"topk: selected index k={k} out of range for a dim of size {n}")
        v, i = self.sort(d, descending=largest)
        return TopKResult(v._slice_dim(d, 0, k) if self.ndim else v,
                          i._slice_dim(d, 0, k) if self.ndim else i)


def _compare_exchange(key, idx, size: int, mirror: bool):
    """One stage of the network on the last dim: within each block of ``size``, element
    ``t`` of the first half meets element ``t`` of the second half (``size-1-t`` with
    ``mirror``); the smaller ``(key, idx)`` pair goes first. Each element reads itself and
    its partner (a view: the block's halves swapped), so a stage is one elementwise
    kernel per output."""
    lead, n = key.shape[:-1], key.shape[-1]

    def partner(t):
        b = t.reshape(*lead, n // size, 2, size // 2).flip(-2)
        return (b.flip(-1) if mirror else b).reshape(*lead, n)

    pk, pi = partner(key), partner(idx)
    with no_grad():
        first = key._const(np.array([[1.0], [0.0]], np.float32)).expand(2, size // 2) \
            .reshape(size).repeat(n // size).reshape(n)           # 1 in each first half
        smaller = _or(key < pk, _and(key == pk, idx < pi))
        keep = (smaller.float() == first)                      # first half keeps the min
    return key.where(keep, pk), idx.where(keep, pi)
