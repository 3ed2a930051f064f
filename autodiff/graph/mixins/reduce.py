"""Reductions: sums, means, moments, products, extremes with their indices, norms, softmax,
and ``einsum`` (a contraction lowered to permutes, one batched ``DOT`` and sums).

``dim`` is an int, a tuple or None (every dim; ``()`` too, as PyTorch 2.13 reads
``sum(())``), ``axis=`` is accepted as its alias, and ``keepdim`` keeps reduced dims as
size 1. Index results (``argmax``, ``max(dim).indices``, ``count_nonzero``) are integer
tensors.
"""
from __future__ import annotations

import collections
import math
import numbers

import numpy as np

from ...errors import DTypeError, ShapeError
from .. import ops
from ..ir import Op
from ..trace import no_grad, user_site
from .dims import axis_alias, norm_dim, norm_dims

MaxResult = collections.namedtuple("MaxResult", ["values", "indices"])
AminmaxResult = collections.namedtuple("AminmaxResult", ["min", "max"])


def as_index(t):
    """An index-valued float tensor (exact integers) as the index dtype, int64 (as
    PyTorch's)."""
    return t.long()


def _int_dim(name: str, dim) -> None:
    """PyTorch's ``TypeError`` for a ``dim`` that is not an int (``Tensor.softmax(None)``;
    the functional forms take None for the implicit dim)."""
    if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
        raise TypeError(f"{name}(): argument 'dim' (position 1) must be int, not "
                        f"{type(dim).__name__}")


