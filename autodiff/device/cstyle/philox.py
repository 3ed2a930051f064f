"""Philox-4x32-10 on C-style devices: the device side of ``Op.RAND`` (procedural
:class:`Rand`): where the counter words live in the arena and the C call a random draw
renders to.

Each device's program defines ``_ad_rand`` and the kernel :data:`SET_KERNEL` as a
word-for-word port of :func:`autodiff.graph.rng.philox4x32` and the counter layout of
:func:`autodiff.graph.rng.philox_uniform` (OpenCL C:
:data:`autodiff.device.opencl.render.PHILOX`; CUDA: :func:`autodiff.device.cuda.prelude.philox`),
so that a dropout mask drawn on either device is bit-identical to the numpy reference:

* key ``(k0, k1) = (seed mod 2**32, stream mod 2**32)``, literals in the kernel;
* counter ``(e >> 2, 0, c2, c3)`` for flat element ``e`` (node sizes below ``2**31``, so
  the high word of ``e // 4`` is 0); ``(c2, c3)`` are the *iteration words* of the
  enclosing loops (:func:`autodiff.graph.rng.iteration_words`), which the host writes into
  the arena at :data:`ITER_WORDS` (two uint32 bit patterns) with :data:`SET_KERNEL` before
  the first launch that reads them in a new iteration;
* element ``e`` takes word ``e & 3`` of its block: ``(word >> 8) * 2**-24`` is exact in
  float32, so both devices produce the same bits.

The 32x32 -> 64 bit products of a round are ``mul_hi`` (high word) and the wrapping
``uint`` product (low word).
"""
from __future__ import annotations

from .kernels import SLACK

#: float offset in the arena of the iteration words ``c2, c3`` (just after the error flag,
#: inside the 16 floats the layout reserves for it)
ITER_WORDS = SLACK + 1

#: name of the kernel that writes the iteration words
SET_KERNEL = "_ad_set_iteration_words"

#: the C call every Rand renders to contains this (marks a kernel that reads the words)
CALL = "_ad_rand("


def call(key, index: str) -> str:
    """C expression of element ``index`` (a C int expression) of a RAND node with ``key``
    ``(seed, stream)``: a float in ``[0, 1 - 2**-24]``."""
    seed, stream = key
    return f"_ad_rand({int(seed) & 0xFFFFFFFF:#x}u, {int(stream) & 0xFFFFFFFF:#x}u, " \
           f"{index}, buf)"


def uses_iteration_words(src: str) -> bool:
    """Whether a kernel's source draws random numbers (and so reads the iteration words)."""
    return CALL in src
