"""``torch.nn.functional.ctc_loss``: the connectionist temporal classification loss (Graves
et al., 2006) as tensor ops. The forward (alpha) recursion over the blank-extended targets
is unrolled over the time steps at trace time, one log-sum-exp of three shifted copies per
step, so the sequence lengths must be known while tracing; the gradient is autodiff's
through the recursion."""
from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError, TracedValueError
from ..graph import ops
from ..graph.mixins.dtype import known_values
from ..graph.trace import user_site
from ..graph.tensor import Tensor, _wrap, concat, where
from .functional import _tensor

_NEG_INF = -math.inf


def _traced_lengths(name: str, site: str) -> TracedValueError:
    alt = ("pad every sequence of log_probs to the full length T with frames whose blank "
           "log-probability is 0 and the others' -inf (e.g. torch.where on a step-index "
           "mask) and pass input_lengths=T: the loss is the same"
           if name == "input_lengths" else
           "pass the target lengths of each batch as Python ints, a list or a host "
           "tensor (fixed per traced step)")
    return TracedValueError(
        "ctc_loss", name, site,
        "ctc_loss unrolls its recursion over the lengths at trace time, so they must be "
        "known then: Python ints, a list, or a tensor with a host value. Fixed-shape "
        f"alternative: {alt}.")


def _lengths(value, name: str, n: int, unbatched: bool, site: str) -> np.ndarray:
    """``value`` as an int64 array of ``n`` lengths, or the errors torch gives."""
    if isinstance(value, Tensor):
        if value.dtype not in ("int32", "int64"):
            raise RuntimeError(f"ctc_loss: {name} must be integral, got {value.dtype}")
        known = known_values(value)
        if known is None:
            raise _traced_lengths(name, site)
        value = known
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"ctc_loss: {name} must be ints, got {arr.dtype}")
    arr = arr.reshape(1) if unbatched and arr.ndim == 0 else arr
    if arr.ndim != 1 or arr.shape[0] != n:
        raise RuntimeError(f"ctc_loss: {name} must be of size batch_size ({n}), got shape "
                           f"{list(np.shape(value))}")
    if (arr < 0).any():
        raise RuntimeError(f"ctc_loss: {name} must be non-negative, got {arr.min()}")
    return arr.astype(np.int64)


def _lse(parts: list[Tensor]) -> Tensor:
    """Elementwise ``log(sum(exp(p)))`` over ``parts`` (same shapes): ``-inf`` where all are
    ``-inf``, with a finite (zero) gradient there, unlike a plain log of a zero sum."""
    m = parts[0]
    for p in parts[1:]:
        m = m.maximum(p)
    m = m.detach()
    finite = m > _NEG_INF
    m0 = where(finite, m, 0.0)
    s = (parts[0] - m0).exp()
    for p in parts[1:]:
        s = s + (p - m0).exp()
    return where(finite, where(finite, s, 1.0).log() + m0, _NEG_INF)


