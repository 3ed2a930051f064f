"""``Embedding``: a lookup table read by an index gather (gradient: a scatter-add)."""
from __future__ import annotations

import numpy as np

from ..graph.tensor import Tensor, default_rng
from . import functional as F
from .module import Module, Parameter


class Embedding(Module):
    """``weight [num_embeddings, embedding_dim]``, rows picked by int32 indices
    (``torch.nn.Embedding``; initialised N(0, 1) like PyTorch).

    Input: int32 indices of any shape (e.g. from ``Feeder(..., dtype="int32")``);
    output: ``[*idx.shape, embedding_dim]`` float32. The gradient of ``weight`` is a
    scatter-add of the output gradient (rows of repeated indices add up). Indices outside
    ``[0, num_embeddings)`` make the numpy device raise ``IndexError``.

    Args:
        padding_idx: a row (negative counts from the end) initialised to zeros that never
            receives a gradient, as in PyTorch (it keeps whatever value it is given).
        max_norm: must be None (PyTorch's in-place renormalisation is not supported).
        scale_grad_by_freq, sparse: must be False.
        _weight: initial weight ``[num_embeddings, embedding_dim]``; _freeze: no gradient.

    Raises:
        ValueError: ``padding_idx`` out of range.
        NotImplementedError: ``max_norm``, ``scale_grad_by_freq`` or ``sparse``.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None,
                 max_norm: float | None = None, norm_type: float = 2.0,
                 scale_grad_by_freq: bool = False, sparse: bool = False, _weight=None,
                 _freeze: bool = False):
        super().__init__()
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError("Padding_idx must be within num_embeddings")
            padding_idx = padding_idx % num_embeddings
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("Embedding: max_norm, scale_grad_by_freq and sparse are "
                                      "not supported")
        self.padding_idx, self.max_norm, self.norm_type = padding_idx, max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            w = default_rng().standard_normal((num_embeddings, embedding_dim))
            if padding_idx is not None:
                w[padding_idx] = 0.0
        else:
            w = _weight.numpy() if isinstance(_weight, Tensor) else np.asarray(_weight)
            if w.shape != (num_embeddings, embedding_dim):
                raise ValueError("Shape of weight does not match num_embeddings and "
                                 "embedding_dim")
        self.weight = Parameter(w, requires_grad=not _freeze)

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx: int | None = None,
                        max_norm=None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> "Embedding":
        """An ``Embedding`` holding ``embeddings [N, D]`` (frozen by default)."""
        w = embeddings.numpy() if isinstance(embeddings, Tensor) else np.asarray(embeddings)
        if w.ndim != 2:
            raise ValueError("Embeddings parameter is expected to be 2-dimensional")
        return cls(w.shape[0], w.shape[1], padding_idx, max_norm, norm_type,
                   scale_grad_by_freq, sparse, _weight=w, _freeze=freeze)

    def forward(self, idx) -> Tensor:
        return F.embedding(idx, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        return s + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")


class EmbeddingBag(Module):
    """Sums, means or maxima of embedding rows over bags (``torch.nn.EmbeddingBag``,
    ``weight [num_embeddings, embedding_dim]`` initialised N(0, 1)).

    ``forward(input, offsets=None, per_sample_weights=None)``: ``input [B, N]`` (B bags of
    N indices), or ``input [L]`` with ``offsets [B]`` (bag starts; ``include_last_offset``:
    ``B + 1`` entries) whose values must be known while tracing (data: the bag sizes fix
    the program's shapes). ``per_sample_weights`` (the shape of ``input``) scale the rows,
    ``mode="sum"`` only. Indices equal to ``padding_idx`` are left out (a mean divides by
    the others); an empty bag gives zeros. Output ``[B, embedding_dim]``.

    Raises:
        ValueError: an unknown ``mode``, ``offsets`` with a 2-D input, weights with a mode
            other than sum. RuntimeError: traced ``offsets``.
        NotImplementedError: ``max_norm``, ``scale_grad_by_freq`` or ``sparse``.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm=None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight=None, include_last_offset: bool = False,
                 padding_idx: int | None = None, _freeze: bool = False):
        super().__init__()
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
        self.mode, self.include_last_offset = mode, include_last_offset
        emb = Embedding(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type,
                        scale_grad_by_freq, sparse, _weight, _freeze)
        self.num_embeddings, self.embedding_dim = emb.num_embeddings, emb.embedding_dim
        self.padding_idx, self.max_norm, self.norm_type = emb.padding_idx, max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        self.weight = emb.weight

    def forward(self, input, offsets=None, per_sample_weights=None) -> Tensor:
        return _bag(input, self.weight, offsets, self.mode, per_sample_weights,
                    self.include_last_offset, self.padding_idx)


class _ModeError(ValueError, NotImplementedError):
    """``per_sample_weights`` with a mode other than ``"sum"``: PyTorch's
    ``NotImplementedError``, and a ``ValueError``."""


