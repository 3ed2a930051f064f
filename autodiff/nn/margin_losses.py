"""The rest of ``torch.nn.functional``'s losses and distances: ranking and margin losses,
Poisson and Gaussian likelihoods, ``pairwise_distance``. Each is PyTorch's formula (from
``aten/src/ATen/native/Loss.cpp`` and ``torch/nn/functional.py``) composed from tensor ops,
so its gradient is the composition's; reductions as :func:`.functional.reduce_loss`."""
from __future__ import annotations

import math

import numpy as np

from ..errors import DTypeError, ShapeError
from ..graph import ops
from ..graph.mixins.dtype import known_values
from ..graph.trace import user_site
from ..graph.tensor import Tensor, _wrap, where
from .functional import _check_reduction, _tensor, logsigmoid, reduce_loss, softplus


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


def _legacy(size_average, reduce, reduction: str) -> str:
    """``reduction``, or the deprecated ``size_average`` / ``reduce`` flags as one when
    either is given (``torch.nn.functional``'s ``_Reduction.legacy_get_string``)."""
    if size_average is None and reduce is None:
        return reduction
    from .loss import legacy_reduction
    return legacy_reduction(size_average, reduce)


def multilabel_margin_loss(input: Tensor, target, size_average=None, reduce=None,
                           reduction: str = "mean") -> Tensor:
    """Multi-class multi-label hinge loss (``torch.nn.functional.multilabel_margin_loss``):
    per sample ``sum_j sum_{i not a target} max(0, 1 - (x[y_j] - x[i])) / C`` over the
    target classes ``y_j``, which are the entries of the target row before its first -1
    (a class listed twice counts twice, as PyTorch).

    Args:
        input: float32 ``[N, C]`` or ``[C]`` (or a 0-dim scalar, one class).
        target: int64 (or int32) class indices of the input's shape, padded with -1 after
            the last target class; values in ``[-1, C)``.
        reduction: ``"mean"`` over the samples, ``"sum"`` or ``"none"`` (``[N]``, or a
            0-dim value for a ``[C]`` input); ``size_average`` / ``reduce`` are the
            deprecated flags (either given overrides ``reduction``).

    Returns:
        float32 loss.

    Raises:
        ShapeError: (a ``ValueError`` and ``RuntimeError``) input not ``[N, C]`` / ``[C]``
            with ``C > 0``, or a target of another shape.
        DTypeError: (a ``TypeError`` and ``RuntimeError``) a target that is not integral.
        ValueError: a bad ``reduction``.
        RuntimeError: a target value outside ``[-1, C)`` known while tracing (PyTorch's
            message).
        autodiff.errors.IndexOutOfRange: (an ``IndexError``, at run time, in the iteration
            where it happens) a traced target value outside ``[-1, C)``.
    """
    reduction = _legacy(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not isinstance(target, Tensor):
        target = np.asarray(target)
        target = Tensor(target, dtype="int64" if target.dtype.kind in "iu" else None)
    shape = list(input.shape)
    if not (input.ndim == 0 or (input.ndim in (1, 2) and input.shape[-1] != 0)):
        raise ShapeError("multilabel_margin_loss", [input.shape, target.shape], user_site(),
                         f"expected a non-empty vector or matrix with optional 0-dim batch "
                         f"size as input, got {shape}")
    n_cls = input.shape[-1] if input.ndim else 1
    fits = (target.ndim <= 1 and target.numel() == n_cls) if input.ndim <= 1 else \
        tuple(target.shape) == tuple(input.shape)
    if not fits:
        raise ShapeError("multilabel_margin_loss", [input.shape, target.shape], user_site(),
                         f"inconsistent target size {list(target.shape)} for input of size "
                         f"{shape}")
    if target.dtype not in ("int32", "int64"):
        raise DTypeError(f"multilabel_margin_loss: target must be int64 (or int32) class "
                         f"indices, got {target.dtype} (at {user_site()})")
    value = known_values(target)
    if value is not None and value.size and (value.min() < -1 or value.max() >= n_cls):
        raise RuntimeError(f"multilabel_margin_loss: argument #2 'target' is out of range: "
                           f"values must be in [-1, {n_cls}), got {value.min()}..{value.max()}")
    x = input.reshape(-1, n_cls)
    t = target.reshape(-1, n_cls)
    tf = t.float()
    valid = (tf >= 0).float().cumprod(1) > 0.5                             # before the first -1
    hit = (tf.unsqueeze(-1) == Tensor._const(np.arange(n_cls, dtype=np.float32))) \
        .logical_and(valid.unsqueeze(-1))                                   # [N, j, c]
    is_target = hit.any(1)                                                 # [N, C]
    picked = where(hit, x.unsqueeze(1), 0.0).sum(-1)                       # x[y_j]: [N, j]
    z = _clamp0(1.0 - picked.unsqueeze(2) + x.unsqueeze(1))                # [N, j, i]
    counted = valid.unsqueeze(2).logical_and(is_target.logical_not().unsqueeze(1))
    loss = where(counted, z, 0.0).sum(2).sum(1) / n_cls                    # [N]
    # a checked read of a zero per target: a value outside [-1, C) stops the run
    check = _wrap(ops.gather(ops.const(0.0, (n_cls,)), t.node,
                             ("multilabel_margin_loss", -1)))
    loss = loss + check.sum(1)
    return reduce_loss(loss if input.ndim == 2 else loss.reshape(()), reduction)


def triplet_margin_with_distance_loss(anchor: Tensor, positive: Tensor, negative: Tensor, *,
                                      distance_function=None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean") -> Tensor:
    """``max(d(a, p) - d(a, n) + margin, 0)`` for any distance ``d``
    (``torch.nn.functional.triplet_margin_with_distance_loss``).

    Args:
        anchor, positive, negative: float32 tensors of the same rank (``[N, D]`` or ``[D]``
            for the default distance; any shapes ``distance_function`` takes).
        distance_function: a callable ``(x1, x2) -> Tensor`` of non-negative distances;
            None: :func:`pairwise_distance` (the Euclidean distance).
        margin: positive.
        swap: use ``min(d(a, n), d(p, n))`` as the negative distance (Balntas et al., 2016).
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` (the distances' shape).

    Returns:
        float32 loss.

    Raises:
        ValueError: a bad ``reduction`` or ``margin <= 0`` (PyTorch's messages).
        RuntimeError: inputs of different ranks (PyTorch's message, naming the ranks).
    """
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    a_dim, p_dim, n_dim = anchor.ndim, positive.ndim, negative.ndim
    if not a_dim == p_dim == n_dim:
        raise RuntimeError(
            f"triplet_margin_with_distance_loss: the anchor, positive, and negative tensors are "
            f"expected to have the same number of dimensions, but got: anchor {a_dim}D, "
            f"positive {p_dim}D, and negative {n_dim}D inputs (at {user_site()})")
    dist = pairwise_distance if distance_function is None else distance_function
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = d_neg.minimum(dist(positive, negative))
    return reduce_loss(_clamp0(margin + d_pos - d_neg), reduction)


__all__ = ["pairwise_distance", "margin_ranking_loss", "hinge_embedding_loss",
           "soft_margin_loss", "multilabel_soft_margin_loss", "multi_margin_loss",
           "cosine_embedding_loss", "triplet_margin_loss", "poisson_nll_loss",
           "gaussian_nll_loss", "multilabel_margin_loss",
           "triplet_margin_with_distance_loss"]
