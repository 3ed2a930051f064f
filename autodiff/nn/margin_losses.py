"""The rest of ``torch.nn.functional``'s losses and distances: ranking and margin losses,
Poisson and Gaussian likelihoods, ``pairwise_distance``. Each is PyTorch's formula (from
``aten/src/ATen/native/Loss.cpp`` and ``torch/nn/functional.py``) composed from tensor ops,
so its gradient is the composition's; reductions as :func:`.functional.reduce_loss`."""
from __future__ import annotations

import math

from ..graph.tensor import Tensor
from .functional import _tensor, logsigmoid, reduce_loss, softplus


def _clamp0(x: Tensor) -> Tensor:
    return x.clamp(min=0.0)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    """``||x1 - x2 + eps||_p`` over the last dim (``[N, D]`` pairs -> ``[N]``, or ``[N, 1]``
    with ``keepdim``; operands broadcast)."""
    return (x1 - x2 + eps).norm(p, -1, keepdim=keepdim)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """``max(0, -y (x1 - x2) + margin)``, ``y`` in {1, -1} (1: ``x1`` should rank higher)."""
    return reduce_loss(_clamp0(-_tensor(target) * (input1 - input2) + margin), reduction)


def hinge_embedding_loss(input: Tensor, target: Tensor, margin: float = 1.0,
                         size_average=None, reduce=None, reduction: str = "mean") -> Tensor:
    """``x`` where ``y == 1``, ``max(0, margin - x)`` where ``y == -1`` (PyTorch adds both
    terms where ``y`` is neither)."""
    y = _tensor(target)
    out = _clamp0(margin - input).where(y != 1, 0.0) + input.where(y != -1, 0.0)
    return reduce_loss(out, reduction)


def soft_margin_loss(input: Tensor, target: Tensor, size_average=None, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """``log(1 + exp(-y x))`` (as a softplus: no overflow for large ``-y x``)."""
    return reduce_loss(softplus(-_tensor(target) * input), reduction)


def multilabel_soft_margin_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
                                size_average=None, reduce=None,
                                reduction: str = "mean") -> Tensor:
    """``-(y log sigmoid(x) + (1 - y) log sigmoid(-x))``, class weights applied, averaged
    over the classes (last dim): ``[N, C]`` -> ``[N]`` before the reduction."""
    y = _tensor(target)
    loss = -(y * logsigmoid(input) + (1.0 - y) * logsigmoid(-input))
    if weight is not None:
        loss = loss * _tensor(weight)
    return reduce_loss(loss.mean(-1), reduction)


def multi_margin_loss(input: Tensor, target, p: int = 1, margin: float = 1.0,
                      weight: Tensor | None = None, size_average=None, reduce=None,
                      reduction: str = "mean") -> Tensor:
    """``sum_{i != y} max(0, margin - x[y] + x[i])^p / C`` per sample (``[N, C]`` logits,
    int targets ``[N]``), times ``weight[y]``.

    Raises:
        ValueError: ``p`` other than 1 or 2 (PyTorch's).
    """
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    x = input if input.ndim == 2 else input.reshape(1, -1)
    y = _tensor(target, "int64").reshape(-1, 1)
    picked = x.gather(1, y)                                        # [N, 1]
    hit = x._index_grid() == y.float()                             # the target's column
    z = _clamp0(margin - picked + x).where(hit.logical_not(), 0.0)
    z = z * z if p == 2 else z
    if weight is not None:
        z = z * _tensor(weight).gather(0, y.reshape(-1)).reshape(-1, 1)
    loss = z.sum(1) / x.shape[1]
    return reduce_loss(loss if input.ndim == 2 else loss.reshape(()), reduction)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor,
                          margin: float = 0.0, size_average=None, reduce=None,
                          reduction: str = "mean") -> Tensor:
    """``1 - cos`` where ``y == 1``, ``max(0, cos - margin)`` where ``y == -1``, with
    PyTorch's ``cos = x1.x2 / sqrt((|x1|^2 + 1e-12)(|x2|^2 + 1e-12))`` over the last dim."""
    eps = 1e-12
    d = input1.ndim - 1
    cos = (input1 * input2).sum(d) / (((input1 * input1).sum(d) + eps)
                                      * ((input2 * input2).sum(d) + eps)).sqrt()
    y = _tensor(target)
    out = (1.0 - cos).where(y == 1, 0.0) + _clamp0(cos - margin).where(y == -1, 0.0)
    return reduce_loss(out, reduction)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor,
                        margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                        swap: bool = False, size_average=None, reduce=None,
                        reduction: str = "mean") -> Tensor:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with :func:`pairwise_distance`; ``swap``
    uses ``min(d(a, n), d(p, n))`` (Balntas et al., 2016, as PyTorch)."""
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = d_neg.minimum(pairwise_distance(positive, negative, p, eps))
    return reduce_loss(_clamp0(d_pos - d_neg + margin), reduction)


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool = True,
                     full: bool = False, size_average=None, eps: float = 1e-8, reduce=None,
                     reduction: str = "mean") -> Tensor:
    """``exp(x) - t x`` (``log_input``) or ``x - t log(x + eps)``; ``full`` adds Stirling's
    ``t log t - t + log(2 pi t) / 2`` where ``t > 1``."""
    t = _tensor(target)
    loss = input.exp() - t * input if log_input else input - t * (input + eps).log()
    if full:
        safe = t.where(t > 1, 1.0)
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        loss = loss + stirling.where(t > 1, 0.0)
    return reduce_loss(loss, reduction)


def gaussian_nll_loss(input: Tensor, target: Tensor, var, full: bool = False,
                      eps: float = 1e-6, reduction: str = "mean") -> Tensor:
    """``(log(max(var, eps)) + (x - t)^2 / max(var, eps)) / 2`` (+ ``log(2 pi) / 2`` with
    ``full``); ``var`` of the input's shape, or with its last dim 1 or missing (one
    variance per sample). The clamp is invisible to the gradient, as PyTorch's in-place
    clamp under ``no_grad``.

    Raises:
        ValueError: ``var`` of another shape.
    """
    v = _tensor(var) if not isinstance(var, (int, float)) else Tensor(float(var))
    if v.ndim == input.ndim - 1 and tuple(v.shape) == tuple(input.shape[:-1]):
        v = v.unsqueeze(-1)
    elif v.ndim and tuple(v.shape) != tuple(input.shape) and not (
            tuple(v.shape[:-1]) == tuple(input.shape[:-1]) and v.shape[-1] == 1):
        raise ValueError(f"gaussian_nll_loss: var of shape {list(v.shape)} does not fit "
                         f"input of shape {list(input.shape)}")
    v = v + (v.clamp(min=eps) - v).detach()
    d = input - target
    loss = 0.5 * (v.log() + d * d / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return reduce_loss(loss, reduction)


__all__ = ["pairwise_distance", "margin_ranking_loss", "hinge_embedding_loss",
           "soft_margin_loss", "multilabel_soft_margin_loss", "multi_margin_loss",
           "cosine_embedding_loss", "triplet_margin_loss", "poisson_nll_loss",
           "gaussian_nll_loss"]
