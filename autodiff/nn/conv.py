"""Convolutions: ``F.conv1d``/``conv2d``/``conv3d``, ``F.conv_transpose1d``/``2d``/``3d`` and
the ``Conv1d/2d/3d`` and ``ConvTranspose1d/2d/3d`` modules (PyTorch's arguments, defaults,
parameter shapes and initialisation). One implementation serves every number of spatial
dims; the rank only picks the input layout.

A convolution is lowered to the dot product the compiler already has, through views:

    pad -> WINDOW per spatial dim -> permute/reshape -> DOT (+ bias, activation: epilogue)

The input window is an index map (an implicit im2col: ``cols[n*P + p, c*KK + k]`` reads
``x[n, c, p*stride + k*dilation - padding]``), never a materialised unfolded input in the
graph IR. The weight gradient is again one DOT (``cols^T @ grad``, a correlation); the input
gradient is the DOT ``grad @ W`` followed by the adjoint of the window (a sum of strided
placements, :func:`autodiff.graph.ops.window_fold`). A transposed convolution is the same two
steps forward: ``x @ W`` then ``window_fold`` (col2im), so no zeros are inserted into the
input and no work is spent on them.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError
from ..graph import ops
from ..graph.tensor import Tensor, _wrap
from ..graph.trace import user_site
from . import init
from .module import Module, Parameter
from .padding import pad as _pad

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def checked_padding(values: tuple, what: str) -> tuple:
    """``values``; a negative one in a padding (``what``) raises PyTorch's
    ``RuntimeError`` (it would crop the input)."""
    if "padding" in what and min(values, default=0) < 0:
        raise RuntimeError(f"negative padding is not supported: {what}={values}")
    return values


def _tuple(v, n: int, what: str) -> tuple:
    if isinstance(v, (tuple, list)):
        if len(v) != n:
            raise ValueError(f"{what} must have {n} entries, got {tuple(v)}")
        return checked_padding(tuple(int(a) for a in v), what)
    return checked_padding((int(v),) * n, what)


def _same_pads(kernel, dilation) -> list[tuple[int, int]]:
    """(before, after) per dim for ``padding="same"``: the extra element goes after."""
    out = []
    for k, d in zip(kernel, dilation):
        total = d * (k - 1)
        out.append((total // 2, total - total // 2))
    return out


def _check(op: str, x: Tensor, w: Tensor, nsp: int, groups: int, transposed: bool):
    if w.ndim != nsp + 2:
        raise ShapeError(op, [x.shape, w.shape], user_site(),
                         f"weight must have {nsp + 2} dims")
    if x.ndim not in (nsp + 1, nsp + 2):
        raise ShapeError(op, [x.shape, w.shape], user_site(),
                         f"expected a {nsp + 1}-D (unbatched) or {nsp + 2}-D (batched) input")
    if groups < 1:
        raise ValueError(f"{op}: groups must be a positive integer, got {groups}")
    c = x.shape[-nsp - 1]
    c_w = w.shape[0] if transposed else w.shape[1] * groups
    if c != c_w or w.shape[0] % groups:
        raise ShapeError(op, [x.shape, w.shape], user_site(),
                         f"{c} input channels do not fit a weight for {c_w} with groups "
                         f"{groups}")


def _conv(op, x, weight, bias, stride, padding, dilation, groups, nsp):
    _check(op, x, weight, nsp, groups, False)
    unbatched = x.ndim == nsp + 1
    if unbatched:
        x = x.unsqueeze(0)
    kernel = weight.shape[2:]
    stride, dilation = _tuple(stride, nsp, "stride"), _tuple(dilation, nsp, "dilation")
    if isinstance(padding, str):
        if padding == "valid":
            pads = [(0, 0)] * nsp
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{op}: padding='same' is not supported for strided "
                                 "convolutions")
            pads = _same_pads(kernel, dilation)
        else:
            raise ValueError(f"{op}: invalid padding string {padding!r}, should be one of "
                             "'valid', 'same'")
    else:
        pads = [(p, p) for p in _tuple(padding, nsp, "padding")]
    if any(a or b for a, b in pads):
        x = _pad(x, [a for pr in reversed(pads) for a in pr])
    n, c = x.shape[:2]
    for i, (k, s, d) in enumerate(zip(kernel, stride, dilation)):
        if x.shape[2 + i] < d * (k - 1) + 1:
            raise ShapeError(op, [x.shape, weight.shape], user_site(),
                             f"kernel size {k} (dilation {d}) is larger than the padded "
                             f"input size {x.shape[2 + i]} of spatial dim {i}")
        x = _wrap(ops.window(x.node, 2 + i, k, s, d))
    out_sp = x.shape[2:2 + nsp]
    cols = math.prod(out_sp)
    kk = math.prod(kernel)
    o = weight.shape[0]
    g, cg, og = groups, c // groups, o // groups
    if g == 1:                       # [N, C, *P, *K] -> [N*P, C*K] @ [C*K, O] -> [N*P, O]
        a = x.permute(0, *range(2, 2 + nsp), 1, *range(2 + nsp, 2 + 2 * nsp))
        y = a.reshape(n * cols, c * kk) @ weight.reshape(o, c * kk).T
        y = y.reshape(n, *out_sp, o).permute(0, nsp + 1, *range(1, nsp + 1))
    else:                            # one batched DOT over the groups
        a = x.reshape(n, g, cg, *out_sp, *kernel)
        a = a.permute(1, 0, *range(3, 3 + nsp), 2, *range(3 + nsp, 3 + 2 * nsp))
        y = a.reshape(g, n * cols, cg * kk) @ weight.reshape(g, og, cg * kk).transpose(1, 2)
        y = y.reshape(g, n, *out_sp, og).permute(1, 0, nsp + 2, *range(2, nsp + 2))
        y = y.reshape(n, o, *out_sp)
    if bias is not None:
        y = y + bias.reshape(o, *([1] * nsp))
    return y.squeeze(0) if unbatched else y


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """1-D cross-correlation, as ``torch.nn.functional.conv1d``.

    Args:
        input: float32 ``[N, C_in, L]`` (or unbatched ``[C_in, L]``).
        weight: ``[C_out, C_in / groups, K]``; bias: optional ``[C_out]``.
        stride, padding, dilation: ints or 1-tuples; ``padding`` may be ``"valid"`` or
            ``"same"`` (stride 1 only; odd totals put the extra zero after).
        groups: input and output channels split into ``groups`` independent blocks
            (``groups == C_in``: depthwise).

    Returns:
        ``[N, C_out, (L + 2*padding - dilation*(K-1) - 1) // stride + 1]``.

    Raises:
        ShapeError: channels or dims that do not fit (names the shapes and your line).
        ValueError: a bad ``padding`` string, ``"same"`` with a stride, bad ``groups``.
    """
    return _conv("conv1d", input, weight, bias, stride, padding, dilation, groups, 1)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """2-D cross-correlation, as ``torch.nn.functional.conv2d``.

    Args:
        input: float32 ``[N, C_in, H, W]`` (or unbatched ``[C_in, H, W]``).
        weight: ``[C_out, C_in / groups, KH, KW]``; bias: optional ``[C_out]``.
        stride, padding, dilation: ints or pairs; ``padding`` may be ``"valid"`` or
            ``"same"`` (stride 1 only).
        groups: channel blocks (``groups == C_in``: depthwise).

    Returns:
        ``[N, C_out, H_out, W_out]``, ``H_out = (H + 2*pH - dH*(KH-1) - 1) // sH + 1``.

    Raises:
        ShapeError, ValueError: as :func:`conv1d`.
    """
    return _conv("conv2d", input, weight, bias, stride, padding, dilation, groups, 2)


def conv3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """3-D cross-correlation, as ``torch.nn.functional.conv3d`` (video, volumes).

    Args:
        input: float32 ``[N, C_in, D, H, W]`` (or unbatched ``[C_in, D, H, W]``).
        weight: ``[C_out, C_in / groups, KD, KH, KW]``; bias: optional ``[C_out]``.
        stride, padding, dilation: ints or triples; ``padding`` may be ``"valid"`` or
            ``"same"`` (stride 1 only).
        groups: channel blocks (``groups == C_in``: depthwise).

    Returns:
        ``[N, C_out, D_out, H_out, W_out]``, ``D_out = (D + 2*pD - dD*(KD-1) - 1) // sD + 1``
        (likewise H, W). Lowered as :func:`conv1d`: pad, one ``WINDOW`` per spatial dim,
        one DOT (no materialised im2col).

    Raises:
        ShapeError: (a ``ValueError`` and a ``RuntimeError``, PyTorch's type) channels,
            ranks or a kernel larger than the padded input.
        ValueError: a bad ``padding`` string, ``"same"`` with a stride, bad ``groups``.
    """
    return _conv("conv3d", input, weight, bias, stride, padding, dilation, groups, 3)


def col2im(y: Tensor, kernel, stride, dilation, lengths) -> Tensor:
    """The adjoint of windowing every spatial dim: ``y [N, C, P_0, K_0, ..., P_{n-1},
    K_{n-1}]`` (each window count followed by its window index) -> ``[N, C, L_0, ...,
    L_{n-1}]``, element ``(p_i, k_i)`` added at ``p_i * stride_i + k_i * dilation_i``
    (overlapping windows add up). One :func:`autodiff.graph.ops.window_fold` per dim (views
    and adds), the last dim first; used by transposed convolutions and ``F.fold``.

    Raises:
        ShapeError: windows that do not fit ``lengths``.
    """
    for i in reversed(range(len(kernel))):   # fold the last (P_i, K_i) pair, move L_i after C
        y = _wrap(ops.window_fold(y.node, y.ndim - 2, lengths[i], kernel[i], stride[i],
                                  dilation[i]))
        y = y.permute(0, 1, y.ndim - 1, *range(2, y.ndim - 1))
    return y


def _conv_transpose(op, x, weight, bias, stride, padding, output_padding, groups, dilation,
                    nsp):
    _check(op, x, weight, nsp, groups, True)
    unbatched = x.ndim == nsp + 1
    if unbatched:
        x = x.unsqueeze(0)
    stride, dilation = _tuple(stride, nsp, "stride"), _tuple(dilation, nsp, "dilation")
    padding = _tuple(padding, nsp, "padding")
    output_padding = _tuple(output_padding, nsp, "output_padding")
    for op_, s, d in zip(output_padding, stride, dilation):
        if op_ >= max(s, d):
            raise ValueError(f"{op}: output padding must be smaller than either stride or "
                             f"dilation, got output_padding={output_padding}")
    n, c, *sp = x.shape
    kernel = weight.shape[2:]
    g, cg, og = groups, c // groups, weight.shape[1]
    o, kk, cols = og * g, math.prod(kernel), math.prod(sp)
    # cols [N*P, C_out*K] = x [N*P, C_in] @ W [C_in, C_out*K], per group
    xt = x.reshape(n, g, cg, cols).permute(1, 0, 3, 2).reshape(g, n * cols, cg)
    y = xt @ weight.reshape(g, cg, og * kk)                      # [G, N*P, Og*K]
    y = y.reshape(g, n, *sp, og, *kernel)
    # -> [N, G, Og, (P_i, K_i) for each dim]: every spatial dim followed by its window index
    perm = [1, 0, 2 + nsp] + [a for i in range(nsp) for a in (2 + i, 3 + nsp + i)]
    y = y.permute(*perm).reshape(n, o, *[a for i in range(nsp) for a in (sp[i], kernel[i])])
    lengths, fulls = [], []
    for i in range(nsp):
        full = (sp[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1
        out_len = full - 2 * padding[i] + output_padding[i]
        if out_len <= 0:
            raise ShapeError(op, [x.shape, weight.shape], user_site(),
                             f"padding {padding} leaves no output in spatial dim {i}")
        lengths.append(out_len)
        fulls.append(max(full, padding[i] + out_len))
    y = col2im(y, kernel, stride, dilation, fulls)       # [N, O, L_0, ..., L_{nsp-1}]
    spec = [(0, n, 1), (0, o, 1)] + [(p, p + ol, 1) for p, ol in zip(padding, lengths)]
    y = _wrap(ops.slice_(y.node, spec))
    if bias is not None:
        y = y + bias.reshape(o, *([1] * nsp))
    return y.squeeze(0) if unbatched else y


def conv_transpose1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """1-D transposed convolution, as ``torch.nn.functional.conv_transpose1d``.

    Args:
        input: float32 ``[N, C_in, L]`` (or ``[C_in, L]``).
        weight: ``[C_in, C_out / groups, K]``; bias: optional ``[C_out]``.
        stride, padding, output_padding, dilation: ints or 1-tuples.

    Returns:
        ``[N, C_out, (L-1)*stride - 2*padding + dilation*(K-1) + output_padding + 1]``.

    Raises:
        ShapeError: channels or dims that do not fit. ValueError: ``output_padding`` not
            below the stride or the dilation.
    """
    return _conv_transpose("conv_transpose1d", input, weight, bias, stride, padding,
                           output_padding, groups, dilation, 1)


def conv_transpose2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """2-D transposed convolution (the gradient of ``conv2d`` with respect to its input),
    as ``torch.nn.functional.conv_transpose2d``.

    Args:
        input: float32 ``[N, C_in, H, W]`` (or ``[C_in, H, W]``).
        weight: ``[C_in, C_out / groups, KH, KW]``; bias: optional ``[C_out]``.
        stride, padding, output_padding, dilation: ints or pairs.

    Returns:
        ``[N, C_out, H_out, W_out]``,
        ``H_out = (H-1)*sH - 2*pH + dH*(KH-1) + output_padding_H + 1``.

    Raises:
        ShapeError, ValueError: as :func:`conv_transpose1d`.
    """
    return _conv_transpose("conv_transpose2d", input, weight, bias, stride, padding,
                           output_padding, groups, dilation, 2)


def conv_transpose3d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1,
                     padding=0, output_padding=0, groups: int = 1, dilation=1) -> Tensor:
    """3-D transposed convolution (the gradient of ``conv3d`` with respect to its input),
    as ``torch.nn.functional.conv_transpose3d``.

    Args:
        input: float32 ``[N, C_in, D, H, W]`` (or ``[C_in, D, H, W]``).
        weight: ``[C_in, C_out / groups, KD, KH, KW]``; bias: optional ``[C_out]``.
        stride, padding, output_padding, dilation: ints or triples.

    Returns:
        ``[N, C_out, D_out, H_out, W_out]``,
        ``D_out = (D-1)*sD - 2*pD + dD*(KD-1) + output_padding_D + 1`` (likewise H, W):
        one DOT, then :func:`col2im` (no zeros inserted into the input).

    Raises:
        ShapeError, ValueError: as :func:`conv_transpose1d`.
    """
    return _conv_transpose("conv_transpose3d", input, weight, bias, stride, padding,
                           output_padding, groups, dilation, 3)


class _ConvNd(Module):
    nsp = 1
    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 output_padding=0):
        super().__init__()
        n = self.nsp
        name = type(self).__name__
        if groups < 1 or in_channels % groups or out_channels % groups:
            raise ValueError(f"{name}: in_channels {in_channels} and out_channels "
                             f"{out_channels} must be divisible by groups {groups}")
        if padding_mode not in PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {PADDING_MODES}, got "
                             f"{padding_mode!r}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size = _tuple(kernel_size, n, "kernel_size")
        self.stride, self.dilation = _tuple(stride, n, "stride"), _tuple(dilation, n, "dilation")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: invalid padding string {padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' is not supported for strided "
                                 "convolutions")
            self.padding = padding
        else:
            self.padding = _tuple(padding, n, "padding")
        self.output_padding = _tuple(output_padding, n, "output_padding")
        self.padding_mode = padding_mode
        if self.transposed:
            shape = (in_channels, out_channels // groups, *self.kernel_size)
        else:
            shape = (out_channels, in_channels // groups, *self.kernel_size)
        self.weight = Parameter(np.zeros(shape, np.float32))
        self.bias = Parameter(np.zeros(out_channels, np.float32)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """PyTorch's initialisation, drawn now from the global generator: ``kaiming_uniform_
        (a=sqrt(5))``, i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)), for the weight and the
        bias; ``fan_in`` is dim 1 of the weight times the kernel size (both kinds)."""
        fan_in = self.weight.shape[1] * math.prod(self.kernel_size)
        bound = 1.0 / math.sqrt(fan_in) if fan_in else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def _edge_pads(self) -> list[int]:
        """``F.pad`` amounts (last dim first) for a non-zeros ``padding_mode``."""
        pairs = _same_pads(self.kernel_size, self.dilation) if self.padding == "same" else \
            [(0, 0)] * self.nsp if self.padding == "valid" else [(p, p) for p in self.padding]
        return [a for pr in reversed(pairs) for a in pr]

    def extra_repr(self) -> str:
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * self.nsp:            # PyTorch's format: no quotes
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self.nsp:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self.nsp:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros"):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode)

    def forward(self, input: Tensor) -> Tensor:
        if self.padding_mode != "zeros":
            x = _pad(input, self._edge_pads(), self.padding_mode)
            return _conv(type(self).__name__.lower(), x, self.weight, self.bias, self.stride,
                         0, self.dilation, self.groups, self.nsp)
        return _conv(type(self).__name__.lower(), input, self.weight, self.bias, self.stride,
                     self.padding, self.dilation, self.groups, self.nsp)


class Conv1d(_Conv):
    """``torch.nn.Conv1d``: ``weight [out, in / groups, K]``, ``bias [out]``; see
    :func:`conv1d`. ``padding`` is an int, a 1-tuple, ``"valid"`` or ``"same"``;
    ``padding_mode`` is ``"zeros"``, ``"reflect"``, ``"replicate"`` or ``"circular"``.
    Initialised as PyTorch: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), ``fan_in = in / groups * K``.
    Input ``[N, in, L]`` (or ``[in, L]``) -> ``[N, out, L_out]``."""
    nsp = 1


class Conv2d(_Conv):
    """``torch.nn.Conv2d``: ``weight [out, in / groups, KH, KW]``, ``bias [out]``; see
    :func:`conv2d` and :class:`Conv1d` for the arguments. Input ``[N, in, H, W]`` (or
    ``[in, H, W]``) -> ``[N, out, H_out, W_out]``."""
    nsp = 2


class Conv3d(_Conv):
    """``torch.nn.Conv3d``: ``weight [out, in / groups, KD, KH, KW]``, ``bias [out]``; see
    :func:`conv3d` and :class:`Conv1d` for the arguments (``padding_mode`` included).
    Input ``[N, in, D, H, W]`` (or ``[in, D, H, W]``) -> ``[N, out, D_out, H_out, W_out]``."""
    nsp = 3


class _ConvTranspose(_ConvNd):
    transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros"):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for '
                             f"{type(self).__name__}")
        if isinstance(padding, str):
            raise ValueError(f"{type(self).__name__}: padding must be ints")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, output_padding)

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        """``output_size`` (the spatial sizes, optionally with the batch and channel dims)
        picks the ``output_padding`` that reaches it, as PyTorch's ``_output_padding``.

        Raises:
            ValueError: ``output_size`` of the wrong length, or outside the sizes this
                layer can produce for the input.
        """
        return _conv_transpose(f"conv_transpose{self.nsp}d", input, self.weight, self.bias,
                               self.stride, self.padding,
                               self._output_padding(input, output_size), self.groups,
                               self.dilation, self.nsp)

    def _output_padding(self, input: Tensor, output_size):
        if output_size is None:
            return self.output_padding
        n = self.nsp
        lead = 2 if input.ndim == n + 2 else 1
        size = list(output_size)
        if len(size) == lead + n:
            size = size[lead:]
        if len(size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.ndim}D input, output_size must "
                             f"have {n} or {lead + n} elements (got {len(output_size)})")
        k, s, p, d = self.kernel_size, self.stride, self.padding, self.dilation
        lo = [(input.shape[lead + i] - 1) * s[i] - 2 * p[i] + d[i] * (k[i] - 1) + 1
              for i in range(n)]
        hi = [lo[i] + s[i] - 1 for i in range(n)]
        if any(not lo[i] <= size[i] <= hi[i] for i in range(n)):
            raise ValueError(f"requested an output size of {size}, but valid sizes range from "
                             f"{lo} to {hi} (for an input of {list(input.shape[lead:])})")
        return tuple(size[i] - lo[i] for i in range(n))


class ConvTranspose1d(_ConvTranspose):
    """``torch.nn.ConvTranspose1d``: ``weight [in, out / groups, K]``, ``bias [out]``; see
    :func:`conv_transpose1d`."""
    nsp = 1


class ConvTranspose2d(_ConvTranspose):
    """``torch.nn.ConvTranspose2d``: ``weight [in, out / groups, KH, KW]``, ``bias [out]``;
    see :func:`conv_transpose2d`. Input ``[N, in, H, W]`` -> ``[N, out, H_out, W_out]``."""
    nsp = 2


class ConvTranspose3d(_ConvTranspose):
    """``torch.nn.ConvTranspose3d``: ``weight [in, out / groups, KD, KH, KW]``, ``bias
    [out]``; see :func:`conv_transpose3d`. Input ``[N, in, D, H, W]`` -> ``[N, out, D_out,
    H_out, W_out]``; ``forward(input, output_size=None)`` as :class:`ConvTranspose2d`."""
    nsp = 3


__all__ = ["conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "col2im", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
           "ConvTranspose2d", "ConvTranspose3d"]
