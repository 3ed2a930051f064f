"""Tiered compilation: a loop body's team chains, compiled in the background and swapped in
between two iterations.

A team chain (:func:`.chain.team`) runs a heavy loop body in one launch instead of
hundreds, but PoCL compiles a kernel together with every function it calls, on one core:
the few large team kernels of a training step cannot be compiled in parallel the way the
many dispatch kernels of its one-by-one launches are (the main job, W5, from an empty
cache: 2.8 s to its first iteration with dispatch kernels, 4.5-4.8 s with team chains;
BENCHMARKS.md). So the device's compile builds both:

1. **tier 1**, the program as launched one by one (and its pre-JIT, :mod:`.prejit`): the
   first iteration starts as soon as it does today;
2. **tier 2**, the team chains of each eligible loop body (:func:`plan`), in a program of
   their own that a :mod:`.prejit` helper process builds and compiles while the loop runs
   (:meth:`Tier.start`); between two iterations, once the helper is done, this process
   builds the same program (a hit in PoCL's cache), makes the team launches' kernels and
   swaps the loop's body (:meth:`Tier.swap`). On a warm cache the helper is done after a
   few iterations.

The swap changes no value: a team chain runs the same kernel bodies in the same order over
the same work-groups, so the parameters are bit-identical either way (tested). The same
idea as a tiered JIT (a baseline tier first, the optimised code swapped in at a safe point:
the JVM's or V8's on-stack replacement), at the granularity of loop iterations.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from . import prejit
from .runtime import Launch, Loop, _blocks


#: a loop with more than this many seconds still to run (estimated from its first
#: :data:`ESTIMATE_AT` iterations) has the second tier compiled while it runs; a shorter
#: one runs tier 1 to its end, and the compile happens after the run, in the background
#: (niceness :data:`NICE`), for the next run of the program. A compile beside the loop takes
#: a core from it: the main job, compiled cold, ran its first 190 of 300 steps at 35 ms
#: instead of 24 before the swap (at niceness 19 it never finished in 300 steps and still
#: cost 8%); team chains save 2-4 ms a step.
BACKGROUND_S = 20.0

#: what a launch saved saves (seconds; 13 us on average on two threads of a 2-vCPU VM,
#: W3 replayed: BENCHMARKS.md) and the least a second tier must save over a run to be
#: compiled at all: a short evaluation loop's would not repay its compile
LAUNCH_S = 13e-6
MIN_SAVING_S = 0.05
ESTIMATE_AT = 16
NICE = 19


@dataclass(eq=False)
class Upgrade:
    """One step list inside a loop and what replaces it: ``steps`` (the list, changed in
    place) becomes ``body`` (the same host steps, its launches ``launches`` team chains),
    with the launches' kernel names (``kernel``) and int arguments (``args``)."""
    steps: list
    body: list
    launches: list
    kernel: dict = field(default_factory=dict)
    args: dict = field(default_factory=dict)


def plan(base: list, team: list) -> list[Upgrade]:
    """The step lists inside loops of host steps ``base`` (tier 1) whose counterparts in
    ``team`` (the same program compiled with team chains) launch fewer kernels. Both hold
    the same host steps in the same order (team chains never cross one); each replacement
    keeps ``base``'s own host step objects (their staging, prefetch and ring state carry
    over), nested loops and branches included. The body of a loop run in blocks of
    iterations (:attr:`.runtime.Loop.block`) keeps its one launch. Empty when the two
    programs do not pair up, or when the launches saved over a whole run (each list's
    times the iterations of the loops around it) would save under :data:`MIN_SAVING_S`."""
    out: list = []
    saved = [0]                 # launches saved over a whole run

    def walk(b: list, t: list, runs: int, owner) -> bool:
        bh = [x for x in b if type(x) is not Launch]
        th = [x for x in t if type(x) is not Launch]
        if len(bh) != len(th) or any(type(x) is not type(y) for x, y in zip(bh, th)):
            return False
        launches = [x for x in t if type(x) is Launch]
        fewer = sum(type(x) is Launch for x in b) - len(launches)
        if owner is not None and not getattr(owner, "block", 0) and fewer > 0:
            host = iter(bh)
            out.append(Upgrade(b, [x if type(x) is Launch else next(host) for x in t],
                               launches))
            saved[0] += fewer * runs
        for x, y in zip(bh, th):
            for bb, tb in zip(_blocks(x), _blocks(y)):
                inner = runs * len(x.range) if type(x) is Loop else runs
                if not walk(bb, tb, inner, x if type(x) is Loop else owner):
                    return False
        return True
    if not walk(base, team, 1, None) or saved[0] * LAUNCH_S < MIN_SAVING_S:
        return []
    return out