class ReduceMixin:
    def _reduce(self, op: Op, dim, keepdim: bool):
        dims = norm_dims(dim, self.ndim, self.shape)
        node = ops.reduce(op, self.node, dims)
        if not keepdim:
            node = ops.reshape(node, [d for i, d in enumerate(self.shape) if i not in dims])
        return self._wrap(node)

    def _count(self, dim) -> int:
        """How many elements each result of a reduction over ``dim`` combines."""
        n = 1
        for d in norm_dims(dim, self.ndim, self.shape):
            n *= self.shape[d]
        return n

    def _as(self, dtype):
        return self if dtype is None else self.to(dtype)

    def _float_only(self, name: str, dtype=None):
        """This tensor cast to ``dtype`` if given; then PyTorch's error for ``name`` of an
        integer or bool tensor (mean, var, std, norm, softmax... have no integer result)."""
        x = self._as(dtype)
        if not x.is_floating_point():
            raise DTypeError(f"{name}: expected a floating point input, got {x.dtype} (pass "
                             f"dtype= or cast with .float(); traced at {user_site()})")
        return x

    @axis_alias
    def sum(self, dim=None, keepdim: bool = False, *, dtype=None):
        """Sum over ``dim`` (an int, a tuple, or None/``()`` for all dims); integers and bool
        are summed as int64 (bool sums count), as in PyTorch, unless ``dtype`` is given
        (the input is cast to it and the sum has it)."""
        return self._accumulating(dtype)._reduce(Op.SUM, dim, keepdim)

    def _accumulating(self, dtype):
        """The input of a sum or product (``sum``, ``prod``, ``cumsum``, ``cumprod``):
        cast to ``dtype`` if given, else integers and bool as int64 (PyTorch's result
        dtype for them)."""
        if dtype is not None:
            return self.to(dtype)
        return self if self.is_floating_point() else self.long()

    @axis_alias
    def mean(self, dim=None, keepdim: bool = False, *, dtype=None):
        """Mean over ``dim``; NaN for an empty reduction, as in PyTorch.

        Raises:
            DTypeError: an integer or bool tensor without a floating ``dtype`` (a
                ``RuntimeError``, as PyTorch's)."""
        x = self._float_only("mean", dtype)
        n = x._count(dim)
        s = x.sum(dim, keepdim)
        return s * (1.0 / n) if n else s * math.nan

    @axis_alias
    def nansum(self, dim=None, keepdim: bool = False, *, dtype=None):
        """:meth:`sum` with NaN counted as 0 (no gradient reaches a NaN); integers and bool
        as :meth:`sum` (int64)."""
        x = self._as(dtype)
        if not x.is_floating_point():
            return x.sum(dim, keepdim)
        return x.where(x == x, 0.0).sum(dim, keepdim)

    @axis_alias
    def nanmean(self, dim=None, keepdim: bool = False, *, dtype=None):
        """Mean of the elements that are not NaN (NaN where all are; the gradient there is
        0, where PyTorch's is NaN).

        Raises:
            DTypeError: an integer or bool tensor without a floating ``dtype``."""
        x = self._float_only("nanmean", dtype)
        return x.nansum(dim, keepdim) / (x == x).float().sum(dim, keepdim)

    def aminmax(self, *, dim=None, keepdim: bool = False):
        """``(min, max)`` over ``dim`` (all elements if None), as ``torch.aminmax``."""
        return AminmaxResult(self.amin(dim, keepdim), self.amax(dim, keepdim))

    @axis_alias
    def var(self, dim=None, unbiased: bool = True, keepdim: bool = False, *,
            correction: int | None = None):
        """Variance over ``dim`` with ``correction`` (default 1: Bessel's, or
        ``unbiased=False`` for 0); NaN or inf where ``n - correction <= 0``, as in PyTorch."""
        if isinstance(unbiased, numbers.Integral) and not isinstance(unbiased, bool):
            raise TypeError("var(): the second positional argument is `unbiased` (a bool), as "
                            "in PyTorch; pass keepdim= by keyword")
        corr = correction if correction is not None else (1 if unbiased else 0)
        self._float_only("var")               # std and var: floating point only, as PyTorch
        n = self._count(dim)
        d = self - self.mean(dim, keepdim=True)
        ss = (d * d).sum(dim, keepdim)
        return ss * (1.0 / (n - corr)) if n - corr > 0 else ss / 0.0

    @axis_alias
    def std(self, dim=None, unbiased: bool = True, keepdim: bool = False, *,
            correction: int | None = None):
        """Square root of :meth:`var`; where it is 0 the gradient is 0 (PyTorch's), not
        the NaN of ``sqrt'(0) * 0``."""
        v = self.var(dim, unbiased, keepdim, correction=correction)
        pos = v > 0
        return v.where(pos, 1.0).sqrt().where(pos, v)

    @axis_alias
    def var_mean(self, dim=None, unbiased: bool = True, keepdim: bool = False, *,
                 correction: int | None = None):
        """``(var, mean)`` over ``dim`` (``torch.var_mean``)."""
        return (self.var(dim, unbiased, keepdim, correction=correction),
                self.mean(dim, keepdim))

    @axis_alias
    def std_mean(self, dim=None, unbiased: bool = True, keepdim: bool = False, *,
                 correction: int | None = None):
        """``(std, mean)`` over ``dim`` (``torch.std_mean``)."""
        return (self.std(dim, unbiased, keepdim, correction=correction),
                self.mean(dim, keepdim))

    @axis_alias
    def prod(self, dim=None, keepdim: bool = False, *, dtype=None):
        """Product over ``dim`` (one int, or None for all): a pairwise tree of multiplies
        (``log2 n`` levels, the last level padded with a 1), exact with zeros in both
        directions of AD. Integers and bool multiply as int64 (PyTorch's result dtype),
        unless ``dtype`` is given."""
        x = self._accumulating(dtype)
        if dim is None:
            out = x.reshape(-1).prod(0, dtype=x.dtype)
            return out.reshape([1] * x.ndim) if keepdim else out
        d = x._dim(dim)
        if x.ndim == 0:
            return x
        y = x.movedim(d, -1)
        while y.shape[-1] > 1:
            if y.shape[-1] % 2:
                y = y.cat(y._fill_shape(y.shape[:-1] + (1,), 1), dim=-1)
            y = y.reshape(*y.shape[:-1], y.shape[-1] // 2, 2)
            y = y[..., 0] * y[..., 1]
        if y.shape[-1] == 0:                         # empty product: 1 (gradient 0)
            y = y.sum(-1, keepdim=True) + 1
        out = y.movedim(-1, d)
        return out if keepdim else out.squeeze(d)

    def _fill_shape(self, shape, value):
        return self._wrap(ops.const(value, shape, self.dtype))

    # -- extremes ------------------------------------------------------------------------
    def _nonempty(self, dim, name: str):
        """Raise PyTorch's error if ``name`` (a max/min-like reduction, which has no
        identity) reduces a zero-size dim -- an ``IndexError`` for a given ``dim``, a
        ``RuntimeError`` for every dim (``dim=None``) -- with the input shape and the
        user's site."""
        dims = norm_dims(dim, self.ndim, self.shape)
        if self.numel() == 0 and any(self.shape[d] == 0 for d in dims):
            shape, site = list(self.shape), user_site()
            if dim is None:                 # PyTorch: a RuntimeError here
                raise RuntimeError(f"{name}(): Expected reduction dim to be specified for "
                                   f"input.numel() == 0: a reduction over every dim needs "
                                   f"non-zero size (input shape {shape}, traced at {site})")
            raise IndexError(f"{name}(): Expected reduction dim {dim} to have non-zero size "
                             f"(input shape {shape}, traced at {site})")

    @axis_alias
    def amax(self, dim=None, keepdim: bool = False):
        """Maximum over ``dim``; ties share the gradient evenly (as ``torch.amax``)."""
        self._nonempty(dim, "amax")
        return self._reduce(Op.RMAX, dim, keepdim)

    @axis_alias
    def amin(self, dim=None, keepdim: bool = False):
        """Minimum over ``dim``; ties share the gradient evenly (as ``torch.amin``)."""
        self._nonempty(dim, "amin")
        if not self.is_floating_point():     # ~ is decreasing and, unlike -, never overflows
            return ~(~self).amax(dim, keepdim)
        return -(-self).amax(dim, keepdim)

    @axis_alias
    def max(self, dim=None, keepdim: bool = False):
        """Maximum of all elements (``dim=None``, a 0-d tensor), ``(values, indices)`` along
        ``dim`` like ``torch.max`` (first maximal position; the gradient goes to it alone),
        or ``maximum`` with a tensor."""
        if not isinstance(dim, (numbers.Integral, type(None))):
            return self.maximum(dim)
        self._nonempty(dim, "max")
        if dim is None:
            return self.amax()
        return self._select(self.amax(dim, keepdim=True), dim, keepdim)

    @axis_alias
    def min(self, dim=None, keepdim: bool = False):
        """Like :meth:`max` for the minimum."""
        if not isinstance(dim, (numbers.Integral, type(None))):
            return self.minimum(dim)
        self._nonempty(dim, "min")
        if dim is None:
            return self.amin()
        return self._select(self.amin(dim, keepdim=True), dim, keepdim)

    @axis_alias
    def argmax(self, dim=None, keepdim: bool = False):
        """Index of the first maximum along ``dim`` (of the flattened tensor if None), an
        int64 tensor.

        Raises:
            RuntimeError: a bool tensor (PyTorch does not support it).
        """
        self._no_bool("argmax")
        if dim is None:
            out = self.reshape(-1).argmax(0)
            return out.reshape([1] * self.ndim) if keepdim else out
        self._nonempty(dim, "argmax")
        return self._argext(self.amax(dim, keepdim=True), dim, keepdim)

    @axis_alias
    def argmin(self, dim=None, keepdim: bool = False):
        """Index of the first minimum along ``dim`` (of the flattened tensor if None), an
        int64 tensor (a bool tensor raises ``RuntimeError``, as in PyTorch)."""
        self._no_bool("argmin")
        if dim is None:
            out = self.reshape(-1).argmin(0)
            return out.reshape([1] * self.ndim) if keepdim else out
        self._nonempty(dim, "argmin")
        return self._argext(self.amin(dim, keepdim=True), dim, keepdim)

    def _no_bool(self, name: str) -> None:
        if self.dtype == "bool":
            raise RuntimeError(f"{name}(): does not support bool input (traced at "
                               f"{user_site()})")

    def _positions(self, dim: int, values=None):
        """A float32 constant of this tensor's rank counting ``0..n-1`` (or ``values``)
        along ``dim``, size 1 elsewhere."""
        d = self._dim(dim)
        n = self.shape[d] if self.ndim else 1
        shape = [1] * max(self.ndim, 1)
        shape[d] = n
        v = np.arange(n, dtype=np.float32) if values is None else np.asarray(values, np.float32)
        t = self._const(v.reshape(shape))
        return t if self.ndim else t.reshape(())

    def _argext(self, values, dim: int, keepdim: bool):
        """Index of the first element equal to ``values`` (keepdim) along ``dim``, or of the
        first NaN (as torch: a NaN is the extreme, and ``amax``/``amin`` give NaN then)."""
        d = self._dim(dim)
        self._nonempty(d, "argmax")
        n = self.shape[d] if self.ndim else 1
        with no_grad():
            rev = self._positions(d, np.arange(n, 0, -1))             # n .. 1
            hit = rev.where((self == values) | (self != self), 0.0)
            first = n - hit.amax(d, keepdim=keepdim)
        return as_index(first)

    def _select(self, values, dim: int, keepdim: bool):
        """``(values, indices)`` of ``torch.max/min(t, dim)`` given the extreme ``values``
        (keepdim). As in torch, the gradient reaches only the element at the returned
        index, not every tied element (``amax`` splits it among ties)."""
        d = self._dim(dim)
        idx = self._argext(values, d, keepdim=True)
        if not self.is_floating_point():     # no gradient to route: the values as they are
            return MaxResult(values if keepdim else values.squeeze(d),
                             idx if keepdim else idx.squeeze(d))
        with no_grad():
            hit = self._positions(d) == idx.float()
        picked = self.where(hit, 0.0).sum(d, keepdim=keepdim)   # one element plus zeros
        return MaxResult(picked, idx if keepdim else idx.squeeze(d))

    # -- logical and counting -------------------------------------------------------------
    @axis_alias
    def any(self, dim=None, keepdim: bool = False):
        """Whether any element along ``dim`` is nonzero (False for an empty reduction)."""
        return (self != 0).float().sum(dim, keepdim) > 0

    @axis_alias
    def all(self, dim=None, keepdim: bool = False):
        """Whether every element along ``dim`` is nonzero (True for an empty reduction)."""
        return (self == 0).float().sum(dim, keepdim) == 0

    @axis_alias
    def count_nonzero(self, dim=None):
        """Number of nonzero elements along ``dim`` (an integer tensor)."""
        return as_index((self != 0).float().sum(dim))

    # -- log-sum-exp, norms ----------------------------------------------------------------
    @axis_alias
    def logsumexp(self, dim=None, keepdim: bool = False):
        """``log(sum(exp(x)))`` along ``dim`` with the (detached) maximum subtracted first;
        an all ``-inf`` slice gives ``-inf``; integers and bool as float32."""
        x = self._floating()
        m = x.amax(dim, keepdim=True).detach() if x.numel() else \
            x._fill_shape([1 if i in norm_dims(dim, x.ndim, x.shape) else s
                           for i, s in enumerate(x.shape)], 0.0)
        m = m.where(m.abs() != math.inf, 0.0)
        out = (x - m).exp().sum(dim, keepdim=True).log() + m
        return out if keepdim else out.squeeze(norm_dims(dim, self.ndim, self.shape))

    @axis_alias
    def norm(self, p="fro", dim=None, keepdim: bool = False, *, dtype=None):
        """Vector norm over ``dim`` (``torch.norm``): ``p`` = ``"fro"`` or 2 (Euclidean,
        gradient 0 at 0 as in PyTorch), 1, ``inf``, ``-inf``, 0 (count of nonzeros) or any
        other number (``(sum |x|^p)^(1/p)``).

        Raises:
            NotImplementedError: ``p="nuc"`` (needs a singular value decomposition).
            DTypeError: an integer or bool tensor without a floating ``dtype`` (a
                ``RuntimeError``, as PyTorch's).
        """
        x = self._float_only("norm", dtype)
        if p == "nuc":
            raise NotImplementedError("norm(p='nuc') needs an SVD, which autodiff lacks")
        if p == "fro" or p == 2:
            s = (x * x).sum(dim, keepdim)
            zero = s == 0                    # sqrt'(0) is inf: keep it out of the gradient
            safe = self._fill_shape((), 1.0).where(zero, s)
            return self._fill_shape((), 0.0).where(zero, safe.sqrt())
        if p == math.inf:
            return x.abs().amax(dim, keepdim)
        if p == -math.inf:
            return x.abs().amin(dim, keepdim)
        if p == 0:
            return (x != 0).float().sum(dim, keepdim)
        if p == 1:
            return x.abs().sum(dim, keepdim)
        return (x.abs() ** float(p)).sum(dim, keepdim) ** (1.0 / float(p))

    def dist(self, other, p: float = 2):
        """The ``p``-norm of ``self - other`` (broadcast), a 0-d tensor (``torch.dist``;
        ``p`` as :meth:`norm`: 0, 1, 2, ``inf``, ``-inf`` or any other number).

        Raises:
            RuntimeError: a non-floating difference (PyTorch's norm rejects it).
        """
        diff = self - other
        if not diff.is_floating_point():
            raise RuntimeError(f"dist(): input dtype should be either floating point or "
                               f"complex. Got {diff.dtype} instead.")
        return diff.norm(p)

    def renorm(self, p: float, dim: int, maxnorm: float):
        """Each slice along ``dim`` whose ``p``-norm (over the other dims) exceeds
        ``maxnorm`` scaled down to norm ``maxnorm``: multiplied by
        ``maxnorm / (norm + 1e-7)``, as ``torch.renorm`` (the gradient goes through the
        norm too, as PyTorch's).

        Raises:
            RuntimeError: rank < 2, ``p <= 0`` or ``maxnorm < 0``.
        """
        if self.ndim < 2:
            raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {self.ndim} "
                               f"dimensions")
        if not p > 0:
            raise RuntimeError("renorm: non-positive-norm not supported")
        if maxnorm < 0:
            raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
        d = self._dim(dim)
        norm = self.norm(p, tuple(i for i in range(self.ndim) if i != d), keepdim=True)
        big = norm > maxnorm
        return self * (maxnorm / (norm + 1e-7)).where(big, 1.0)

    def renorm_(self, p: float, dim: int, maxnorm: float):
        """In-place :meth:`renorm`."""
        return self._set_promoted(self.renorm(p, dim, maxnorm))

    # -- softmax ---------------------------------------------------------------------------
    def _softmax_input(self, name: str, dim, dtype):
        """The input of ``name`` (softmax, log_softmax) after PyTorch's checks: an int
        ``dim`` in range, a floating tensor (cast to ``dtype`` first)."""
        _int_dim(name, dim)
        x = self._float_only(name, dtype)
        x._dim(dim)
        return x

    def softmax(self, dim: int = -1, dtype=None):
        """``exp(x) / sum(exp(x))`` along ``dim``, the (detached) maximum subtracted first;
        a tensor with no elements comes back empty, as in PyTorch.

        Raises:
            DTypeError: an integer or bool tensor without a floating ``dtype`` (PyTorch's
                ``NotImplementedError``)."""
        x = self._softmax_input("softmax", dim, dtype)
        if x.numel() == 0:              # nothing to normalise: empty, as in PyTorch
            return x * 1.0
        e = (x - x.amax(dim, keepdim=True).detach()).exp()
        return e / e.sum(dim, keepdim=True)

    def log_softmax(self, dim: int = -1, dtype=None):
        """``x - logsumexp(x)`` along ``dim`` (a tensor with no elements comes back empty).

        Raises:
            DTypeError: an integer or bool tensor without a floating ``dtype``."""
        x = self._softmax_input("log_softmax", dim, dtype)
        if x.numel() == 0:
            return x * 1.0
        z = x - x.amax(dim, keepdim=True).detach()
        return z - z.exp().sum(dim, keepdim=True).log()


