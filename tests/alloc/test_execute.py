"""End to end on the numpy procedural path: the arena gives identical results to separate
buffers, the report carries the plan, and a broken plan really breaks the numbers."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

import autodiff as ad
from autodiff import alloc, nn
from autodiff.alloc import PlanError
from autodiff.errors import IndexOutOfRange
from autodiff.optim import AdamW
from example_loader import load_example

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def _linear_module():
    return load_example("linear")


def run_linear(steps=5, **options):
    lin = _linear_module()
    net = lin.build()
    losses, report = lin.train(net, steps, "numpy", ir="procedural", **options)
    return np.array(losses), [p.numpy() for p in net.parameters()], report


def run_transformer(steps=3, **options):
    """A 2-layer encoder with a causal mask, cross-entropy and AdamW (dropout off)."""
    ad.manual_seed(1)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, 0.0, batch_first=True), 2)
    head = nn.Linear(32, 11)
    adamw = AdamW([*enc.parameters(), *head.parameters()], lr=3e-3)
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((steps, 4, 8, 32)).astype(np.float32)
    ys = rng.integers(0, 11, (steps, 32)).astype(np.int32)
    it_x, it_y, losses = iter(xs), iter(ys), []

    def step():
        x = ad.Feeder(lambda: next(it_x), [4, 8, 32], name="x")
        y = ad.Feeder(lambda: next(it_y), [32], "int32", name="y")
        adamw.zero_grad()
        logits = head(enc(x, is_causal=True)).reshape(32, 11)
        loss = nn.functional.cross_entropy(logits, y)
        loss.backward()
        adamw.step()
        ad.Receiver(lambda v: losses.append(float(v)), [loss], name="loss")

    ad.ir_for(steps, step)
    # "simplify" is left out: at the time of writing it breaks this graph on every device
    # (the graph interpreter too); the in-place marks come from the "inplace" pass
    report = ad.execute(device="numpy", ir="procedural", passes=["cse", "prune", "inplace"],
                        **options)
    return np.array(losses), [p.numpy() for p in [*enc.parameters(), *head.parameters()]], report


def assert_identical(a, b):
    np.testing.assert_array_equal(a[0], b[0])
    for pa, pb in zip(a[1], b[1]):
        np.testing.assert_array_equal(pa, pb)


@pytest.mark.parametrize("fuse,by_member", [(False, False), (True, False), (True, True)])
def test_linear_identical_with_and_without_the_arena(fuse, by_member):
    on = run_linear(fuse=fuse, by_member=by_member, plan=True, debug=True)
    off = run_linear(fuse=fuse, by_member=by_member, plan=False)
    assert_identical(on, off)
    assert "memory" in on[2].stats and "memory" not in off[2].stats
    mem = on[2].stats["memory"]
    assert mem["arena_bytes"] <= 1.02 * mem["lower_bound_bytes"]


@pytest.mark.slow
@pytest.mark.parametrize("fuse,by_member", [(False, False), (True, False), (True, True)])
def test_transformer_identical_with_and_without_the_arena(fuse, by_member):
    on = run_transformer(fuse=fuse, by_member=by_member, plan=True, debug=True)
    off = run_transformer(fuse=fuse, by_member=by_member, plan=False)
    assert_identical(on, off)
    assert np.isfinite(on[0]).all()
    mem = on[2].stats["memory"]
    # 1.03: bool masks (1 byte, not 4) lowered the bound more than the arena (unfused:
    # 147712 B against 143616; with float masks it was 147968 against 146624)
    assert mem["inplace"] > 0 and mem["arena_bytes"] <= 1.03 * mem["lower_bound_bytes"]


def test_overlapping_temporaries_give_wrong_numbers(monkeypatch):
    # every buffer at offset 0 of the arena: if the device really runs out of the arena,
    # values get clobbered: the losses change, or the clobbered integer targets are caught
    # by the device's range check of cross_entropy
    good = run_transformer(fuse=False, plan=True)
    monkeypatch.setattr(alloc.Plan, "buffer_offsets",
                        lambda self: {b: 0 for b in self.buffers.values()})
    try:
        bad = run_transformer(fuse=False, plan=True)
    except IndexOutOfRange as e:
        assert "cross_entropy" in str(e)
    else:
        assert not np.array_equal(good[0], bad[0])


def test_debug_verifies_the_plan(monkeypatch):
    monkeypatch.setattr(alloc.planner, "STRATEGIES",
                        {"everything_at_zero": lambda ranges, alignment: [0] * len(ranges)})
    run_linear(steps=1, fuse=False, plan=True)            # unchecked: runs (wrongly)
    ad.reset()
    with pytest.raises(PlanError, match="share bytes"):
        run_linear(steps=1, fuse=False, plan=True, debug=True)


def test_report_and_verbose_and_stage(capsys):
    losses, _, report = run_linear(steps=2, fuse=True, plan=True, verbose=True)
    mem = report.stats["memory"]
    assert {"naive_bytes", "lower_bound_bytes", "arena_bytes", "saved_pct",
            "arena_over_lower_bound"} <= set(mem)
    assert mem["lower_bound_bytes"] <= mem["arena_bytes"] <= mem["naive_bytes"]
    assert mem["saved_pct"] == pytest.approx(100 * (1 - mem["arena_bytes"] / mem["naive_bytes"]),
                                             abs=0.01)
    out = capsys.readouterr().out
    assert "memory: arena" in out and "lower bound" in out and "saved vs naive" in out
    ad.print_graph(stage="alloc")
    table = capsys.readouterr().out
    assert table.startswith("memory plan:") and "offset" in table
    rows = {line.split()[0]: line.split()[1:] for line in table.splitlines()[3:]}
    assert "x" in rows                    # the Feeder's staging buffer has a slot
    assert len(rows) == mem["buffers"] + mem["inplace"]
