"""Padding: ``F.pad`` (constant, reflect, replicate, circular) and the padding modules.

Every mode is built from views (``PAD``, ``SLICE``, ``EXPAND``, ``CONCAT``), so a padded
input is never materialised by itself: the kernel that reads it indexes the original.
"""
from __future__ import annotations

from ..errors import ShapeError
from ..graph import ops
from ..graph.tensor import Tensor, _wrap, concat
from ..graph.trace import user_site
from .module import Module

MODES = ("constant", "reflect", "replicate", "circular")


def _narrow(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    return x.index(dim, start, start + length)


def _edge(x: Tensor, dim: int, before: int, after: int, mode: str) -> Tensor:
    n = x.shape[dim]
    if mode == "replicate":
        shape = list(x.shape)
        parts = []
        if before:
            shape[dim] = before
            parts.append(_narrow(x, dim, 0, 1).expand(*shape))
        parts.append(x)
        if after:
            shape[dim] = after
            parts.append(_narrow(x, dim, n - 1, 1).expand(*shape))
        return concat(parts, dim)
    if mode == "circular":
        return concat(([_narrow(x, dim, n - before, before)] if before else []) + [x]
                      + ([_narrow(x, dim, 0, after)] if after else []), dim)
    # reflect: x[before], ..., x[1], x, x[n-2], ..., x[n-1-after]
    left = [_narrow(x, dim, i, 1) for i in range(before, 0, -1)]
    right = [_narrow(x, dim, n - 2 - i, 1) for i in range(after)]
    return concat(left + [x] + right, dim)


def pad(input: Tensor, pad, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad the trailing dims of ``input``, as ``torch.nn.functional.pad``.

    Args:
        input: float32 (or int32 for ``"constant"``) tensor.
        pad: ``(left, right)`` for the last dim, then ``(top, bottom)`` for the one before,
            and so on (an even number of ints, at most ``2 * input.ndim``). Negative
            amounts crop (``"constant"`` only, as in PyTorch).
        mode: ``"constant"`` (``value``, default 0), ``"reflect"`` (mirror without the edge,
            each amount below the dim's size), ``"replicate"`` (repeat the edge) or
            ``"circular"`` (wrap around, each amount at most the dim's size).
        value: fill value of ``"constant"`` (``-inf`` works: max pooling uses it).

    Returns:
        The padded tensor, dims grown by ``left + right`` etc.

    Raises:
        ValueError: odd-length ``pad``, unknown ``mode``, or ``value`` given with another
            mode.
        ShapeError: more pad entries than dims, or an amount too large for the mode.
    """
    pad = [int(p) for p in pad]
    if len(pad) % 2:
        raise ValueError(f"pad: padding length must be divisible by 2, got {len(pad)}")
    if mode not in MODES:
        raise ValueError(f"pad: mode must be one of {MODES}, got {mode!r}")
    if value is not None and mode != "constant" and value != 0:
        raise ValueError(f"pad: padding mode {mode!r} doesn't take in value argument")
    nd = input.ndim
    if len(pad) // 2 > nd:
        raise ShapeError("pad", [input.shape], user_site(),
                         f"padding {pad} has more than 2 entries per dim")
    pairs = [(0, 0)] * nd
    for i in range(len(pad) // 2):
        pairs[nd - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    if mode == "constant":
        return _constant(input, pairs, 0.0 if value is None else float(value))
    x = input
    for dim, (a, b) in enumerate(pairs):
        n = x.shape[dim]
        if a < 0 or b < 0:
            raise ShapeError("pad", [input.shape], user_site(),
                             f"negative padding {pad} needs mode 'constant'")
        limit = n - 1 if mode == "reflect" else n
        if max(a, b) > limit:
            raise ShapeError("pad", [input.shape], user_site(),
                             f"{mode} padding {max(a, b)} of dim {dim} must be "
                             f"{'below' if mode == 'reflect' else 'at most'} its size {n}")
        if a or b:
            x = _edge(x, dim, a, b, mode)
    return x


def _constant(x: Tensor, pairs, value: float) -> Tensor:
    crop = [(max(-a, 0), x.shape[d] - max(-b, 0), 1) for d, (a, b) in enumerate(pairs)]
    if any(a < 0 or b < 0 for a, b in pairs):
        if any(lo > hi for lo, hi, _ in crop):
            raise ShapeError("pad", [x.shape], user_site(), "cropping more than the dim")
        x = _wrap(ops.slice_(x.node, crop))
    grow = [(max(a, 0), max(b, 0)) for a, b in pairs]
    padded = _wrap(ops.pad(x.node, grow))
    if value == 0 or padded.shape == x.shape:
        return padded
    inside = ops.pad(ops.const(True, x.shape, "bool"), grow)
    return _wrap(ops.where(inside, padded.node, ops.const(value, (), x.dtype)))


class _Pad(Module):
    """Base of the padding modules: ``F.pad(x, padding, mode, value)`` over the last
    ``dims`` dims; ``padding`` is an int (every side) or ``2 * dims`` ints (left, right,
    top, bottom, front, back)."""
    mode, dims = "constant", 1

    def __init__(self, padding, value: float | None = None):
        super().__init__()
        self.padding = (int(padding),) * (2 * self.dims) if isinstance(padding, int) \
            else tuple(int(p) for p in padding)
        if len(self.padding) != 2 * self.dims:
            raise ValueError(f"{type(self).__name__}: padding needs {2 * self.dims} ints, "
                             f"got {self.padding}")
        self.value = value

    def forward(self, x: Tensor) -> Tensor:
        return pad(x, self.padding, self.mode, self.value)

    def extra_repr(self) -> str:
        return f"{self.padding}" + (f", value={self.value}" if self.mode == "constant" else "")


class _ConstantPad(_Pad):
    def __init__(self, padding, value: float):
        super().__init__(padding, value)


class _ZeroPad(_Pad):
    def __init__(self, padding):
        super().__init__(padding, 0.0)


class _EdgePad(_Pad):
    def __init__(self, padding):
        super().__init__(padding)


class ConstantPad1d(_ConstantPad): dims = 1
class ConstantPad2d(_ConstantPad): dims = 2
class ConstantPad3d(_ConstantPad): dims = 3
class ZeroPad1d(_ZeroPad): dims = 1
class ZeroPad2d(_ZeroPad): dims = 2
class ZeroPad3d(_ZeroPad): dims = 3
class ReflectionPad1d(_EdgePad): mode, dims = "reflect", 1
class ReflectionPad2d(_EdgePad): mode, dims = "reflect", 2
class ReflectionPad3d(_EdgePad): mode, dims = "reflect", 3
class ReplicationPad1d(_EdgePad): mode, dims = "replicate", 1
class ReplicationPad2d(_EdgePad): mode, dims = "replicate", 2
class ReplicationPad3d(_EdgePad): mode, dims = "replicate", 3
class CircularPad1d(_EdgePad): mode, dims = "circular", 1
class CircularPad2d(_EdgePad): mode, dims = "circular", 2
class CircularPad3d(_EdgePad): mode, dims = "circular", 3
