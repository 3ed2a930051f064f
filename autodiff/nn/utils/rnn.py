"""``torch.nn.utils.rnn``: ``pad_sequence`` / ``unpad_sequence``, ``PackedSequence`` with
``pack_padded_sequence``, ``pad_packed_sequence``, ``pack_sequence`` and
``unpack_sequence``, and ``invert_permutation``.

Sequence lengths are shapes, so they are known when the program is traced: padding,
unpadding, packing and unpacking are static slices, concatenations and gathers (with
constant indices) of the traced values; gradients flow to the sequences (the padding gets
none). A length computed by the program (a traced tensor) has no value while tracing and
raises :class:`~autodiff.errors.TracedValueError`; its fixed-shape alternative is a padded
batch with a mask of the valid steps.

A ``PackedSequence``'s ``data`` has exactly PyTorch's layout: time-major, the sequences
sorted by decreasing length (ties in the order ``torch.sort(descending=True)`` gives), so
row ``sum(batch_sizes[:t]) + b`` is step ``t`` of the ``b``-th longest sequence;
``batch_sizes``, ``sorted_indices`` and ``unsorted_indices`` are int64 tensors whose values
are on the host. The recurrent modules (:mod:`autodiff.nn.rnn`) take and return one.
"""
from __future__ import annotations

import collections

import numpy as np

from ...errors import DimError, TracedValueError
from ...graph.mixins.dtype import known_values
from ...graph.tensor import Tensor, concat, stack
from ...graph.trace import TRACER, user_site

__all__ = ["PackedSequence", "invert_permutation", "pack_padded_sequence",
           "pad_packed_sequence", "pad_sequence", "unpad_sequence", "pack_sequence",
           "unpack_sequence"]


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0,
                 padding_side: str = "right") -> Tensor:
    """Pad variable-length sequences to the longest one and stack them, as
    ``torch.nn.utils.rnn.pad_sequence``.

    Args:
        sequences: tensors ``[L_i, *]`` (the same trailing dims and dtype), or one tensor
            ``[B, L, *]`` taken as its ``B`` rows (as PyTorch).
        batch_first: the output is ``[B, T, *]`` instead of ``[T, B, *]`` (``T`` the
            longest ``L_i``).
        padding_value: the value of the padded positions (in the sequences' dtype).
        padding_side: ``"right"`` (padding after each sequence) or ``"left"`` (before).

    Returns:
        ``[T, B, *]`` (or ``[B, T, *]``) in the sequences' dtype.

    Raises:
        RuntimeError: no sequences, a 0-d sequence, trailing dims that differ, or a
            ``padding_side`` other than ``"left"``/``"right"`` (PyTorch's exception type).
    """
    if padding_side not in ("left", "right"):
        raise RuntimeError("Expected padding_side to be one of left or right, but got "
                           f"{padding_side}.")
    seqs = list(sequences.unbind(0)) if isinstance(sequences, Tensor) else list(sequences)
    if not seqs:
        raise RuntimeError("received an empty list of sequences")
    seqs = [s if isinstance(s, Tensor) else Tensor(s) for s in seqs]
    if any(s.ndim == 0 for s in seqs):
        raise RuntimeError("pad_sequence: every sequence needs at least one dim (its "
                           "length), got a 0-d tensor")
    trailing = tuple(seqs[0].shape[1:])
    for s in seqs[1:]:
        if tuple(s.shape[1:]) != trailing:
            raise RuntimeError(f"pad_sequence: the sequences' trailing dims differ: "
                               f"{list(seqs[0].shape)} and {list(s.shape)}")
    longest = max(s.shape[0] for s in seqs)
    out = []
    for s in seqs:
        n = longest - s.shape[0]
        if n:
            fill = s.new_full((n, *trailing), padding_value)
            s = concat([s, fill] if padding_side == "right" else [fill, s], 0)
        out.append(s)
    return stack(out, 0 if batch_first else 1)