def embedding_bag(input, weight: Tensor, offsets=None, max_norm=None, norm_type: float = 2,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights=None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """Sums, means or maxima of rows of ``weight`` over bags of indices, as
    ``torch.nn.functional.embedding_bag`` (what :class:`EmbeddingBag` computes).

    Args:
        input: int32/int64 ``[B, N]`` (B bags of N indices), or ``[L]`` with ``offsets``.
        weight: float32 ``[num_embeddings, embedding_dim]``.
        offsets: ``[B]`` bag starts (``include_last_offset``: ``B + 1`` entries) for a 1-D
            input; values known while tracing (a list, an array or a tensor made from data:
            the bag sizes fix the program's shapes).
        mode: ``"sum"``, ``"mean"`` or ``"max"``.
        per_sample_weights: float32 of ``input``'s shape scaling each row, ``"sum"`` only.
        padding_idx: indices equal to it are left out (a mean divides by the others; an
            empty bag gives zeros).
        max_norm, scale_grad_by_freq, sparse: must be None / False.

    Returns:
        ``[B, embedding_dim]``; the gradient of ``weight`` is a scatter-add.

    Raises:
        ValueError: ``weight`` not 2-D, an unknown ``mode``, ``offsets`` with a 2-D input
            or missing for a 1-D one, an input of another rank, ``per_sample_weights`` of
            another shape; ``per_sample_weights`` with a mode other than sum (also a
            ``NotImplementedError``, PyTorch's type). RuntimeError: traced ``offsets``.
        NotImplementedError: ``max_norm``, ``scale_grad_by_freq`` or ``sparse``.
    """
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension "
                         f"{weight.ndim}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding_bag: max_norm, scale_grad_by_freq and sparse "
                                  "are not supported")
    if padding_idx is not None:
        n = weight.shape[0]
        if not -n <= padding_idx < n:
            raise ValueError("padding_idx must be within the number of embeddings")
        padding_idx %= n
    return _bag(input, weight, offsets, mode, per_sample_weights, include_last_offset,
                padding_idx)


def _bag(input, weight, offsets, mode, per_sample_weights, include_last_offset,
         padding_idx) -> Tensor:
    """The bags of :func:`embedding_bag` (arguments checked)."""
    idx = input if isinstance(input, Tensor) else Tensor(np.asarray(input), dtype="int64")
    if per_sample_weights is not None and tuple(per_sample_weights.shape) != \
            tuple(idx.shape):
        raise ValueError(f"embedding_bag: If per_sample_weights "
                         f"({list(per_sample_weights.shape)}) is not None, then it must "
                         f"have the same shape as the input ({list(idx.shape)})")
    if per_sample_weights is not None and mode != "sum":
        raise _ModeError(f"embedding_bag: per_sample_weights was not None. "
                         f"per_sample_weights is only supported for mode='sum' (got "
                         f"mode='{mode}')")
    if idx.ndim not in (1, 2):
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{idx.ndim}")
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError("offsets has to be None if input is 2D")
        b, n = idx.shape
        bag = np.repeat(np.arange(b), n)
        idx = idx.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    else:
        starts = _known(offsets, "offsets")
        if include_last_offset:
            starts, b = starts[:-1], len(starts) - 1
        else:
            b = len(starts)
        bag = np.searchsorted(starts, np.arange(idx.shape[0]), side="right") - 1
    rows = F.embedding(idx, weight)                              # [L, D]
    keep = None if padding_idx is None else (idx != padding_idx)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(-1)
    segment = Tensor(bag.astype(np.int64))
    zeros = weight.new_zeros(b, weight.shape[1])
    if mode == "max":
        if keep is not None:
            rows = rows.where(keep.unsqueeze(-1), -float("inf"))
        out = zeros.scatter_reduce(0, segment.unsqueeze(-1).expand(*rows.shape), rows,
                                   "amax", include_self=False)
        return out.where(out > -float("inf"), 0.0)
    if keep is not None:
        rows = rows * keep.float().unsqueeze(-1)
    out = zeros.index_add(0, segment, rows)
    if mode == "mean":                     # bag sizes: known, unless padding
        count = (Tensor(np.bincount(bag, minlength=b).astype(np.float32)) if keep is None
                 else weight.new_zeros(b).index_add(0, segment, keep.float()))
        out = out / count.clamp(min=1.0).unsqueeze(-1)
    return out


def _known(offsets, what: str) -> np.ndarray:
    """``offsets`` as a host int array: a list, numpy array, or tensor made from data."""
    if offsets is None:
        raise ValueError("embedding_bag: offsets has to be given for a 1D input")
    if isinstance(offsets, Tensor):
        if offsets._var is None:
            from ..graph.trace import user_site
            raise RuntimeError(f"embedding_bag: {what} computed by the program (shape "
                               f"{list(offsets.shape)}, at {user_site()}): the bag sizes fix "
                               f"the output's shape, so they must be data known while "
                               f"tracing; use a 2-D input of fixed-size bags instead")
        offsets = offsets.numpy()
    return np.asarray(offsets, np.int64).reshape(-1)
