"""The ``cse`` pass: identical pure nodes merge; loads across writes, effects and values of
different loop iterations never do."""
from __future__ import annotations

import numpy as np

import autodiff as ad
from autodiff.graph import ops
from autodiff.graph.ir import Op
from autodiff.graph.tensor import _wrap
from autodiff.opt import cse, prune, simplify
from opt_helpers import apply_exact_pass, assert_same_results, count, run, trace


def merged(build):
    return apply_exact_pass(build, cse, "cse")


def test_repeated_expressions_merge_and_outputs_may_share_a_node():
    x = ad.Tensor(np.linspace(-1, 1, 6, dtype=np.float32))
    g, c = merged(lambda: [x.exp() * 2.0 + 1.0, x.exp() * 2.0 + 1.0, x.exp()])
    assert count(g, Op.EXP) == 3 and count(c, Op.EXP) == 1
    assert c.outputs[0] is c.outputs[1]
    assert len(c.outputs) == 3


def test_sigmoid_forward_and_backward_share_values():
    w = ad.Tensor(np.full((3,), 0.5, np.float32), requires_grad=True)

    def build():
        def body():
            y = (w * 2.0).sigmoid() + (w * 2.0).sigmoid()
            y.sum().backward()
            with ad.no_grad():
                w.sub_(w.grad * 0.1)
        ad.ir_for(3, body)
    g, c = merged(build)
    assert count(g, Op.SIGMOID) == 2 and count(c, Op.SIGMOID) == 1
    assert c.count() < g.count()


def test_constants_merge_by_exact_value():
    x = ad.Tensor(np.ones(2, np.float32))
    g, c = merged(lambda: [x + _wrap(ops.const(0.0, (2,))), x + _wrap(ops.const(-0.0, (2,))),
                           x + _wrap(ops.const(0.0, (2,)))])
    consts = [n for n in c.walk() if n.op is Op.CONST]
    assert len(consts) == 2, "0.0 and -0.0 stay apart, the two 0.0 merge"
    assert c.outputs[0] is c.outputs[2] and c.outputs[0] is not c.outputs[1]


def test_loads_do_not_merge_across_a_loop_that_assigns():
    v = ad.Tensor(np.ones(3, np.float32))

    def build():
        before = v * 2.0

        def body():
            with ad.no_grad():
                v.add_(1.0)
        ad.ir_for(2, body)
        after = v * 2.0
        return [before, after]
    g, c = merged(build)
    assert c.outputs[0] is not c.outputs[1]
    outs, _ = run(c)
    np.testing.assert_allclose(outs[0], [2, 2, 2])
    np.testing.assert_allclose(outs[1], [6, 6, 6])


def test_loads_do_not_merge_across_a_zero_iteration_loop_either():
    v = ad.Tensor(np.ones(3, np.float32))

    def build():
        before = v * 2.0
        ad.ir_for(0, lambda: v.add_(1.0))
        return [before, v * 2.0]
    g, c = merged(build)
    assert sum(n.op is Op.LOAD for n in c.nodes) == 2 and c.outputs[0] is not c.outputs[1]


def test_body_load_merges_with_outer_load_only_when_the_loop_does_not_assign_it():
    const_var = ad.Tensor(np.full(3, 2.0, np.float32))
    state = ad.Tensor(np.zeros(3, np.float32))
    seen = []

    def build():
        outer = const_var * state

        def body():
            with ad.no_grad():
                state.add_(const_var * state + 1.0)
            ad.Receiver(lambda a: seen.append(a), [state * const_var])
        ad.ir_for(3, body)
        return [outer]
    g, c = merged(build)
    loads = [n for n in c.walk() if n.op is Op.LOAD]
    names = sorted(id(n.arg) for n in loads)
    assert names.count(id(const_var._var)) == 1, "const_var is loaded once, before the loop"
    assert names.count(id(state._var)) == 2, "state is reloaded inside the assigning loop"
    body_mul = [n for n in c.nodes[-1].arg.body.nodes if n.op is Op.MUL]
    assert all(m is not c.outputs[0] for m in body_mul), "loop value != value before the loop"


def test_body_nodes_merge_into_values_computed_before_the_loop():
    x = ad.Tensor(np.linspace(0, 1, 4, dtype=np.float32))
    seen = []

    def build():
        e = x.exp()

        def body():
            ad.Receiver(lambda a: seen.append(a), [x.exp() + 1.0])
        ad.ir_for(2, body)
        return [e]
    g, c = merged(build)
    assert count(c, Op.EXP) == 1


def test_values_from_a_loop_body_are_not_reused_after_it():
    x = ad.Tensor(np.linspace(0, 1, 4, dtype=np.float32))

    def build():
        ad.ir_for(2, lambda: ad.Receiver(lambda a: None, [x.sin()]))
        return [x.sin()]
    g, c = merged(build)
    assert count(c, Op.SIN) == 2


def test_effects_never_merge():
    calls = []

    def feed():
        calls.append(1)
        return np.ones(2, np.float32)

    def build():
        def body():
            a = ad.Feeder(feed, [2])
            b = ad.Feeder(feed, [2])
            ad.Receiver(lambda v: None, [a + b])
            ad.Receiver(lambda v: None, [a + b])
        ad.ir_for(2, body)
    g, c = merged(build)
    assert count(c, Op.FEEDER) == 2 and count(c, Op.RECEIVER) == 2 and count(c, Op.ADD) == 1


def test_random_draws_merge_within_one_body_only():
    def build():
        outer = _wrap(ops.rand((3,), seed=7))

        def body():
            r1 = _wrap(ops.rand((3,), seed=7))
            r2 = _wrap(ops.rand((3,), seed=7))
            ad.Receiver(lambda a, b, c: None, [r1, r2, outer])
        ad.ir_for(2, body)
        return [outer]
    g, c = merged(build)
    assert count(g, Op.RAND) == 3 and count(c, Op.RAND) == 2


def test_cse_after_simplify_and_prune_shrinks_and_keeps_values():
    x = ad.Tensor(np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4))
    g = trace(lambda: [x.T.T.exp() * 1.0 + x.exp(), (x * 1.0).exp()])
    o = prune(cse(simplify(g)))
    assert count(o, Op.EXP) == 1 and count(o, Op.PERMUTE) == 0
    assert_same_results(run(g), run(o))
