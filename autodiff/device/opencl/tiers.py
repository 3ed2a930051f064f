"""Tiered compilation: a loop body's team chains, compiled in the background and swapped in
between two iterations.

A team chain (:func:`.chain.team`) runs a heavy loop body in one launch instead of
hundreds, but PoCL compiles a kernel together with every function it calls, on one core:
the few large team kernels of a training step cannot be compiled in parallel the way the
many dispatch kernels of its one-by-one launches are (the main job, W5, from an empty
cache: 2.8 s to its first iteration with dispatch kernels, 4.5-4.8 s with team chains;
BENCHMARKS.md). So the device's compile builds both:

1. **tier 1**, the program as launched one by one (and its pre-JIT, :mod:`.prejit`): the
   first iteration starts as soon as it does without a second tier;
2. **tier 2**, the team chains of each eligible step list inside a loop (:func:`plan`), in
   a program of their own, which a :mod:`.prejit` helper process builds and compiles into
   PoCL's cache: after the run, in the background, for the next run of the program
   (:meth:`Tier.finish`), or during it when the loop is long (:data:`BACKGROUND_S`). A
   marker file in PoCL's cache directory says it is done.

Once tier 2 is compiled, :meth:`Tier.step` (called before each iteration of the
outermost loop) builds its program in this process (a hit in PoCL's cache, 45-55 ms),
makes the team launches' kernels and puts the team bodies in place -- and tier 1's back
while other processes keep the cores busy (:data:`BUSY`): team workers spin at barriers.

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
    with the launches' kernel names (``kernel``) and int arguments (``args``); ``base``:
    the list's tier-1 content (to switch back)."""
    steps: list
    body: list
    launches: list
    kernel: dict = field(default_factory=dict)
    args: dict = field(default_factory=dict)
    base: list = field(default_factory=list)


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


#: cores other processes may keep busy (time the hypervisor steals included) while team
#: chains run, sampled every :data:`SAMPLE_S` seconds or more (``/proc/stat`` counts in
#: 10 ms ticks per core: two cores over 0.05 s read within 0.4 cores): team workers spin at
#: barriers, and with the cores shared (two training processes on two cores) a worker
#: waits whole scheduler slices for a descheduled partner (W3 two threads, two processes
#: at once: 130-500 ms per step with team chains against 31 without)
BUSY, SAMPLE_S = 0.5, 0.05