def _lengths(lengths) -> list[int]:
    return [int(v) for v in _host_ints(lengths, "unpad_sequence", "lengths",
                                       "pass the lengths as a list of ints").reshape(-1)]


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list:
    """The inverse of :func:`pad_sequence` (right padding): the first ``lengths[i]`` steps
    of each sequence, as ``torch.nn.utils.rnn.unpad_sequence``.

    Args:
        padded_sequences: ``[T, B, *]`` (or ``[B, T, *]`` with ``batch_first``).
        lengths: ``B`` lengths, each in ``[0, T]``: a list of ints, a numpy array, a torch
            tensor or an autodiff tensor whose value is known when tracing (host data: a
            variable the program does not assign, e.g. the lengths
            :func:`pad_packed_sequence` returns); a length is a shape, so it cannot be a
            traced value.

    Returns:
        A list of ``B`` tensors ``[lengths[i], *]``.

    Raises:
        autodiff.errors.TracedValueError: (a ``TypeError``) ``lengths`` is a traced tensor.
        ValueError: not ``B`` lengths, or a length outside ``[0, T]``.
    """
    x = padded_sequences if batch_first else padded_sequences.transpose(0, 1)
    ls = _lengths(lengths)
    b, t = x.shape[0], x.shape[1]
    if len(ls) != b:
        raise ValueError(f"unpad_sequence: {len(ls)} lengths for a batch of {b}")
    if any(n < 0 or n > t for n in ls):
        raise ValueError(f"unpad_sequence: lengths {ls} outside [0, {t}]")
    return [x[i, :n] for i, n in enumerate(ls)]


# -- host values of lengths / batch sizes / permutations -------------------------------
def _assigned(var) -> bool:
    """Whether the program being traced assigns ``var`` (in this scope or one enclosing)."""
    s = TRACER.scope
    while s is not None:
        if var in s.assigned:
            return True
        s = s.parent
    return False


_PADDED_INSTEAD = (
    "They are shapes (a PackedSequence's data has sum(lengths) rows), so they must be "
    "known while tracing: Python ints, a list, a numpy array or a tensor made from host "
    "data. Fixed-shape alternative: keep the padded batch [T, B, *] and a mask of the "
    "valid steps, e.g. m = arange(T)[:, None] < lengths[None, :], multiply the outputs "
    "by m and read each sequence's last valid step with a gather at lengths - 1.")


def _host_ints(value, op: str, name: str, instead: str = _PADDED_INSTEAD) -> np.ndarray:
    """``value`` (ints, a list, a numpy array, a torch tensor, or an autodiff tensor whose
    value is known while tracing) as an int64 numpy array.

    Raises:
        TracedValueError: ``value`` is a traced tensor (computed by the program).
    """
    if isinstance(value, Tensor):
        v = known_values(value)
        if v is None and value._var is not None and not _assigned(value._var):
            v = value._var.value               # host data, fixed for the whole program
        if v is None:
            raise TracedValueError(
                op, f"{name}, a traced {getattr(value.dtype, 'name', value.dtype)} tensor "
                    f"of shape {list(value.shape)}",
                user_site(), instead)
        value = v
    elif hasattr(value, "detach") and hasattr(value, "numpy"):          # a torch tensor
        value = value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{op}: {name} must be integers, got {arr.dtype}")
    return arr.astype(np.int64)


def _index_tensor(value, op: str, name: str) -> Tensor:
    """An int64 tensor of ``value`` (an autodiff tensor is kept as it is)."""
    if isinstance(value, Tensor):
        return value
    return Tensor(_host_ints(value, op, name), dtype="int64")


def _sort_descending(values) -> np.ndarray:
    """The permutation sorting ``values`` by decreasing value, ties in their order (a
    stable sort). PyTorch's CPU ``sort`` is not stable past 16 values, so there the
    ``sorted_indices`` of equal lengths, and the order of their rows in a packed batch,
    may differ from PyTorch's; padded results and final states do not."""
    return np.argsort(-np.asarray(values, np.int64), kind="stable")


