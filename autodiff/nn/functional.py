"""Functional forms of the layers and losses, spelled like ``torch.nn.functional``.

Every function composes :class:`~autodiff.Tensor` ops, so it traces graph IR nodes and gets
its gradient from the per-op rules of :mod:`autodiff.graph.autograd`. All float tensors are
float32; class indices and token ids are int32 tensors (for instance from an int32 Feeder).
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from ..errors import ShapeError
from ..graph import ops
from ..graph.trace import user_site
from ..graph.tensor import Tensor, _wrap, default_rng, where

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)


def _tensor(x, dtype: str | None = None) -> Tensor:
    return x if isinstance(x, Tensor) else Tensor(x, dtype=dtype)


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
def relu(x: Tensor) -> Tensor:
    """``max(x, 0)`` elementwise."""
    return x.relu()


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


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim``; the (detached) maximum is subtracted first,
    so large inputs do not overflow."""
    return x.softmax(dim)


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    """``x - log(sum(exp(x)))`` along ``dim``, max-subtracted (stable for large inputs)."""
    return x.log_softmax(dim)


# -- layers --------------------------------------------------------------------------------
def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x @ weight.T + bias``: ``x [..., in]``, ``weight [out, in]``, ``bias [out]``.

    Leading dims are folded into one (``[N, in] @ [in, out]``), so the product is a single
    2-D DOT and the weight gradient a single DOT too, instead of a batched DOT against a
    broadcast weight followed by a sum over the batch.
    """
    lead = x.shape[:-1]
    y = (x.reshape(-1, x.shape[-1]) if x.ndim > 2 else x) @ weight.T
    if x.ndim > 2:
        y = y.reshape(*lead, weight.shape[0])
    return y + bias if bias is not None else y


def layer_norm(x: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the trailing ``normalized_shape`` dims, as ``torch.nn.functional.layer_norm``.

    ``(x - mean) / sqrt(var + eps) * weight + bias`` with the biased variance.

    Args:
        x: float32 ``[..., *normalized_shape]``.
        normalized_shape: int or tuple of ints, the trailing dims normalised together.
        weight, bias: optional float32 ``normalized_shape`` tensors.
        eps: added to the variance.

    Raises:
        ShapeError: (a ValueError) the trailing dims of ``x`` are not ``normalized_shape``;
            names the shapes and the user's ``file:line``.
    """
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


def dropout(x: Tensor, p: float = 0.5, training: bool = True, *, seed: int | None = None,
            stream: int = 0) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    The mask comes from an ``Op.RAND`` node (counter-based Philox, new in every loop
    iteration, identical on every device for the same ``seed`` and ``stream``).

    Args:
        x: float32 tensor.
        p: drop probability in ``[0, 1]``.
        training: ``False`` returns ``x`` unchanged (evaluation mode).
        seed: Philox key word 0; ``None`` draws one from the global generator
            (:func:`autodiff.manual_seed`) at trace time.
        stream: Philox key word 1: different streams give independent masks.

    Raises:
        ValueError: ``p`` outside ``[0, 1]``.
    """
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


def embedding(idx, weight: Tensor) -> Tensor:
    """Rows of ``weight [num, dim]`` picked by int32 ``idx`` (any shape): ``[*idx.shape, dim]``.

    An index gather; its gradient is a scatter-add into ``weight`` (repeated indices add).

    Raises:
        TypeError: ``idx`` is not int32.
    """
    idx = _tensor(idx, "int32") if not isinstance(idx, Tensor) else idx
    if idx.dtype != "int32":
        raise TypeError(f"embedding: indices must be int32, got {idx.dtype}")
    return weight[idx]


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
def cross_entropy(input: Tensor, target, ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy from logits, as ``torch.nn.functional.cross_entropy`` (no class weights).

    Args:
        input: float32 logits ``[N, C]``, ``[N, C, d1, ...]`` or ``[C]``.
        target: int32 class indices ``[N]`` (``[N, d1, ...]``, ``[]``), e.g. from an int32
            Feeder; or float32 class probabilities of ``input``'s shape.
        ignore_index: targets equal to it add nothing and do not count in the mean.
        reduction: ``"mean"`` (over the non-ignored targets), ``"sum"`` or ``"none"``.
        label_smoothing: in ``[0, 1]``: mixes the target with the uniform distribution.

    Returns:
        A scalar float32 tensor (``[N, d1, ...]`` for ``reduction="none"``).

    Raises:
        ShapeError: (a ValueError) shapes do not fit; names them and the user's
            ``file:line``.
        ValueError: bad ``reduction`` / ``label_smoothing``.
        IndexError: (at run time) a class target outside ``[0, C)`` other than
            ``ignore_index``: the run stops in that iteration
            (:class:`autodiff.errors.IndexOutOfRange`).
        TypeError: index targets are not int32.
    """
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    target = _tensor(target)
    if input.ndim == 1:                                   # unbatched: [C] and []
        out = cross_entropy(input.unsqueeze(0), target.unsqueeze(0), ignore_index,
                            reduction, label_smoothing)
        return out.squeeze(0) if reduction == "none" else out
    n_cls = input.shape[1]
    if input.ndim > 2:                                    # class dim last
        input = input.permute(0, *range(2, input.ndim), 1)
        if target.dtype == "float32" and target.ndim == input.ndim:
            target = target.permute(0, *range(2, target.ndim), 1)
    logp = input.log_softmax(-1)
    batch_shape = input.shape[:-1]
    if target.dtype == "float32":                         # class probabilities
        if target.shape != input.shape:
            raise ShapeError("cross_entropy", [input.shape, target.shape], user_site(),
                             "probability targets must match the logits")
        if label_smoothing:
            target = target * (1.0 - label_smoothing) + label_smoothing / n_cls
        return reduce_loss(-(target * logp).sum(-1), reduction)
    if target.dtype != "int32":
        raise TypeError(f"cross_entropy: class targets must be int32, got {target.dtype}")
    if tuple(target.shape) != tuple(batch_shape):
        raise ShapeError("cross_entropy", [input.shape, target.shape], user_site(),
                         f"class targets must have shape {list(batch_shape)}")
    t = target.float().unsqueeze(-1)
    one_hot = t == Tensor(np.arange(n_cls, dtype=np.float32))         # [..., C]
    valid = target.float() != float(ignore_index)                      # [...]
    # where(), not one_hot * logp: a masked class (logit -inf) must not make 0 * -inf
    loss = -where(one_hot, logp, 0.0).sum(-1) * valid
    # a target outside [0, C) (ignore_index aside) stops the run with an IndexError naming
    # it and the iteration, on every device: a checked gather from zeros, adding 0
    loss = loss + _wrap(ops.gather(ops.const(0.0, (n_cls,)), target.node,
                                   ("cross_entropy", int(ignore_index))))
    if label_smoothing:
        smooth = where(valid, -logp.sum(-1), 0.0)
        loss = loss * (1.0 - label_smoothing) + smooth * (label_smoothing / n_cls)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    return loss.sum() / valid.sum()


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean (or sum) of squared differences (see :func:`autodiff.nn.loss.mse_loss`)."""
    from .loss import mse_loss as _mse
    return _mse(input, target, reduction)


__all__ = ["relu", "gelu", "softmax", "log_softmax", "linear", "layer_norm", "dropout",
           "embedding", "causal_mask", "additive_mask", "attention",
           "scaled_dot_product_attention", "cross_entropy", "mse_loss", "reduce_loss"]
