"""``Op.RAND`` as tensor expressions: Philox-4x32-10 ported from :mod:`autodiff.graph.rng`.

The counter layout is the reference's word for word: block ``b = e // 4`` of element ``e``
has counter ``(b mod 2**32, b >> 32, c2, c3)`` where ``(c2, c3)`` are the loop-index words
(:func:`autodiff.graph.rng.iteration_words`), which the host passes each call as a
``uint32[2]`` tensor. Each of the ten rounds is one ``te.compute`` stage over
``[blocks, 4]`` words; 32 x 32 -> 64-bit products are taken in ``uint64``.
"""
from __future__ import annotations

import numpy as np
from tvm import te, tirx

from ...graph.rng import M0, M1, ROUNDS, W0, W1

U32, U64 = "uint32", "uint64"
MASK = 0xFFFFFFFF


def _u32(v: int):
    return tirx.const(v & MASK, U32)


def _pick(w, words):
    """``words[w]`` for a symbolic word index ``w`` in ``0..3``."""
    return tirx.Select(w == 0, words[0], tirx.Select(w == 1, words[1], tirx.Select(
        w == 2, words[2], words[3])))


def _round(prev, k0: int, k1: int, r: int):
    def word(b, w):
        c0, c1, c2, c3 = (prev[b, j] for j in range(4))
        p0 = c0.astype(U64) * tirx.const(M0, U64)
        p1 = c2.astype(U64) * tirx.const(M1, U64)
        s32 = tirx.const(32, U64)
        return _pick(w, [(p1 >> s32).astype(U32) ^ c1 ^ _u32(k0), p1.astype(U32),
                         (p0 >> s32).astype(U32) ^ c3 ^ _u32(k1), p0.astype(U32)])
    return te.compute(prev.shape, word, name=f"philox_round{r}")


def philox_te(seed: int, stream: int, iters: te.Tensor, shape) -> te.Tensor:
    """float32 uniform ``[0, 1)`` of ``shape``, equal to :func:`~autodiff.graph.rng.philox_uniform`.

    Parameters
    ----------
    seed, stream : int
        The ``RAND`` node's ``arg`` (the Philox key).
    iters : te.Tensor
        ``uint32[2]``: the loop-index counter words ``(c2, c3)``.
    shape : tuple of int
        Output shape.

    Returns
    -------
    te.Tensor
        float32 tensor of ``shape``.
    """
    shape = tuple(int(d) for d in shape)
    n = int(np.prod(shape, dtype=np.int64))
    blocks = max((n + 3) // 4, 1)
    state = te.compute((blocks, 4), lambda b, w: _pick(w, [
        b.astype(U32), _u32(0), iters[0], iters[1]]), name="philox_counter")
    k0, k1 = seed & MASK, stream & MASK
    for r in range(ROUNDS):
        if r:
            k0, k1 = (k0 + W0) & MASK, (k1 + W1) & MASK
        state = _round(state, k0, k1, r)
    strides = [int(np.prod(shape[i + 1:], dtype=np.int64)) for i in range(len(shape))]

    def value(*i):
        e = sum((j * s for j, s in zip(i, strides)), tirx.const(0, "int64"))
        word = state[e // 4, e % 4]
        return (word >> _u32(8)).astype("float32") * tirx.const(2.0 ** -24, "float32")
    return te.compute(shape, value, name="rand")
