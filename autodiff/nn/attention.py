"""``MultiheadAttention`` with PyTorch's packed parameter layout."""
from __future__ import annotations

import math

import numpy as np

from ..graph.tensor import Tensor, default_rng
from . import functional as F
from .dropout import RandomStream
from .layers import Linear
from .module import Module, Parameter


class MultiheadAttention(Module):
    """Multi-head scaled dot-product attention (``torch.nn.MultiheadAttention``).

    Parameters, named and laid out as PyTorch's so state dicts move both ways:
    ``in_proj_weight [3D, D]`` (query, key, value projections stacked), ``in_proj_bias
    [3D]``, ``out_proj.weight [D, D]``, ``out_proj.bias [D]``. Initialisation as PyTorch:
    xavier-uniform ``in_proj_weight``, zero biases, ``Linear`` default for ``out_proj``.

    Heads are one more batch dim of a batched DOT (``[B, H, T, hd]``), never a Python loop.
    Scores are scaled by ``1 / sqrt(head_dim)``.

    Args:
        embed_dim: ``D``. num_heads: ``H``, must divide ``D``.
        dropout: dropout on the attention weights in training mode.
        bias: learn ``in_proj_bias`` and ``out_proj.bias``.
        batch_first: inputs ``[B, T, D]``; ``False`` (the default, as PyTorch's):
            ``[T, B, D]``.
        seed: seed of the attention-dropout masks (``None``: drawn from the global generator).

    Raises:
        ValueError: ``num_heads`` does not divide ``embed_dim``.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 batch_first: bool = False, seed: int | None = None):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} must be divisible by num_heads {num_heads}")
        self.embed_dim, self.num_heads = int(embed_dim), int(num_heads)
        self.head_dim = embed_dim // num_heads
        self.dropout, self.batch_first = float(dropout), batch_first
        bound = math.sqrt(6.0 / (embed_dim + 3 * embed_dim))          # xavier_uniform_
        self.in_proj_weight = Parameter(default_rng().uniform(-bound, bound,
                                                              (3 * embed_dim, embed_dim)))
        self.in_proj_bias = Parameter(np.zeros(3 * embed_dim)) if bias else None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias)
        if bias:
            self.out_proj.bias = Parameter(np.zeros(embed_dim))
        self.rng = RandomStream(seed)

    def reseed(self, seed: int | None = None) -> None:
        """Draw a new attention-dropout seed (used when the module is cloned)."""
        self.rng.reseed(seed)

    def _project(self, x: Tensor, part: int) -> Tensor:
        d = self.embed_dim
        w = self.in_proj_weight[part * d:(part + 1) * d]
        b = self.in_proj_bias[part * d:(part + 1) * d] if self.in_proj_bias is not None \
            else None
        return F.linear(x, w, b)

    def _heads(self, x: Tensor) -> Tensor:
        """``[B, T, D]`` -> ``[B, H, T, hd]``."""
        b, t, _ = x.shape
        return x.reshape(b, t, self.num_heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask=None,
                need_weights: bool = True, attn_mask=None, average_attn_weights: bool = True,
                is_causal: bool = False):
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: ``[B, T, D]`` (``[T, B, D]`` without ``batch_first``; ``[T, D]`` unbatched).
            key, value: ``[B, S, D]`` likewise.
            key_padding_mask: ``[B, S]``: numpy bool (``True`` = ignore that key) or an
                additive float mask.
            need_weights: also return the attention weights.
            attn_mask: ``[T, S]`` or ``[B * H, T, S]``: numpy bool (``True`` = not allowed to
                attend) or an additive float mask (array or float32 Tensor).
            average_attn_weights: average the returned weights over heads.
            is_causal: without ``attn_mask``, mask out keys after the query position (with
                ``attn_mask`` given, it is a hint and ``attn_mask`` is used, as in PyTorch).

        Returns:
            ``(output, weights)``: output of ``query``'s shape; weights ``[B, T, S]``
            (``[B, H, T, S]`` without averaging) or ``None`` without ``need_weights``.
        """
        batched = query.ndim == 3
        if not batched:
            query, key, value = (x.unsqueeze(0) for x in (query, key, value))
        elif not self.batch_first:
            query, key, value = (x.transpose(0, 1) for x in (query, key, value))
        b, t, d = query.shape
        s = key.shape[1]
        if d != self.embed_dim or key.shape[-1] != d or value.shape[-1] != d:
            raise ValueError(f"MultiheadAttention: embed_dim {self.embed_dim}, got query "
                             f"{list(query.shape)}, key {list(key.shape)}, value "
                             f"{list(value.shape)}")
        # three products with row blocks of in_proj_weight (not one [3D] product sliced
        # afterwards): the backward pads then act on [D, D] weight blocks, not activations
        q, k, v = (self._project(x, i) for i, x in enumerate((query, key, value)))
        mask = self._mask(attn_mask, key_padding_mask, is_causal, b, t, s)
        p = self.dropout if self.training else 0.0
        seed, stream = self.rng.next() if p > 0 else (None, 0)
        out, weights = F.attention(self._heads(q), self._heads(k), self._heads(v), mask, p,
                                   1.0 / math.sqrt(self.head_dim), seed=seed, stream=stream)
        out = self.out_proj(out.permute(0, 2, 1, 3).reshape(b, t, d))
        if not batched:
            out = out.squeeze(0)
        elif not self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = weights.mean(1)
        return out, (weights if batched else weights.squeeze(0))

    def _mask(self, attn_mask, key_padding_mask, is_causal: bool, b: int, t: int, s: int):
        """One additive mask broadcastable to ``[B, H, T, S]``, or ``None``."""
        mask = None
        if attn_mask is not None:
            mask = F.additive_mask(attn_mask)
            if mask.ndim == 3:                                 # [B * H, T, S]
                mask = mask.reshape(b, self.num_heads, t, s)
        elif is_causal:
            mask = Tensor(F.causal_mask(t, s))
        if key_padding_mask is not None:
            kpm = F.additive_mask(key_padding_mask).reshape(b, 1, 1, s)
            mask = kpm if mask is None else mask + kpm
        return mask

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, " \
               f"dropout={self.dropout}, batch_first={self.batch_first}"