def _inverse(perm: np.ndarray | None) -> np.ndarray | None:
    if perm is None:
        return None
    inv = np.empty_like(perm)
    inv[perm] = np.arange(len(perm), dtype=perm.dtype)
    return inv


def invert_permutation(permutation):
    """The inverse of a permutation (``torch.nn.utils.rnn.invert_permutation``): ``out``
    with ``out[permutation[i]] = i``; None for None.

    Args:
        permutation: a 1-D int tensor (its values known while tracing), list or array.

    Returns:
        An int64 tensor of the same length, or None.

    Raises:
        TracedValueError: ``permutation`` is a traced tensor.
        RuntimeError: it is not a permutation of ``0 .. n-1``.
    """
    if permutation is None:
        return None
    p = _host_ints(permutation, "invert_permutation", "permutation").reshape(-1)
    if sorted(p.tolist()) != list(range(len(p))):
        raise RuntimeError(f"invert_permutation: {p.tolist()} is not a permutation")
    return Tensor(_inverse(p), dtype="int64")


# -- PackedSequence --------------------------------------------------------------------
_PackedSequenceBase = collections.namedtuple(
    "PackedSequence_", ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])


class PackedSequence(_PackedSequenceBase):
    """A batch of variable-length sequences, packed (``torch.nn.utils.rnn.PackedSequence``,
    a named tuple of four fields). Made by :func:`pack_padded_sequence` or
    :func:`pack_sequence`, taken and returned by :class:`~autodiff.nn.RNN`,
    :class:`~autodiff.nn.LSTM` and :class:`~autodiff.nn.GRU`, undone by
    :func:`pad_packed_sequence`.

    Fields:
        data: ``[sum(lengths), *]``: step ``t`` of the ``B`` sequences sorted by decreasing
            length, for ``t = 0, 1, ...``, the sequences still running at ``t`` (the first
            ``batch_sizes[t]`` of them). Any dtype; a traced tensor.
        batch_sizes: int64 ``[max(lengths)]``: how many sequences have a step ``t``. Its
            values must be known while tracing (it holds host data).
        sorted_indices: int64 ``[B]`` or None (the batch was already sorted): packed
            column ``b`` is original sequence ``sorted_indices[b]``.
        unsorted_indices: int64 ``[B]`` or None: its inverse (computed from
            ``sorted_indices`` when not given).

    ``PackedSequence(data, batch_sizes, sorted_indices=None, unsorted_indices=None)`` or
    ``PackedSequence((data, batch_sizes), sorted_indices=...)`` as PyTorch; the index
    fields may be given as lists or numpy arrays (stored as int64 tensors).

    Raises:
        AssertionError: ``batch_sizes`` omitted and ``data`` not a ``(data, batch_sizes)``
            pair (PyTorch's check).
    """

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if batch_sizes is None:
            if not (isinstance(data, (list, tuple)) and len(data) == 2):
                raise AssertionError("PackedSequence: without batch_sizes, data must be a "
                                     "(data, batch_sizes) pair")
            data, batch_sizes = data
        if isinstance(data, np.ndarray):
            data = Tensor(data)
        batch_sizes = _index_tensor(batch_sizes, "PackedSequence", "batch_sizes")
        if sorted_indices is not None:
            sorted_indices = _index_tensor(sorted_indices, "PackedSequence",
                                           "sorted_indices")
        if unsorted_indices is None:
            unsorted_indices = invert_permutation(sorted_indices)
        else:
            unsorted_indices = _index_tensor(unsorted_indices, "PackedSequence",
                                             "unsorted_indices")
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs) -> "PackedSequence":
        """``data.to(...)`` (a dtype: a cast; a device: ignored, as :meth:`Tensor.to`);
        ``self`` when that is ``data`` itself, as PyTorch."""
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        return _with_data(self, data)

    def cpu(self) -> "PackedSequence":
        """``self``: where a program runs is :func:`autodiff.execute`'s ``device``."""
        return self

    def cuda(self, *args, **kwargs) -> "PackedSequence":
        """``self`` (see :meth:`cpu`)."""
        return self

    def float(self) -> "PackedSequence":
        return self.to("float32")

    def half(self) -> "PackedSequence":
        return self.to("float16")

    def bfloat16(self) -> "PackedSequence":
        return self.to("bfloat16")


