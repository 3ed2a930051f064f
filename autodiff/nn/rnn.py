"""Recurrent layers: ``RNN``, ``LSTM``, ``GRU`` and their cells, with PyTorch's arguments,
parameter names (``weight_ih_l0``, ``weight_hh_l0_reverse``, ...), gate order (LSTM: input,
forget, cell, output; GRU: reset, update, new) and initialisation, so a PyTorch state_dict
loads unchanged.

The input projection of every time step is one DOT per layer and direction
(``x [L*N, in] @ W_ih^T``); each step adds ``h @ W_hh^T``. Sequences of at least
:data:`SCAN_MIN_STEPS` steps run the time loop as one :func:`autodiff.scan` (a rolled loop,
its backward a rolled loop over saved per-step values): the graph and the compile time do
not grow with the length. Shorter ones are unrolled while tracing (one set of nodes per
step), which lets fusion work across steps.

``RNN``/``LSTM``/``GRU`` also take a :class:`~autodiff.nn.utils.rnn.PackedSequence` (its
batch sizes known while tracing): the batch runs padded to the longest length, sorted as
packed, and a constant mask of the valid steps freezes each sequence's state after its
last step and zeroes its outputs there (a reverse direction starts at each sequence's own
last step). The output is packed again in PyTorch's layout and ``h_n`` (``c_n``) is each
sequence's state at its last valid step, in the original batch order, as PyTorch.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError
from ..graph.control import scan
from ..graph.tensor import Tensor, concat, default_rng, stack, where, zeros
from ..graph.trace import user_site
from . import functional as F
from .dropout import RandomStream
from .module import Module, Parameter
from .utils.rnn import PackedSequence, _gather_rows, _layout, _packed_rows, _padded_rows

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}

#: sequences at least this long run as a scan (shorter: unrolled); chosen by measurement
#: (BENCHMARKS.md, "Recurrent layers: unrolled or scan")
SCAN_MIN_STEPS = 16


def _cell(mode: str, gi: Tensor, h: Tensor, c, w_hh: Tensor, b_hh, w_hr=None):
    """One time step: ``gi = x @ W_ih^T + b_ih`` (precomputed), state ``h`` (and ``c``)."""
    gh = h @ w_hh.T
    if b_hh is not None:
        gh = gh + b_hh
    if mode == "RNN_TANH":
        return (gi + gh).tanh(), None
    if mode == "RNN_RELU":
        return (gi + gh).relu(), None
    hs = w_hh.shape[0] // _GATES[mode]
    if mode == "LSTM":
        z = gi + gh
        i, f = z[..., :hs].sigmoid(), z[..., hs:2 * hs].sigmoid()
        g, o = z[..., 2 * hs:3 * hs].tanh(), z[..., 3 * hs:].sigmoid()
        c = f * c + i * g
        h = o * c.tanh()
        return (h @ w_hr.T if w_hr is not None else h), c
    r = (gi[..., :hs] + gh[..., :hs]).sigmoid()
    u = (gi[..., hs:2 * hs] + gh[..., hs:2 * hs]).sigmoid()
    n = (gi[..., 2 * hs:] + r * gh[..., 2 * hs:]).tanh()
    return n + u * (h - n), None          # (1 - u) * n + u * h


def _masked(m, h_new: Tensor, c_new, h: Tensor, c):
    """A step under mask ``m [N, 1]`` (bool; None: every row valid): ``(output, h, c)``,
    the output zero and the state kept where ``m`` is False."""
    if m is None:
        return h_new, h_new, c_new
    return (where(m, h_new, 0.0), where(m, h_new, h),
            where(m, c_new, c) if c is not None else None)


def _scan(mode: str, gi: Tensor, h: Tensor, c, w_hh: Tensor, b_hh, w_hr, reverse: bool,
          mask=None):
    """The time loop as one scan over ``gi [L, N, G]``: ``((h_n, c_n), outputs [L, N, H])``;
    ``mask`` (bool ``[L, N, 1]`` or None): see :func:`_masked`."""
    lstm = mode == "LSTM"

    def step(carry, x):
        h, c = carry if lstm else (carry, None)
        g, m = x if mask is not None else (x, None)
        y, h, c = _masked(m, *_cell(mode, g, h, c, w_hh, b_hh, w_hr), h, c)
        return ((h, c) if lstm else h), y

    xs = (gi, mask) if mask is not None else gi
    carry, ys = scan(step, (h, c) if lstm else h, xs, reverse=reverse)
    return (carry if lstm else (carry, None)), ys


class RNNBase(Module):
    """Shared by :class:`RNN`, :class:`LSTM` and :class:`GRU` (see :class:`LSTM`)."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0):
        super().__init__()
        if not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if hidden_size <= 0 or num_layers <= 0:
            raise ValueError("hidden_size and num_layers must be positive")
        if proj_size < 0 or (proj_size and mode != "LSTM"):
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections (LSTM only)")
        if proj_size >= hidden_size and proj_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional, self.proj_size = float(dropout), bidirectional, proj_size
        self.rng = RandomStream()
        dirs = 2 if bidirectional else 1
        gate = _GATES[mode] * hidden_size
        real_h = proj_size or hidden_size
        bound = 1.0 / math.sqrt(hidden_size)
        rand = lambda *shape: Parameter(default_rng().uniform(-bound, bound, shape))
        for layer in range(num_layers):
            in_l = input_size if layer == 0 else real_h * dirs
            for d in range(dirs):
                sfx = f"_l{layer}{'_reverse' if d else ''}"
                setattr(self, f"weight_ih{sfx}", rand(gate, in_l))
                setattr(self, f"weight_hh{sfx}", rand(gate, real_h))
                if bias:
                    setattr(self, f"bias_ih{sfx}", rand(gate))
                    setattr(self, f"bias_hh{sfx}", rand(gate))
                if proj_size:
                    setattr(self, f"weight_hr{sfx}", rand(proj_size, hidden_size))

    def _weights(self, layer: int, d: int):
        sfx = f"_l{layer}{'_reverse' if d else ''}"
        get = lambda n: getattr(self, f"{n}{sfx}", None)
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), \
            get("weight_hr")

    def forward(self, input, hx=None):
        """Run the sequence (see :class:`LSTM` for shapes); returns ``(output, h_n)``, for
        LSTM ``(output, (h_n, c_n))``. ``input`` may be a
        :class:`~autodiff.nn.utils.rnn.PackedSequence` (then ``output`` is one too)."""
        name = type(self).__name__
        site = user_site()
        packed = isinstance(input, PackedSequence)
        mask = None
        if packed:
            sizes, srt, uns = _layout(input, name)
            data = input.data
            if data.ndim != 2:
                raise ShapeError(name, [data.shape], site, f"input must have 2 dimensions, "
                                 f"got {data.ndim} (the data of a PackedSequence)")
            if data.shape[-1] != self.input_size:
                raise ShapeError(name, [data.shape], site, f"input.size(-1) must be equal to "
                                 f"input_size. Expected {self.input_size}, got "
                                 f"{data.shape[-1]}")
            rows, valid, _ = _padded_rows(sizes, len(sizes), None)
            x = _gather_rows(data, rows.reshape(-1)).reshape(*rows.shape, data.shape[-1])
            if not valid.all():
                x = x.masked_fill(Tensor._const(~valid[..., None]), 0.0)   # [L, N, in]
                mask = valid
            unbatched = False
        else:
            if input.ndim not in (2, 3):
                raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.ndim}D "
                                 "instead")
            if input.shape[-1] != self.input_size:
                raise ShapeError(name, [input.shape], site, f"input.size(-1) must be equal "
                                 f"to input_size. Expected {self.input_size}, got "
                                 f"{input.shape[-1]}")
            unbatched = input.ndim == 2
            x = input.unsqueeze(1) if unbatched else \
                (input.transpose(0, 1) if self.batch_first else input)   # [L, N, in]
        seq, n = x.shape[:2]
        dirs = 2 if self.bidirectional else 1
        real_h = self.proj_size or self.hidden_size
        lstm = self.mode == "LSTM"
        h0, c0 = (hx if lstm and hx is not None else (hx, None))
        if h0 is not None and unbatched:
            h0 = h0.unsqueeze(1)
            c0 = c0.unsqueeze(1) if c0 is not None else None
        want = (self.num_layers * dirs, n, real_h)
        if h0 is not None and tuple(h0.shape) != want:
            raise ShapeError(name, [h0.shape], site, f"Expected hidden size {list(want)}, "
                             f"got {list(h0.shape)}")
        if lstm and c0 is not None and tuple(c0.shape) != want[:2] + (self.hidden_size,):
            raise ShapeError(name, [c0.shape], site, "Expected hidden size "
                             f"{list(want[:2] + (self.hidden_size,))}, got {list(c0.shape)}")
        if packed and srt is not None:          # the initial state in the packed order
            h0 = h0.index_select(1, Tensor._const(srt.astype(np.int32))) \
                if h0 is not None else None
            c0 = c0.index_select(1, Tensor._const(srt.astype(np.int32))) \
                if c0 is not None else None
        step_masks = None
        if mask is not None:
            step_masks = [None if valid_t.all() else Tensor._const(valid_t[:, None])
                          for valid_t in mask]
        h_out, c_out = [], []
        for layer in range(self.num_layers):
            outs = []
            for d in range(dirs):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, d)
                k = layer * dirs + d
                h = h0[k] if h0 is not None else zeros(n, real_h)
                c = (c0[k] if c0 is not None else zeros(n, self.hidden_size)) if lstm else None
                gi = F.linear(x.reshape(seq * n, -1), w_ih, b_ih).reshape(seq, n, -1)
                if seq >= SCAN_MIN_STEPS:
                    m = Tensor._const(mask[..., None]) if mask is not None else None
                    (h, c), ys = _scan(self.mode, gi, h, c, w_hh, b_hh, w_hr, bool(d), m)
                    outs.append(ys)
                else:
                    hs = [None] * seq
                    for t in (reversed(range(seq)) if d else range(seq)):
                        m = step_masks[t] if step_masks is not None else None
                        hs[t], h, c = _masked(
                            m, *_cell(self.mode, gi[t], h, c, w_hh, b_hh, w_hr), h, c)
                    outs.append(stack(hs, 0))
                h_out.append(h)
                if lstm:
                    c_out.append(c)
            x = concat(outs, -1) if dirs == 2 else outs[0]
            if self.dropout and self.training and layer < self.num_layers - 1:
                seed, stream = self.rng.next()
                x = F.dropout(x, self.dropout, True, seed=seed, stream=stream)
        h_n = stack(h_out, 0)
        c_n = stack(c_out, 0) if lstm else None
        if packed:
            rows = _packed_rows(sizes, n, seq)
            out = PackedSequence(_gather_rows(x.reshape(seq * n, -1), rows),
                                 input.batch_sizes, input.sorted_indices,
                                 input.unsorted_indices)
            out.__dict__["_layout"] = input.__dict__["_layout"]
            if uns is not None:                 # the states in the original batch order
                idx = Tensor._const(uns.astype(np.int32))
                h_n = h_n.index_select(1, idx)
                c_n = c_n.index_select(1, idx) if lstm else None
            return (out, (h_n, c_n)) if lstm else (out, h_n)
        out = x.squeeze(1) if unbatched else (x.transpose(0, 1) if self.batch_first else x)
        h_n = h_n.squeeze(1) if unbatched else h_n
        if lstm:
            return out, (h_n, c_n.squeeze(1) if unbatched else c_n)
        return out, h_n

    def reseed(self, seed: int | None = None) -> None:
        self.rng.reseed(seed)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class RNN(RNNBase):
    """Elman RNN, ``torch.nn.RNN``: ``h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T +
    b_hh)`` (``nonlinearity="relu"``: ReLU). Arguments and shapes as :class:`LSTM`
    (without ``proj_size``); returns ``(output, h_n)``.

    Raises:
        ValueError: an unknown ``nonlinearity``, or an argument as :class:`LSTM`.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        super().__init__("RNN_" + nonlinearity.upper(), input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """Long short-term memory (Hochreiter and Schmidhuber, 1997), ``torch.nn.LSTM``::

        i, f, g, o = split(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh)   (this gate order)
        c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g);  h_t = sigmoid(o) * tanh(c_t)
        h_t = h_t W_hr^T                                                 (proj_size > 0)

    Args:
        input_size, hidden_size: feature sizes. num_layers: stacked layers.
        bias: ``bias_ih``/``bias_hh``. batch_first: ``[N, L, *]`` instead of ``[L, N, *]``.
        dropout: dropout on each layer's output except the last (training mode).
        bidirectional: a second, reversed pass per layer (``..._reverse`` parameters),
            outputs concatenated.
        proj_size: project ``h`` to this size (``weight_hr_l{k}``).

    Parameters ``weight_ih_l{k} [4H, in]``, ``weight_hh_l{k} [4H, H]``, ``bias_ih_l{k}``,
    ``bias_hh_l{k} [4H]`` per layer ``k`` (and ``_reverse``), all U(-1/sqrt(H), 1/sqrt(H)).

    Input ``[L, N, in]`` (or ``[L, in]`` unbatched); ``hx = (h_0, c_0)`` each
    ``[D * num_layers, N, H]`` or None (zeros). Returns ``(output [L, N, D * H], (h_n,
    c_n))``. The ``L`` steps are one scan (unrolled at trace time when ``L`` is below
    :data:`SCAN_MIN_STEPS`).

    The input may also be a :class:`~autodiff.nn.utils.rnn.PackedSequence` (``data [sum
    of lengths, in]``; ``batch_first`` does not apply): ``hx`` is then in the original
    batch order (``N = batch_sizes[0]``), the output is a ``PackedSequence`` of the same
    layout (``data [sum of lengths, D * H]``) and ``h_n``/``c_n`` hold each sequence's
    state at its last valid step (a reverse direction: after its step 0), in the original
    batch order, as PyTorch. It runs as the padded batch ``[max length, N, in]`` with a
    constant mask of the valid steps, so its cost is that of the padded batch.

    Raises:
        ValueError: bad arguments, or an input/state shape that does not fit (a
            :class:`~autodiff.errors.ShapeError`, also a ``RuntimeError`` as PyTorch's,
            for a wrong feature size, state shape or packed data rank).
        TracedValueError: a ``PackedSequence`` whose ``batch_sizes`` or indices are
            traced tensors.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size)