@dataclass(eq=False)
class Tier:
    """The second tier of an Executable: ``upgrades`` (:func:`plan`) whose launches'
    kernels are in the program of source file ``path`` (text ``source``); ``launches``:
    ``(kernel name, global size, local size)`` of each kernel for the helper's pre-JIT;
    ``marker``: the file a helper creates once PoCL's cache holds them all (in that cache's
    directory, named by the source and the device). ``pending``: not swapped in yet. Stats:
    ``swapped`` (the outermost loop's iteration before which it was, by the loop's site),
    ``swap_s`` (seconds this process spent building the program and swapping), ``helper``
    (``"none"``, ``"during"`` the run, ``"after"`` it)."""
    path: str
    upgrades: list
    launches: list
    marker: str
    source: str = ""
    helper: prejit.Helper | None = None
    pending: bool = True
    swapped: dict = field(default_factory=dict)
    swap_s: float = 0.0
    compiled: str = "none"

    def warm(self) -> bool:
        """Whether a helper has compiled every kernel of this tier into PoCL's cache."""
        return os.path.exists(self.marker)

    def tick(self, device, done: int, left: int, elapsed: float) -> None:
        """After ``done`` iterations of the outermost loop (``left`` to go; ``elapsed``
        seconds since the first one ended): at :data:`ESTIMATE_AT`, start compiling the
        second tier now when the loop has more than :data:`BACKGROUND_S` seconds left and
        it is not compiled yet."""
        if done != ESTIMATE_AT or not self.pending or self.helper is not None:
            return
        if elapsed / (done - 1) * left > BACKGROUND_S and not self.warm():
            self._start(device, 0)
            self.compiled = "during"

    def _start(self, device, nice: int) -> None:
        self.helper = prejit.start(device, nice=nice)
        if self.helper is not None:
            self.helper.send([self.path], [(0, *la) for la in self.launches], mine=0,
                             marker=self.marker)

    def ready(self) -> bool:
        """Whether the second tier can be swapped in: compiled by an earlier run or by
        this run's helper."""
        return self.pending and (self.warm() or self.helper is not None and
                                 os.path.exists(os.path.join(self.helper.claims, "done")))

    def swap(self, exe, lp, k: int) -> None:
        """Swap the second tier in before iteration ``k`` of ``exe``'s outermost loop
        ``lp`` (no step list inside it is being run): the program built from PoCL's cache,
        a kernel per team launch with its arguments, every upgraded list replaced in
        place."""
        import numpy as np
        import pyopencl as cl
        t = time.perf_counter()
        with open(self.path) as f:
            prg = cl.Program(exe.ctx, f.read()).build(devices=[exe.device])
        for u in self.upgrades:
            for la in u.launches:
                la.kernel = cl.Kernel(prg, u.kernel[la])
                la.kernel.set_arg(0, exe.arena)
                for i, v in enumerate(u.args[la], 1):
                    la.kernel.set_arg(i, np.int32(v))
            u.steps[:] = u.body
        self.pending = False
        self.swapped[lp.site] = k
        self.swap_s += time.perf_counter() - t
        if self.helper is not None:
            self.helper.stop()
            self.helper = None

    def finish(self, device) -> None:
        """At the end of a run: a second tier still pending is compiled for the next run,
        by this run's helper or a new one, in the background at niceness :data:`NICE`
        (the helper ends by itself)."""
        if not self.pending or self.warm():
            return
        if self.helper is None:
            self._start(device, NICE)
            self.compiled = "after"
        if self.helper is not None:
            self.helper.detach(NICE)
            self.helper = None
