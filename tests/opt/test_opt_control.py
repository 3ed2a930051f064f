"""Graph passes on control flow: each sub-graph (branch, loop or scan body) is a scope; CSE
and pruning work inside it, nothing moves out of a branch, and results stay exact."""
from __future__ import annotations

import numpy as np

import autodiff as ad
from autodiff.graph.ir import Op
from autodiff.opt import cse, optimize, prune, simplify
from autodiff.opt.lower_control import lower_control
from opt_helpers import apply_exact_pass, check_wellformed, count, run, trace


def _x():
    return ad.Tensor(np.linspace(-1, 1, 6, dtype=np.float32))


def _branches(g):
    return [n for n in g.walk() if n.op is Op.IF]


def test_cse_inside_a_branch_and_into_values_before_it():
    x = _x()

    def build():
        return ad.ir_if(x.sum() > 0, lambda: x.exp() + x.exp() + x.sin(),
                        lambda: x.exp() * 3.0)

    g, c = apply_exact_pass(lambda: [x.sin() * 1.0, build()], cse, "cse")
    (then, orelse) = _branches(c)[0].arg.graphs()
    assert count(g, Op.EXP) == 3 and sum(n.op is Op.EXP for n in then.nodes) == 1
    assert sum(n.op is Op.EXP for n in orelse.nodes) == 1      # not merged across branches
    assert not any(n.op is Op.SIN for n in then.nodes)          # merged into the outer sin


def test_nothing_after_a_branch_merges_into_it():
    x = _x()

    def build():
        ad.ir_if(x.sum() > 0, lambda: ad.Receiver(lambda v: None, [x.cos()]))
        return x.cos()

    g, c = apply_exact_pass(build, cse, "cse")
    assert count(c, Op.COS) == 2
    top_cos = [n for n in c.nodes if n.op is Op.COS]
    assert top_cos and c.outputs[0] is top_cos[0]


def test_loads_do_not_merge_across_a_branch_that_assigns():
    v = ad.zeros(3)

    def build():
        a = v * 1.0
        ad.ir_if(_x().sum() > -10, lambda: v.add_(1.0))
        return [a, v * 1.0]

    g, c = apply_exact_pass(build, cse, "cse")
    assert sum(n.op is Op.LOAD and n.arg is v._var for n in c.nodes) == 2
    (oa, _), (ob, _) = run(g), run(c)
    assert (ob[1] - ob[0] == 1).all()


def test_prune_inside_branches_and_of_unused_control_flow():
    x = _x()

    def build():
        ad.ir_if(x.sum() > 0, lambda: x.exp(), lambda: x.sin())              # never read
        _ = ad.scan(lambda c, t: (c + t, c), 0.0, x)                          # never read
        kept = ad.ir_if(x.sum() > 0, lambda: (x.log(), x.cos() + 1.0)[1],
                        lambda: x.tan() * 0.0 + 2.0)
        ad.ir_if(x.sum() < 0, lambda: ad.Receiver(lambda v: None, [x]))       # effect
        return kept

    g, p = apply_exact_pass(build, prune, "prune")
    assert count(g, Op.IF) == 3 and count(p, Op.IF) == 2
    assert count(p, Op.SCAN) == 0 and count(p, Op.LOG) == 0
    check_wellformed(p)


def test_simplify_inside_branches_and_scans():
    x = _x()

    def build():
        r = ad.ir_if(x.sum() > 0, lambda: x * 1.0 + 0.0 * 0.0, lambda: -(-x))
        c, ys = ad.scan(lambda c, t: (c + t * 1.0, -(-t)), ad.zeros(()), x)
        return [r, c, ys]

    g, s = apply_exact_pass(build, simplify, "simplify")
    s = prune(s)                              # what the rewrites left unused
    assert count(s, Op.NEG) == 0 and count(s, Op.MUL) < count(g, Op.MUL)


def test_loop_index_ranges_decide_comparisons():
    t = ad.tensor(np.arange(10, dtype=np.float32))
    got = []

    def build():
        def body(i):
            p = (i.float() >= 0.0) * (i.float() < 10.0)                # always 1
            ad.Receiver(lambda a, b: got.append((float(a), float(b))), [p, t[i]])
        ad.ir_for(range(2, 10, 3), body)

    g, s = apply_exact_pass(build, simplify, "simplify")
    s = prune(s)
    assert count(s, Op.CMPLT) == count(s, Op.CMPGE) == 0
    assert count(g, Op.CMPLT) >= 2


def test_optimize_then_lower_control_keeps_results():
    w0 = np.random.default_rng(0).standard_normal((3, 3)).astype(np.float32) * 0.5
    w = ad.tensor(w0, requires_grad=True)
    x = ad.tensor(np.random.default_rng(1).standard_normal((5, 3)).astype(np.float32))

    def build():
        h, ys = ad.scan(lambda h, t: ((h @ w + t).tanh(),) * 2, ad.zeros(3), x)
        y = ad.ir_if(h.sum() > 0, lambda: ys * 2.0, lambda: ys.exp())
        (y * y).sum().backward()
        return [w.grad, y, h]

    g = trace(build)
    o = optimize(g)
    lowered = lower_control(o)
    check_wellformed(lowered)
    assert count(lowered, Op.SCAN) == count(lowered, Op.RESULT) == 0
    assert count(lowered, Op.FOR) == 2 and count(lowered, Op.PUT) >= 1
    (og, vg), (ol, vl) = run(g), run(lowered)
    for a, b in zip(og, ol):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6)
    assert all(vl[k].tolist() == vg[k].tolist() for k in vg)    # plus transient ones