def _with_data(ps: PackedSequence, data) -> PackedSequence:
    """``ps`` with other ``data`` (same layout)."""
    out = PackedSequence(data, ps.batch_sizes, ps.sorted_indices, ps.unsorted_indices)
    if "_layout" in ps.__dict__:
        out.__dict__["_layout"] = ps.__dict__["_layout"]
    return out


def _layout(ps: PackedSequence, op: str):
    """``(batch_sizes, sorted_indices, unsorted_indices)`` of ``ps`` as host int64 arrays
    (the indices None when absent), checked against ``data``.

    Raises:
        TracedValueError: a field is a traced tensor.
        RuntimeError: batch sizes that are not a non-increasing run of positive ints, or
            that do not add up to ``data``'s rows; indices that are no permutation of the
            batch.
    """
    key = (id(ps.batch_sizes), id(ps.sorted_indices), id(ps.unsorted_indices))
    cached = ps.__dict__.get("_layout")
    if cached is not None and cached[0] == key:
        return cached[1]
    sizes = _host_ints(ps.batch_sizes, op, "batch_sizes").reshape(-1)
    if not len(sizes) or sizes[-1] <= 0 or (np.diff(sizes) > 0).any():
        raise RuntimeError(f"{op}: batch_sizes must be a non-empty, non-increasing sequence "
                           f"of positive ints, got {sizes.tolist()}")
    rows = ps.data.shape[0] if getattr(ps.data, "ndim", 0) else None
    if rows != int(sizes.sum()):
        raise RuntimeError(f"{op}: the packed data has {rows} rows, batch_sizes "
                           f"{sizes.tolist()} add up to {int(sizes.sum())}")
    perms = []
    for name in ("sorted_indices", "unsorted_indices"):
        v = getattr(ps, name)
        if v is None:
            perms.append(None)
            continue
        p = _host_ints(v, op, name).reshape(-1)
        if sorted(p.tolist()) != list(range(int(sizes[0]))):
            raise RuntimeError(f"{op}: {name} {p.tolist()} is not a permutation of the "
                               f"batch of {int(sizes[0])}")
        perms.append(p)
    srt, uns = perms
    if uns is None and srt is not None:
        uns = _inverse(srt)
    if srt is None and uns is not None:
        srt = _inverse(uns)
    out = (sizes, srt, uns)
    ps.__dict__["_layout"] = (key, out)
    return out


def _batch_sizes(lengths: np.ndarray) -> np.ndarray:
    """``batch_sizes[t]``: how many of ``lengths`` exceed ``t``."""
    return (lengths[None, :] > np.arange(int(lengths.max()))[:, None]).sum(1).astype(np.int64)


def _packed_rows(sizes: np.ndarray, n: int, steps: int, cols=None,
                 batch_first: bool = False) -> np.ndarray:
    """For each packed row (step ``t``, sorted column ``b``), its row in a padded
    ``[steps, n]`` (``[n, steps]`` with ``batch_first``) batch flattened over the two
    leading dims; sorted column ``b`` is padded column ``cols[b]`` (``b`` if None)."""
    out = []
    for t, bs in enumerate(sizes):
        b = np.arange(int(bs))
        c = b if cols is None else cols[b]
        out.append(c * steps + t if batch_first else t * n + c)
    return np.concatenate(out).astype(np.int32)


