"""Pooling and resampling: ``F.max_pool1d/2d/3d`` (and ``*_with_indices``), ``avg_pool1d/2d/3d``,
``lp_pool1d/2d/3d``, ``adaptive_avg_pool1d/2d/3d``, ``adaptive_max_pool1d/2d/3d`` (and
``*_with_indices``), ``max_unpool1d/2d/3d``, ``interpolate``, ``pixel_shuffle``/
``pixel_unshuffle``, and their modules, with PyTorch's arguments, defaults and output sizes.
One implementation per kind serves every number of spatial dims.

Pooling is a window view plus a reduction: pad (``-inf`` for max, zeros for average) ->
``WINDOW`` per spatial dim -> ``RMAX``/``SUM`` over the window dims. Adaptive pooling uses the
same windows, cut at PyTorch's start/end indices (``floor(i*L/O)``, ``ceil((i+1)*L/O)``): a
window of the longest length per output, masked beyond each window's own length.
Interpolation multiplies by constant per-dim resampling matrices (two nonzeros per row for
linear, one for nearest), i.e. DOTs, or expands for integer nearest scale factors.

Max pooling's gradient goes to every maximal element of a window, split evenly on ties
(``RMAX``'s rule, like ``torch.amax``); PyTorch's ``max_pool`` gives it all to the first
maximal element. The two agree whenever a window's maximum is unique (e.g. after ReLU, tied
zeros get no gradient through the ReLU either way).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError
from ..graph import ops
from ..graph.tensor import Tensor, _wrap, concat, where
from ..graph.trace import user_site
from .conv import checked_padding
from .module import Module
from .padding import pad as _pad

_BIG = float(2 ** 24)


class PoolingError(ValueError, RuntimeError):
    """A pooling argument PyTorch refuses (padding over half the kernel, a non-positive
    kernel, stride or dilation, an ``output_size`` of the wrong length): a ``RuntimeError``
    as PyTorch raises, and a ``ValueError``."""


def _tuple(v, n: int, what: str) -> tuple:
    if isinstance(v, (tuple, list)):
        if len(v) == 1 and n > 1:
            v = tuple(v) * n
        if len(v) != n:
            raise ValueError(f"{what} must be an int or have {n} entries, got {tuple(v)}")
        return checked_padding(tuple(int(a) for a in v), what)
    return checked_padding((int(v),) * n, what)


def _batched(op: str, x: Tensor, nsp: int) -> tuple[Tensor, bool]:
    if x.ndim not in (nsp + 1, nsp + 2):
        raise ShapeError(op, [x.shape], user_site(),
                         f"expected a {nsp + 1}-D (unbatched) or {nsp + 2}-D (batched) input")
    return (x.unsqueeze(0), True) if x.ndim == nsp + 1 else (x, False)


def _out_len(length, k, s, p, d, ceil_mode) -> int:
    """PyTorch's pooling output size (``pooling_output_shape``)."""
    num = length + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= length + p:
        out -= 1
    return out


def _uniform_windows(op, x, kernel, stride, padding, dilation, ceil_mode, fill):
    """Pad with ``fill`` and window every spatial dim: ``[N, C, *out, *kernel]`` and the
    output sizes."""
    outs, pads = [], []
    for i, (k, s, p, d) in enumerate(zip(kernel, stride, padding, dilation)):
        if s < 1 or k < 1 or d < 1:
            raise PoolingError(f"{op}: kernel_size, stride and dilation must be positive")
        if p > k // 2:
            raise PoolingError(f"{op}: pad should be at most half of effective kernel size, "
                               f"but got pad={p}, kernel_size={k}")
        n = x.shape[2 + i]
        o = _out_len(n, k, s, p, d, ceil_mode)
        if o < 1:
            raise ShapeError(op, [x.shape], user_site(), f"output size {o} is too small "
                             f"(kernel {kernel}, stride {stride}, padding {padding})")
        outs.append(o)
        extra = max(0, (o - 1) * s + d * (k - 1) + 1 - (n + 2 * p))
        pads.append((p, p + extra))
    flat = [a for pr in reversed(pads) for a in pr]
    if any(flat):
        x = _pad(x, flat, value=fill)
    for i, (k, s, d) in enumerate(zip(kernel, stride, dilation)):
        x = _wrap(ops.window(x.node, 2 + i, k, s, d))
        if x.shape[2 + i] > outs[i]:     # ceil-mode padding may allow one more start
            x = x.index(2 + i, 0, outs[i])
    return x, outs, pads


def _first_index(win: Tensor, best: Tensor, idx: Tensor, nsp: int) -> Tensor:
    """int32 index of the first maximal window element (smallest flat input position,
    PyTorch's scan order), ``idx`` holding the windows' flat input positions."""
    dims = tuple(range(-nsp, 0))
    hit = win == best
    return (-where(hit, -idx, -_BIG).amax(dims)).int()


