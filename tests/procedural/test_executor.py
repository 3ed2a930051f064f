"""The numpy executor of the procedural IR: arena placement of temps (an overlapping plan
shows as wrong numbers), and host-callback errors restoring variables to the start of the
failing iteration like the graph interpreter."""
from __future__ import annotations

import numpy as np
import pytest

import autodiff as ad
from autodiff.device.numpy.interpreter import Interpreter
from autodiff.device.numpy.procedural import ProceduralExecutor, compile_procedural
from autodiff.fusion import fuse
from autodiff.procedural.lower import lower

from helpers import run, trace


def _mlp_graph():
    rng = np.random.default_rng(0)
    x = ad.tensor(rng.standard_normal((4, 8)).astype(np.float32))
    w1 = ad.tensor(rng.standard_normal((8, 8)).astype(np.float32) * 0.3)
    w2 = ad.tensor(rng.standard_normal((8, 8)).astype(np.float32) * 0.3)

    def build():
        h = (x @ w1).tanh()
        g = (h @ w2).sigmoid() * h
        return [(g @ w1).sum(0) + h.sum(0)]
    return trace(build)


def _separate(program):
    offsets, off = {}, 0
    for b in program.temps():
        offsets[b] = off
        off += b.nbytes
    return offsets


@pytest.mark.parametrize("fused", [False, True])
def test_temps_in_a_disjoint_arena_plan_give_the_same_numbers(fused):
    g = _mlp_graph()
    prog = fuse(lower(g)) if fused else lower(g)
    want = run(Interpreter(g), g)[0][0]
    exe = ProceduralExecutor(prog, offsets=_separate(prog))
    assert exe.arena is not None and exe.arena.nbytes == sum(b.nbytes for b in prog.temps())
    np.testing.assert_allclose(run(exe, g)[0][0], want, rtol=1e-5, atol=1e-6)


def test_an_overlapping_arena_plan_shows_as_wrong_numbers():
    g = _mlp_graph()
    prog = lower(g)
    want = run(Interpreter(g), g)[0][0]
    everything_at_zero = {b: 0 for b in prog.temps()}
    got = run(ProceduralExecutor(prog, offsets=everything_at_zero), g)[0][0]
    assert not np.allclose(got, want, rtol=1e-3, atol=1e-3)


def test_misaligned_offset_is_rejected():
    prog = lower(_mlp_graph())
    b = prog.temps()[0]
    with pytest.raises(ValueError, match="aligned"):
        ProceduralExecutor(prog, offsets={b: 2})


def _failing_loop(fail_at, where):
    w = ad.tensor(np.ones((2, 2), np.float32), requires_grad=True)
    calls = {"n": 0, "received": 0}     # Feeders may run ahead: each callback counts its own

    def feed():
        calls["n"] += 1
        if where == "feeder" and calls["n"] == fail_at + 1:
            raise RuntimeError("boom")
        return np.full((2, 2), 0.5, np.float32)

    def recv(v):
        calls["received"] += 1
        if where == "receiver" and calls["received"] == fail_at + 1:
            raise RuntimeError("boom")

    def build():
        def body():
            x = ad.Feeder(feed, (2, 2), name="x")
            loss = (x @ w).sum()
            loss.backward()
            with ad.no_grad():
                w.sub_(w.grad, alpha=0.1)
            w.grad = None
            ad.Receiver(recv, [loss], name="loss")
        ad.ir_for(5, body)
    return trace(build), calls


@pytest.mark.parametrize("where,err", [("feeder", ad.FeederError),
                                       ("receiver", ad.ReceiverError)])
@pytest.mark.parametrize("fuse_", [False, True])
def test_callback_error_restores_variables_to_the_iteration_start(where, err, fuse_):
    finals = []
    for make in (Interpreter, lambda g: compile_procedural(g, fuse=fuse_)):
        g, calls = _failing_loop(2, where)
        var = next(n.arg for n in g.walk() if n.op.name == "LOAD")
        store = {var: var.value.copy()}
        with pytest.raises(err) as info:
            make(g).run(store)
        assert info.value.iteration == (2,)
        finals.append(store[var])
    np.testing.assert_allclose(finals[1], finals[0], rtol=1e-6)
    assert not np.allclose(finals[0], 1.0)                   # two iterations did run


def test_stages_and_vals():
    g = _mlp_graph()
    exe = compile_procedural(g)
    assert {"procedural", "fused"} <= set(exe.stages)
    assert str(exe.stages["fused"]).startswith("fused {")
    run(exe, g)
    assert set(exe.vals) == {o.id for o in g.outputs}
