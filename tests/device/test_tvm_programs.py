"""The TVM device against the numpy reference on whole programs: random programs (raw and
optimized graphs), loop semantics (Feeder/Receiver order, errors restoring variables), and
``Op.RAND`` (Philox) drawn inside loops."""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

pytest.importorskip("tvm", reason="the tvm device needs the [tvm] extra")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "opt"))

import autodiff as ad  # noqa: E402
from autodiff.device import tvm as tvm_device  # noqa: E402
from autodiff.nn import Dropout  # noqa: E402
from autodiff.opt import optimize  # noqa: E402
from opt_programs import assert_same, build, execute_graph, specs  # noqa: E402

RTOL, ATOL = 1e-5, 1e-6


@settings(max_examples=8, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(specs())
def test_random_programs_match_numpy_raw_and_optimized(spec):
    prog = build(spec)
    ref = execute_graph(prog, prog.graph)
    for what, graph in (("raw", prog.graph), ("optimized", optimize(prog.graph))):
        got = execute_graph(prog, graph, interpreter=tvm_device.compile)
        assert_same(ref, got, RTOL, ATOL, f"tvm {what}")


def _counter_program(fail_feed_at=None, fail_recv_at=None):
    """w += x each iteration; Feeder/Receiver/Feeder/Receiver interleaved in the body."""
    events = []
    w = ad.Tensor(np.zeros(3, np.float32), name="w")
    k = {"a": 0, "b": 0}

    def feed(name):
        def fn():
            if name == "a" and k["a"] == fail_feed_at:
                return np.zeros(4, np.float32)            # wrong shape
            k[name] += 1
            events.append(f"feed {name}")
            return np.full(3, k[name], np.float32)
        return fn

    def recv(name):
        def fn(v):
            if name == "r1" and len([e for e in events if e.startswith("recv r1")]) == \
                    fail_recv_at:
                raise RuntimeError("boom")
            events.append(f"recv {name} {v.tolist()}")
        return fn

    def body():
        a = ad.Feeder(feed("a"), [3], name="a")
        with ad.no_grad():
            w.add_(a)
        ad.Receiver(recv("r1"), [w * 1.0], name="r1")
        b = ad.Feeder(feed("b"), [3], name="b")
        ad.Receiver(recv("r2"), [b * 2.0], name="r2")

    ad.ir_for(3, body)
    return w, events


def test_feeders_and_receivers_run_in_program_order():
    w, events = _counter_program()
    ad.execute(device="tvm", prefetch=0)
    assert events == ["feed a", "recv r1 [1.0, 1.0, 1.0]", "feed b", "recv r2 [2.0, 2.0, 2.0]",
                      "feed a", "recv r1 [3.0, 3.0, 3.0]", "feed b", "recv r2 [4.0, 4.0, 4.0]",
                      "feed a", "recv r1 [6.0, 6.0, 6.0]", "feed b", "recv r2 [6.0, 6.0, 6.0]"]
    np.testing.assert_array_equal(w.numpy(), [6.0, 6.0, 6.0])


def test_feeder_error_names_iteration_and_restores_variables():
    w, _ = _counter_program(fail_feed_at=2)
    with pytest.raises(ad.FeederError, match=r"Feeder 'a' in iteration 2: expected shape \[3\]"):
        ad.execute(device="tvm")
    np.testing.assert_array_equal(w._var.value, [3.0, 3.0, 3.0])   # after iterations 0, 1


def test_receiver_error_restores_variables_of_that_iteration():
    w, _ = _counter_program(fail_recv_at=1)
    with pytest.raises(ad.ReceiverError, match="Receiver 'r1' in iteration 1") as e:
        ad.execute(device="tvm")
    assert isinstance(e.value.__cause__, RuntimeError)
    np.testing.assert_array_equal(w._var.value, [1.0, 1.0, 1.0])   # start of iteration 1


def _dropout_program(seed):
    ad.manual_seed(seed)
    drop = Dropout(0.3)
    x = ad.Tensor(np.ones((4, 7), np.float32))
    acc = ad.Tensor(np.zeros((4, 7), np.float32), name="acc")
    seen = []

    def outer():
        def inner():
            with ad.no_grad():
                acc.add_(drop(x))
            ad.Receiver(lambda v: seen.append(v), [acc * 1.0], name="acc")
        ad.ir_for(2, inner)

    ad.ir_for(3, outer)
    return acc, seen


def test_rand_in_nested_loops_matches_the_reference_bit_for_bit():
    acc, seen = _dropout_program(7)
    ad.execute(device="tvm")
    ad.reset()
    ref_acc, ref_seen = _dropout_program(7)
    ad.execute(device="numpy")
    assert len(seen) == 6
    for a, b in zip(seen, ref_seen):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(acc.numpy(), ref_acc.numpy())
    assert len({a.tobytes() for a in np.diff(np.stack(seen), axis=0)}) > 1   # new masks


def test_outputs_and_loads_outside_loops():
    """Top-level code before and after a loop; an output read from a LOAD before updates."""
    p = ad.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3), name="p")
    before = p * 2.0

    def halve():
        with ad.no_grad():
            p.mul_(0.5)
    ad.ir_for(2, halve)
    after = p.sum(1)
    ad.execute(device="tvm")
    np.testing.assert_allclose(before.numpy(), np.arange(6).reshape(2, 3) * 2.0)
    np.testing.assert_allclose(after.numpy(), np.arange(6).reshape(2, 3).sum(1) / 4.0)
