"""Counter-based random numbers for ``Op.RAND``: Philox-4x32-10 (Salmon et al., SC 2011).

A counter-based generator is a pure function ``(key, counter) -> bits``: no state is carried
from one draw to the next, so every device (numpy, OpenCL, ...) computes the same numbers
for the same element of the same loop iteration, in any order and in parallel. This module
is the reference every device is checked against; a device kernel ports
:func:`philox4x32` and the counter layout of :func:`philox_uniform` word for word.

Layout of one ``RAND`` node's draw (``arg = (seed, stream)``, loop indices ``iters``,
outermost first, element ``e`` in row-major order of the node's shape):

* key ``(k0, k1) = (seed mod 2**32, stream mod 2**32)``;
* counter ``(c0, c1, c2, c3)`` with ``c0, c1`` = low and high words of ``e // 4``,
  ``c2 = iters[0]``, ``c3 = sum(iters[k] * 0x9E3779B1**(k-1) for k >= 1) mod 2**32``
  (exact for up to two nested loops; zeros outside loops);
* element ``e`` takes output word ``e % 4`` of that block, and becomes
  ``(word >> 8) * 2**-24``: a float32 in ``[0, 1 - 2**-24]``, exactly representable.
"""
from __future__ import annotations

import numpy as np

M0, M1 = 0xD2511F53, 0xCD9E8D57          # Philox multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85          # Weyl key increments (golden ratio, sqrt(3) - 1)
FOLD = 0x9E3779B1                        # folds loop indices beyond the second into c3
ROUNDS = 10
_MASK = np.uint64(0xFFFFFFFF)


def philox4x32(counter, key, rounds: int = ROUNDS) -> np.ndarray:
    """Philox-4x32 with ``rounds`` rounds on a batch of counters.

    Parameters
    ----------
    counter : array-like of uint32, shape ``[4, n]`` (or ``[4]``)
        Counter words ``c0..c3`` per block.
    key : pair of ints
        Key words ``k0, k1`` (taken mod ``2**32``).
    rounds : int
        Number of rounds (10 is the standard, crush-resistant choice).

    Returns
    -------
    np.ndarray
        uint32 of the counter's shape: four output words per block.
    """
    c = np.asarray(counter, dtype=np.uint64)
    c0, c1, c2, c3 = c[0], c[1], c[2], c[3]
    k0, k1 = np.uint64(int(key[0]) & 0xFFFFFFFF), np.uint64(int(key[1]) & 0xFFFFFFFF)
    m0, m1, w0, w1 = np.uint64(M0), np.uint64(M1), np.uint64(W0), np.uint64(W1)
    s32 = np.uint64(32)
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + w0) & _MASK, (k1 + w1) & _MASK
        p0, p1 = m0 * c0, m1 * c2        # 32 x 32 -> 64 bits, exact in uint64
        c0, c1, c2, c3 = ((p1 >> s32) ^ c1 ^ k0, p1 & _MASK,
                          (p0 >> s32) ^ c3 ^ k1, p0 & _MASK)
    return np.stack([c0, c1, c2, c3]).astype(np.uint32)


def iteration_words(iters) -> tuple[int, int]:
    """Counter words ``(c2, c3)`` for loop indices ``iters`` (outermost first)."""
    iters = [int(i) for i in iters]
    if not iters:
        return 0, 0
    c3, mul = 0, 1
    for i in iters[1:]:
        c3 = (c3 + i * mul) & 0xFFFFFFFF
        mul = (mul * FOLD) & 0xFFFFFFFF
    return iters[0] & 0xFFFFFFFF, c3


def philox_uniform(seed: int, stream: int, iters, shape) -> np.ndarray:
    """The value of an ``Op.RAND`` node: float32 uniform in ``[0, 1)``.

    Parameters
    ----------
    seed, stream : int
        The node's ``arg``; the Philox key.
    iters : sequence of int
        Current loop indices, outermost first (``()`` outside loops).
    shape : tuple of int
        The node's shape.

    Returns
    -------
    np.ndarray
        float32 array of ``shape``; a pure function of the arguments (same on every device).
    """
    shape = tuple(int(d) for d in shape)
    n = int(np.prod(shape, dtype=np.int64))
    blocks = np.arange((n + 3) // 4, dtype=np.uint64)
    c2, c3 = iteration_words(iters)
    counter = np.stack([blocks & _MASK, blocks >> np.uint64(32),
                        np.full_like(blocks, c2), np.full_like(blocks, c3)])
    words = philox4x32(counter, (seed, stream)).T.reshape(-1)[:n]   # element e: block e//4
    return ((words >> np.uint32(8)).astype(np.float32) * np.float32(2.0 ** -24)).reshape(shape)
