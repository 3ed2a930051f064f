"""The pass driver: options, the report, printing, and known-graph node counts."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest

import autodiff as ad
from autodiff.graph.ir import Op
from autodiff.opt import PASSES, optimize
from autodiff.runtime import Report
from opt_helpers import assert_same_results, check_wellformed, run, snapshot, trace
from example_loader import load_example

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "linear.py"

#: examples/linear.py's loop body (Linear(255,255) -> Sigmoid -> Linear(255,255), sum, SGD),
#: node counts (loop body counted once) after each pass. A ratchet: lower is better; update
#: the numbers when a pass improves.
LINEAR_COUNTS = {"traced": 55, "simplify": 54, "cse": 51, "dot_layout": 53, "prune": 45,
                 "inplace": 45}


def _linear_example():
    return load_example("linear")


def test_linear_example_shrinks_by_a_known_count_and_trains_the_same():
    ex = _linear_example()
    losses, report = ex.train(ex.build(), steps=4)
    assert report.nodes == LINEAR_COUNTS
    assert LINEAR_COUNTS["traced"] - LINEAR_COUNTS["inplace"] == 10
    ref, _ = ex.train(ex.build(), steps=4, optimize_graph=False)
    np.testing.assert_allclose(losses, ref, rtol=1e-5)


def test_linear_example_optimized_graph_structure():
    ex = _linear_example()
    net = ex.build()
    ex.train(net, steps=1)
    g = ad.TRACER.last.optimized
    body = g.nodes[0].arg.body
    ops = [n.op for n in body.nodes]
    assert ops.count(Op.SIGMOID) == 1 and ops.count(Op.ASSIGN) == 4
    # W.T of both layers and the two upstream gradients g.T of the weight gradients, which
    # dot_layout computes as g.T @ x in W's layout [out, in]; permute(permute(W)) is gone
    assert ops.count(Op.PERMUTE) == 4
    # the bias gradient of the last layer is a constant: sum of ones over the batch, times lr (subtracted)
    consts = [n.arg for n in body.nodes if n.op is Op.CONST]
    assert float(np.float32(0.02)) in [abs(float(np.float32(c))) for c in consts]
    updates = {n.id for n in body.nodes if n.op in (Op.ADD, Op.SUB)}
    assert len(set(g.inplace) & updates) >= 4, "every parameter update writes in place"


def test_unknown_options_are_ignored_and_unknown_passes_rejected():
    x = ad.Tensor(np.ones(2, np.float32))
    g = trace(lambda: x * 1.0)
    o = optimize(g, report=None, tile_size=16, device="opencl")
    assert o.outputs[0].op is Op.LOAD
    with pytest.raises(ValueError, match="unknown graph pass"):
        optimize(g, passes=["simplify", "vectorize"])


def test_passes_option_runs_only_those_in_that_order_and_records_counts():
    x = ad.Tensor(np.ones(2, np.float32))
    g = trace(lambda: [x.exp() * 1.0 + x.exp()])
    report = Report("-")
    o = optimize(g, report=report, passes=["repeat", "dce"])
    assert list(report.nodes) == ["traced", "cse", "prune"]
    assert report.nodes["traced"] == g.count() and report.nodes["prune"] == o.count()
    assert set(report.stats["opt_ms"]) == {"cse", "prune"}
    assert any(n.op is Op.MUL for n in o.walk()), "simplify did not run"


def test_all_passes_are_pure_and_keep_values():
    w = ad.Tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3), requires_grad=True)
    seen = []

    def build():
        def body():
            loss = ((w * 1.0).T.T.sigmoid() * 2.0 + 0.0 * w).sum()
            loss.backward()
            with ad.no_grad():
                w.sub_(w.grad / 4.0)
            ad.Receiver(lambda a: seen.append(a), [loss])
        ad.ir_for(3, body)
        return [w * 2.0]
    g = trace(build)
    before = snapshot(g)
    for name in PASSES:
        o = optimize(g, passes=[name])
        check_wellformed(o)
        seen.clear()
        a = run(g)
        first = list(seen)
        seen.clear()
        assert_same_results(a, run(o))
        np.testing.assert_allclose(seen, first, rtol=1e-6)
    o = optimize(g)
    assert snapshot(g) == before
    assert o.count() < g.count()


def test_execute_report_and_verbose_output(capsys):
    x = ad.Tensor(np.ones(3, np.float32))
    y = (x * 1.0).exp()
    report = ad.execute(verbose=True)
    out = capsys.readouterr().out
    assert list(report.nodes) == ["traced", "simplify", "cse", "dot_layout", "prune", "inplace"]
    assert report.nodes["traced"] > report.nodes["inplace"]
    assert "opt: traced" in out and "simplify" in out and "graph(opt)" in out
    np.testing.assert_allclose(y.numpy(), np.exp(np.ones(3)), rtol=1e-6)


def test_print_graph_opt_stage_shows_counts_and_the_optimized_graph(capsys):
    x = ad.Tensor(np.ones(3, np.float32))
    y = (x * 1.0).T.exp()                  # noqa: F841 (kept: an output)
    ad.print_graph(stage="opt")
    pending = capsys.readouterr().out
    assert pending.startswith("# nodes: traced") and "graph(opt)" in pending
    assert " mul " not in pending
    ad.execute()
    ad.print_graph(stage="opt")
    after = capsys.readouterr().out
    assert after.startswith("# nodes: traced") and "-> inplace" in after


def test_fast_math_and_prefer_exp2_flow_from_execute():
    x = ad.Tensor(np.array([1.0, 2.0], np.float32))
    y = x * 0.0 + x.exp()
    ad.execute(fast_math=True, prefer_exp2=True)
    opt = ad.TRACER.last.optimized
    assert opt.outputs[0].op is Op.EXP2, "x * 0 + exp(x) -> 0 + exp2(x * log2 e) -> exp2(..)"
    assert not any(n.op in (Op.EXP, Op.ADD) for n in opt.walk())
    np.testing.assert_allclose(y.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)


def test_graph_passes_and_compile_run_with_the_heap_before_them_frozen(monkeypatch):
    """During the graph passes and the device's compile the objects that existed before
    (the traced program among them) are frozen out of the cyclic collector's scans;
    afterwards, and after a failing compile too, nothing stays frozen."""
    import gc

    import autodiff.runtime as rt
    from autodiff.device import numpy as npdev
    seen = []
    real_opt, real_compile = rt.optimize, npdev.compile

    def opt(graph, *a, **k):
        seen.append(("optimize", gc.get_freeze_count()))
        return real_opt(graph, *a, **k)

    def compile_(graph, *a, **k):
        seen.append(("compile", gc.get_freeze_count()))
        if k.get("fail"):
            raise RuntimeError("compile failed")
        return real_compile(graph, *a, **{x: v for x, v in k.items() if x != "fail"})
    monkeypatch.setattr(rt, "optimize", opt)
    monkeypatch.setattr(npdev, "compile", compile_)
    before = gc.get_freeze_count()
    x = ad.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = (x * 2).sum()
    ad.execute(device="numpy")
    assert float(y.numpy()) == 30.0
    assert [s for s, _ in seen] == ["optimize", "compile"]
    assert all(n > before for _, n in seen)
    assert gc.get_freeze_count() == before
    (x * 3).sum()
    monkeypatch.setattr(rt, "check_options", lambda *a, **k: None)
    with pytest.raises(RuntimeError, match="compile failed"):
        ad.execute(device="numpy", fail=True)
    assert gc.get_freeze_count() == before


def test_a_users_own_gc_freeze_is_left_as_it_was():
    """Objects the user froze (``gc.freeze()``, e.g. before forking workers) stay frozen
    through ``execute()``."""
    import gc
    gc.freeze()
    try:
        n = gc.get_freeze_count()
        x = ad.Tensor(np.ones(3, np.float32))
        y = (x + 1).sum()
        ad.execute(device="numpy")
        assert float(y.numpy()) == 6.0
        assert gc.get_freeze_count() > n // 2      # not unfrozen (some were freed)
    finally:
        gc.unfreeze()
