"""Functional forms of the layers and losses, spelled like ``torch.nn.functional``.

Every function composes :class:`~autodiff.Tensor` ops, so it traces graph IR nodes and gets
its gradient from the per-op rules of :mod:`autodiff.graph.autograd`. All float tensors are
float32; class indices and token ids are int32 tensors (for instance from an int32 Feeder).
"""
from __future__ import annotations

import functools
import inspect
import math
import numbers
import warnings

import numpy as np

from ..errors import ShapeError
from ..graph import ops
from ..graph.trace import user_site
from ..graph.tensor import Tensor, _wrap, concat, default_rng, where

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)


def _tensor(x, dtype: str | None = None) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(x, dtype=dtype)


def legacy_reduction(size_average, reduce) -> str:
    """PyTorch's ``_Reduction.legacy_get_string``: the deprecated ``size_average`` /
    ``reduce`` flags as a ``reduction``."""
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "none" if not reduce else ("mean" if size_average else "sum")


def _legacy_flags(fn):
    """``fn`` (a loss taking ``size_average``, ``reduce`` and ``reduction``) reading the
    deprecated flags as PyTorch's functional losses do: either given, ``reduction`` is
    :func:`legacy_reduction` of them, with PyTorch's warning (they were ignored: ``F.l1_loss(x,
    y, reduce=False)`` gave the mean)."""
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def loss(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        flags = bound.arguments.get("size_average"), bound.arguments.get("reduce")
        if any(f is not None for f in flags):
            reduction = legacy_reduction(*flags)
            warnings.warn(f"size_average and reduce args will be deprecated, please use "
                          f"reduction='{reduction}' instead.", UserWarning, stacklevel=2)
            bound.arguments.update(size_average=None, reduce=None, reduction=reduction)
        return fn(*bound.args, **bound.kwargs)
    return loss


def reduce_loss(x: Tensor, reduction: str) -> Tensor:
    """``x`` reduced by ``"mean"``, ``"sum"`` or ``"none"``.

    Raises:
        ValueError: unknown reduction.
    """
    if reduction == "mean":
        return x.mean()
    if reduction == "sum":
        return x.sum()
    if reduction == "none":
        return x
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


# -- activations -------------------------------------------------------------------------
def _inplace_option(fn):
    """``fn(input, ..., inplace=False)`` with PyTorch's ``inplace=True``: ``input`` takes the
    result (:func:`_in_place`: a traced tensor names the new value from then on, a view
    writes it back into its base, a variable is assigned) and is returned."""
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        out = fn(*args, **kwargs)
        return _in_place(bound.arguments["input"], out) if bound.arguments.get("inplace") \
            else out
    return wrapper


@_inplace_option
def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``max(x, 0)`` elementwise."""
    return input.relu()


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """Gaussian error linear unit, elementwise, as ``torch.nn.functional.gelu``.

    Args:
        x: float32 tensor of any shape.
        approximate: ``"none"``: ``x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))``;
            ``"tanh"``: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``.

    Raises:
        ValueError: unknown ``approximate``.
    """
    if approximate == "none":
        return x * 0.5 * (1.0 + (x * _INV_SQRT2).erf())
    if approximate == "tanh":
        inner = (x + x * x * x * 0.044715) * _SQRT_2_OVER_PI
        return x * 0.5 * (1.0 + inner.tanh())
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def implicit_softmax_dim(name: str, ndim: int) -> int:
    """The dim PyTorch's ``softmax``/``log_softmax``/``softmin`` take when ``dim`` is None
    (``torch.nn.functional._get_softmax_dim``): 0 for a 0-, 1- or 3-D input, else 1, with
    its deprecation warning."""
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the "
                  f"call to include dim=X as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype=None) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim``; the (detached) maximum is subtracted first,
    so large inputs do not overflow. ``dim=None`` takes PyTorch's deprecated implicit dim
    (:func:`implicit_softmax_dim`, with its warning); ``dtype`` casts the input first;
    ``_stacklevel`` is accepted for PyTorch's signature.

    Raises:
        DTypeError: an integer or bool input without a floating ``dtype``."""
    if dim is None:
        dim = implicit_softmax_dim("softmax", input.ndim)
    return input.softmax(dim, dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
                dtype=None) -> Tensor:
    """``x - log(sum(exp(x)))`` along ``dim``, max-subtracted (stable for large inputs);
    ``dim=None`` as :func:`softmax`."""
    if dim is None:
        dim = implicit_softmax_dim("log_softmax", input.ndim)
    return input.log_softmax(dim, dtype)


@_inplace_option
def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` where ``x > 0``, else ``negative_slope * x``."""
    return input.where(input > 0, input * negative_slope)


def _expm1_neg(x: Tensor) -> Tensor:
    """``expm1(x)`` where ``x <= 0``, 0 elsewhere: the negative branch of ELU-like functions,
    kept finite (its gradient too) where the other branch is taken."""
    return x.where(x <= 0, 0.0).expm1()


@_inplace_option
def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` where ``x > 0``, else ``alpha (exp(x) - 1)``."""
    return input.where(input > 0, _expm1_neg(input) * alpha)


@_inplace_option
def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` where ``x > 0``, else ``alpha (exp(x / alpha) - 1)``."""
    return input.where(input > 0, _expm1_neg(input * (1.0 / alpha)) * alpha)


