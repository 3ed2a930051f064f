"""Receiver rings: a light loop's Receiver values handed to the host a ring at a time.

A Receiver inside an ``ir_for`` loop reads its values back every iteration, and on PoCL a
read command costs 6-8 us -- as long as a small model's whole step on one core (W1: 60 us).
In a loop body of kernels and Receivers only (no Feeder can be waiting on a value) and of
little work, each Receiver instead gets a *ring* in the arena's constants region: one
counter word, then :data:`~.runtime.RECEIVER_RING` slots of its values
(:data:`~.runtime.RING` in a body with Feeders through rings, below). A one-point kernel body
(:func:`copy_body`) copies the iteration's values into the slot the counter names and
advances it; it runs in the iteration's launch chain, which the Receiver therefore no
longer breaks. The host step (:class:`~.runtime.RingReceive`) reads the whole ring once per
ring of iterations (or when a value is needed sooner) and calls the Receiver
for each iteration in order. The constants region is rewritten at each run's start, so the
counter starts at 0 with the host's count.

Feeders get rings the same way where the run lets them (``prefetch`` of at least
``2 RING - 1``, so that every Receiver value the order rule waits for was read with a ring
at least a block earlier): the host writes each iteration's value into the next slot of
the Feeder's ring (:class:`~.runtime.RingFeed`, a host step moved to the front of the
body), and a one-point body (:func:`copy_body`) at the Feeder's place in the chain
copies the slot into the Feeder's buffer. With every Feeder and Receiver of a loop body on
rings and its kernels in one chain, nothing separates two iterations on the device: the
loop runs in blocks of up to a ring of iterations per launch (:attr:`~.runtime.Loop.block`).
"""
from __future__ import annotations

import math

import numpy as np

from ...graph.dtypes import storage
from ...procedural.ir import FeederWrite, Gather, Kernel, ReceiverRead, ScatterAdd
from ..cstyle.dialect import body_name
from ..cstyle.kernels import Source
from . import chain
from .runtime import RING, RingFeed, RingReceive

#: most 4-byte words of a Receiver's values that a ring holds per slot
WORDS = 1024

#: most work (:func:`.chain.work`, flop-equivalents) of a loop body whose Receivers and
#: Feeders go through rings: a ring delays each value by up to :data:`~.runtime.RING`
#: iterations, and a read or write per iteration (6-8 us on PoCL) only matters for steps
#: below a millisecond or so (W4, an MLP step of 30 MFLOP, is 0.3 ms)
WORK = 1 << 26

#: most 4-byte words of a Feeder's value that a ring holds per slot
FEED_WORDS = 1 << 15


def eligible(body, feeders: bool = False) -> bool:
    """Whether the Receivers (and with ``feeders``, the Feeders) of ``For`` body ``body``
    go through rings: it holds only kernels without an index check (no error record to
    read with each value), Receivers and, with ``feeders``, Feeders; no host functions,
    branches or nested loops, and at most :data:`WORK` of work. Without ``feeders`` a
    Feeder rules rings out (the order rule may need a Receiver's value before the next
    Feeder call: rings keep up only with ``prefetch >= 2 RING - 1``)."""
    ok = (ReceiverRead, FeederWrite) if feeders else (ReceiverRead,)
    return all(isinstance(x, ok) or
               (isinstance(x, Kernel) and not isinstance(x, (Gather, ScatterAdd)))
               for x in body) and any(isinstance(x, ok) for x in body) and \
        chain.body_work(body) <= WORK


def parts(s: ReceiverRead, off) -> list | None:
    """[(word offset, words)] of Receiver ``s``'s values in the arena (``off``: word
    offsets by buffer name) when they fit a ring slot (4-byte values, at most
    :data:`WORDS` in all), else None."""
    out = [(off[b.name], math.prod(b.shape)) for b in s.buffers]
    if any(np.dtype(storage(b.dtype)).itemsize != 4 for b in s.buffers) or \
            not 0 < sum(n for _, n in out) <= WORDS:
        return None
    return out


