"""``F.unfold`` / ``F.fold`` (im2col / col2im) and the ``Unfold`` / ``Fold`` modules, with
PyTorch's arguments, layouts and errors.

``unfold`` is the convolution's own input view made explicit: zero padding, one ``WINDOW``
per spatial dim, then a permutation and a reshape to ``[N, C * prod(kernel), L]`` (the
reshape of the permuted window view is where the blocks are copied out, once). ``fold`` is
its adjoint, the scatter of a transposed convolution: :func:`~autodiff.nn.conv.col2im`
(strided placements added up, one ``window_fold`` per dim) followed by cropping the
padding. Each one's gradient is the other.
"""
from __future__ import annotations

import math

from ..errors import ShapeError
from ..graph import ops
from ..graph.tensor import Tensor, _wrap
from ..graph.trace import user_site
from .conv import col2im
from .module import Module
from .padding import pad as _pad

_NSP = 2          # PyTorch's fold/unfold take image-like (two spatial dims) tensors


def _pair(v, what: str) -> tuple:
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            v = (v[0], v[0])
        if len(v) != _NSP:
            raise ValueError(f"{what} must be an int or a pair, got {tuple(v)}")
        out = tuple(int(a) for a in v)
    else:
        out = (int(v),) * _NSP
    low = 0 if what == "padding" else 1
    if min(out) < low:
        want = "non-negative" if low == 0 else "greater than zero"
        raise RuntimeError(f"{what} should be {want}, but got {what}: {out}")
    return out


