"""``TransformerEncoderLayer``, ``TransformerEncoder``, their decoder counterparts and
``Transformer``, with PyTorch's parameter names.

State dict keys match ``torch.nn.TransformerEncoder``: ``layers.0.self_attn.in_proj_weight``,
``layers.0.self_attn.out_proj.weight``, ``layers.0.linear1.weight``, ``layers.0.norm1.weight``,
... so weights load from PyTorch and back.
"""
from __future__ import annotations

import copy

from ..graph.tensor import Tensor
from . import functional as F
from .attention import MultiheadAttention
from .dropout import Dropout
from .layers import Linear, ModuleList
from .module import Module, Parameter
from .normalization import LayerNorm

_ACTIVATIONS = {"relu": F.relu, "gelu": F.gelu}


def clone_module(module: Module) -> Module:
    """A deep copy of ``module`` with fresh variables (same values) and fresh dropout seeds.

    ``copy.deepcopy`` alone would share variable identities (ids, owners) between the
    copies; here every parameter and buffer becomes a new tensor.
    """
    memo: dict = {}
    for m in module.modules():
        for d in (m._parameters, m._buffers):
            for t in d.values():
                if t is None or id(t) in memo:
                    continue
                if isinstance(t, Parameter):
                    memo[id(t)] = Parameter(t.numpy(), t.requires_grad, t.name)
                else:
                    memo[id(t)] = Tensor(t.numpy(), t.requires_grad, t.dtype, t.name)
    new = copy.deepcopy(module, memo)
    for m in new.modules():
        if hasattr(m, "reseed"):
            m.reseed()
    return new


def _activation_fn(activation):
    """``"relu"``/``"gelu"`` as the function, a callable or module as it is.

    Raises:
        ValueError: another string (PyTorch's message).
    """
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation should be relu/gelu, not {activation}")
        return _ACTIVATIONS[activation]
    return activation


def _feed_forward(layer: Module, d_model: int, dim_feedforward: int, dropout: float,
                  bias: bool) -> None:
    """``layer.linear1``, ``layer.dropout``, ``layer.linear2`` registered in PyTorch's
    order (their place in the ``state_dict``)."""
    layer.linear1 = Linear(d_model, dim_feedforward, bias=bias)
    layer.dropout = Dropout(dropout)
    layer.linear2 = Linear(dim_feedforward, d_model, bias=bias)