class GRU(RNNBase):
    """Gated recurrent unit (Cho et al., 2014), ``torch.nn.GRU``::

        r = sigmoid(x W_ir + b_ir + h W_hr + b_hr);  z = sigmoid(x W_iz + b_iz + h W_hz + b_hz)
        n = tanh(x W_in + b_in + r * (h W_hn + b_hn));  h' = (1 - z) * n + z * h

    Gates stacked ``r, z, n`` in ``weight_ih_l{k} [3H, in]`` etc.; arguments and shapes as
    :class:`LSTM` (no ``proj_size``); returns ``(output, h_n)``.
    """

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional)


class _CellBase(Module):
    mode = "LSTM"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 mode: str | None = None):
        super().__init__()
        self.mode = mode or type(self).mode
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        gate = _GATES[self.mode] * hidden_size
        bound = 1.0 / math.sqrt(hidden_size)
        rand = lambda *shape: Parameter(default_rng().uniform(-bound, bound, shape))
        self.weight_ih, self.weight_hh = rand(gate, input_size), rand(gate, hidden_size)
        self.bias_ih = rand(gate) if bias else None
        self.bias_hh = rand(gate) if bias else None

    def forward(self, input: Tensor, hx=None):
        if input.ndim not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got "
                             f"{input.ndim}D instead")
        unbatched = input.ndim == 1
        x = input.unsqueeze(0) if unbatched else input
        n = x.shape[0]
        lstm = self.mode == "LSTM"
        if hx is None:
            h = zeros(n, self.hidden_size)
            c = zeros(n, self.hidden_size) if lstm else None
        else:
            h, c = hx if lstm else (hx, None)
            if unbatched:
                h = h.unsqueeze(0)
                c = c.unsqueeze(0) if c is not None else None
        gi = F.linear(x, self.weight_ih, self.bias_ih)
        h, c = _cell(self.mode, gi, h, c, self.weight_hh, self.bias_hh)
        sq = (lambda t: t.squeeze(0)) if unbatched else (lambda t: t)
        return (sq(h), sq(c)) if lstm else sq(h)

    def extra_repr(self) -> str:
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(_CellBase):
    """``torch.nn.RNNCell``: one step of :class:`RNN`; ``forward(x [N, in], h [N, H]) ->
    h'``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh"):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, "RNN_" + nonlinearity.upper())
        self.nonlinearity = nonlinearity


class LSTMCell(_CellBase):
    """``torch.nn.LSTMCell``: one step of :class:`LSTM`; ``forward(x, (h, c)) -> (h', c')``."""
    mode = "LSTM"


class GRUCell(_CellBase):
    """``torch.nn.GRUCell``: one step of :class:`GRU`; ``forward(x, h) -> h'``."""
    mode = "GRU"
