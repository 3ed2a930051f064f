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