def ctc_loss(log_probs: Tensor, targets, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False) -> Tensor:
    """The CTC loss, ``-log p(target | log_probs)`` summed over all alignments
    (``torch.nn.functional.ctc_loss``).

    Args:
        log_probs: float32 ``[T, N, C]`` (or ``[T, C]`` unbatched) per-frame log-probabilities
            over ``C`` classes, blank included (normally a ``log_softmax`` output; they
            are used as given).
        targets: int32/int64 class indices (never ``blank``, in ``[0, C)``): padded
            ``[N, S]``, or the ``N`` targets concatenated ``[sum(target_lengths)]``
            (``[S]`` unbatched). May be a traced tensor.
        input_lengths: ``N`` frame counts ``<= T`` (an int unbatched): Python ints, a list,
            a numpy array or a tensor whose value is known while tracing.
        target_lengths: ``N`` target lengths (``<= S`` for padded targets), likewise.
        blank: the blank class.
        reduction: ``"mean"``: each loss divided by its target length (at least 1), then
            averaged over the batch (as torch); ``"sum"``; ``"none"``: ``[N]`` (0-dim
            unbatched).
        zero_infinity: infinite losses (no alignment fits, e.g. too few frames) and
            their gradients become 0.

    Returns:
        float32 loss.

    Raises:
        ShapeError: (a ``ValueError`` and ``RuntimeError``) log_probs not ``[T, N, C]`` /
            ``[T, C]``, or targets of a shape that does not fit.
        RuntimeError: a length out of range or of the wrong count (PyTorch's checks), or
            a target value outside ``[0, C)`` known while tracing.
        TypeError: (:class:`autodiff.errors.TracedValueError`) ``input_lengths`` or
            ``target_lengths`` is a traced tensor (its values are computed by the
            program); the message names a fixed-shape alternative.
        ValueError: a bad ``reduction``.
        autodiff.errors.IndexOutOfRange: (an ``IndexError``, at run time) a traced target
            value outside ``[0, C)``.

    Gradients are the exact derivative with respect to ``log_probs``. PyTorch's own
    backward returns ``exp(log_probs) - posterior`` instead (the gradient with respect to the
    logits of a ``log_softmax``), so the two agree through a ``log_softmax`` but not on a
    gradient read directly at ``log_probs``.
    """
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    site = user_site()
    targets = _tensor(targets, "int64") if not isinstance(targets, Tensor) else targets
    if log_probs.ndim not in (2, 3):
        raise ShapeError("ctc_loss", [log_probs.shape, targets.shape], site,
                         "log_probs must be [T, N, C] or [T, C] (unbatched)")
    unbatched = log_probs.ndim == 2
    lp = log_probs.unsqueeze(1) if unbatched else log_probs
    T, N, C = lp.shape
    if not 0 <= blank < C:
        raise RuntimeError(f"ctc_loss: blank must be in label range [0, {C}), got {blank}")
    if targets.dtype not in ("int32", "int64"):
        raise RuntimeError(f"ctc_loss: targets must be int32 or int64 class indices, got "
                           f"{targets.dtype}")
    il = _lengths(input_lengths, "input_lengths", N, unbatched, site)
    tl = _lengths(target_lengths, "target_lengths", N, unbatched, site)
    if (il > T).any():
        raise RuntimeError(f"ctc_loss: Expected input_lengths to have value at most {T}, but "
                           f"got value {il.max()}")
    if unbatched:
        if targets.ndim != 1:
            raise ShapeError("ctc_loss", [log_probs.shape, targets.shape], site,
                             "unbatched targets must be [S]")
        targets = targets.reshape(1, -1)
    S = max(int(tl.max(initial=0)), 1)
    if targets.ndim == 2:                                  # padded [N, S_max]
        if targets.shape[0] != N or targets.shape[1] < tl.max(initial=0):
            raise ShapeError("ctc_loss", [log_probs.shape, targets.shape], site,
                             f"padded targets must be [{N}, >= {tl.max(initial=0)}] "
                             f"(the batch size, the longest target length)")
        flat = targets.reshape(-1)
        rows = np.arange(N)[:, None] * targets.shape[1]
    elif targets.ndim == 1:                                # concatenated
        if targets.shape[0] != tl.sum():
            raise ShapeError("ctc_loss", [log_probs.shape, targets.shape], site,
                             f"concatenated targets must have sum(target_lengths) = "
                             f"{tl.sum()} elements")
        flat = targets
        rows = (np.cumsum(tl) - tl)[:, None]
    else:
        raise ShapeError("ctc_loss", [log_probs.shape, targets.shape], site,
                         "targets must be [N, S] (padded) or 1-D (concatenated)")
    known = known_values(targets)
    if known is not None and known.size:
        used = np.concatenate([known.reshape(-1)[r: r + k] for r, k in zip(rows[:, 0], tl)]
                              + [np.zeros(0, known.dtype)])
        if used.size and (used.min() < 0 or used.max() >= C):
            raise RuntimeError(f"ctc_loss: target values must be in [0, {C}), got "
                               f"{used.min()}..{used.max()}")

    # blank-extended targets l' [N, L]: blank, y1, blank, y2, ..., blank
    L = 2 * S + 1
    s_idx = np.arange(L)
    label = (s_idx % 2 == 1)[None, :] & ((s_idx - 1) // 2 < tl[:, None])     # [N, L]
    pos = np.where(label, rows + (s_idx - 1)[None, :] // 2, 0)
    if flat.shape[0] == 0:
        ext = Tensor._const(np.full((N, L), float(blank), np.float32))
    else:
        picked = flat.gather(0, Tensor._const(pos.reshape(-1).astype(np.int64))).reshape(N, L)
        ext = where(Tensor._const(label), picked.float(), float(blank))
    ext_i = ext.long()
    # a target outside [0, C) stops the run (the gather below would read another class)
    check = _wrap(ops.gather(ops.const(0.0, (C,)), ext_i.node, ("ctc_loss", None)))
    lpe = lp.gather(2, ext_i.unsqueeze(0).broadcast_to([T, N, L])) + check.unsqueeze(0)
    # the skip s-2 -> s: allowed into a label that differs from the previous label
    prev = concat([Tensor._const(np.full((N, 2), -1.0, np.float32)), ext[:, :-2]], 1)
    skip = (ext != prev).logical_and(Tensor._const(label))                  # [N, L]

    ninf1 = Tensor._const(np.full((N, 1), _NEG_INF, np.float32))
    ninf2 = Tensor._const(np.full((N, 2), _NEG_INF, np.float32))
    start = Tensor._const(np.where(s_idx[None, :] < np.where(tl > 0, 2, 1)[:, None], 0.0,
                                   _NEG_INF).astype(np.float32))            # s in {0, 1}
    empty = Tensor._const(np.where(s_idx[None, :] == 0, 0.0, _NEG_INF).astype(np.float32)
                          .repeat(N, 0))                                   # no frame yet
    alpha = empty
    if T:
        alpha = where(Tensor._const((il > 0)[:, None]), start + lpe[0], empty)
    for t in range(1, int(il.max(initial=0))):
        a1 = concat([ninf1, alpha[:, :-1]], 1)
        a2 = where(skip, concat([ninf2, alpha[:, :-2]], 1), _NEG_INF)
        new = _lse([alpha, a1, a2]) + lpe[t]
        alpha = where(Tensor._const((t < il)[:, None]), new, alpha)     # frozen after T_n
    end = (s_idx[None, :] == 2 * tl[:, None]) | (s_idx[None, :] == 2 * tl[:, None] - 1)
    ends = where(Tensor._const(end), alpha, _NEG_INF)                     # [N, L]
    loss = -_lse_row(ends)
    if zero_infinity:
        loss = where(loss == math.inf, 0.0, loss)
    if reduction == "none":
        return loss.reshape(()) if unbatched else loss
    if reduction == "sum":
        return loss.sum()
    return (loss * Tensor._const((1.0 / np.maximum(tl, 1)).astype(np.float32))).mean()


def _lse_row(x: Tensor) -> Tensor:
    """:func:`_lse` over the last dim of ``[N, L]``."""
    m = x.amax(1, keepdim=True).detach()
    finite = m > _NEG_INF
    m0 = where(finite, m, 0.0)
    s = (x - m0).exp().sum(1, keepdim=True)
    return where(finite, where(finite, s, 1.0).log() + m0, _NEG_INF).squeeze(1)


__all__ = ["ctc_loss"]
