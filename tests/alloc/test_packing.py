"""Packers, lower bound and verifier on hypothesis-generated interval sets."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autodiff.alloc import (STRATEGIES, Allocation, LiveRange, Plan, PlanError, align_up,
                            lower_bound, pack, verify)

ALIGNMENTS = st.sampled_from([1, 2, 4, 8, 64, 128, 256])


@st.composite
def interval_sets(draw, max_buffers=40):
    n = draw(st.integers(0, max_buffers))
    ranges = []
    for i in range(n):
        start = draw(st.integers(0, 60))
        length = draw(st.integers(0, 25))
        size = draw(st.one_of(st.integers(0, 64), st.integers(0, 20000),
                              st.sampled_from([4, 1024, 4096, 65536])))
        ranges.append(LiveRange(f"b{i}", size, start, start + length))
    return ranges


def brute_lower_bound(ranges, alignment):
    steps = max((r.end for r in ranges), default=-1) + 1
    return max((sum(align_up(r.size_bytes, alignment) for r in ranges if r.start <= t <= r.end)
                for t in range(steps)), default=0)


def brute_conflict(plan) -> bool:
    """All-pairs check: two buffers live at a common step share a byte (empty ones never)."""
    for a, b in itertools.combinations([a for a in plan.allocations if a.size], 2):
        if a.range.interferes(b.range) and a.offset < b.stop and b.offset < a.stop:
            return True
    return False


@settings(max_examples=500, deadline=None)
@given(interval_sets(), ALIGNMENTS)
def test_every_strategy_packs_safely_between_bound_and_naive(ranges, alignment):
    plan = pack(ranges, alignment)
    verify(plan)
    assert not brute_conflict(plan)
    assert plan.lower_bound_bytes == brute_lower_bound(ranges, alignment)
    assert plan.lower_bound_bytes <= plan.arena_bytes <= plan.naive_bytes
    assert plan.arena_bytes == min(plan.tried.values())
    assert set(plan.tried) <= set(STRATEGIES) and {"greedy_by_size", "best_fit"} <= set(plan.tried)
    for name in ("greedy_by_size", "best_fit"):
        single = pack(ranges, alignment, strategies=[name])
        verify(single)
        assert single.arena_bytes == plan.tried[name]
    assert all(o % alignment == 0 for o in plan.offsets.values())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 5000), min_size=1, max_size=30), ALIGNMENTS)
def test_chain_where_each_buffer_dies_as_the_next_is_made_meets_the_bound(sizes, alignment):
    # buffer i is written at step i and read (for the last time) at step i + 1
    ranges = [LiveRange(i, s, i, i + 1) for i, s in enumerate(sizes)]
    plan = pack(ranges, alignment)
    verify(plan)
    assert plan.arena_bytes == plan.lower_bound_bytes == max(
        align_up(a, alignment) + align_up(b, alignment)
        for a, b in zip(sizes, sizes[1:] + [0]))


def test_elementwise_chain_of_equal_buffers_needs_two_slots():
    ranges = [LiveRange(i, 4 * 1024, i, i + 1) for i in range(50)]
    plan = pack(ranges, 128)
    verify(plan)
    assert plan.arena_bytes == plan.lower_bound_bytes == 2 * 4096
    assert plan.naive_bytes == 50 * 4096
    assert plan.saved_pct == pytest.approx(96.0)


@settings(max_examples=500, deadline=None)
@given(interval_sets(max_buffers=25), ALIGNMENTS, st.data())
def test_verify_rejects_exactly_the_overlapping_layouts(ranges, alignment, data):
    # random aligned offsets: often unsafe; verify must agree with the all-pairs check
    sizes = [align_up(r.size_bytes, alignment) for r in ranges]
    offsets = [alignment * data.draw(st.integers(0, 40)) for _ in ranges]
    arena = max((o + s for o, s in zip(offsets, sizes)), default=0)
    bound = lower_bound(ranges, alignment)
    plan = Plan([Allocation(r, o, s) for r, o, s in zip(ranges, offsets, sizes)],
                max(arena, bound), bound, sum(sizes), alignment)
    if brute_conflict(plan):
        with pytest.raises(PlanError, match="share bytes"):
            verify(plan)
    else:
        verify(plan)


def _plan(offsets, ranges, arena=None, alignment=1):
    allocs = [Allocation(r, o, align_up(r.size_bytes, alignment)) for r, o in zip(ranges, offsets)]
    return Plan(allocs, arena if arena is not None else max(a.stop for a in allocs),
                lower_bound(ranges, alignment), sum(a.size for a in allocs), alignment)


def test_verify_names_each_kind_of_violation():
    a, b = LiveRange("a", 100, 0, 5), LiveRange("b", 100, 5, 9)
    verify(_plan([0, 100], [a, b]))
    with pytest.raises(PlanError, match="a .*b .*share bytes|b .*a .*share bytes"):
        verify(_plan([0, 50], [a, b]))
    with pytest.raises(PlanError, match="outside the arena"):
        verify(_plan([0, 100], [a, b], arena=150))
    with pytest.raises(PlanError, match="not a multiple of alignment"):
        verify(_plan([0, 130], [LiveRange("a", 100, 0, 5), LiveRange("b", 100, 5, 9)],
                     alignment=128, arena=1024))
    bad = _plan([0, 100], [a, b])
    bad.lower_bound_bytes = 100
    with pytest.raises(PlanError, match="lower bound"):
        verify(bad)
    bad = _plan([0, 100], [a, b])
    bad.aliases = {"c": "zz"}
    with pytest.raises(PlanError, match="no allocation"):
        verify(bad)


def test_buffers_live_at_different_steps_share_an_address():
    ranges = [LiveRange("a", 64, 0, 3), LiveRange("b", 64, 4, 7), LiveRange("c", 32, 8, 8)]
    plan = pack(ranges)
    verify(plan)
    assert plan.arena_bytes == 64 and set(plan.offsets.values()) == {0}


def test_pack_rejects_bad_input():
    r = LiveRange("a", 8, 0, 1)
    with pytest.raises(ValueError, match="alignment"):
        pack([r], 0)
    with pytest.raises(ValueError, match="unique"):
        pack([r, LiveRange("a", 8, 2, 3)])
    with pytest.raises(ValueError, match="unknown strategies"):
        pack([r], strategies=["first_fit"])
    with pytest.raises(ValueError, match="start <= end"):
        LiveRange("x", 8, 3, 2)


def test_empty_plan():
    plan = pack([])
    verify(plan)
    assert (plan.arena_bytes, plan.lower_bound_bytes, plan.ratio, plan.saved_pct) == (0, 0, 1.0, 0.0)


def test_plot_writes_a_png(tmp_path):
    from autodiff.alloc import plot
    rng = np.random.default_rng(0)
    ranges = [LiveRange(f"t{i}", int(rng.integers(1, 5000)), int(s), int(s + rng.integers(0, 9)))
              for i, s in enumerate(rng.integers(0, 40, 60))]
    plan = pack(ranges, 64)
    path = tmp_path / "plan.png"
    plot(plan, path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_pack_falls_back_to_greedy_when_every_strategy_gives_up(monkeypatch):
    from autodiff.alloc import planner
    monkeypatch.setitem(planner.STRATEGIES, "never", lambda ranges, alignment: None)
    ranges = [LiveRange("a", 10, 0, 1), LiveRange("b", 10, 1, 2), LiveRange("c", 20, 2, 3)]
    plan = pack(ranges, 8, strategies=["never"])
    verify(plan)
    assert plan.strategy == "greedy_by_size" and plan.tried == {}
    assert plan.arena_bytes == plan.lower_bound_bytes == 40
