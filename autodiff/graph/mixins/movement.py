"""Movement: views of a tensor (reshape, permute, expand, slice, concatenation).

Every op here is index arithmetic: lowering turns it into an access expression over the
producer's buffer, never a copy.
"""
from __future__ import annotations

from .. import ops
from .creation import shape_args
from .dims import norm_dim


class MovementMixin:
    def _dim(self, d) -> int:
        return norm_dim(d, self.ndim)

    def reshape(self, *shape):
        return self._wrap(ops.reshape(self.node, shape_args(shape)))

    view = reshape

    def flatten(self, start_dim: int = 0, end_dim: int = -1):
        s = list(self.shape)
        if not s:
            return self.reshape(1)
        a, b = start_dim % len(s), end_dim % len(s)
        return self.reshape(*s[:a], -1, *s[b + 1:])

    def permute(self, *dims):
        return self._wrap(ops.permute(self.node, shape_args(dims)))

    def transpose(self, dim0: int, dim1: int):
        perm = list(range(self.ndim))
        perm[dim0], perm[dim1] = perm[dim1], perm[dim0]
        return self.permute(*perm)

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim)))

    @property
    def mT(self):
        return self.transpose(-2, -1)

    def t(self):
        return self.T

    def broadcast_to(self, *shape):
        return self._wrap(ops.expand(self.node, shape_args(shape)))

    expand = broadcast_to

    def expand_as(self, other):
        return self.broadcast_to(other.shape)

    def unsqueeze(self, dim: int):
        s = list(self.shape)
        s.insert(dim % (len(s) + 1), 1)
        return self.reshape(*s)

    def squeeze(self, dim=None):
        s = list(self.shape)
        if dim is None:
            return self.reshape(*[d for d in s if d != 1])
        dims = {d % len(s) for d in ((dim,) if isinstance(dim, int) else dim)}
        return self.reshape(*[d for i, d in enumerate(s) if not (i in dims and d == 1)])

    def contiguous(self):
        return self

    def index(self, dim: int, start: int, stop: int):
        """Elements ``start:stop`` of dim ``dim`` (the original project's ``index``)."""
        spec = [(0, d, 1) for d in self.shape]
        spec[dim % self.ndim] = (start, stop, 1)
        return self._wrap(ops.slice_(self.node, spec))

    def cat(self, *others, dim: int = 0):
        """``self`` and ``others`` joined along ``dim`` (``torch.cat``)."""
        return self._wrap(ops.concat([self.node] + [self._lift(o) for o in others], dim))

    def stack(self, *others, dim: int = 0):
        """``self`` and ``others`` (one shape) joined along a new dim (``torch.stack``)."""
        return self.unsqueeze(dim).cat(*[o.unsqueeze(dim) for o in others], dim=dim)
