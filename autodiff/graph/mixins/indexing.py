"""Indexing: ``x[key]`` (basic and advanced), gather/scatter families, masked writes."""
from __future__ import annotations

import numbers

from ...errors import ShapeError
from .. import ops
from ..trace import user_site


class IndexingMixin:
    def __getitem__(self, key):
        if isinstance(key, IndexingMixin):
            return self._wrap(ops.gather(self.node, key.node))
        key = key if isinstance(key, tuple) else (key,)
        if sum(k is Ellipsis for k in key) > 1:
            raise IndexError("only one Ellipsis allowed")
        n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
        if n_real > self.ndim:
            raise ShapeError("getitem", [self.shape], user_site(), f"too many indices: {key}")
        if any(k is Ellipsis for k in key):
            i = next(j for j, k in enumerate(key) if k is Ellipsis)
            key = key[:i] + (slice(None),) * (self.ndim - n_real) + key[i + 1:]
        else:
            key = key + (slice(None),) * (self.ndim - n_real)
        spec, out_shape, d = [], [], 0
        for k in key:
            if k is None:
                out_shape.append(1)
                continue
            size = self.shape[d]
            if isinstance(k, slice):
                if k.step not in (None, 1):
                    raise ShapeError("getitem", [self.shape], user_site(),
                                     f"slice step {k.step} is not supported")
                a, b, _ = k.indices(size)
                b = max(a, b)
                spec.append((a, b, 1))
                out_shape.append(b - a)
            elif isinstance(k, numbers.Integral):
                i = int(k) + size if k < 0 else int(k)
                if not 0 <= i < size:
                    raise ShapeError("getitem", [self.shape], user_site(),
                                     f"index {k} out of range for dim {d} of size {size}")
                spec.append((i, i + 1, 1))
            else:
                raise TypeError(f"unsupported index {k!r}")
            d += 1
        return self._wrap(ops.reshape(ops.slice_(self.node, spec), out_shape))