class TransformerEncoderLayer(Module):
    """Self-attention and a feed-forward block, each with a residual connection and a
    ``LayerNorm`` (``torch.nn.TransformerEncoderLayer``).

    Post-norm (``norm_first=False``, PyTorch's default)::

        x = norm1(x + dropout1(self_attn(x, x, x)))
        x = norm2(x + dropout2(linear2(dropout(activation(linear1(x))))))

    Pre-norm (``norm_first=True``): ``x = x + block(norm(x))`` for both blocks.

    Args:
        d_model: features ``D``. nhead: attention heads.
        dim_feedforward: hidden width of the feed-forward block.
        dropout: probability for all dropouts (attention weights included).
        activation: ``"relu"``, ``"gelu"`` (exact) or a callable / module.
        layer_norm_eps: LayerNorm ``eps``.
        batch_first: inputs ``[B, T, D]``; ``False`` (the default, as PyTorch's): ``[T, B, D]``.
        norm_first: pre-norm instead of post-norm.
        bias: learn the biases of the linear layers, attention and norms.

    Input ``[B, T, D]`` float32 -> ``[B, T, D]``.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first)
        _feed_forward(self, d_model, dim_feedforward, dropout, bias)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation_fn(activation)

    def forward(self, src: Tensor, src_mask=None, src_key_padding_mask=None,
                is_causal: bool = False) -> Tensor:
        """``src [B, T, D]``; ``src_mask``/``src_key_padding_mask``/``is_causal`` as in
        :meth:`MultiheadAttention.forward` (``attn_mask``, ``key_padding_mask``)."""
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal) -> Tensor:
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x) -> Tensor:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """A stack of ``num_layers`` copies of ``encoder_layer`` (``torch.nn.TransformerEncoder``).

    Like PyTorch, every layer starts as a copy of ``encoder_layer`` (same initial weights);
    each copy has its own variables and dropout seeds. Parameters are named ``layers.<i>.*``;
    an optional final ``norm`` module is applied after the last layer.
    """

    def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int,
                 norm: Module | None = None):
        super().__init__()
        self.layers = ModuleList(clone_module(encoder_layer) for _ in range(num_layers))
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src: Tensor, mask=None, src_key_padding_mask=None,
                is_causal: bool | None = None) -> Tensor:
        """``src [B, T, D]`` through every layer; ``mask`` is each layer's ``src_mask``,
        ``is_causal=True`` (without ``mask``) applies the causal mask."""
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                      is_causal=bool(is_causal))
        return self.norm(x) if self.norm is not None else x


class TransformerDecoderLayer(Module):
    """Self-attention, cross-attention over ``memory``, feed-forward
    (``torch.nn.TransformerDecoderLayer``: its parameter names, defaults and post-norm or
    ``norm_first`` pre-norm order).

    Args: as :class:`TransformerEncoderLayer`; ``multihead_attn`` attends from the target
    to ``memory``.

    Input ``tgt [T, B, D]`` and ``memory [S, B, D]`` (``[B, *, D]`` with ``batch_first``)
    -> ``[T, B, D]``.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                                 batch_first=batch_first)
        _feed_forward(self, d_model, dim_feedforward, dropout, bias)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm3 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1, self.dropout2, self.dropout3 = (Dropout(dropout), Dropout(dropout),
                                                       Dropout(dropout))
        self.activation = _activation_fn(activation)

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask=None, memory_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None,
                tgt_is_causal: bool = False, memory_is_causal: bool = False) -> Tensor:
        """Masks as :meth:`MultiheadAttention.forward`'s ``attn_mask`` and
        ``key_padding_mask``, for the self-attention (``tgt_*``) and the cross-attention
        (``memory_*``)."""
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask,
                                    memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask,
                                               memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal) -> Tensor:
        return self.dropout1(self.self_attn(x, x, x, attn_mask=attn_mask,
                                            key_padding_mask=key_padding_mask,
                                            need_weights=False, is_causal=is_causal)[0])

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal) -> Tensor:
        return self.dropout2(self.multihead_attn(x, mem, mem, attn_mask=attn_mask,
                                                 key_padding_mask=key_padding_mask,
                                                 need_weights=False, is_causal=is_causal)[0])

    def _ff_block(self, x) -> Tensor:
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoder(Module):
    """A stack of ``num_layers`` copies of ``decoder_layer``
    (``torch.nn.TransformerDecoder``; copies as :class:`TransformerEncoder`'s)."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int,
                 norm: Module | None = None):
        super().__init__()
        self.layers = ModuleList(clone_module(decoder_layer) for _ in range(num_layers))
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask=None, memory_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor:
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask,
                      memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        return self.norm(x) if self.norm is not None else x


class Transformer(Module):
    """Encoder-decoder (Vaswani et al., 2017), as ``torch.nn.Transformer``: its arguments,
    parameter names (``encoder.layers.<i>.*``, ``encoder.norm``, ``decoder.layers.<i>.*``,
    ``decoder.norm``) and initialisation (xavier-uniform for every parameter of 2 or more
    dims).

    ``forward(src [S, B, D], tgt [T, B, D], ...) -> [T, B, D]`` (``[B, *, D]`` with
    ``batch_first``); masks as the encoder's and decoder's.
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True):
        super().__init__()
        kw = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation,
                  layer_norm_eps=layer_norm_eps, batch_first=batch_first,
                  norm_first=norm_first, bias=bias)
        self.encoder = custom_encoder or TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, **kw), num_encoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        self.decoder = custom_decoder or TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, **kw), num_decoder_layers,
            LayerNorm(d_model, eps=layer_norm_eps, bias=bias))
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        from .init import xavier_uniform_
        for p in self.parameters():
            if p.ndim > 1:
                xavier_uniform_(p)

    def forward(self, src: Tensor, tgt: Tensor, src_mask=None, tgt_mask=None,
                memory_mask=None, src_key_padding_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, src_is_causal: bool | None = None,
                tgt_is_causal: bool | None = None, memory_is_causal: bool = False) -> Tensor:
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask,
                            tgt_is_causal=tgt_is_causal, memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int):
        """``[sz, sz]`` float32 numpy mask: ``-inf`` above the diagonal, 0 elsewhere (an
        additive causal mask, as torch's)."""
        import numpy as np
        return np.triu(np.full((sz, sz), -np.inf, np.float32), 1)
