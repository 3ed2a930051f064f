"""``pad_sequence`` / ``unpad_sequence``, as ``torch.nn.utils.rnn``.

Sequence lengths are shapes, so they are known when the program is traced: padding and
unpadding are static slices and concatenations of the traced values (gradients flow to
the sequences; the padding gets none).

``PackedSequence`` (``pack_sequence``, ``pack_padded_sequence``, ``pad_packed_sequence``)
is not provided: the recurrent modules of :mod:`autodiff.nn.rnn` run every sequence of a
batch over the whole time axis (one ``scan``) and do not take a ``PackedSequence``.
"""
from __future__ import annotations

import numpy as np

from ...graph.tensor import Tensor, concat, stack

__all__ = ["pad_sequence", "unpad_sequence"]


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
    if isinstance(lengths, Tensor):
        lengths = lengths._host_value("unpad_sequence lengths",
                                      "pass the lengths as a list of ints")
    elif hasattr(lengths, "detach") and hasattr(lengths, "numpy"):       # a torch tensor
        lengths = lengths.detach().cpu().numpy()
    return [int(v) for v in np.asarray(lengths).reshape(-1)]


def unpad_sequence(padded_sequences: Tensor, lengths, batch_first: bool = False) -> list:
    """The inverse of :func:`pad_sequence` (right padding): the first ``lengths[i]`` steps
    of each sequence, as ``torch.nn.utils.rnn.unpad_sequence``.

    Args:
        padded_sequences: ``[T, B, *]`` (or ``[B, T, *]`` with ``batch_first``).
        lengths: ``B`` lengths, each in ``[0, T]``: a list of ints, a numpy array, a torch
            tensor or an autodiff tensor whose value is known when tracing (a variable
            outside an ``ir_for`` body); a length is a shape, so it cannot be a traced
            value.

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
