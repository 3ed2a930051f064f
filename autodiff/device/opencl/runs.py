"""Team runs: consecutive launches of one dispatch kernel as one team launch of that kernel.

On two or more PoCL threads every launch wakes the sleeping worker threads (13 us per
launch on average on two threads of a 2-vCPU VM; BENCHMARKS.md), and a heavy loop body
launches hundreds of kernels per iteration. A :func:`.chain.team` chain runs a whole body
in one launch, but as one new kernel calling every body: PoCL compiles it on one core (the
main job's first iteration 1.7-2 s later from an empty cache). A *team run* needs no
compile of its own: on a CPU
device every dispatch kernel (:func:`.chain.dispatch`) has a team mode
(:func:`.chain.team_branch`) that runs a table of its own entries -- their cases, work-group
counts and int arguments, in the arena's constants region -- as one launch of one
work-group per worker thread, with a barrier where an entry touches what the entries since
the last one wrote (:func:`.chain.independent`). The entries are shared out among the
dispatch kernels so that consecutive launches mostly share one (:func:`partition`), and a
loop body is a few team launches (W3: 336 launches -> 22), from the first iteration on.
Small kernels of such a body are not chained (a chain is one work-group, which one worker
would run while the other waits).

Each step list inside a loop whose launches merge becomes an :class:`~.tiers.Upgrade`:
same host steps, the runs of two or more launches replaced by their team launch; the
:class:`~.tiers.Tier` puts them in place while other processes leave the cores free (team
workers spin at barriers). Same values bit for bit: the same block functions over the same
work-groups in the same order.
"""
from __future__ import annotations

import math

import networkx as nx

from . import chain
from .runtime import Launch, Loop, _blocks
from .tiers import Upgrade

#: what a launch saved saves (seconds; 13 us on average on two threads of a 2-vCPU VM,
#: W3 replayed: BENCHMARKS.md) and the least team runs must save over a whole run to be
#: used at all: a short evaluation loop's would not repay their sampling
LAUNCH_S = 13e-6
MIN_SAVING_S = 0.05


def upgrades(steps: list, members: dict, kernel: dict, args: dict, team: set,
             workers: int, table) -> list[Upgrade]:
    """The :class:`~.tiers.Upgrade` s of host steps ``steps``: in every step list inside a
    loop (not one run in blocks of iterations, :attr:`.runtime.Loop.block`), each run of two
    or more consecutive launches of the same team-mode dispatch kernel (named in ``team``)
    as one team launch of ``workers`` work-groups. ``members``: launch -> its bodies;
    ``kernel`` and ``args``: launch -> its kernel's name and int arguments
    (``(which, params..., reps, ctr, wrd, wstep)``); ``table(ints) -> word``: stores a
    run's table in the arena (:func:`.chain.team_branch`), only when the upgrades are
    kept. Empty when the launches saved over a whole run would save under
    :data:`MIN_SAVING_S`."""
    out: list = []
    saved = [0]

    def walk(lst: list, runs: int, owner) -> None:
        body, made, i = [], [], 0
        while i < len(lst):
            j = i
            while j < len(lst) and _joins(lst[j], kernel, team) and \
                    kernel[lst[j]] == kernel[lst[i]]:
                j += 1
            if j - i >= 2:
                made.append(_team_launch(lst[i:j], members, kernel, args, workers))
                body.append(made[-1][0])
                i = j
            else:
                body.append(lst[i])
                i += 1
        if made and owner is not None and not owner.block:
            out.append(Upgrade(lst, body, [la for la, _ in made],
                               dict(made)))              # the tables: stored below
            saved[0] += (len(lst) - len(body)) * runs
        for x in lst:
            for blk in _blocks(x):
                walk(blk, runs * len(x.range) if type(x) is Loop else runs,
                     x if type(x) is Loop else owner)
    walk(steps, 1, None)
    if saved[0] * LAUNCH_S < MIN_SAVING_S:
        return []
    for u in out:                           # each run's table into the arena
        u.args = {la: (-2 - table(rows),) + (0,) * (len(args[first]) - 5) + chain.ONCE
                  for la, (rows, first) in u.args.items()}
    return out


def _joins(x, kernel: dict, team: set) -> bool:
    return type(x) is Launch and not x.reps_arg and kernel.get(x) in team