def copy_body(name: str, parts: list[tuple[int, int]], ring: int, slots: int,
              into_slot: bool = True) -> Source:
    """A one-point kernel body copying between the arena -- ``parts`` = [(word offset,
    words)], 4-byte values -- and the current slot of the ring at word ``ring`` (a
    counter word, the slot to use next, advanced here, then ``slots`` slots of the parts'
    words each): into the slot (a Receiver's values, ``into_slot``) or out of it into the
    parts (a Feeder's value)."""
    stride = sum(n for _, n in parts)
    L = [f"static inline void {body_name(name)}(__global float* restrict buf, const int g0, "
         "const int g1, const int g2) {",
         "  __global int* w = (__global int*)buf;",
         f"  const int slot = w[{ring}];",
         f"  __global int* slot_ = w + {ring + 1} + slot*{stride};"]
    at = 0
    for o, n in parts:
        a, b = (f"slot_ + {at}", f"w + {o}") if into_slot else (f"w + {o}", f"slot_ + {at}")
        L.append(_copy(n, a, b))
        at += n
    L += [f"  w[{ring}] = slot + 1 == {slots} ? 0 : slot + 1;", "}"]
    return Source(name, "\n".join(L), (1,), (1,))


def _copy(words: int, dst: str, src: str) -> str:
    """C copying ``words`` ints from ``src`` to ``dst`` (int pointer expressions): in
    vectors of the widest of 16, 4 lanes that divides them (vload/vstore need no
    alignment), as floats (the preamble's vector accesses are float ones: a load and a
    store move the bits unchanged, NaN payloads included)."""
    w = next(v for v in (16, 4, 1) if words % v == 0)
    if w == 1:
        return f"  for (int i = 0; i < {words}; i++) ({dst})[i] = ({src})[i];"
    return (f"  for (int i = 0; i < {words // w}; i++) vstore{w}(vload{w}(i, "
            f"(__global const float*)({src})), i, (__global float*)({dst}));")


def receiver(s: ReceiverRead, parts: list, kernels,
             slots: int = RING) -> tuple[Source, RingReceive]:
    """Receiver ``s`` through a ring of ``slots`` slots in the constants region of
    ``kernels`` (the device's ``_Kernels``, which names and holds the copy body): the copy
    body, to launch in the chain of the iteration, and the host step."""
    stride = sum(n for _, n in parts)
    at = kernels.reserve(1 + slots * stride)
    src = copy_body(kernels.name("ring"), parts, at, slots)
    kernels.bodies.append(src)
    starts = np.cumsum([0] + [n for _, n in parts])[:-1]
    step = RingReceive(s.spec, [(int(a) * 4, tuple(b.shape), storage(b.dtype))
                                for a, b in zip(starts, s.buffers)],
                       (at + 1) * 4, slots, stride * 4)
    return src, step


def feeder(s: FeederWrite, off, kernels) -> tuple[Source, RingFeed] | None:
    """Feeder ``s`` through a ring in the constants region of ``kernels`` (a counter word,
    then :data:`~.runtime.RING` slots of its value): the one-point body copying the slot
    the counter names into the Feeder's buffer (to launch in the iteration's chain, where
    the Feeder is), and the host step writing each iteration's value into the next slot.
    None for a value that is not 4-byte words or is over :data:`FEED_WORDS`."""
    b = s.buffer
    words = math.prod(b.shape)
    if np.dtype(storage(b.dtype)).itemsize != 4 or not 0 < words <= FEED_WORDS:
        return None
    at = kernels.reserve(1 + RING * words)
    dst = off[b.name]
    src = copy_body(kernels.name("feed"), [(dst, words)], at, RING, into_slot=False)
    kernels.bodies.append(src)
    return src, RingFeed(s.spec, dst * 4, tuple(b.shape), storage(b.dtype),
                         ring=(at + 1) * 4, slots=RING, stride=words * 4)