def _gather_rows(x: Tensor, rows: np.ndarray) -> Tensor:
    """``x [N, *]`` at ``rows`` (one ``GATHER`` with constant indices; ``x`` itself when
    ``rows`` is ``0 .. N-1``)."""
    if len(rows) == x.shape[0] and np.array_equal(rows, np.arange(len(rows))):
        return x
    return x.index_select(0, Tensor._const(rows))


def pack_padded_sequence(input: Tensor, lengths, batch_first: bool = False,
                         enforce_sorted: bool = True) -> PackedSequence:
    """Pack a padded batch of variable-length sequences
    (``torch.nn.utils.rnn.pack_padded_sequence``).

    Args:
        input: ``[T, B, *]`` (``[B, T, *]`` with ``batch_first``), any dtype, traced or not;
            sequence ``b`` is its first ``lengths[b]`` steps.
        lengths: ``B`` lengths in ``[1, T]``: Python ints, a list, a numpy array, a torch
            tensor or an autodiff tensor whose value is known while tracing (host data);
            floats are truncated, as PyTorch's ``as_tensor(..., dtype=int64)``.
        batch_first: the layout of ``input``.
        enforce_sorted: ``lengths`` must be in decreasing order (``sorted_indices`` None);
            False: the batch is sorted here (``torch.sort(descending=True)``'s order,
            ties included) and ``sorted_indices`` / ``unsorted_indices`` record it.

    Returns:
        A :class:`PackedSequence` whose ``data`` ``[sum(lengths), *]`` (the dtype of
        ``input``) is one gather of ``input`` (gradients flow back to the valid steps).

    Raises:
        TracedValueError: (a ``TypeError``) ``lengths`` is a traced tensor; the message
            gives the fixed-shape alternative (a mask of the valid steps).
        IndexError: ``input`` has fewer than 2 dims.
        RuntimeError: as PyTorch: ``lengths`` not 1-D, an empty ``input``, not ``B``
            lengths, a length ``<= 0``, lengths not sorted with ``enforce_sorted``; also
            a length above ``T`` (PyTorch reads past the input there).
    """
    op, site = "pack_padded_sequence", user_site()
    lengths = _host_ints(lengths, op, "lengths")
    if lengths.ndim != 1:
        raise RuntimeError(f"'lengths' argument should be a 1D CPU int64 tensor, but got "
                           f"{lengths.ndim}D cpu Long tensor")
    x = input if isinstance(input, Tensor) else Tensor(input)
    if x.ndim < 2:
        n = max(x.ndim, 1)
        raise DimError(op, [x.shape], site, f"Dimension out of range (expected to be in "
                                            f"range of [{-n}, {n - 1}], but got 1)")
    order = None
    if not enforce_sorted:
        order = _sort_descending(lengths)
        lengths = lengths[order]
    steps, n = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
    if x.numel() == 0:
        raise RuntimeError("Cannot pack empty tensors.")
    if len(lengths) != n:
        raise RuntimeError(f"Expected `len(lengths)` to be equal to batch_size, but got "
                           f"{len(lengths)} (batch_size={n})")
    if lengths[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    if (np.diff(lengths) > 0).any():
        raise RuntimeError("`lengths` array must be sorted in decreasing order when "
                           "`enforce_sorted` is True. You can pass `enforce_sorted=False` "
                           "to pack_padded_sequence and/or pack_sequence to sidestep this "
                           "requirement if you do not need ONNX exportability.")
    if lengths[0] > steps:
        raise RuntimeError(f"{op}: a length of {int(lengths[0])} exceeds the "
                           f"{steps} steps of the padded input of shape {list(x.shape)}")
    sizes = _batch_sizes(lengths)
    rows = _packed_rows(sizes, n, steps, order, batch_first)
    data = _gather_rows(x.reshape(-1, *x.shape[2:]), rows)
    out = PackedSequence(data, sizes, order, None)
    out.__dict__["_layout"] = ((id(out.batch_sizes), id(out.sorted_indices),
                                id(out.unsorted_indices)), (sizes, order, _inverse(order)))
    return out


def _padded_rows(sizes: np.ndarray, steps: int, cols: np.ndarray | None):
    """``(rows, valid)`` ``[steps, B]``: the packed row of padded step ``t`` of column
    ``j`` (sorted column ``cols[j]``), 0 where the sequence has ended (``valid`` False)."""
    n = int(sizes[0])
    lens = (sizes[None, :] > np.arange(n)[:, None]).sum(1)           # sorted lengths
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    b = np.arange(n) if cols is None else cols
    t = np.arange(steps)[:, None]
    valid = t < lens[b][None, :]
    rows = np.where(valid, offsets[np.minimum(t, len(sizes) - 1)] + b[None, :], 0)
    return rows.astype(np.int32), valid, lens


def pad_packed_sequence(sequence: PackedSequence, batch_first: bool = False,
                        padding_value: float = 0.0, total_length: int | None = None):
    """The inverse of :func:`pack_padded_sequence`
    (``torch.nn.utils.rnn.pad_packed_sequence``): the sequences padded to one length, in
    their original batch order.

    Args:
        sequence: a :class:`PackedSequence`.
        batch_first: return ``[B, T, *]`` instead of ``[T, B, *]``.
        padding_value: the value of the padded steps (cast to ``data``'s dtype).
        total_length: pad to this many steps (at least the longest length), else ``T`` is
            the longest length.

    Returns:
        ``(padded, lengths)``: ``padded`` ``[T, B, *]`` in ``data``'s dtype (one gather of
        ``data``, gradients flow back to it); ``lengths`` int64 ``[B]``, host data.

    Raises:
        ValueError: ``total_length`` below the longest length (PyTorch's message).
        TracedValueError: a field of ``sequence`` other than ``data`` is a traced tensor.
        RuntimeError: fields that do not fit together (see :class:`PackedSequence`).
    """
    op = "pad_packed_sequence"
    sizes, _, uns = _layout(sequence, op)
    steps = len(sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError("Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and "
                             f"max sequence length being {steps}")
        steps = int(total_length)
    rows, valid, lens = _padded_rows(sizes, steps, uns)
    if batch_first:
        rows, valid = rows.T, valid.T
    data = sequence.data
    rest = tuple(data.shape[1:])
    out = _gather_rows(data, rows.reshape(-1)).reshape(*rows.shape, *rest)
    if not valid.all():
        mask = Tensor._const(~valid.reshape(valid.shape + (1,) * len(rest)))
        out = out.masked_fill(mask, padding_value)
    return out, Tensor(lens[uns] if uns is not None else lens, dtype="int64")


def pack_sequence(sequences, enforce_sorted: bool = True) -> PackedSequence:
    """Pack a list of variable-length sequences (``torch.nn.utils.rnn.pack_sequence``):
    ``pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=...)``.

    Args:
        sequences: tensors ``[L_i, *]`` (same trailing dims and dtype), ``L_i >= 1``; in
            decreasing order of length with ``enforce_sorted``.
        enforce_sorted: as :func:`pack_padded_sequence`.

    Returns:
        A :class:`PackedSequence`.

    Raises:
        RuntimeError: no sequences, trailing dims that differ, an empty sequence, or
            (``enforce_sorted``) lengths not in decreasing order (PyTorch's messages).
    """
    seqs = list(sequences)
    lengths = [s.shape[0] for s in seqs]
    return pack_padded_sequence(pad_sequence(seqs), lengths, enforce_sorted=enforce_sorted)


def unpack_sequence(packed_sequences: PackedSequence) -> list:
    """The sequences of a :class:`PackedSequence` in their original order, as tensors
    ``[L_i, *]`` (``torch.nn.utils.rnn.unpack_sequence``)."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)