_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


@_inplace_option
def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with the constants of Klambauer et al. (2017)."""
    return elu(input, _SELU_ALPHA) * _SELU_SCALE


@_inplace_option
def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``x sigmoid(x)``."""
    return input * input.sigmoid()


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta x)) / beta``, and ``x`` where ``beta x > threshold``."""
    bx = input * beta
    safe = bx.minimum(threshold)
    return input.where(bx > threshold, safe.exp().log1p() * (1.0 / beta))


@_inplace_option
def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x tanh(softplus(x))``."""
    return input * softplus(input).tanh()


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``."""
    return input / (input.abs() + 1.0)


@_inplace_option
def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """``x`` clamped to ``[min_val, max_val]``; the gradient is 1 strictly inside (PyTorch)."""
    out = input.where(input > min_val, min_val)
    return out.where(input < max_val, max_val)


@_inplace_option
def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``hardtanh(x, 0, 6)``."""
    return hardtanh(input, 0.0, 6.0)


@_inplace_option
def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``x / 6 + 1/2`` on ``(-3, 3)``, 0 below, 1 above."""
    return hardtanh(input * (1.0 / 6.0) + 0.5, 0.0, 1.0)


@_inplace_option
def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x (x + 3) / 6`` on ``[-3, 3]``, 0 below, ``x`` above."""
    mid = input * (input + 3.0) * (1.0 / 6.0)
    return input.where(input > 3.0, mid).where(input >= -3.0, 0.0)


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|))`` (no overflow)."""
    return input.minimum(0.0) - (-input.abs()).exp().log1p()


@_inplace_option
def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``x`` where ``x > threshold``, else ``value``."""
    return input.where(input > threshold, value)


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)``."""
    return input - input.tanh()


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0."""
    return (input - lambd).where(input > lambd, (input + lambd).where(input < -lambd, 0.0))


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` where ``|x| > lambd``, else 0."""
    return input.where(input.abs() > lambd, 0.0)


@_inplace_option
def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
          training: bool = False, inplace: bool = False) -> Tensor:
    """Randomized leaky ReLU (Xu et al., 2015): negative inputs times a slope drawn
    uniformly from ``[lower, upper]`` per element in training (new draws every loop
    iteration), ``(lower + upper) / 2`` in evaluation."""
    if not training:
        return leaky_relu(input, (lower + upper) / 2)
    slope = input.rand_like() * (upper - lower) + lower
    return input.where(input >= 0, input * slope)


# -- in-place forms (torch.nn.functional's ``relu_``...) and aliases --------------------------
def _in_place(input: Tensor, value: Tensor) -> Tensor:
    """``input`` takes ``value`` (PyTorch's in-place semantics: a traced tensor names the
    new value from here on, a view writes it back into its base, a variable is assigned;
    a leaf that requires grad raises ``RuntimeError`` outside ``no_grad``, as PyTorch)."""
    return input._set_promoted(value)


def relu_(input: Tensor) -> Tensor:
    """In-place :func:`relu`: ``input`` takes ``max(x, 0)`` and is returned."""
    return _in_place(input, relu(input))


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place :func:`elu`."""
    return _in_place(input, elu(input, alpha))


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place :func:`celu`."""
    return _in_place(input, celu(input, alpha))


def selu_(input: Tensor) -> Tensor:
    """In-place :func:`selu`."""
    return _in_place(input, selu(input))


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """In-place :func:`leaky_relu`."""
    return _in_place(input, leaky_relu(input, negative_slope))


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """In-place :func:`hardtanh`."""
    return _in_place(input, hardtanh(input, min_val, max_val))


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place :func:`threshold` (the module-level function of that name)."""
    return _in_place(input, globals()["threshold"](input, threshold, value))


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,
           training: bool = False) -> Tensor:
    """In-place :func:`rrelu` (random slopes in training, drawn on the device)."""
    return _in_place(input, rrelu(input, lower, upper, training))


def sigmoid(input: Tensor) -> Tensor:
    """``1 / (1 + exp(-x))`` elementwise (``torch.nn.functional.sigmoid``)."""
    return input.sigmoid()


def tanh(input: Tensor) -> Tensor:
    """``tanh(x)`` elementwise (``torch.nn.functional.tanh``)."""
    return input.tanh()


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10,
                   dim: int = -1, *, seed: int | None = None, stream: int = 0) -> Tensor:
    """A sample of the Gumbel-softmax (concrete) distribution, as
    ``torch.nn.functional.gumbel_softmax`` (Jang et al., 2016; Maddison et al., 2016).

    ``y = softmax((logits + g) / tau, dim)`` with ``g = -log(e)``, ``e ~ Exponential(1)``
    drawn on the device (``Op.RAND``: new in every loop iteration; ``seed`` as
    :func:`dropout`'s). With ``hard``, the one-hot vector of ``y``'s first maximum along
    ``dim``, differentiated as ``y`` (straight-through: ``y_hard - y.detach() + y``).

    Args:
        logits: float32 ``[..., num_features]`` unnormalised log-probabilities.
        tau: the temperature (> 0).
        eps: deprecated and unused, as in PyTorch (a value other than the default warns).

    Returns:
        A tensor of ``logits``' shape: probabilities summing to 1 along ``dim``, or
        one-hot vectors with ``hard``.

    The exponential draws are ``-log(u)`` of float32 uniforms ``u`` in ``(0, 1)`` (the
    zero draw moved to ``2**-25``): ``g`` lies in about ``[-2.9, 16.6]``.
    """
    if eps != 1e-10:
        import warnings
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    if seed is None:
        seed = int(default_rng().integers(0, 2 ** 32))
    u = _wrap(ops.rand(logits.shape, seed, stream)).clamp(min=2.0 ** -25)
    gumbels = -((-u.log()).log())
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = logits.new_zeros(*logits.shape).detach().scatter(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def pdist(input: Tensor, p: float = 2) -> Tensor:
    """The ``p``-norm distance between every pair of rows, as ``torch.nn.functional.pdist``:
    ``[N, M]`` -> ``[N * (N - 1) / 2]``, pairs ``(i, j)``, ``i < j``, in row-major order
    (the upper triangle of :func:`torch.cdist`'s matrix). ``p`` as :meth:`Tensor.norm`
    (0, 1, 2, ``inf`` or any other non-negative number); the gradient of a zero distance
    is 0 for ``p = 2``, as PyTorch's.

    Raises:
        RuntimeError: an input that is not 2-D, or ``p < 0`` (PyTorch's messages).
    """
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n = input.shape[0]
    i, j = np.triu_indices(n, 1)
    if len(i) == 0:
        return input.new_zeros(0)
    a = input.index_select(0, Tensor(i.astype(np.int64)))
    b = input.index_select(0, Tensor(j.astype(np.int64)))
    return (a - b).norm(p, -1)


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Tensor:
    """``x / (k + alpha * mean of x^2 over size neighbouring channels)^beta`` (Krizhevsky
    et al., 2012, as PyTorch: the window is zero-padded, ``size // 2`` channels before and
    ``(size - 1) // 2`` after, and always divided by ``size``); input ``[N, C, *]``.

    Raises:
        ValueError: fewer than 3 dims.
    """
    if input.ndim < 3:
        raise ValueError(f"local_response_norm: expected 3D or higher dimensional input "
                         f"(got {input.ndim} dimensions)")
    sq = input * input
    c = input.shape[1]
    zeros = lambda n: sq.narrow(1, 0, 1) * 0.0 if n == 1 else \
        (sq.narrow(1, 0, 1) * 0.0).expand(sq.shape[0], n, *sq.shape[2:])   # noqa: E731
    before, after = size // 2, (size - 1) // 2
    parts = ([zeros(before)] if before else []) + [sq] + ([zeros(after)] if after else [])
    padded = concat(parts, 1) if len(parts) > 1 else sq
    div = padded.narrow(1, 0, c)
    for j in range(1, size):
        div = div + padded.narrow(1, j, c)
    return input / (div * (alpha / size) + k) ** beta


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3,
            dtype=None) -> Tensor:
    """``softmax(-x)`` along ``dim`` (``dim=None`` as :func:`softmax`)."""
    if dim is None:
        dim = implicit_softmax_dim("softmin", input.ndim)
    return (-input).softmax(dim, dtype)


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """``a sigmoid(b)`` for the halves ``a``, ``b`` of ``dim`` (its size must be even).

    Raises:
        RuntimeError: the size of ``dim`` is odd.
    """
    n = input.shape[input._dim(dim)]
    if n % 2:
        raise RuntimeError(f"glu: Halving dimension must be even, but dimension {dim} is "
                           f"size {n}")
    a, b = input.chunk(2, dim)
    return a * b.sigmoid()


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,
              out=None) -> Tensor:
    """``x / max(||x||_p, eps)`` along ``dim``."""
    return input / input.norm(p, dim, keepdim=True).clamp(min=eps)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """``sum(x1 / max(||x1||, eps) * x2 / max(||x2||, eps))`` along ``dim`` (PyTorch's
    formula; operands broadcast). As in PyTorch the clamp is invisible to the gradient:
    the norms' gradient is that of the unclamped norms."""
    def norm(x):
        n = x.norm(2, dim, keepdim=True)
        return n + (n.clamp(min=eps) - n).detach()
    return ((x1 / norm(x1)) * (x2 / norm(x2))).sum(dim)


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """``[*tensor.shape, num_classes]`` int64 tensor (PyTorch's dtype) with a 1 at each index.

    Raises:
        RuntimeError: ``num_classes`` is -1 for a traced tensor (the class count would
            depend on the data), or a value of a data tensor is outside
            ``[0, num_classes)`` (PyTorch's message).
        autodiff.errors.IndexOutOfRange: (an ``IndexError``, at run time, in the iteration
            where it happens) a value of a traced tensor is outside ``[0, num_classes)``.
    """
    if num_classes < 0:
        if tensor._var is None:
            raise RuntimeError("one_hot: give num_classes for a traced tensor (the class count "
                               "would depend on its values)")
        num_classes = int(tensor.numpy().max()) + 1 if tensor.numel() else 0
    elif tensor._var is not None and tensor.numel():
        v = tensor.numpy()
        if v.min() < 0:
            raise RuntimeError("one_hot: Class values must be non-negative.")
        if v.max() >= num_classes:
            raise RuntimeError("one_hot: Class values must be smaller than num_classes.")
    hit = tensor.float().unsqueeze(-1) == Tensor._const(np.arange(num_classes, dtype=np.float32))
    out = hit.long()
    if tensor._var is None and tensor.dtype in ("int32", "int64") and num_classes:
        # a checked read of a zero per value: one outside [0, num_classes) stops the run
        check = _wrap(ops.gather(ops.const(0, (num_classes,), "int64"), tensor.node,
                                 ("one_hot", None)))
        out = out + check.unsqueeze(-1)
    return out


# -- layers --------------------------------------------------------------------------------
def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x @ weight.T + bias``: ``x [..., in]``, ``weight [out, in]``, ``bias [out]``.

    ``matmul`` folds the leading dims into one (``[N, in] @ [in, out]``), so the product is
    a single 2-D DOT and the weight gradient a single DOT too, instead of a batched DOT
    against a broadcast weight followed by a sum over the batch.
    """
    y = x @ weight.T
    return y + bias if bias is not None else y


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the trailing ``normalized_shape`` dims, as ``torch.nn.functional.layer_norm``.

    ``(x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance.

    Args:
        input: float32 ``[..., *normalized_shape]``.
        normalized_shape: int or tuple of ints, the trailing dims normalised together.
        weight, bias: optional float32 ``normalized_shape`` tensors.
        eps: added to the variance.

    Raises:
        ShapeError: (a ValueError) the trailing dims of ``input`` are not ``normalized_shape``;
            names the shapes and the user's ``file:line``.
    """
    x = input
    shape = (normalized_shape,) if isinstance(normalized_shape, numbers.Integral) \
        else tuple(normalized_shape)
    if tuple(x.shape[len(x.shape) - len(shape):]) != tuple(shape) or len(shape) > x.ndim:
        raise ShapeError("layer_norm", [x.shape, shape], user_site(),
                         "the input shape does not end with normalized_shape")
    dims = tuple(range(x.ndim - len(shape), x.ndim))
    d = x - x.mean(dims, keepdim=True)
    y = d * ((d * d).mean(dims, keepdim=True) + eps).rsqrt()
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


@_inplace_option
def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, *,
            seed: int | None = None, stream: int = 0) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    The mask comes from an ``Op.RAND`` node (counter-based Philox, new in every loop
    iteration, identical on every device for the same ``seed`` and ``stream``).

    Args:
        input: float32 tensor.
        inplace: ``input`` takes the result (PyTorch's in-place form).
        p: drop probability in ``[0, 1]``.
        training: ``False`` returns ``input`` unchanged (evaluation mode).
        seed: Philox key word 0; ``None`` draws one from the global generator
            (:func:`autodiff.manual_seed`) at trace time.
        stream: Philox key word 1: different streams give independent masks.

    Raises:
        ValueError: ``p`` outside ``[0, 1]``.
    """
    x = input
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    if seed is None:
        seed = int(default_rng().integers(0, 2 ** 32))
    u = _wrap(ops.rand(x.shape, seed, stream))
    return x * where(u >= p, 1.0 / (1.0 - p), 0.0)


def embedding(input, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight [num, dim]`` picked by int32/int64 ``input`` (any shape):
    ``[*input.shape, dim]``, as ``torch.nn.functional.embedding``.

    An index gather; its gradient is a scatter-add into ``weight`` (repeated indices add),
    except into row ``padding_idx`` (negative counts from the end), which gets none.

    Raises:
        TypeError: ``input`` is not int32 or int64.
        ValueError: ``padding_idx`` outside the rows.
        NotImplementedError: ``max_norm``, ``scale_grad_by_freq`` or ``sparse`` (as
            :class:`autodiff.nn.Embedding`: PyTorch's in-place renormalisation and sparse
            gradients are not supported).
    """
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: max_norm, scale_grad_by_freq and sparse are "
                                  "not supported")
    idx = _tensor(input, "int64") if not isinstance(input, Tensor) else input
    if idx.dtype not in ("int32", "int64"):
        raise TypeError(f"embedding: indices must be int32 or int64, got {idx.dtype}")
    if padding_idx is not None:
        n = weight.shape[0]
        if not -n <= padding_idx < n:
            raise ValueError("Padding_idx must be within num_embeddings")
        if weight.requires_grad:
            keep = np.ones((n, 1), bool)
            keep[padding_idx % n] = False
            weight = where(Tensor(keep), weight, weight.detach())   # no gradient row
    return _wrap(ops.gather(weight.node, idx.node))


# -- attention --------------------------------------------------------------------------
def causal_mask(q_len: int, k_len: int | None = None) -> np.ndarray:
    """Additive float32 mask ``[q_len, k_len]``: 0 where ``j <= i``, ``-inf`` above the
    diagonal (``torch.nn.Transformer.generate_square_subsequent_mask`` for square sizes)."""
    k_len = q_len if k_len is None else k_len
    return np.triu(np.full((q_len, k_len), -np.inf, np.float32), 1)


def additive_mask(mask, masked_value: bool = True) -> Tensor:
    """A float32 additive attention mask from a bool array or a float mask.

    Args:
        mask: numpy bool array (``True`` where ``masked_value`` says: ``masked_value=True``
            means "not allowed to attend", PyTorch's convention for ``MultiheadAttention``;
            ``False`` means "allowed", the convention of ``scaled_dot_product_attention``),
            or a float array / float32 Tensor added to the scores as is.
    """
    if isinstance(mask, Tensor):
        if mask.dtype != "float32":
            raise TypeError("attention mask tensors must be float32 (additive); pass bool "
                            "masks as numpy arrays")
        return mask
    if hasattr(mask, "detach") and hasattr(mask, "cpu"):          # a torch tensor
        mask = mask.detach().cpu().numpy()
    mask = np.asarray(mask)
    if mask.dtype == np.bool_:
        blocked = mask if masked_value else ~mask
        return Tensor(np.where(blocked, -np.inf, 0.0).astype(np.float32))
    return Tensor(mask.astype(np.float32))


def attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None = None,
              dropout_p: float = 0.0, scale: float | None = None, *,
              seed: int | None = None, stream: int = 0) -> tuple[Tensor, Tensor]:
    """Scaled dot-product attention returning ``(output, weights)``.

    Args:
        query: ``[..., L, E]``; key: ``[..., S, E]``; value: ``[..., S, Ev]`` (batch dims
            broadcast; heads are one more batch dim, so all heads are one batched DOT).
        mask: optional float32 additive mask broadcastable to ``[..., L, S]``.
        dropout_p: dropout on the attention weights.
        scale: score scale, default ``1 / sqrt(E)``.

    Returns:
        ``output [..., L, Ev]`` and the (post-dropout) weights ``[..., L, S]``.
    """
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale
    if mask is not None:
        scores = scores + mask
    weights = scores.softmax(-1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, True, seed=seed, stream=stream)
    return weights @ value, weights


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask=None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, *, seed: int | None = None,
                                 stream: int = 0) -> Tensor:
    """``softmax(q k^T * scale + mask) v`` as ``torch.nn.functional.scaled_dot_product_attention``.

    Args:
        query, key, value: ``[..., L, E]``, ``[..., S, E]``, ``[..., S, Ev]``.
        attn_mask: numpy bool (``True`` = may attend, PyTorch's SDPA convention) or an
            additive float mask broadcastable to ``[..., L, S]``.
        dropout_p: dropout on the attention weights (always applied when > 0, as in torch).
        is_causal: add the top-left aligned causal mask (``attn_mask`` must be None).
        scale: default ``1 / sqrt(E)``.

    Returns:
        ``[..., L, Ev]`` float32.

    Raises:
        ValueError: both ``attn_mask`` and ``is_causal``.
    """
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: give attn_mask or is_causal, not both")
    mask = Tensor(causal_mask(query.shape[-2], key.shape[-2])) if is_causal else \
        (additive_mask(attn_mask, masked_value=False) if attn_mask is not None else None)
    return attention(query, key, value, mask, dropout_p, scale, seed=seed, stream=stream)[0]


# -- losses ---------------------------------------------------------------------------------
def _class_last(input: Tensor, target: Tensor | None = None):
    """``[N, C, d1, ...]`` -> ``[N, d1, ..., C]`` (and a probability target alike)."""
    if input.ndim > 2:
        input = input.movedim(1, -1)
        if target is not None and target.dtype == "float32" and target.ndim == input.ndim:
            target = target.movedim(1, -1)
    return input, target


def _check_reduction(reduction: str) -> None:
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _picked(logp: Tensor, target: Tensor, weight, ignore_index: int,
            name: str = "cross_entropy"):
    """Per-element ``w[t] * logp[t]`` (class dim last) and ``w[t]`` (0 where ignored).

    A target outside ``[0, C)`` other than ``ignore_index`` stops the run in its iteration
    with an ``IndexError`` naming ``name``, the user's line and the value, on every device
    (:class:`autodiff.errors.IndexOutOfRange`): a checked gather from zeros, adding 0."""
    n_cls = logp.shape[-1]
    if target.dtype not in ("int32", "int64"):
        raise TypeError(f"class targets must be int32 or int64, got {target.dtype}")
    if tuple(target.shape) != tuple(logp.shape[:-1]):
        raise ShapeError("cross_entropy", [logp.shape, target.shape], user_site(),
                         f"class targets must have shape {list(logp.shape[:-1])}")
    t = target.float()
    one_hot = t.unsqueeze(-1) == Tensor._const(np.arange(n_cls, dtype=np.float32))  # [..., C]
    valid = (t != float(ignore_index)).float()                                  # [...]
    w = valid if weight is None else (one_hot.float() * weight).sum(-1) * valid
    check = _wrap(ops.gather(ops.const(0.0, (n_cls,)), target.node,
                             (name, int(ignore_index))))
    # where(), not one_hot * logp: a masked class (logit -inf) must not make 0 * -inf
    return where(one_hot, logp, 0.0).sum(-1) * w + check, w


def nll_loss(input: Tensor, target, weight: Tensor | None = None, size_average=None,
             ignore_index: int = -100, reduce=None, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of log-probabilities (``torch.nn.functional.nll_loss``).

    Args:
        input: float32 log-probabilities ``[N, C]``, ``[N, C, d1, ...]`` or ``[C]``.
        target: int32 class indices ``[N]`` (``[N, d1, ...]``, ``[]``).
        weight: optional float32 ``[C]`` class weights.
        ignore_index: targets equal to it add nothing and do not count in the mean.
        reduction: ``"mean"`` (divided by the summed weights of the non-ignored targets),
            ``"sum"`` or ``"none"``.

    Raises:
        ValueError: shapes do not fit, or a bad ``reduction``.
        TypeError: targets are not int32.
    """
    _check_reduction(reduction)
    target = _tensor(target)
    if input.ndim == 1:
        out = nll_loss(input.unsqueeze(0), target.unsqueeze(0), weight, None, ignore_index,
                       None, reduction)
        return out.squeeze(0) if reduction == "none" else out
    logp, _ = _class_last(input)
    loss, w = _picked(logp, target, weight, ignore_index, "nll_loss")
    if reduction == "none":
        return -loss
    return -loss.sum() if reduction == "sum" else _weighted_mean(-loss.sum(), w.sum())


def cross_entropy(input: Tensor, target, weight: Tensor | None = None, size_average=None,
                  ignore_index: int = -100, reduce=None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy from logits, as ``torch.nn.functional.cross_entropy``.

    With label smoothing ``e`` the loss is ``(1 - e) nll + e / C * smooth`` where ``smooth``
    is ``-sum_c w_c logp_c`` (PyTorch's formula, weights included; the mean divides both
    terms by the summed target weights).

    Args:
        input: float32 logits ``[N, C]``, ``[N, C, d1, ...]`` or ``[C]``.
        target: int32 class indices ``[N]`` (``[N, d1, ...]``, ``[]``), e.g. from an int32
            Feeder; or float32 class probabilities of ``input``'s shape.
        weight: optional float32 ``[C]`` class weights.
        ignore_index: targets equal to it add nothing and do not count in the mean.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.
        label_smoothing: in ``[0, 1]``: mixes the target with the uniform distribution.

    Returns:
        A scalar float32 tensor (``[N, d1, ...]`` for ``reduction="none"``).

    Raises:
        ShapeError: (a ValueError) shapes do not fit; names them and the user's
            ``file:line``.
        ValueError: bad ``reduction`` / ``label_smoothing``.
        TypeError: index targets are not int32.
    """
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
    _check_reduction(reduction)
    target = _tensor(target)
    if input.ndim == 1:                                   # unbatched: [C] and []
        out = cross_entropy(input.unsqueeze(0), target.unsqueeze(0), weight, None,
                            ignore_index, None, reduction, label_smoothing)
        return out.squeeze(0) if reduction == "none" else out
    n_cls = input.shape[1]
    input, target = _class_last(input, target)
    logp = input.log_softmax(-1)
    wlogp = logp if weight is None else logp * weight
    if target.dtype == "float32":                         # class probabilities
        if target.shape != input.shape:
            raise ShapeError("cross_entropy", [input.shape, target.shape], user_site(),
                             "probability targets must match the logits")
        if label_smoothing:
            target = target * (1.0 - label_smoothing) + label_smoothing / n_cls
        return reduce_loss(-(target * wlogp).sum(-1), reduction)
    picked, w = _picked(logp, target, weight, ignore_index)
    loss = -picked
    if label_smoothing:
        valid = target.float() != float(ignore_index)
        smooth = where(valid, -wlogp.sum(-1), 0.0)
        loss = loss * (1.0 - label_smoothing) + smooth * (label_smoothing / n_cls)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return _weighted_mean(loss.sum(), w.sum())


def _weighted_mean(total: Tensor, weight: Tensor) -> Tensor:
    """``total / weight``; NaN when every target is ignored (``weight`` 0), as PyTorch,
    but with a zero gradient there (``0 * 1/0`` would carry NaN into every parameter)."""
    some = weight != 0
    return (total / weight.where(some, 1.0)).where(some, math.nan)


def _reduce(x: Tensor, weight, reduction: str) -> Tensor:
    return reduce_loss(x if weight is None else x * weight, reduction)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """``-(t log x + (1 - t) log(1 - x))`` with each log clamped to ``>= -100`` (PyTorch),
    for probabilities ``input`` in ``[0, 1]`` and ``target`` of the same shape."""
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"binary_cross_entropy: target {list(target.shape)} must have the "
                         f"input's shape {list(input.shape)}")
    lx = input.log().clamp(min=-100.0)
    l1x = (1.0 - input).log().clamp(min=-100.0)
    return _reduce(-(target * lx + (1.0 - target) * l1x), weight, reduction)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None, size_average=None,
                                     reduce=None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """``binary_cross_entropy(sigmoid(x), t)`` computed stably from logits:
    ``(1 - t) x + (1 + (p - 1) t) softplus(-x)`` with ``p = pos_weight`` (default 1)."""
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"binary_cross_entropy_with_logits: target {list(target.shape)} must "
                         f"have the input's shape {list(input.shape)}")
    sp = (-input.abs()).exp().log1p() + (-input).relu()          # softplus(-x)
    lw = 1.0 if pos_weight is None else (pos_weight - 1.0) * target + 1.0
    return _reduce((1.0 - target) * input + lw * sp, weight, reduction)


def _weighted_loss(loss: Tensor, input: Tensor, weight, reduction: str,
                   mean_by_weights: bool = True) -> Tensor:
    """``loss * weight`` reduced as torch 2.13's ``weight=`` of ``l1_loss``/``mse_loss``
    (``"mean"``: divided by the summed weights) or of ``huber_loss`` (``mean_by_weights``
    False: by the element count); ``reduce_loss`` without a weight.

    Raises:
        ValueError: ``weight`` not of ``input``'s shape, or an unknown ``reduction``."""
    if weight is None:
        return reduce_loss(loss, reduction)
    weight = weight if isinstance(weight, Tensor) else _tensor(weight, "float32")
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")
    w = loss * weight
    if reduction == "mean" and mean_by_weights:
        return w.sum() / weight.sum()
    return reduce_loss(w, reduction)


def l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
            reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """Mean (or sum) absolute difference; ``weight`` (of ``input``'s shape) scales each
    element, the mean then divided by the summed weights (torch 2.13's)."""
    return _weighted_loss((input - target).abs(), input, weight, reduction)


def smooth_l1_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                   reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (``l1`` at beta 0)."""
    d = (input - target).abs()
    if beta == 0:
        return reduce_loss(d, reduction)
    return reduce_loss((d * d * (0.5 / beta)).where(d < beta, d - 0.5 * beta), reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean",
               delta: float = 1.0, weight: Tensor | None = None) -> Tensor:
    """``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``; ``weight`` scales
    each element (its mean over the element count, as torch 2.13's)."""
    d = (input - target).abs()
    loss = (d * d * 0.5).where(d < delta, (d - 0.5 * delta) * delta)
    return _weighted_loss(loss, input, weight, reduction, mean_by_weights=False)


def kl_div(input: Tensor, target: Tensor, size_average=None, reduce=None,
           reduction: str = "mean", log_target: bool = False) -> Tensor:
    """Pointwise KL divergence ``t (log t - x)`` for log-probabilities ``input`` (0 where
    ``t = 0``; ``exp(t) (t - x)`` with ``log_target``). ``reduction="batchmean"`` divides
    the sum by the batch size (the mathematically correct KL), ``"mean"`` by the element
    count (PyTorch's default)."""
    if log_target:
        loss = target.exp() * (target - input)
    else:
        loss = target.xlogy(target) - target * input
    if reduction == "batchmean":
        return loss.sum() / (input.shape[0] if input.ndim else 1)
    return reduce_loss(loss, reduction)


def mse_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
             reduction: str = "mean", weight: Tensor | None = None) -> Tensor:
    """Mean (or sum) of squared differences, shapes broadcast as in PyTorch; ``weight`` as
    :func:`l1_loss`'s."""
    d = input - target
    return _weighted_loss(d * d, input, weight, reduction)


__all__ = ["relu", "gelu", "softmax", "log_softmax", "linear", "layer_norm", "dropout",
           "embedding", "causal_mask", "additive_mask", "attention",
           "scaled_dot_product_attention", "cross_entropy", "mse_loss", "reduce_loss"]
__all__ += ["leaky_relu", "elu", "celu", "selu", "silu", "softplus", "mish", "softsign",
            "hardtanh", "relu6", "hardsigmoid", "hardswish", "logsigmoid", "softmin", "glu",
            "normalize", "cosine_similarity", "one_hot", "nll_loss", "binary_cross_entropy",
            "binary_cross_entropy_with_logits", "l1_loss", "smooth_l1_loss", "huber_loss",
            "kl_div"]


# -- model coverage (issue 16): padding, convolution, pooling, resampling, normalisation ----
# Defined next to their modules; re-exported here under torch.nn.functional's names.
from .conv import conv1d, conv2d, conv_transpose1d, conv_transpose2d  # noqa: E402
from .normalization import batch_norm, group_norm, instance_norm, rms_norm  # noqa: E402
from .padding import pad  # noqa: E402
from .activation import prelu  # noqa: E402
from .pooling import channel_shuffle, lp_pool1d, lp_pool2d  # noqa: E402
from .pooling import (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_max_pool1d,  # noqa: E402
                      adaptive_max_pool2d, avg_pool1d, avg_pool2d, interpolate, max_pool1d,
                      max_pool2d, pixel_shuffle, pixel_unshuffle, upsample)

from .conv import conv3d, conv_transpose3d  # noqa: E402
from .pooling import (adaptive_avg_pool3d, adaptive_max_pool1d_with_indices,  # noqa: E402
                      adaptive_max_pool2d_with_indices, adaptive_max_pool3d,
                      adaptive_max_pool3d_with_indices, avg_pool3d, lp_pool3d,
                      max_pool1d_with_indices, max_pool2d_with_indices, max_pool3d,
                      max_pool3d_with_indices, max_unpool1d, max_unpool2d, max_unpool3d,
                      upsample_bilinear, upsample_nearest)
from .fold import fold, unfold  # noqa: E402
from .dropout import (alpha_dropout, dropout1d, dropout2d, dropout3d,  # noqa: E402
                      feature_alpha_dropout)
from .layers import bilinear  # noqa: E402
from .embedding import embedding_bag  # noqa: E402
native_channel_shuffle = channel_shuffle

from .margin_losses import (cosine_embedding_loss, gaussian_nll_loss,  # noqa: E402
                            hinge_embedding_loss, margin_ranking_loss, multi_margin_loss,
                            multilabel_soft_margin_loss, pairwise_distance, poisson_nll_loss,
                            soft_margin_loss, triplet_margin_loss)
from .margin_losses import (multilabel_margin_loss,  # noqa: E402
                            triplet_margin_with_distance_loss)
from .ctc import ctc_loss  # noqa: E402

__all__ += ["threshold", "tanhshrink", "softshrink", "hardshrink", "rrelu",
            "local_response_norm", "pairwise_distance", "margin_ranking_loss",
            "hinge_embedding_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
            "multi_margin_loss", "cosine_embedding_loss", "triplet_margin_loss",
            "poisson_nll_loss", "gaussian_nll_loss"]
__all__ += ["channel_shuffle", "lp_pool1d", "lp_pool2d"]
__all__ += ["pad", "conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "max_pool1d",
            "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool1d",
            "adaptive_avg_pool2d", "adaptive_max_pool1d", "adaptive_max_pool2d", "interpolate",
            "upsample", "pixel_shuffle", "pixel_unshuffle", "batch_norm", "group_norm",
            "instance_norm", "rms_norm", "prelu"]
__all__ += ["multilabel_margin_loss", "triplet_margin_with_distance_loss", "ctc_loss"]
__all__ += ["conv3d", "conv_transpose3d", "max_pool3d", "avg_pool3d", "lp_pool3d",
            "adaptive_avg_pool3d", "adaptive_max_pool3d", "max_pool1d_with_indices",
            "max_pool2d_with_indices", "max_pool3d_with_indices",
            "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
            "adaptive_max_pool3d_with_indices", "max_unpool1d", "max_unpool2d", "max_unpool3d",
            "fold", "unfold", "upsample_bilinear", "upsample_nearest", "alpha_dropout",
            "feature_alpha_dropout", "dropout1d", "dropout2d", "dropout3d", "bilinear",
            "embedding_bag", "native_channel_shuffle", "relu_", "elu_", "celu_", "selu_",
            "leaky_relu_", "hardtanh_", "threshold_", "rrelu_", "sigmoid", "tanh",
            "gumbel_softmax", "pdist"]


# the losses that take PyTorch's deprecated size_average/reduce flags read them
for _name in ("binary_cross_entropy", "binary_cross_entropy_with_logits", "cross_entropy",
              "kl_div", "l1_loss", "mse_loss", "nll_loss", "smooth_l1_loss",
              "cosine_embedding_loss",
              "hinge_embedding_loss", "margin_ranking_loss", "multi_margin_loss",
              "multilabel_margin_loss", "multilabel_soft_margin_loss", "poisson_nll_loss",
              "soft_margin_loss", "triplet_margin_loss"):
    globals()[_name] = _legacy_flags(globals()[_name])
del _name
