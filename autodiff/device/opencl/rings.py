"""Receiver rings: a light loop's Receiver values handed to the host 8 iterations at a time.

A Receiver inside an ``ir_for`` loop reads its values back every iteration, and on PoCL a
read command costs 6-8 us -- as long as a small model's whole step on one core (W1: 60 us).
In a loop body of kernels and Receivers only (no Feeder can be waiting on a value) and of
little work, each Receiver instead gets a *ring* in the arena's constants region: one
counter word, then :data:`~.runtime.RING` slots of its values. A one-point kernel body
(:func:`copy_body`) copies the iteration's values into the slot the counter names and
advances it; it runs in the iteration's launch chain, which the Receiver therefore no
longer breaks. The host step (:class:`~.runtime.RingReceive`) reads the whole ring once per
:data:`~.runtime.RING` iterations (or when a value is needed sooner) and calls the Receiver
for each iteration in order. The constants region is rewritten at each run's start, so the
counter starts at 0 with the host's count.
"""
from __future__ import annotations

import math

import numpy as np

from ...graph.dtypes import storage
from ...procedural.ir import Gather, Kernel, ReceiverRead, ScatterAdd
from ..cstyle.dialect import body_name
from ..cstyle.kernels import Source
from . import chain
from .runtime import RING, RingReceive

#: most 4-byte words of a Receiver's values that a ring holds per slot
WORDS = 1024

#: most work (:func:`.chain.work`, flop-equivalents) of a loop body whose Receivers go
#: through rings: a ring delays each value by up to :data:`~.runtime.RING` iterations, a
#: read per iteration (6-8 us on PoCL) only matters for steps well below a millisecond
WORK = 1 << 24


def eligible(body) -> bool:
    """Whether the Receivers of ``For`` body ``body`` go through rings: it holds only
    kernels without an index check (no error record to read with each value) and
    Receivers, no Feeders (whose order rule needs each value before later calls), host
    functions, branches or nested loops, and at most :data:`WORK` of work."""
    return all(isinstance(x, ReceiverRead) or
               (isinstance(x, Kernel) and not isinstance(x, (Gather, ScatterAdd)))
               for x in body) and any(isinstance(x, ReceiverRead) for x in body) and \
        sum(chain.work(x) for x in body if isinstance(x, Kernel)) <= WORK


def parts(s: ReceiverRead, off) -> list | None:
    """[(word offset, words)] of Receiver ``s``'s values in the arena (``off``: word
    offsets by buffer name) when they fit a ring slot (4-byte values, at most
    :data:`WORDS` in all), else None."""
    out = [(off[b.name], math.prod(b.shape)) for b in s.buffers]
    if any(np.dtype(storage(b.dtype)).itemsize != 4 for b in s.buffers) or \
            not 0 < sum(n for _, n in out) <= WORDS:
        return None
    return out


def copy_body(name: str, parts: list[tuple[int, int]], ring: int, slots: int) -> Source:
    """A one-point kernel body copying a Receiver's values -- ``parts`` = [(word offset,
    words)] of the arena, 4-byte values -- into the next slot of the ring at word
    ``ring``: a counter word (the slot to write next, advanced here), then ``slots`` slots
    of the parts' words each."""
    stride = sum(n for _, n in parts)
    L = [f"static inline void {body_name(name)}(__global float* restrict buf, const int g0, "
         "const int g1, const int g2) {",
         "  __global int* w = (__global int*)buf;",
         f"  const int slot = w[{ring}];",
         f"  __global int* dst = w + {ring + 1} + slot*{stride};"]
    at = 0
    for o, n in parts:
        L.append(f"  for (int i = 0; i < {n}; i++) dst[{at} + i] = w[{o} + i];")
        at += n
    L += [f"  w[{ring}] = slot + 1 == {slots} ? 0 : slot + 1;", "}"]
    return Source(name, "\n".join(L), (1,), (1,))


def receiver(s: ReceiverRead, parts: list, kernels) -> tuple[Source, RingReceive]:
    """Receiver ``s`` through a ring in the constants region of ``kernels`` (the device's
    ``_Kernels``, which names and holds the copy body): the copy body, to launch in the
    chain of the iteration, and the host step."""
    stride = sum(n for _, n in parts)
    at = kernels.reserve(1 + RING * stride)
    src = copy_body(kernels.name("ring"), parts, at, RING)
    kernels.bodies.append(src)
    starts = np.cumsum([0] + [n for _, n in parts])[:-1]
    step = RingReceive(s.spec, [(int(a) * 4, tuple(b.shape), storage(b.dtype))
                                for a, b in zip(starts, s.buffers)],
                       (at + 1) * 4, RING, stride * 4)
    return src, step