def busy_s() -> float | None:
    """Busy CPU seconds of the whole machine since boot (``/proc/stat``: user, nice,
    system, irq, softirq and steal time), or None where there is no ``/proc/stat``."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _clock() -> float:
    return time.perf_counter()


def _sample() -> tuple:
    return _clock(), busy_s(), time.process_time()


@dataclass(eq=False)
class Tier:
    """The second tier of an Executable: ``upgrades`` (:func:`plan`) whose launches'
    kernels are in the program of source file ``path`` (text ``source``); ``launches``:
    ``(kernel name, global size, local size)`` of each kernel for the helper's pre-JIT;
    ``marker``: the file a helper creates once PoCL's cache holds them all (in that cache's
    directory, named by the source and the device).

    Once compiled, team chains run while other processes leave the cores free: the
    machine's busy time minus this process's is sampled as the loop runs (:data:`BUSY`),
    and tier 1 takes over while they do not.

    Stats: ``switches`` (``(iteration, "team" | "base")``, the first ones), ``busy``
    (others' cores at each switch to tier 1), ``swap_s`` (seconds spent building the
    program and switching), ``compiled`` (``"none"``, ``"during"`` the run, ``"after"``
    it)."""
    path: str
    upgrades: list
    launches: list
    marker: str
    source: str = ""
    helper: prejit.Helper | None = None
    compiled: str = "none"
    team: bool = False              # the team bodies are in place
    kernels: bool = False           # the team launches have their kernels
    switches: list = field(default_factory=list)
    sample: tuple | None = None     # (wall s, machine busy s, this process's CPU s)
    busy: list = field(default_factory=list)
    swap_s: float = 0.0
    ready: bool = False             # compiled (found so by step())
    looked: float = float("-inf")   # when step() last looked for it

    def warm(self) -> bool:
        """Whether a helper has compiled every kernel of this tier into PoCL's cache."""
        return os.path.exists(self.marker)

    def _done(self) -> bool:
        return self.warm() or self.helper is not None and \
            os.path.exists(os.path.join(self.helper.claims, "done"))

    def step(self, exe, k: int, start: int, stop: int) -> None:
        """Before iteration ``k`` of ``exe``'s outermost loop (iterations ``start`` to
        ``stop``; no step list inside it is being run): start the helper (at
        :data:`ESTIMATE_AT`, when more than :data:`BACKGROUND_S` seconds remain), or, once
        compiled, run team chains or tier 1 as the cores are free or not. It looks at the
        files and the cores' use at most every :data:`SAMPLE_S` seconds: other iterations
        pay a clock read."""
        if not self.ready:
            if k - start == ESTIMATE_AT:
                self._estimate(exe, k, start, stop)
            now = _clock()
            if now - self.looked < SAMPLE_S:
                return
            self.looked = now
            if not self._done():
                return
            self.ready = True
        load = self.others()
        if load is None:
            return
        if (load <= BUSY) != self.team:
            if self.team:
                self.busy.append(round(load, 2))
            self._use(exe, not self.team, k)

    def _estimate(self, exe, k: int, start: int, stop: int) -> None:
        """Start the helper now if the loop has more than :data:`BACKGROUND_S` seconds
        left at the pace of its iterations ``start + 1`` to ``k``."""
        if self.helper is None and exe._iter0 is not None and not self._done():
            per = (_clock() - exe._iter0[0]) / (k - start - 1)
            if per * (stop - k) > BACKGROUND_S:
                self._start(exe.device, 0)
                self.compiled = "during"

    def begin(self, exe) -> None:
        """At the start of a run of ``exe``: the team kernels made if they are compiled
        (so that no iteration waits for the program's build), and the first sample of
        the cores' use."""
        if not self.kernels and self.warm():
            self._load(exe)
        self.sample = _sample()

    def others(self) -> float | None:
        """Cores other processes kept busy since the last sample (None until
        :data:`SAMPLE_S` seconds have passed; 0 where the machine does not tell)."""
        if self.sample is None:
            self.sample = _sample()
            return None
        t0, busy0, own0 = self.sample
        if _clock() - t0 < SAMPLE_S:
            return None
        self.sample = t, busy, own = _sample()
        if busy is None or busy0 is None:
            return 0.0
        return max(0.0, (busy - busy0) - (own - own0)) / (t - t0)

    def _load(self, exe) -> None:
        """Build the program (from PoCL's cache) and make a kernel per team launch."""
        import numpy as np
        import pyopencl as cl
        t = time.perf_counter()
        with open(self.path) as f:
            prg = cl.Program(exe.ctx, f.read()).build(devices=[exe.device])
        for u in self.upgrades:
            u.base = list(u.steps)
            for la in u.launches:
                la.kernel = cl.Kernel(prg, u.kernel[la])
                la.kernel.set_arg(0, exe.arena)
                for i, v in enumerate(u.args[la], 1):
                    la.kernel.set_arg(i, np.int32(v))
        self.kernels = True
        if self.helper is not None:
            self.helper.stop()
            self.helper = None
        self.swap_s += time.perf_counter() - t

    def _use(self, exe, team: bool, k: int) -> None:
        """Put the team bodies (``team``) or tier 1's back in place, before iteration
        ``k`` (the kernels made first if they are not yet)."""
        if team and not self.kernels:
            self._load(exe)
        t = time.perf_counter()
        for u in self.upgrades:
            u.steps[:] = u.body if team else u.base
        self.team = team
        if len(self.switches) < 32:
            self.switches.append((k, "team" if team else "base"))
        self.swap_s += time.perf_counter() - t

    def _start(self, device, nice: int) -> None:
        self.helper = prejit.start(device, nice=nice)
        if self.helper is not None:
            self.helper.send([self.path], [(0, *la) for la in self.launches], mine=0,
                             marker=self.marker)

    def finish(self, device) -> None:
        """At the end of a run: a second tier not compiled yet is compiled for the next
        run, by this run's helper or a new one, in the background at niceness
        :data:`NICE` (the helper ends by itself)."""
        if self.kernels or self.warm():
            return
        if self.helper is None:
            self._start(device, NICE)
            self.compiled = "after"
        if self.helper is not None:
            self.helper.detach(NICE)
            self.helper = None