def _team_launch(run: list, members: dict, kernel: dict, args: dict,
                 workers: int) -> tuple[Launch, tuple]:
    """One team launch of ``run`` (launches of one dispatch kernel; named as that kernel)
    and ``(table, first launch)``: the run's table (:func:`.chain.team_branch`) -- a
    barrier before a launch that touches what the launches since the last one wrote."""
    rows, since = [], []
    for la in run:
        bodies = members[la]
        wait = bool(since) and not all(chain.independent(since, b, follows=i > 0)
                                       for i, b in enumerate(bodies))
        since = list(bodies) if wait else since + list(bodies)
        g = tuple(la.global_size) + (1,) * (3 - len(la.global_size))
        a = args[la]
        rows += [int(wait), a[0], g[0], g[0] * g[1], math.prod(g), *a[1:-4]]
    la = Launch(kernel[run[0]], (workers,), (1,), rand=any(x.rand for x in run),
                counters=any(x.counters for x in run), team=workers)
    return la, ([len(run)] + rows, run[0])


def partition(uses: list[int], n: int, most: int) -> list[list[int]]:
    """Dispatch kernels for entries ``0 .. n-1`` (numbered in first-launch order) launched
    in the order ``uses``: ``ceil(n / most)`` lists of at most ``most`` entries, each in
    first-launch order, such that few consecutive launches fall in two kernels (each such
    pair ends a team run).

    Recursive Kernighan-Lin bisection (networkx; B. W. Kernighan and S. Lin, "An efficient
    heuristic procedure for partitioning graphs", Bell System Technical Journal, 1970) of
    the graph whose edge weights count consecutive launches of two entries, padded with
    isolated nodes to ``most`` per kernel (a swap with one of them moves an entry), each
    bisection starting from launch order. Cuts in launch order alone break the backward
    pass's runs wherever it launches a forward entry again (W3: 82 runs per step in
    chunks of 24 in launch order, 23 partitioned; the main job's training step 85 -> 44).
    Deterministic (integer nodes, a fixed seed): the program's source, and so PoCL's
    cache of it, stays the same from run to run."""
    k = -(-n // most)
    if k <= 1:
        return [list(range(n))]
    g = nx.Graph()
    g.add_nodes_from(range(k * most))
    for a, b in zip(uses, uses[1:]):
        if a != b:
            w = g.get_edge_data(a, b, {"weight": 0})["weight"]
            g.add_edge(a, b, weight=w + 1)

    def split(nodes: list[int], k: int) -> list[list[int]]:
        if k == 1:
            return [[x for x in nodes if x < n]]
        cut = (k + 1) // 2 * most
        a, b = nx.community.kernighan_lin_bisection(
            g.subgraph(nodes), (set(nodes[:cut]), set(nodes[cut:])), weight="weight",
            seed=0)
        if len(a) != cut:                   # the halves come back in either order
            a, b = b, a
        return split(sorted(a), (k + 1) // 2) + split(sorted(b), k // 2)
    return _refine(g, sorted(p for p in split(list(range(k * most)), k) if p), most)


def _refine(g: "nx.Graph", parts: list[list[int]], most: int) -> list[list[int]]:
    """``parts`` after single-entry moves, each to the kernel (with room: at most ``most``
    entries) where it has the most launch-neighbour weight, while one gains (the
    Fiduccia-Mattheyses refinement step, greedily, without its tie-breaking): recursive
    bisection fixes its first cuts, and an entry the backward pass launches between
    another kernel's entries often belongs with those."""
    where = {e: i for i, p in enumerate(parts) for e in p}
    size = [len(p) for p in parts]
    moved = True
    while moved:
        moved = False
        for e in sorted(where):
            pull = [0] * len(parts)
            for f, w in g[e].items():
                if f in where:
                    pull[where[f]] += w["weight"]
            here = where[e]
            best = max((i for i in range(len(parts)) if i != here and size[i] < most),
                       key=lambda i: (pull[i], -i), default=None)
            if best is not None and pull[best] > pull[here]:
                size[here] -= 1
                size[best] += 1
                where[e] = best
                moved = True
    out = [sorted(e for e in where if where[e] == i) for i in range(len(parts))]
    return sorted(p for p in out if p)
