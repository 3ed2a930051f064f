"""Two tiers of one program's launches, switched between iterations: one launch per kernel
(tier 1), or team runs (tier 2, :mod:`.runs`) while other processes leave the cores free.

Team workers spin at their barriers (OpenCL C cannot yield a core), so a team launch needs
its cores to itself: with the cores shared (two training processes on two cores) a worker
waits whole scheduler slices for a descheduled partner (W3 two threads, two processes at
once: 130-500 ms per step with team chains against 31 without; BENCHMARKS.md). So
:meth:`Tier.step`, called before each iteration of the outermost loop, samples the
machine's busy time minus this process's (:data:`BUSY`, every :data:`SAMPLE_S` seconds or
more) and puts the team runs in place while it is low, tier 1's launches back while it is
not. Both tiers are kernels of the same program (a team run launches a dispatch kernel in
its team mode), so the swap compiles nothing.

The swap changes no value: a team run runs the same block functions in the same order over
the same work-groups, so the parameters are bit-identical either way (tested). The same
idea as a tiered JIT's swap at a safe point (the JVM's or V8's on-stack replacement), at
the granularity of loop iterations, with no compile between the tiers.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from .runtime import set_int_args


@dataclass(eq=False)
class Upgrade:
    """One step list inside a loop and what replaces it: ``steps`` (the list, changed in
    place) becomes ``body`` (the same host steps, its launches ``launches`` team runs, each
    named as the dispatch kernel it launches), with the launches' int arguments
    (``args``); ``base``: the list's tier-1 content (to switch back)."""
    steps: list
    body: list
    launches: list
    args: dict = field(default_factory=dict)
    base: list = field(default_factory=list)


#: cores other processes may keep busy (time the hypervisor steals included) while team
#: runs run, sampled every :data:`SAMPLE_S` seconds or more (``/proc/stat`` counts in
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
    """The second tier of an Executable: ``upgrades`` (:func:`.runs.upgrades`), whose team
    launches' kernels ``make(name)`` gives (tier 1's programs: a dispatch kernel in its
    team mode).

    Team runs are in place while other processes leave the cores free: the machine's busy
    time minus this process's is sampled as the loop runs (:data:`BUSY`), and tier 1 takes
    over while they do not.

    Stats: ``switches`` (``(iteration, "team" | "base")``, the first ones), ``busy``
    (others' cores at each switch to tier 1), ``swap_s`` (seconds spent switching)."""
    upgrades: list
    make: object = None             # name -> a kernel of tier 1's programs
    team: bool = False              # the team runs are in place
    kernels: bool = False           # the team launches have their kernels
    switches: list = field(default_factory=list)
    sample: tuple | None = None     # (wall s, machine busy s, this process's CPU s)
    busy: list = field(default_factory=list)
    swap_s: float = 0.0

    def step(self, exe, k: int) -> None:
        """Before iteration ``k`` of ``exe``'s outermost loop (no step list inside it is
        being run): team runs or tier 1 as the cores are free or not. The cores' use is read at most every :data:`SAMPLE_S` seconds:
        other iterations pay a clock read."""
        load = self.others()
        if load is None:
            return
        if (load <= BUSY) != self.team:
            if self.team:
                self.busy.append(round(load, 2))
            self._use(exe, not self.team, k)

    def watch(self) -> None:
        """Take the first sample of the cores' use now (at the end of the compile: the host
        enqueues several iterations ahead, so a sample first taken when the run starts
        decided only at iteration 9 of W3 whenever the first iteration took under
        :data:`SAMPLE_S`)."""
        self.sample = _sample()

    def begin(self, exe) -> None:
        """At the start of a run of ``exe``: the team launches' kernels, and the first
        sample of the cores' use unless :meth:`watch` took one."""
        if not self.kernels:
            self._load(exe)
        if self.sample is None:
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
        """A kernel per team launch, its arguments set."""
        t = time.perf_counter()
        for u in self.upgrades:
            u.base = list(u.steps)
            for la in u.launches:
                la.kernel = self.make(la.name)
                la.kernel.set_arg(0, exe.arena)
                set_int_args(la.kernel, 1, u.args[la])
        self.kernels = True
        self.swap_s += time.perf_counter() - t

    def _use(self, exe, team: bool, k: int) -> None:
        """Put the team runs (``team``) or tier 1's launches back in place, before
        iteration ``k`` (:meth:`begin` made their kernels)."""
        t = time.perf_counter()
        for u in self.upgrades:
            u.steps[:] = u.body if team else u.base
        self.team = team
        if len(self.switches) < 32:
            self.switches.append((k, "team" if team else "base"))
        self.swap_s += time.perf_counter() - t