def _blocks(op, sizes, kernel, dilation, padding, stride, shapes) -> list[int]:
    """Block counts per spatial dim (``(size + 2p - d(k-1) - 1) // s + 1``), all positive."""
    out = [(n + 2 * p - d * (k - 1) - 1) // s + 1
           for n, k, d, p, s in zip(sizes, kernel, dilation, padding, stride)]
    if min(out) < 1:
        raise ShapeError(op, shapes, user_site(),
                         f"given spatial size {tuple(sizes)}, kernel_size={kernel}, "
                         f"dilation={dilation}, padding={padding}, stride={stride}: the "
                         f"array of sliding blocks would be {tuple(out)}, which is too small "
                         "(non-positive)")
    return out


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sliding local blocks as columns (im2col), as ``torch.nn.functional.unfold``.

    Args:
        input: ``[N, C, H, W]`` (or unbatched ``[C, H, W]``), any dtype.
        kernel_size, dilation, padding (zeros), stride: ints or pairs.

    Returns:
        ``[N, C * kH * kW, L]`` (``[C * kH * kW, L]`` unbatched), ``L = L_H * L_W`` blocks,
        ``L_H = (H + 2 pH - dH (kH - 1) - 1) // sH + 1``; column ``l`` holds block ``l``
        (row-major over the block grid), rows ordered ``(c, kh, kw)``. Overlapping blocks
        repeat input elements; the gradient adds them back.

    Raises:
        RuntimeError: an input that is not 3-D or 4-D, non-positive kernel, dilation or
            stride, negative padding; ShapeError (a ``RuntimeError`` and a
            ``ValueError``): no complete block fits.
    """
    if input.ndim not in (_NSP + 1, _NSP + 2):
        raise RuntimeError(f"unfold: expected a 3D or 4D (batch mode) tensor for input, but "
                           f"got: {list(input.shape)}")
    unbatched = input.ndim == _NSP + 1
    x = input.unsqueeze(0) if unbatched else input
    kernel, dilation = _pair(kernel_size, "kernel_size"), _pair(dilation, "dilation")
    padding, stride = _pair(padding, "padding"), _pair(stride, "stride")
    n, c, *sizes = x.shape
    outs = _blocks("unfold", sizes, kernel, dilation, padding, stride, [input.shape])
    if any(padding):
        x = _pad(x, [a for p in reversed(padding) for a in (p, p)])
    for i, (k, s, d) in enumerate(zip(kernel, stride, dilation)):
        x = _wrap(ops.window(x.node, 2 + i, k, s, d))
        if x.shape[2 + i] > outs[i]:
            x = x.index(2 + i, 0, outs[i])
    # [N, C, *L, *K] -> [N, C, *K, *L] -> [N, C*K, L]
    x = x.permute(0, 1, *range(2 + _NSP, 2 + 2 * _NSP), *range(2, 2 + _NSP))
    y = x.reshape(n, c * math.prod(kernel), math.prod(outs))
    return y.squeeze(0) if unbatched else y


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Columns of sliding local blocks summed back into an image (col2im), as
    ``torch.nn.functional.fold``: the adjoint of :func:`unfold` (overlapping blocks add).

    Args:
        input: float32 ``[N, C * kH * kW, L]`` (or unbatched ``[C * kH * kW, L]``), ``L``
            the number of blocks that fit ``output_size`` with these arguments.
        output_size: the spatial ``(H, W)`` of the output (int or pair).
        kernel_size, dilation, padding, stride: ints or pairs, as :func:`unfold`'s.

    Returns:
        ``[N, C, H, W]`` (``[C, H, W]`` unbatched).

    Raises:
        RuntimeError: an input that is not 2-D or 3-D, a channel dim not divisible by
            ``kH * kW``, non-positive kernel, dilation or stride, negative padding;
            ShapeError (a ``RuntimeError`` and a ``ValueError``): ``L`` is not the block
            count of ``output_size``.
    """
    if input.ndim not in (2, 3):
        raise RuntimeError(f"fold: expected a 2D or 3D (batch mode) tensor for input, but "
                           f"got: {list(input.shape)}")
    unbatched = input.ndim == 2
    x = input.unsqueeze(0) if unbatched else input
    sizes = _pair(output_size, "output_size")
    kernel, dilation = _pair(kernel_size, "kernel_size"), _pair(dilation, "dilation")
    padding, stride = _pair(padding, "padding"), _pair(stride, "stride")
    n, ck, length = x.shape
    kk = math.prod(kernel)
    if ck % kk:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the "
                           f"product of kernel_size, but got input.size(1)={ck} and "
                           f"kernel_size={kernel}.")
    outs = _blocks("fold", sizes, kernel, dilation, padding, stride, [input.shape])
    if math.prod(outs) != length:
        raise ShapeError("fold", [input.shape], user_site(),
                         f"given output_size={sizes}, kernel_size={kernel}, "
                         f"dilation={dilation}, padding={padding}, stride={stride}, expected "
                         f"size of input's dimension 2 to match the calculated number of "
                         f"sliding blocks {' * '.join(map(str, outs))} = {math.prod(outs)}, "
                         f"but got input.size(2)={length}")
    c = ck // kk
    # [N, C, *K, *L] -> [N, C, L_0, K_0, L_1, K_1]: each block count next to its window
    y = x.reshape(n, c, *kernel, *outs)
    y = y.permute(0, 1, *[a for i in range(_NSP) for a in (2 + _NSP + i, 2 + i)])
    full = [s + 2 * p for s, p in zip(sizes, padding)]
    y = col2im(y, kernel, stride, dilation, full)
    if any(padding):
        spec = [(0, n, 1), (0, c, 1)] + [(p, p + s, 1) for p, s in zip(padding, sizes)]
        y = _wrap(ops.slice_(y.node, spec))
    return y.squeeze(0) if unbatched else y


class Unfold(Module):
    """``torch.nn.Unfold(kernel_size, dilation=1, padding=0, stride=1)``: :func:`unfold`.
    Input ``[N, C, H, W]`` (or ``[C, H, W]``) -> ``[N, C * kH * kW, L]``."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Module):
    """``torch.nn.Fold(output_size, kernel_size, dilation=1, padding=0, stride=1)``:
    :func:`fold`. Input ``[N, C * kH * kW, L]`` (or ``[C * kH * kW, L]``) ->
    ``[N, C, *output_size]``."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.output_size, self.kernel_size = output_size, kernel_size
        self.dilation, self.padding, self.stride = dilation, padding, stride

    def forward(self, input: Tensor) -> Tensor:
        return fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                    self.stride)

    def extra_repr(self) -> str:
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")


__all__ = ["unfold", "fold", "Unfold", "Fold"]