# -- einsum ------------------------------------------------------------------------------
def einsum(equation: str, *operands):
    """Einstein summation (``torch.einsum``), lowered to permutes, one batched ``DOT`` per
    pair of operands (left to right) and sums; no new kernel kind.

    Supports explicit (``"ij,jk->ik"``) and implicit (``"ij,jk"``: the labels appearing
    once, alphabetically) outputs, ``...`` for broadcast dims, size-1 dims broadcasting,
    repeated labels within an operand (its diagonal) and any number of operands.

    Raises:
        ValueError: a malformed equation or operand count.
        ShapeError: a label's sizes disagree.
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum(): {len(terms)} operand subscripts for {len(operands)} "
                         "operands")
    nell = max((t.ndim - len(s) + 3 for s, t in zip(terms, operands) if "..." in s),
               default=0)
    ell = [chr(0x3b1 + i) for i in range(nell)]          # greek letters stand for "..."

    def labels(s: str, ndim: int) -> list:
        if "..." in s:
            a, b = s.split("...")
            s = list(a) + ell[nell - (ndim - len(a) - len(b)):] + list(b)
        if len(s) != ndim or any(not c.isalpha() for c in s):
            raise ValueError(f"einsum(): subscripts {equation!r} do not fit the operands' "
                             f"ranks {[t.ndim for t in operands]}")
        return list(s)

    subs = [labels(s, t.ndim) for s, t in zip(terms, operands)]
    if arrow:
        out = labels(rhs, len(rhs) - 3 + nell) if "..." in rhs else list(rhs)
    else:
        flat = [c for s in subs for c in s]
        out = ell + sorted(c for c in set(flat) if flat.count(c) == 1 and c not in ell)
    if len(set(out)) != len(out) or any(c not in [x for s in subs for x in s] for c in out):
        raise ValueError(f"einsum(): output subscripts of {equation!r} must be unique and "
                         "appear in the inputs")
    sizes: dict = {}
    for s, t in zip(subs, operands):
        for c, n in zip(s, t.shape):
            if n != 1 and sizes.get(c, 1) not in (1, n):
                raise ShapeError("einsum", [t.shape for t in operands], user_site(),
                                 f"label {c!r} has sizes {sizes[c]} and {n}")
            sizes[c] = n if n != 1 else sizes.get(c, 1)
    items = [_diagonals(t, s) for t, s in zip(operands, subs)]
    acc, acc_l = items[0]
    for k, (t, tl) in enumerate(items[1:], 1):
        later = set(out) | {c for _, l2 in items[k + 1:] for c in l2}
        acc, acc_l = _contract(acc, acc_l, t, tl, later, sizes)
    rest = tuple(i for i, c in enumerate(acc_l) if c not in out)
    if rest:
        acc = acc.sum(rest)
        acc_l = [c for c in acc_l if c in out]
    acc = acc.broadcast_to([sizes[c] for c in acc_l]) if acc_l else acc
    return acc.permute(*[acc_l.index(c) for c in out]) if out else acc


def _diagonals(t, s):
    """Operand ``t`` with labels ``s``; a label repeated within it becomes its diagonal."""
    s = list(s)
    while len(set(s)) != len(s):
        c = next(c for c in s if s.count(c) > 1)
        i = s.index(c)
        j = s.index(c, i + 1)
        t = t.diagonal(0, i, j)
        s = [x for k, x in enumerate(s) if k not in (i, j)] + [c]
    return t, s


def _contract(a, al, b, bl, later, sizes):
    """``a`` (labels ``al``) times ``b`` (``bl``), summing the labels not in ``later``:
    shared labels are batch dims (kept) or contracted (summed); each side's own labels
    become the rows and columns of one ``[batch, M, K] @ [batch, K, N]`` product."""
    for c in [c for c in al if c not in bl and c not in later]:      # summed on one side
        a, al = a.sum(al.index(c)), [x for x in al if x != c]
    for c in [c for c in bl if c not in al and c not in later]:
        b, bl = b.sum(bl.index(c)), [x for x in bl if x != c]
    batch = [c for c in al if c in bl and c in later]
    contr = [c for c in al if c in bl and c not in later]
    left = [c for c in al if c not in bl]
    right = [c for c in bl if c not in al]
    shared = set(batch + contr)

    def arrange(t, tl, order):
        t = t.permute(*[tl.index(c) for c in order]) if len(order) > 1 else t
        return t.broadcast_to([sizes[c] if c in shared else t.shape[k]
                               for k, c in enumerate(order)])

    a = arrange(a, al, batch + left + contr)
    b = arrange(b, bl, batch + contr + right)
    nb = [sizes[c] for c in batch]
    ls, rs = a.shape[len(batch):len(batch) + len(left)], b.shape[len(batch) + len(contr):]
    m, n = int(np.prod(ls, dtype=np.int64)), int(np.prod(rs, dtype=np.int64))
    k = int(np.prod([sizes[c] for c in contr], dtype=np.int64))
    out = a.reshape(*nb, m, k) @ b.reshape(*nb, k, n)
    return out.reshape(*nb, *ls, *rs), batch + left + right
