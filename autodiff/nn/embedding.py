"""``Embedding``: a lookup table read by an index gather (gradient: a scatter-add)."""
from __future__ import annotations

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
    """

    def __init__(self, num_embeddings: int, embedding_dim: int):
        super().__init__()
        self.num_embeddings, self.embedding_dim = int(num_embeddings), int(embedding_dim)
        self.weight = Parameter(default_rng().standard_normal((num_embeddings, embedding_dim)))

    def forward(self, idx) -> Tensor:
        return F.embedding(idx, self.weight)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}"