def _index_windows(shape_sp, pads, kernel, stride, dilation, outs) -> Tensor:
    """Flat input positions ``h*W + w`` windowed like the values: ``[*out, *kernel]``."""
    pos = Tensor(np.arange(math.prod(shape_sp), dtype=np.float32).reshape(shape_sp))
    flat = [a for pr in reversed(pads) for a in pr]
    if any(flat):
        pos = _pad(pos, flat, value=-1.0)
    for i, (k, s, d) in enumerate(zip(kernel, stride, dilation)):
        pos = _wrap(ops.window(pos.node, i, k, s, d))
        if pos.shape[i] > outs[i]:
            pos = pos.index(i, 0, outs[i])
    return pos


def _max_pool(op, x, kernel_size, stride, padding, dilation, ceil_mode, return_indices, nsp):
    x, unbatched = _batched(op, x, nsp)
    kernel = _tuple(kernel_size, nsp, "kernel_size")
    stride = kernel if stride is None or stride == [] or stride == () else \
        _tuple(stride, nsp, "stride")
    padding, dilation = _tuple(padding, nsp, "padding"), _tuple(dilation, nsp, "dilation")
    win, outs, pads = _uniform_windows(op, x, kernel, stride, padding, dilation, ceil_mode,
                                       -math.inf)
    dims = tuple(range(-nsp, 0))
    y = win.amax(dims)
    if not return_indices:
        return y.squeeze(0) if unbatched else y
    pos = _index_windows(x.shape[2:], pads, kernel, stride, dilation, outs)
    idx = _first_index(win, y.reshape(*y.shape, *([1] * nsp)), pos, nsp)
    return (y.squeeze(0), idx.squeeze(0)) if unbatched else (y, idx)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """1-D max pooling, as ``torch.nn.functional.max_pool1d``.

    ``[N, C, L]`` (or ``[C, L]``) -> ``[N, C, L_out]``, ``L_out = floor_or_ceil((L + 2p -
    d(k-1) - 1) / s) + 1`` (a last window starting in the right padding is dropped).
    ``stride`` defaults to ``kernel_size``; ``padding`` (``-inf``) at most half the kernel.
    With ``return_indices``, also the int32 position of each maximum in the input's last dim.

    Raises:
        ValueError: bad kernel, stride, dilation or padding. ShapeError: input rank, or no
            output.
    """
    return _max_pool("max_pool1d", input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices, 1)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-D max pooling, as ``torch.nn.functional.max_pool2d``: ``[N, C, H, W]`` (or
    ``[C, H, W]``) -> ``[N, C, H_out, W_out]``; arguments ints or pairs, see
    :func:`max_pool1d`. Indices (with ``return_indices``) are int32 flat positions
    ``h * W + w`` in the input plane, as PyTorch's (which are int64)."""
    return _max_pool("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices, 2)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """3-D max pooling, as ``torch.nn.functional.max_pool3d``: ``[N, C, D, H, W]`` (or
    ``[C, D, H, W]``) -> ``[N, C, D_out, H_out, W_out]``; arguments ints or triples, sizes
    as :func:`max_pool1d` per dim (``ceil_mode``, ``dilation``, ``-inf`` padding of at
    most half the kernel). With ``return_indices``, also the int32 flat positions
    ``d * H * W + h * W + w`` of the maxima in each input volume (PyTorch's are int64).

    Raises:
        PoolingError: (a ``RuntimeError`` and a ``ValueError``) bad kernel, stride,
            dilation or padding. ShapeError: input rank, or no output.
    """
    return _max_pool("max_pool3d", input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices, 3)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """:func:`max_pool1d` returning ``(output, int32 indices)`` whatever ``return_indices``
    says (``torch.nn.functional.max_pool1d_with_indices``)."""
    return _max_pool("max_pool1d", input, kernel_size, stride, padding, dilation, ceil_mode,
                     True, 1)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """:func:`max_pool2d` returning ``(output, int32 indices)``
    (``torch.nn.functional.max_pool2d_with_indices``)."""
    return _max_pool("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode,
                     True, 2)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False, return_indices=False):
    """:func:`max_pool3d` returning ``(output, int32 indices)``
    (``torch.nn.functional.max_pool3d_with_indices``)."""
    return _max_pool("max_pool3d", input, kernel_size, stride, padding, dilation, ceil_mode,
                     True, 3)


def _avg_pool(op, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override, nsp):
    x, unbatched = _batched(op, x, nsp)
    kernel = _tuple(kernel_size, nsp, "kernel_size")
    stride = kernel if stride is None or stride == [] or stride == () else \
        _tuple(stride, nsp, "stride")
    padding = _tuple(padding, nsp, "padding")
    win, outs, _ = _uniform_windows(op, x, kernel, stride, padding, (1,) * nsp, ceil_mode,
                                    0.0)
    total = win.sum(tuple(range(-nsp, 0)))
    if divisor_override:
        y = total / float(divisor_override)
    else:
        # PyTorch's count: the window clipped to the padded input (count_include_pad) or
        # to the input itself
        counts = None
        for i, (o, k, s, p) in enumerate(zip(outs, kernel, stride, padding)):
            n = x.shape[2 + i]
            start = np.arange(o) * s - p
            end = np.minimum(start + k, n + p)
            if not count_include_pad:
                start, end = np.maximum(start, 0), np.minimum(end, n)
            c = (end - start).astype(np.float64)
            counts = c if counts is None else np.multiply.outer(counts, c)
        y = total * Tensor((1.0 / counts).astype(np.float32))
    return y.squeeze(0) if unbatched else y


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """1-D average pooling, as ``torch.nn.functional.avg_pool1d``: ``[N, C, L]`` ->
    ``[N, C, L_out]`` (sizes as :func:`max_pool1d`, zero padding). ``count_include_pad``:
    divide by the window clipped to the padded input, else to the input.

    Raises:
        ValueError, ShapeError: as :func:`max_pool1d`.
    """
    return _avg_pool("avg_pool1d", input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, None, 1)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """2-D average pooling, as ``torch.nn.functional.avg_pool2d``: ``[N, C, H, W]`` ->
    ``[N, C, H_out, W_out]``; ``divisor_override`` replaces the window count."""
    return _avg_pool("avg_pool2d", input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override, 2)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """3-D average pooling, as ``torch.nn.functional.avg_pool3d``: ``[N, C, D, H, W]`` (or
    ``[C, D, H, W]``) -> ``[N, C, D_out, H_out, W_out]``; arguments ints or triples, the
    divisor as :func:`avg_pool2d`.

    Raises:
        PoolingError, ShapeError: as :func:`max_pool3d`.
    """
    return _avg_pool("avg_pool3d", input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override, 3)


# -- adaptive pooling ---------------------------------------------------------------------
def _adaptive_bounds(n: int, o: int):
    start = np.array([(i * n) // o for i in range(o)])
    end = np.array([-((-(i + 1) * n) // o) for i in range(o)])
    return start, end


def _adaptive_windows(x: Tensor, sizes, fill: float):
    """``[N, C, *out, *kmax]`` windows at PyTorch's adaptive bounds, elements beyond a
    window's own length set to ``fill``; also the per-dim (start, end) arrays."""
    nsp = len(sizes)
    bounds, kmaxes = [], []
    for i, o in enumerate(sizes):
        n = x.shape[2 + i]
        start, end = _adaptive_bounds(n, o)
        kmax = int((end - start).max())
        bounds.append((start, end))
        kmaxes.append(kmax)
        if n % o == 0:                                   # uniform: one strided window
            x = _wrap(ops.window(x.node, 2 + i, kmax, n // o, 1))
        else:
            padded = _pad(x, [0, 0] * (x.ndim - 3 - i) + [0, kmax - 1], value=fill)
            w = _wrap(ops.window(padded.node, 2 + i, kmax, 1, 1))     # every start
            x = concat([w.index(2 + i, int(s), int(s) + 1) for s in start], 2 + i)
    # WINDOW appends each window dim last: x is [N, C, *out, *kmax] already
    mask = None
    for i, ((start, end), kmax) in enumerate(zip(bounds, kmaxes)):
        ok = (np.arange(kmax)[None, :] < (end - start)[:, None])          # [o, kmax]
        if ok.all():
            continue
        shape = [1] * (2 * nsp)
        shape[i], shape[nsp + i] = ok.shape
        m = ok.reshape(shape)
        mask = m if mask is None else (mask & m)
    if mask is not None:
        x = where(Tensor(mask.astype(bool)), x, fill)
    return x, bounds, kmaxes


def _sizes(op, x, output_size, nsp):
    out = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * nsp
    if len(out) != nsp:
        raise PoolingError(f"{op}: output_size must be an int or {nsp} values, got "
                           f"{output_size}")
    return tuple(x.shape[2 + i] if o is None else int(o) for i, o in enumerate(out))


def _adaptive(op, x, output_size, nsp, kind, return_indices=False):
    x, unbatched = _batched(op, x, nsp)
    sizes = _sizes(op, x, output_size, nsp)
    if any(o < 1 for o in sizes):
        raise ShapeError(op, [x.shape], user_site(), f"output_size {sizes} must be positive")
    win, bounds, kmaxes = _adaptive_windows(x, sizes, -math.inf if kind == "max" else 0.0)
    dims = tuple(range(-nsp, 0))
    if kind == "avg":
        counts = None
        for start, end in bounds:
            c = (end - start).astype(np.float64)
            counts = c if counts is None else np.multiply.outer(counts, c)
        y = win.sum(dims) * Tensor((1.0 / counts).astype(np.float32))
        return y.squeeze(0) if unbatched else y
    y = win.amax(dims)
    if not return_indices:
        return y.squeeze(0) if unbatched else y
    pos = Tensor(np.arange(math.prod(x.shape[2:]), dtype=np.float32)
                 .reshape(1, 1, *x.shape[2:]))
    pwin, _, _ = _adaptive_windows(pos, sizes, -1.0)
    idx = _first_index(win, y.reshape(*y.shape, *([1] * nsp)), pwin, nsp)
    return (y.squeeze(0), idx.squeeze(0)) if unbatched else (y, idx)


def adaptive_avg_pool1d(input, output_size):
    """``[N, C, L]`` -> ``[N, C, output_size]``: the mean of ``x[floor(i*L/O) :
    ceil((i+1)*L/O)]`` per output ``i``, as ``torch.nn.functional.adaptive_avg_pool1d``."""
    return _adaptive("adaptive_avg_pool1d", input, output_size, 1, "avg")


def adaptive_avg_pool2d(input, output_size):
    """``[N, C, H, W]`` -> ``[N, C, *output_size]`` (an int, a pair, ``None`` keeps a dim),
    as ``torch.nn.functional.adaptive_avg_pool2d``."""
    return _adaptive("adaptive_avg_pool2d", input, output_size, 2, "avg")


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Adaptive max pooling over ``[N, C, L]``, as ``torch.nn.functional.adaptive_max_pool1d``
    (int32 indices with ``return_indices``)."""
    return _adaptive("adaptive_max_pool1d", input, output_size, 1, "max", return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Adaptive max pooling over ``[N, C, H, W]``, as
    ``torch.nn.functional.adaptive_max_pool2d`` (int32 flat ``h * W + w`` indices)."""
    return _adaptive("adaptive_max_pool2d", input, output_size, 2, "max", return_indices)


def adaptive_avg_pool3d(input, output_size):
    """``[N, C, D, H, W]`` (or ``[C, D, H, W]``) -> ``[N, C, *output_size]`` (an int, a
    triple, ``None`` keeps a dim), as ``torch.nn.functional.adaptive_avg_pool3d``.

    Raises:
        PoolingError: ``output_size`` of another length. ShapeError: input rank.
    """
    return _adaptive("adaptive_avg_pool3d", input, output_size, 3, "avg")


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Adaptive max pooling over ``[N, C, D, H, W]``, as
    ``torch.nn.functional.adaptive_max_pool3d`` (int32 flat ``d * H * W + h * W + w``
    indices with ``return_indices``)."""
    return _adaptive("adaptive_max_pool3d", input, output_size, 3, "max", return_indices)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=False):
    """:func:`adaptive_max_pool1d` returning ``(output, int32 indices)``."""
    return _adaptive("adaptive_max_pool1d", input, output_size, 1, "max", True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=False):
    """:func:`adaptive_max_pool2d` returning ``(output, int32 indices)``."""
    return _adaptive("adaptive_max_pool2d", input, output_size, 2, "max", True)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=False):
    """:func:`adaptive_max_pool3d` returning ``(output, int32 indices)``."""
    return _adaptive("adaptive_max_pool3d", input, output_size, 3, "max", True)


# -- unpooling ------------------------------------------------------------------------------
def _unpool_size(op, x, kernel, stride, padding, output_size, nsp):
    """PyTorch's ``_unpool_output_size``: the default ``(in - 1) * stride - 2 * padding +
    kernel`` per dim, or ``output_size`` (spatial sizes, optionally after the batch and
    channel dims) strictly within ``stride`` of it."""
    default = [(x.shape[-nsp + d] - 1) * stride[d] + kernel[d] - 2 * padding[d]
               for d in range(nsp)]
    if output_size is None:
        out = default
    else:
        out = [int(v) for v in output_size]
        if len(out) == nsp + 2:
            out = out[2:]
        if len(out) != nsp:
            raise ValueError(f"output_size should be a sequence containing {nsp} or "
                             f"{nsp + 2} elements, but it has a length of '{len(out)}'")
        for d in range(nsp):
            lo, hi = default[d] - stride[d], default[d] + stride[d]
            if not lo < out[d] < hi:
                raise ValueError(f'invalid output_size "{tuple(output_size)}" (dim {d} must '
                                 f"be between {lo} and {hi})")
    if any(o <= 0 for o in out):
        raise ValueError(f"{op}: output_size must contain positive spatial dimensions, got "
                         f"{out}")
    return out


def _max_unpool(op, x, indices, kernel_size, stride, padding, output_size, nsp):
    x, unbatched = _batched(op, x, nsp)
    if not isinstance(indices, Tensor):
        indices = Tensor(np.asarray(indices), dtype="int64")
    if indices.dtype not in ("int32", "int64"):
        raise RuntimeError(f"elements in indices should be type int64 but got: "
                           f"{indices.dtype}")
    idx = indices.unsqueeze(0) if unbatched else indices
    if tuple(idx.shape) != tuple(x.shape):
        raise ShapeError(op, [x.shape, idx.shape], user_site(),
                         "Expected shape of indices to be same as that of the input tensor")
    kernel = _tuple(kernel_size, nsp, "kernel_size")
    stride = kernel if stride is None or stride == [] or stride == () else \
        _tuple(stride, nsp, "stride")
    padding = _tuple(padding, nsp, "padding")
    out_sp = _unpool_size(op, x, kernel, stride, padding, output_size, nsp)
    plane = math.prod(out_sp)
    if idx._var is not None and idx.numel():             # indices known while tracing
        v = idx.numpy()
        if v.min() < 0 or v.max() >= plane:
            bad = int(v[(v < 0) | (v >= plane)].reshape(-1)[0])
            raise RuntimeError(f"Found an invalid max index: {bad} (output volumes are of "
                               f"size {'x'.join(map(str, out_sp))})")
    n, c = x.shape[:2]
    flat_x, flat_i = x.reshape(n, c, -1), idx.reshape(n, c, -1)
    zeros = x.new_zeros(n, c, plane)
    summed = zeros.scatter_add(2, flat_i, flat_x)
    # several windows may pick one input element (overlapping pools): PyTorch writes its
    # value once; the mean of the equal values is that value. The gradient stays a gather
    # (every input gets the output's gradient at its index, as PyTorch's).
    count = zeros.detach().scatter_add(2, flat_i, x.new_ones(*flat_x.shape).detach())
    dup = count > 1.0
    mean = summed / count.where(dup, 1.0)
    y = summed.where(dup.logical_not(), summed + (mean - summed).detach())
    y = y.reshape(n, c, *out_sp)
    return y.squeeze(0) if unbatched else y


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of :func:`max_pool1d`, as ``torch.nn.functional.max_unpool1d``:
    ``input [N, C, L]`` (or ``[C, L]``) written at ``indices`` (same shape, int32/int64,
    as ``max_pool1d(..., return_indices=True)`` gives them: positions in the output's last
    dim), zeros elsewhere.

    Args:
        kernel_size, stride (default ``kernel_size``), padding: the pooling's.
        output_size: default ``(L - 1) * stride - 2 * padding + kernel_size``; another size
            (optionally with the batch and channel dims) must lie strictly within
            ``stride`` of it, as PyTorch's.

    Returns:
        ``[N, C, L_out]``. The gradient with respect to ``input`` is the output gradient
        gathered at ``indices``. An index written more than once (overlapping pooling
        windows) gets the mean of its values: equal values when they come from max
        pooling, so PyTorch's value (which keeps the last one written) within a rounding
        of the sum; an index written once gets its value exactly.

    Raises:
        ValueError: ``output_size`` of the wrong length or out of range (PyTorch's).
        RuntimeError: non-integer indices, or (when known while tracing) an index outside
            the output (PyTorch's message). ShapeError: input rank, or indices of another
            shape.
    """
    return _max_unpool("max_unpool1d", input, indices, kernel_size, stride, padding,
                       output_size, 1)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of :func:`max_pool2d` (``torch.nn.functional.max_unpool2d``):
    ``[N, C, H, W]`` (or ``[C, H, W]``) written at flat ``h * W_out + w`` ``indices`` of
    ``[N, C, H_out, W_out]``; see :func:`max_unpool1d`."""
    return _max_unpool("max_unpool2d", input, indices, kernel_size, stride, padding,
                       output_size, 2)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """The partial inverse of :func:`max_pool3d` (``torch.nn.functional.max_unpool3d``):
    ``[N, C, D, H, W]`` (or ``[C, D, H, W]``) written at flat ``d * H_out * W_out + h *
    W_out + w`` ``indices``; see :func:`max_unpool1d`."""
    return _max_unpool("max_unpool3d", input, indices, kernel_size, stride, padding,
                       output_size, 3)


# -- resampling ---------------------------------------------------------------------------
def _resample_matrix(n: int, o: int, mode: str, align_corners: bool, scale) -> np.ndarray:
    """``[o, n]`` float32: output ``i`` as a combination of inputs (PyTorch's source index
    rules, ``area_pixel_compute_source_index`` / ``nearest_idx``)."""
    a = np.zeros((o, n), np.float64)
    if mode == "nearest":
        s = (1.0 / scale) if scale else n / o
        src = np.minimum(np.floor(np.arange(o) * np.float32(s)).astype(np.int64), n - 1)
        a[np.arange(o), src] = 1.0
        return a.astype(np.float32)
    if align_corners:
        s = (n - 1) / (o - 1) if o > 1 else 0.0
        src = np.arange(o) * s
    else:
        s = (1.0 / scale) if scale else n / o
        src = np.maximum((np.arange(o) + 0.5) * s - 0.5, 0.0)
    lo = np.minimum(np.floor(src).astype(np.int64), n - 1)
    hi = np.minimum(lo + 1, n - 1)
    w = src - lo
    np.add.at(a, (np.arange(o), lo), 1.0 - w)
    np.add.at(a, (np.arange(o), hi), w)
    return a.astype(np.float32)


def interpolate(input: Tensor, size=None, scale_factor=None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Tensor:
    """Resize the spatial dims, as ``torch.nn.functional.interpolate``.

    Args:
        input: float32 ``[N, C, L]``, ``[N, C, H, W]``, ``[N, C, D, H, W]`` (or more
            spatial dims for nearest).
        size: output spatial size (int or one per dim), or ``scale_factor`` (float or one
            per dim; output ``floor(in * scale)``).
        mode: ``"nearest"``, ``"linear"`` (3-D input), ``"bilinear"`` (4-D input),
            ``"trilinear"`` (5-D input).
        align_corners: linear modes only; default False.
        recompute_scale_factor: True: source positions from the sizes, not ``scale_factor``.

    Returns:
        ``[N, C, *out]``. Integer nearest upscaling is a broadcast (a view); otherwise each
        dim is multiplied by a constant ``[out, in]`` resampling matrix (a DOT).

    Raises:
        ValueError: both or neither of ``size``/``scale_factor``, an unknown mode or
            a mode that does not fit the rank, ``align_corners`` with nearest, ``antialias``.
    """
    nsp = input.ndim - 2
    if nsp < 1:
        raise ValueError(f"interpolate: expected an input with batch and channel dims, got "
                         f"{list(input.shape)}")
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined")
    if antialias:
        raise ValueError("interpolate: antialias is not supported")
    want = {"linear": 1, "bilinear": 2, "trilinear": 3}
    if mode not in ("nearest", "linear", "bilinear", "trilinear"):
        raise ValueError(f"interpolate: mode {mode!r} is not supported (nearest, linear, "
                         "bilinear, trilinear)")
    if mode in want and want[mode] != nsp:
        raise ValueError(f"interpolate: mode {mode!r} needs a {want[mode] + 2}-D input, got "
                         f"{input.ndim}-D")
    if mode == "nearest" and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating "
                         "modes: linear | bilinear | bicubic | trilinear")
    in_sp = input.shape[2:]
    if size is not None:
        out = _tuple(size, nsp, "size")
        scales = [None] * nsp
    else:
        sf = scale_factor if isinstance(scale_factor, (tuple, list)) else [scale_factor] * nsp
        if len(sf) != nsp:
            raise ValueError(f"interpolate: scale_factor needs {nsp} values, got {scale_factor}")
        out = tuple(int(math.floor(n * float(f))) for n, f in zip(in_sp, sf))
        scales = [None if recompute_scale_factor else float(f) for f in sf]
    x = input
    for i, (n, o, sc) in enumerate(zip(in_sp, out, scales)):
        dim = 2 + i
        if mode == "nearest" and o % n == 0 and (sc is None or sc == o // n):
            r = o // n
            if r > 1:                                  # [.., n, 1, ..] -> [.., n, r, ..]
                s = list(x.shape)
                x = x.unsqueeze(dim + 1).expand(*s[:dim + 1], r, *s[dim + 1:])
                x = x.reshape(*s[:dim], o, *s[dim + 1:])
            continue
        a = Tensor(_resample_matrix(n, o, mode, bool(align_corners), sc))     # [o, n]
        moved = x.transpose(dim, -1)
        if moved.dtype != "float32":                  # 16-bit: weights applied in float32
            x = (moved.float() @ a.T).to(x.dtype).transpose(dim, -1)
        else:
            x = (moved @ a.T).transpose(dim, -1)
    return x


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """``torch.nn.functional.upsample`` (deprecated there): :func:`interpolate`."""
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    """``torch.nn.functional.upsample_nearest`` (deprecated there): :func:`interpolate`
    with ``mode="nearest"``."""
    return interpolate(input, size, scale_factor, "nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """``torch.nn.functional.upsample_bilinear`` (deprecated there): :func:`interpolate`
    with ``mode="bilinear"`` and ``align_corners=True``."""
    return interpolate(input, size, scale_factor, "bilinear", True)


def pixel_shuffle(input: Tensor, upscale_factor: int) -> Tensor:
    """``[..., C*r*r, H, W]`` -> ``[..., C, H*r, W*r]`` (a view), as
    ``torch.nn.functional.pixel_shuffle``.

    Raises:
        ShapeError: fewer than 3 dims or channels not divisible by ``r*r``.
    """
    r = int(upscale_factor)
    if input.ndim < 3 or input.shape[-3] % (r * r):
        raise ShapeError("pixel_shuffle", [input.shape], user_site(),
                         f"channels must be divisible by upscale_factor**2 = {r * r}")
    *lead, c, h, w = input.shape
    nl = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(nl), nl, nl + 3, nl + 1, nl + 4, nl + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input: Tensor, downscale_factor: int) -> Tensor:
    """``[..., C, H*r, W*r]`` -> ``[..., C*r*r, H, W]``, the inverse of :func:`pixel_shuffle`.

    Raises:
        ShapeError: fewer than 3 dims or spatial sizes not divisible by ``r``.
    """
    r = int(downscale_factor)
    if input.ndim < 3 or input.shape[-1] % r or input.shape[-2] % r:
        raise ShapeError("pixel_unshuffle", [input.shape], user_site(),
                         f"height and width must be divisible by downscale_factor {r}")
    *lead, c, h, w = input.shape
    nl = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(nl), nl, nl + 2, nl + 4, nl + 1, nl + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


# -- modules -------------------------------------------------------------------------------
class _MaxPoolNd(Module):
    fn = None

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, x):
        return type(self).fn(x, self.kernel_size, self.stride, self.padding, self.dilation,
                             self.ceil_mode, self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    """``torch.nn.MaxPool1d``: :func:`max_pool1d` (``stride`` defaults to the kernel)."""
    fn = staticmethod(max_pool1d)


class MaxPool2d(_MaxPoolNd):
    """``torch.nn.MaxPool2d``: :func:`max_pool2d` (``stride`` defaults to the kernel)."""
    fn = staticmethod(max_pool2d)


class MaxPool3d(_MaxPoolNd):
    """``torch.nn.MaxPool3d``: :func:`max_pool3d` (``stride`` defaults to the kernel)."""
    fn = staticmethod(max_pool3d)


class AvgPool1d(Module):
    """``torch.nn.AvgPool1d``: :func:`avg_pool1d`."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True):
        super().__init__()
        one = lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v,)  # noqa: E731
        self.kernel_size = one(kernel_size)          # PyTorch keeps 1-tuples here
        self.stride = one(stride if stride is not None else kernel_size)
        self.padding, self.ceil_mode = one(padding), ceil_mode
        self.count_include_pad = count_include_pad

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, x):
        return avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad)


class AvgPool2d(Module):
    """``torch.nn.AvgPool2d``: :func:`avg_pool2d`."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride = kernel_size, stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"

    def forward(self, x):
        return avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad, self.divisor_override)


class AvgPool3d(AvgPool2d):
    """``torch.nn.AvgPool3d``: :func:`avg_pool3d`."""

    def forward(self, x):
        return avg_pool3d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                          self.count_include_pad, self.divisor_override)


class AdaptiveAvgPool1d(Module):
    """``torch.nn.AdaptiveAvgPool1d``: :func:`adaptive_avg_pool1d`."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"

    def forward(self, x):
        return adaptive_avg_pool1d(x, self.output_size)


class AdaptiveAvgPool2d(AdaptiveAvgPool1d):
    """``torch.nn.AdaptiveAvgPool2d``: :func:`adaptive_avg_pool2d`."""

    def forward(self, x):
        return adaptive_avg_pool2d(x, self.output_size)


class AdaptiveMaxPool1d(Module):
    """``torch.nn.AdaptiveMaxPool1d``: :func:`adaptive_max_pool1d`."""

    def __init__(self, output_size, return_indices: bool = False):
        super().__init__()
        self.output_size, self.return_indices = output_size, return_indices

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"

    def forward(self, x):
        return adaptive_max_pool1d(x, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(AdaptiveMaxPool1d):
    """``torch.nn.AdaptiveMaxPool2d``: :func:`adaptive_max_pool2d`."""

    def forward(self, x):
        return adaptive_max_pool2d(x, self.output_size, self.return_indices)


class AdaptiveAvgPool3d(AdaptiveAvgPool1d):
    """``torch.nn.AdaptiveAvgPool3d``: :func:`adaptive_avg_pool3d`."""

    def forward(self, x):
        return adaptive_avg_pool3d(x, self.output_size)


class AdaptiveMaxPool3d(AdaptiveMaxPool1d):
    """``torch.nn.AdaptiveMaxPool3d``: :func:`adaptive_max_pool3d`."""

    def forward(self, x):
        return adaptive_max_pool3d(x, self.output_size, self.return_indices)


class _MaxUnpoolNd(Module):
    nsp = 1

    def __init__(self, kernel_size, stride=None, padding=0):
        super().__init__()
        n = self.nsp
        self.kernel_size = _tuple(kernel_size, n, "kernel_size")
        self.stride = _tuple(stride if stride is not None else kernel_size, n, "stride")
        self.padding = _tuple(padding, n, "padding")

    def forward(self, input, indices, output_size=None):
        return _max_unpool(f"max_unpool{self.nsp}d", input, indices, self.kernel_size,
                           self.stride, self.padding, output_size, self.nsp)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """``torch.nn.MaxUnpool1d(kernel_size, stride=None, padding=0)``:
    ``forward(input, indices, output_size=None)`` is :func:`max_unpool1d`."""
    nsp = 1


class MaxUnpool2d(_MaxUnpoolNd):
    """``torch.nn.MaxUnpool2d``: ``forward(input, indices, output_size=None)`` is
    :func:`max_unpool2d`."""
    nsp = 2


class MaxUnpool3d(_MaxUnpoolNd):
    """``torch.nn.MaxUnpool3d``: ``forward(input, indices, output_size=None)`` is
    :func:`max_unpool3d`."""
    nsp = 3


class Upsample(Module):
    """``torch.nn.Upsample``: :func:`interpolate` with fixed arguments."""

    def __init__(self, size=None, scale_factor=None, mode: str = "nearest",
                 align_corners: bool | None = None, recompute_scale_factor: bool | None = None):
        super().__init__()
        self.size, self.scale_factor, self.mode = size, scale_factor, mode
        self.align_corners, self.recompute_scale_factor = align_corners, recompute_scale_factor

    def forward(self, x):
        return interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners,
                           self.recompute_scale_factor)


class UpsamplingNearest2d(Upsample):
    """``torch.nn.UpsamplingNearest2d``."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, "nearest")


class UpsamplingBilinear2d(Upsample):
    """``torch.nn.UpsamplingBilinear2d`` (``align_corners=True``, as PyTorch's)."""

    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, "bilinear", True)


class PixelShuffle(Module):
    """``torch.nn.PixelShuffle``: :func:`pixel_shuffle`."""

    def __init__(self, upscale_factor: int):
        super().__init__()
        self.upscale_factor = int(upscale_factor)

    def forward(self, x):
        return pixel_shuffle(x, self.upscale_factor)


class PixelUnshuffle(Module):
    """``torch.nn.PixelUnshuffle``: :func:`pixel_unshuffle`."""

    def __init__(self, downscale_factor: int):
        super().__init__()
        self.downscale_factor = int(downscale_factor)

    def forward(self, x):
        return pixel_unshuffle(x, self.downscale_factor)


def _lp_pool(op, input, norm_type, kernel_size, stride, ceil_mode, nsp):
    kernel = _tuple(kernel_size, nsp, "kernel_size")
    if norm_type == math.inf:
        return _max_pool(op, input.abs(), kernel, stride, 0, 1, ceil_mode, False, nsp)
    if norm_type == -math.inf:
        return -_max_pool(op, -input.abs(), kernel, stride, 0, 1, ceil_mode, False, nsp)
    out = _avg_pool(op, input ** norm_type, kernel, stride, 0, ceil_mode, True, None, nsp)
    return (out.sign() * out.abs().relu() * math.prod(kernel)) ** (1.0 / norm_type)


def lp_pool1d(input, norm_type: float, kernel_size: int, stride=None, ceil_mode=False):
    """Power-average pooling ``(sum over the window of x^p)^(1/p)``, as
    ``torch.nn.functional.lp_pool1d`` (its formula: an average pool of ``x^p`` times the
    window size, negative sums clipped to 0 before the root; ``p = inf``: the max of
    ``|x|``, ``-inf``: minus the max of ``-|x|``). ``[N, C, L]`` (or ``[C, L]``) ->
    ``[N, C, L_out]``, no padding.

    Raises:
        PoolingError, ShapeError: as :func:`max_pool1d`.
    """
    return _lp_pool("lp_pool1d", input, norm_type, kernel_size, stride, ceil_mode, 1)


def lp_pool2d(input, norm_type: float, kernel_size, stride=None, ceil_mode=False):
    """2-D :func:`lp_pool1d` (``torch.nn.functional.lp_pool2d``): ``[N, C, H, W]``."""
    return _lp_pool("lp_pool2d", input, norm_type, kernel_size, stride, ceil_mode, 2)


def lp_pool3d(input, norm_type: float, kernel_size, stride=None, ceil_mode=False):
    """3-D :func:`lp_pool1d` (``torch.nn.functional.lp_pool3d``): ``[N, C, D, H, W]``."""
    return _lp_pool("lp_pool3d", input, norm_type, kernel_size, stride, ceil_mode, 3)


def channel_shuffle(input, groups: int):
    """``[N, g * c, *]`` -> channels regrouped as ``[N, c * g, *]`` (ShuffleNet, Zhang et
    al., 2018; ``torch.nn.functional.channel_shuffle``).

    Raises:
        ValueError: ``groups`` does not divide the channels.
    """
    n, ch = input.shape[0], input.shape[1]
    if groups <= 0 or ch % groups:
        raise ValueError(f"channel_shuffle: Number of channels ({ch}) must be divisible by "
                         f"groups ({groups})")
    rest = input.shape[2:]
    x = input.reshape(n, groups, ch // groups, *rest).transpose(1, 2)
    return x.reshape(n, ch, *rest)


class LPPool1d(Module):
    """``torch.nn.LPPool1d``: :func:`lp_pool1d`."""

    def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):
        super().__init__()
        self.norm_type, self.kernel_size = norm_type, kernel_size
        self.stride, self.ceil_mode = stride, ceil_mode

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")

    def forward(self, x):
        return lp_pool1d(x, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class LPPool2d(LPPool1d):
    """``torch.nn.LPPool2d``: :func:`lp_pool2d`."""

    def forward(self, x):
        return lp_pool2d(x, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class LPPool3d(LPPool1d):
    """``torch.nn.LPPool3d``: :func:`lp_pool3d`."""

    def forward(self, x):
        return lp_pool3d(x, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class ChannelShuffle(Module):
    """``torch.nn.ChannelShuffle``: :func:`channel_shuffle`."""

    def __init__(self, groups: int):
        super().__init__()
        self.groups = int(groups)

    def forward(self, x):
        return channel_shuffle(x, self.groups)
