"""TVM device: ``K`` loop iterations per device call (``steps_per_call``) against one per
call and the numpy reference, callback order and error semantics inside a batch, the
automatic ``K``, and ``IndexError`` for out-of-range ``GATHER`` indices."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tvm", reason="the tvm device needs the [tvm] extra")

import autodiff as ad  # noqa: E402
from autodiff.device.tvm.plan import loops  # noqa: E402
from autodiff.device.tvm.translate import translate  # noqa: E402
from autodiff.graph.trace import TRACER  # noqa: E402
from autodiff.nn import Dropout, Linear  # noqa: E402
from autodiff.nn.functional import embedding  # noqa: E402
from autodiff.optim import SGD  # noqa: E402

STEPS = 11          # K = 4: two batches and a remainder of 3
RTOL, ATOL = 1e-5, 1e-6


def _train(device, out: dict, fail_at=None, recv_fail_at=None, **kw):
    """Linear + dropout regression on fed batches, a Receiver of the loss and the input
    each step. ``out`` gets ``state`` (parameters, also after an error), ``seen``
    (Receiver values) and ``events`` (callback order)."""
    ad.manual_seed(3)
    xs = np.random.default_rng(0).standard_normal((STEPS, 4, 5)).astype(np.float32)
    lin = Linear(5, 3)
    lin.load_state_dict({"weight": np.full((3, 5), 0.1, np.float32),
                         "bias": np.zeros(3, np.float32)})
    drop = Dropout(0.25)
    opt = SGD(lin.parameters(), lr=0.05)
    out.update(events=[], seen=[])
    order = iter(range(STEPS))

    def feed():
        i = next(order)
        if i == fail_at:
            raise RuntimeError("no data")
        out["events"].append(f"feed {i}")
        return xs[i]

    def recv(loss, x):
        if len(out["seen"]) == recv_fail_at:
            raise ValueError("full")
        out["events"].append(f"recv {len(out['seen'])}")
        out["seen"].append((float(loss), x.copy()))

    def step():
        opt.zero_grad()
        x = ad.Feeder(feed, [4, 5], name="x")
        loss = (drop(lin(x)) ** 2).mean()
        loss.backward()
        opt.step()
        ad.Receiver(recv, [loss, x], name="loss")

    ad.ir_for(STEPS, step)
    try:
        return ad.execute(device=device, **kw)
    finally:
        out["state"] = {k: v.copy() for k, v in lin.state_dict().items()}


def _assert_same_run(a: dict, b: dict):
    assert len(a["seen"]) == len(b["seen"])
    for (la, xa), (lb, xb) in zip(a["seen"], b["seen"]):
        np.testing.assert_allclose(la, lb, rtol=RTOL, atol=ATOL)
        np.testing.assert_array_equal(xa, xb)
    for k in b["state"]:
        np.testing.assert_allclose(a["state"][k], b["state"][k], rtol=RTOL, atol=ATOL)


def _runs(**kw):
    """The same program on numpy, on TVM one step per call and on TVM 4 per call, all with
    Feeders 3 iterations ahead (``prefetch=3``, the least 4 steps per call need)."""
    res = {}
    for name, dev, opts in (("numpy", "numpy", {}), ("one", "tvm", {"steps_per_call": 1}),
                            ("four", "tvm", {"steps_per_call": 4})):
        opts = dict(opts, prefetch=3)
        ad.reset()
        res[name] = {}
        try:
            res[name]["report"] = _train(dev, res[name], **kw, **opts)
        except (ad.FeederError, ad.ReceiverError) as e:
            res[name]["error"] = e
    return res


def test_k_steps_per_call_match_one_step_per_call_and_numpy():
    res = _runs()
    _assert_same_run(res["one"], res["numpy"])
    _assert_same_run(res["four"], res["one"])
    assert res["four"]["report"].stats["tvm"]["steps_per_call"] == 4
    # The order contract: Feeders exactly 3 iterations ahead of the Receivers, whether
    # iterations run 4 per call, one per call, or on numpy.
    ev = res["four"]["events"]
    assert ev == ["feed 0", "feed 1", "feed 2", "feed 3"] + \
        [e for i in range(4, 11) for e in (f"recv {i - 4}", f"feed {i}")] + \
        ["recv 7", "recv 8", "recv 9", "recv 10"]
    assert res["one"]["events"] == ev and res["numpy"]["events"] == ev


def test_feeder_error_in_a_batch_names_its_iteration_and_keeps_earlier_steps():
    """The Feeder fails in iteration 6 (third of the second batch): iterations 4 and 5
    still run with their Receivers; variables hold the values after iteration 5."""
    res = _runs(fail_at=6)
    for name in ("numpy", "one", "four"):
        err = res[name]["error"]
        assert isinstance(err, ad.FeederError) and err.iteration == (6,), name
        assert "Feeder 'x' in iteration 6: callback raised RuntimeError" in str(err)
    _assert_same_run(res["four"], res["numpy"])
    assert len(res["four"]["seen"]) == 6


def test_receiver_error_in_a_batch_restores_the_start_of_its_iteration():
    """The Receiver fails in iteration 5 (second of the second batch): variables hold
    the values at the start of iteration 5, as one step per call."""
    res = _runs(recv_fail_at=5)
    for name in ("numpy", "one", "four"):
        err = res[name]["error"]
        assert isinstance(err, ad.ReceiverError) and err.iteration == (5,), name
        assert isinstance(err.__cause__, ValueError)
    _assert_same_run(res["four"], res["numpy"])
    assert len(res["four"]["seen"]) == 5


def _loop_graph(n_steps, width):
    w = ad.Tensor(np.ones((width, width), np.float32), name="w")

    def body():
        with ad.no_grad():
            w.copy_(w @ w * 0.5)
    ad.ir_for(n_steps, body)
    return TRACER.finish()


@pytest.mark.parametrize("n_steps,width,want", [(100, 8, 16), (5, 8, 5), (100, 512, 1)])
def test_automatic_steps_per_call(n_steps, width, want):
    """Small bodies get 16 (at most the loop's length); a 2.7e8-FLOP body gets 1."""
    steps, mod = translate(_loop_graph(n_steps, width), steps_per_call=None)
    (loop,) = loops(steps)
    assert loop.steps_per_call == want
    names = {gv.name_hint for gv, _ in mod.functions_items()}
    assert (f"seg0_x{want}" in names) == (want > 1)


def test_steps_per_call_out_of_range_raises():
    g = _loop_graph(10, 4)
    for bad in (0, 1000, 2.5, True):
        with pytest.raises(ValueError, match="steps_per_call must be None or an int"):
            translate(g, steps_per_call=bad)


def _gather_program(bad_at, table_rows=6, n_steps=6):
    """acc += table[idx] per step, idx fed; iteration ``bad_at`` feeds an index of
    ``table_rows`` (one past the end)."""
    table = ad.Tensor(np.arange(table_rows * 2, dtype=np.float32).reshape(table_rows, 2),
                      name="table")
    acc = ad.Tensor(np.zeros((3, 2), np.float32), name="acc")
    k = iter(range(n_steps))

    def feed():
        i = next(k)
        return np.array([i % table_rows, 0, table_rows if i == bad_at else 1], np.int32)

    def body():
        idx = ad.Feeder(feed, [3], dtype="int32", name="idx")
        with ad.no_grad():
            acc.add_(embedding(idx, table))
    ad.ir_for(n_steps, body)
    return acc


@pytest.mark.parametrize("steps_per_call", [1, 4])
@pytest.mark.parametrize("bad_at", [2, 5])
def test_gather_out_of_range_raises_index_error_like_numpy(steps_per_call, bad_at):
    """Iteration 2 is in the first batch of 4, iteration 5 in the one-step remainder;
    variables hold the values at the start of the failing iteration, as on numpy."""
    acc = _gather_program(bad_at)
    with pytest.raises(IndexError, match="out of range"):
        ad.execute(device="numpy")
    want = acc._var.value.copy()
    ad.reset()
    acc = _gather_program(bad_at)
    with pytest.raises(IndexError, match=rf"gather: index 6 is out of range \[0, 6\) "
                                         rf"in iteration {bad_at} \(traced at .*test_tvm_batch"):
        ad.execute(device="tvm", steps_per_call=steps_per_call)
    np.testing.assert_array_equal(acc._var.value, want)
    assert want.sum() > 0


def test_gather_in_range_and_negative_index_outside_loops():
    table = ad.Tensor(np.arange(8, dtype=np.float32).reshape(4, 2), name="t")
    ok = embedding(ad.Feeder(lambda: np.array([[3, 0]], np.int32), [1, 2], dtype="int32"),
                   table)
    ad.execute(device="tvm")
    np.testing.assert_array_equal(ok.numpy(), [[[6, 7], [0, 1]]])
    ad.reset()
    table = ad.Tensor(np.arange(8, dtype=np.float32).reshape(4, 2), name="t")
    bad = embedding(ad.Feeder(lambda: np.array([-1, 2], np.int32), [2], dtype="int32"),
                    table)
    with pytest.raises(IndexError, match=r"gather: index -1 is out of range \[0, 4\) "
                                         r"\(traced at"):
        ad.execute(device="tvm")
    del bad
