"""``Schedule.placement`` (each member's movable interval, memoized until a commit) against
the rule it implements, checked member by member and rank by rank: random statement lists
over a few buffers, random groups, commits in between."""
from __future__ import annotations

import numpy as np

from autodiff.fusion.group import Schedule
from autodiff.procedural.ir import Stmt


class _S(Stmt):
    def __init__(self, reads, writes):
        self._r, self._w = list(reads), list(writes)

    def reads(self):
        return self._r

    def writes(self):
        return self._w


def _reference(sched: Schedule, group: list):
    """The rule: the latest member rank ``p`` such that every member can move to ``p``
    across the statements strictly between (none outside the group reads or writes what it
    writes, or writes what it reads)."""
    ids = {id(s) for s in group}
    others = [(r, s) for r, s in sched.stmt.items() if id(s) not in ids]

    def movable(s, p):
        r = sched.rank[id(s)]
        lo, hi = min(r, p), max(r, p)
        w = {id(b) for b in s.writes()}
        rd = {id(b) for b in s.reads()}
        for q, t in others:
            if lo < q < hi:
                tw = {id(b) for b in t.writes()}
                tr = {id(b) for b in t.reads()}
                if w & (tw | tr) or rd & tw:
                    return False
        return True
    for p in sorted({sched.rank[i] for i in (id(s) for s in group)}, reverse=True):
        if all(movable(s, p) for s in group):
            return p
    return None


def _random_schedule(rng, most_buffers: int, statements: tuple[int, int]) -> Schedule:
    """A schedule of random statements (0-2 reads, 1-2 writes each) over 2 to
    ``most_buffers - 1`` buffers; ``statements``: the range of their count."""
    bufs = [object() for _ in range(int(rng.integers(2, most_buffers)))]
    return Schedule([_S([bufs[i] for i in rng.choice(len(bufs), int(rng.integers(0, 3)))],
                        [bufs[i] for i in rng.choice(len(bufs), int(rng.integers(1, 3)))])
                     for _ in range(int(rng.integers(*statements)))])


def _pick(rng, items: list, most: int) -> list:
    """1 to ``most`` distinct random items of ``items``."""
    k = int(rng.integers(1, min(most, len(items)) + 1))
    return [items[i] for i in rng.choice(len(items), k, replace=False)]


def test_placement_matches_the_rule_on_random_schedules():
    rng = np.random.default_rng(0)
    checked = placed = 0
    for trial in range(40):
        sched = _random_schedule(rng, 7, (4, 30))
        for _ in range(30):
            free = [s for s in sched.statements() if sched.free(s)]
            if len(free) < 2:
                break
            group = _pick(rng, free, 6)
            want = _reference(sched, group)
            assert sched.placement(group) == want
            checked += 1
            if want is not None and len(group) > 1 and rng.random() < 0.2:
                sched.commit(group, _S({b for s in group for b in s.reads()},
                                       {b for s in group for b in s.writes()}))
                placed += 1
    assert checked > 600 and placed > 10


def test_placement_of_growing_groups_matches_the_rule():
    """Groups grown a statement or a few at a time (as ``grow`` tries candidates) start from
    the last placed group's intervals (``_Placed``): the answer must still be the rule's,
    for a placeable or an unplaceable candidate alike."""
    rng = np.random.default_rng(1)
    checked = incremental = 0
    for trial in range(60):
        sched = _random_schedule(rng, 8, (6, 40))
        for _ in range(4):
            free = [s for s in sched.statements() if sched.free(s)]
            if len(free) < 3:
                break
            group = [free[int(rng.integers(len(free)))]]
            for _ in range(12):
                rest = [s for s in free if s not in group]
                if not rest:
                    break
                trial_group = group + _pick(rng, rest, 3)
                based = any(p.ids <= {id(s) for s in trial_group} for p in sched._placed)
                want = _reference(sched, trial_group)
                assert sched.placement(trial_group) == want
                checked += 1
                incremental += based
                if want is not None:
                    group = trial_group
            if len(group) > 1 and sched.placement(group) is not None and rng.random() < 0.5:
                sched.commit(group, _S({b for s in group for b in s.reads()},
                                       {b for s in group for b in s.writes()}))
    assert checked > 1000 and incremental > 500
