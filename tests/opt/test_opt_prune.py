"""The ``prune`` pass: only what reaches an effect or an output survives; Feeders stay."""
from __future__ import annotations

import numpy as np

import autodiff as ad
from autodiff.graph.ir import Op
from autodiff.opt import optimize, prune
from opt_helpers import apply_exact_pass, count, run, trace


def pruned(build):
    return apply_exact_pass(build, prune, "prune")


def test_dead_values_go_outputs_and_receiver_inputs_stay():
    x = ad.Tensor(np.arange(4, dtype=np.float32))

    def build():
        x.sin()                                  # read by nobody
        kept = x.cos()
        ad.Receiver(lambda a: None, [x.exp()])
        return [kept]
    g, p = pruned(build)
    assert count(p, Op.SIN) == 0 and count(p, Op.COS) == 1 and count(p, Op.EXP) == 1
    assert p.outputs[0].op is Op.COS


def test_assigns_are_observable_even_when_never_read():
    v = ad.Tensor(np.zeros(2, np.float32))

    def build():
        def body():
            with ad.no_grad():
                v.copy_(v + 1.0)
        ad.ir_for(3, body)
    g, p = pruned(build)
    assert count(p, Op.ASSIGN) == 1 and count(p, Op.FOR) == 1
    _, final = run(p)
    np.testing.assert_array_equal(final[v._var.id], [3, 3])


def test_loop_without_effects_goes_and_so_do_outer_values_only_it_read():
    x = ad.Tensor(np.arange(4, dtype=np.float32))

    def build():
        e = x.exp()                              # read only by the dead loop body
        ad.ir_for(5, lambda: (e * 2.0).sum())
        return [x.cos()]
    g, p = pruned(build)
    assert count(p, Op.FOR) == 0 and count(p, Op.EXP) == 0 and count(p, Op.COS) == 1


def test_unused_feeder_is_kept_called_and_listed():
    calls = {"used": 0, "unused": 0}
    got = []

    def feeder(name):
        def fn():
            calls[name] += 1
            return np.ones(3, np.float32)
        return fn

    def body():
        used = ad.Feeder(feeder("used"), [3], name="used")
        unused = ad.Feeder(feeder("unused"), [3], name="unused")
        (unused * 2.0).exp()                     # computed from, but dead
        ad.Receiver(lambda a: got.append(a), [used + 1.0])

    g, p = pruned(lambda: ad.ir_for(4, body))
    feeders = {n.arg.name: n for n in p.walk() if n.op is Op.FEEDER}
    assert set(feeders) == {"used", "unused"}
    assert p.unused_feeders == {feeders["unused"].id}
    assert count(p, Op.EXP) == 0

    calls.update(used=0, unused=0)
    ad.reset()
    ad.ir_for(4, body)
    ad.execute()                                 # through the whole pipeline
    assert calls == {"used": 4, "unused": 4}, "an unused Feeder is still called"


def test_feeder_read_by_an_output_is_used():
    g, p = pruned(lambda: [ad.Feeder(lambda: np.zeros(2, np.float32), [2])])
    assert p.unused_feeders == frozenset()


def test_optimize_keeps_unused_feeders_through_later_passes():
    def body():
        ad.Feeder(lambda: np.zeros(2, np.float32), [2])
    g = trace(lambda: ad.ir_for(2, body))
    o = optimize(g)
    assert len(o.unused_feeders) == 1 and count(o, Op.FEEDER) == 1
