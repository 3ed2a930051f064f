"""Rule-level tests of the ``simplify`` pass: each rule fires where it should, not where it
must not, and the numpy device computes the same values before and after."""
from __future__ import annotations

import math

import numpy as np
import pytest

import autodiff as ad
from autodiff.graph import ops
from autodiff.graph.ir import Op
from autodiff.graph.tensor import _wrap
from autodiff.opt import prune, simplify
from autodiff.opt.rewrite import Pat, PatternMatcher, rebuild, var
from opt_helpers import assert_same_results, check_wellformed, count, run, snapshot, trace

SPECIAL = np.array([[np.nan, np.inf, -np.inf, -0.0], [0.0, 1.5, -2.25, 3e38]], np.float32)


def simplified(build, **kw):
    g = trace(build)
    before = snapshot(g)
    s = simplify(g, **kw)
    assert snapshot(g) == before, "simplify modified its input"
    check_wellformed(s)
    assert_bitwise_or_close(g, s, kw.get("fast_math", False))
    return g, s


def assert_bitwise_or_close(g, s, fast_math):
    a, b = run(g), run(s)
    if fast_math:
        return
    for x, y in zip(a[0], b[0]):
        keep = ~np.isnan(x)                       # a NaN's sign bit means nothing in IEEE 754
        np.testing.assert_array_equal(np.signbit(y)[keep], np.signbit(x)[keep])   # -0.0 stays
        np.testing.assert_allclose(y, x, rtol=1e-6, atol=0)


def special():
    return ad.Tensor(SPECIAL)


def out(s):
    return s.outputs[0]


# -- constant folding ---------------------------------------------------------------------
def T(node):
    """A traced IR node as a Tensor."""
    return _wrap(node)


C = ops.const


def test_binary_of_constants_folds_to_one_constant():
    _, s = simplified(lambda: T(ops.add(C(2.0, (2, 3)), C(0.5, (2, 3)))))
    folded = [n for n in s.walk() if n.op is Op.CONST and n.arg == 2.5]
    assert len(folded) == 1 and folded[0].shape == (2, 3)


def test_views_of_constant_fold_and_variables_do_not():
    v = ad.Tensor(np.ones(3, np.float32))
    g, s = simplified(lambda: [T(ops.expand(ops.reshape(C(4.0, (3,)), (1, 3)), (2, 3))),
                               T(ops.permute(C(4.0, (2, 3)), (1, 0))),
                               v.reshape(1, 3).expand(2, 3)])
    assert out(s).op is Op.CONST and out(s).shape == (2, 3) and out(s).arg == 4.0
    assert s.outputs[1].op is Op.CONST and s.outputs[1].shape == (3, 2)
    assert s.outputs[2].op is Op.EXPAND, "a variable is not a constant"


def test_reductions_and_dot_of_constants():
    g, s = simplified(lambda: [T(ops.reduce(Op.SUM, C(0.5, (4, 6)), (1,))),
                               T(ops.reduce(Op.RMAX, C(-3.0, (4, 6)), (0, 1))),
                               T(ops.dot(C(2.0, (3, 5)), C(0.25, (5, 2))))])
    assert [(o.op, o.arg) for o in s.outputs] == [(Op.CONST, 3.0), (Op.CONST, -3.0),
                                                  (Op.CONST, 2.5)]
    assert [o.shape for o in s.outputs] == [(4, 1), (1, 1), (3, 2)]


def test_pad_and_concat_of_constants_only_when_uniform():
    g, s = simplified(lambda: [T(ops.pad(C(0.0, (2,)), [(1, 1)])),
                               T(ops.pad(C(1.0, (2,)), [(1, 1)])),
                               T(ops.concat([C(2.0, (2,)), C(2.0, (1,))], 0)),
                               T(ops.concat([C(2.0, (2,)), C(3.0, (1,))], 0))])
    assert [o.op for o in s.outputs] == [Op.CONST, Op.PAD, Op.CONST, Op.CONCAT]


def test_folding_keeps_ieee_special_values():
    _, s = simplified(lambda: [T(ops.mul(C(math.inf, (2,)), C(0.0, (2,)))),
                               T(ops.neg(C(0.0, (2,)))),
                               T(ops.cast(C(2.7, (2,)), "int32"))])
    assert math.isnan(out(s).arg)
    assert s.outputs[1].arg == 0.0 and math.copysign(1, s.outputs[1].arg) == -1
    assert s.outputs[2].arg == 2 and s.outputs[2].dtype == "int32"


# -- unary folding -------------------------------------------------------------------------
def test_double_negation():
    _, s = simplified(lambda: -(-special()))
    assert out(s).op is Op.LOAD


def test_double_reciprocal_only_under_fast_math():
    _, s = simplified(lambda: special().reciprocal().reciprocal())
    assert out(s).op is Op.RECIP
    _, s = simplified(lambda: special().reciprocal().reciprocal(), fast_math=True)
    assert out(s).op is Op.LOAD


def test_exp_to_exp2_only_when_preferred():
    x = ad.Tensor(np.linspace(-20, 20, 12, dtype=np.float32))
    g, s = simplified(lambda: [x.exp(), (x.abs() + 1).log()])
    assert count(s, Op.EXP) == 1 and count(s, Op.EXP2) == 0
    g, s = simplified(lambda: [x.exp(), (x.abs() + 1).log()], prefer_exp2=True)
    assert count(s, Op.EXP) == 0 and count(s, Op.EXP2) == 1
    assert count(s, Op.LOG) == 0 and count(s, Op.LOG2) == 1
    assert_same_results(run(g), run(s), rtol=2e-6, atol=0)


# -- algebraic identities -------------------------------------------------------------------
@pytest.mark.parametrize("expr", [lambda x: x * 1, lambda x: 1 * x, lambda x: x / 1,
                                  lambda x: x - 0.0, lambda x: x + (-0.0), lambda x: -0.0 + x,
                                  lambda x: x ** 1, lambda x: ad.where(x > 0, x, x),
                                  lambda x: x.maximum(x), lambda x: x.minimum(x)])
def test_exact_identities_fire_by_default(expr):
    _, s = simplified(lambda: expr(special()))
    assert out(s).op is Op.LOAD


def test_sum_over_size_one_axes_is_identity():
    x = ad.Tensor(np.arange(6, dtype=np.float32).reshape(1, 6, 1))
    _, s = simplified(lambda: [x.sum((0, 2), keepdim=True), x.amax(0, keepdim=True)])
    assert [o.op for o in s.outputs] == [Op.LOAD, Op.LOAD]


@pytest.mark.parametrize("expr,op", [(lambda x: x + 0.0, Op.ADD), (lambda x: 0.0 + x, Op.ADD),
                                     (lambda x: x * 0, Op.MUL), (lambda x: 0 * x, Op.MUL),
                                     (lambda x: x - x, Op.SUB), (lambda x: x / 3.0, Op.DIV),
                                     (lambda x: 0.0 - x, Op.SUB)])
def test_ieee_breaking_identities_only_under_fast_math(expr, op):
    _, s = simplified(lambda: expr(special()))
    assert out(s).op is op, "must not fire without fast_math"
    _, s = simplified(lambda: expr(special()), fast_math=True)
    assert out(s).op is not op


def test_fast_math_results():
    x = ad.Tensor(np.array([1.0, -2.0, 3.0], np.float32))
    g, s = simplified(lambda: [x * 0, x - x, x / 3.0, (x * 3.0) * 0.5, 0.0 - x], fast_math=True)
    zero = [o for o in s.outputs[:2]]
    assert all(o.op is Op.CONST and o.arg == 0 and o.shape == (3,) for o in zero)
    assert s.outputs[2].op is Op.MUL and s.outputs[2].srcs[1].arg == float(np.float32(1) / 3)
    assert s.outputs[3].op is Op.MUL and s.outputs[3].srcs[1].arg == 1.5
    assert s.outputs[4].op is Op.NEG
    assert_same_results(run(g), run(s), rtol=1e-6, atol=0)


def test_division_by_power_of_two_becomes_exact_multiplication():
    _, s = simplified(lambda: [special() / 4.0, special() / -0.5, special() / 0.0,
                               special() / 2.0 ** 127])
    assert [o.op for o in s.outputs] == [Op.MUL, Op.MUL, Op.DIV, Op.DIV]
    assert s.outputs[0].srcs[1].arg == 0.25 and s.outputs[1].srcs[1].arg == -2.0


def test_negations_move_into_constants_and_subtractions():
    y = ad.Tensor(np.array([2.0, 5.0], np.float32))
    _, s = simplified(lambda: [special()[0, :2] * -1, (-special()) * 3.0,
                               special()[0, :2] - (-y), special()[0, :2] + (-y)])
    assert [o.op for o in s.outputs] == [Op.NEG, Op.MUL, Op.ADD, Op.SUB]
    assert s.outputs[1].srcs[0].op is Op.LOAD and s.outputs[1].srcs[1].arg == -3.0


def test_pow_by_constant_and_where_on_constant():
    x = special()
    _, s = simplified(lambda: [x ** 0, ad.where(T(ops.const(True, (2, 4), "bool")), x, x * 2),
                               ad.where(T(ops.const(False, (2, 4), "bool")), x, x * 2)])
    assert out(s).op is Op.CONST and out(s).arg == 1.0
    assert s.outputs[1].op is Op.LOAD and s.outputs[2].op is Op.MUL


# -- movement folding -----------------------------------------------------------------------
def test_views_of_views_fold():
    x = ad.Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    g, s = simplified(lambda: [x.reshape(6, 4).reshape(4, 6).reshape(24),
                               x.permute(2, 0, 1).permute(2, 0, 1),
                               x.permute(1, 2, 0).permute(2, 0, 1),
                               x[:, 1:][:, :, 1:3][1:],
                               x.sum(0).reshape(1, 3, 4).expand(2, 3, 4).reshape(2, 1, 3, 4)
                               .expand(2, 5, 3, 4)])
    o = s.outputs
    assert o[0].op is Op.RESHAPE and o[0].srcs[0].op is Op.LOAD
    assert o[1].op is Op.PERMUTE and o[1].arg == (1, 2, 0) and o[1].srcs[0].op is Op.LOAD
    assert o[2].op is Op.LOAD, "inverse permutes cancel"
    assert o[3].op is Op.SLICE and o[3].arg == ((1, 2, 1), (1, 3, 1), (1, 3, 1))
    assert o[3].srcs[0].op is Op.LOAD
    live = prune(s)                          # the replaced views are dead, not yet removed
    assert count(live, Op.SLICE) == 1 and count(live, Op.PERMUTE) == 1


def test_expand_of_expand_and_identity_views():
    x = ad.Tensor(np.arange(3, dtype=np.float32).reshape(3, 1, 1))
    g, s = simplified(lambda: [x.expand(3, 2, 1).expand(3, 2, 5), x.detach()])
    assert s.outputs[0].op is Op.EXPAND and s.outputs[0].srcs[0].op is Op.LOAD
    assert s.outputs[1].op is Op.LOAD


def test_permute_of_size_one_dims_is_a_reshape():
    x = ad.Tensor(np.arange(5, dtype=np.float32).reshape(1, 5))
    y = ad.Tensor(np.arange(10, dtype=np.float32).reshape(2, 5))
    g, s = simplified(lambda: [x.T, y.T])
    assert s.outputs[0].op is Op.RESHAPE and s.outputs[1].op is Op.PERMUTE


# -- the rule machinery ------------------------------------------------------------------
def test_rules_reach_a_fixed_point_within_the_bound():
    x = ad.Tensor(np.ones(4, np.float32))
    g = trace(lambda: (((x * 1) * 1) * 1) * 1 + 0.0 * 0 - (-(-(-x))))
    s = simplify(g)
    assert simplify(s).count() == s.count(), "a second run finds nothing more"
    assert count(s, Op.MUL) == 0


def test_rebuild_bound_stops_a_rule_that_never_settles():
    x = ad.Tensor(np.ones(2, np.float32))
    g = trace(lambda: x.exp())
    flip = PatternMatcher([(Pat(Op.EXP, srcs=(var("x"),), name="n"),
                            lambda ctx, n, x: n.replace())])       # a fresh copy each time
    s = rebuild(g, lambda n: flip.rewrite(n) or n, max_steps=5)
    assert count(s, Op.EXP) == 1


def test_rewrite_inside_loop_body_and_outputs_keep_positions():
    v = ad.Tensor(np.ones(3, np.float32))

    def build():
        a = v * 1
        b = v + 2.0

        def body():
            with ad.no_grad():
                v.copy_((v * 1) * 0.5)
        ad.ir_for(2, body)
        return [b, a]
    g, s = simplified(build)
    assert s.outputs[0].op is Op.ADD and s.outputs[1].op is Op.LOAD
    assert count(prune(s), Op.MUL) == 1


def test_value_range_of_deep_and_shared_index_chains(monkeypatch):
    """``value_range`` answers for a chain deeper than Python's recursion limit (one
    thousand frames: a 3,000-step chain of additions of the loop index) and visits a node
    reached by many paths once (``z + z`` sixty times: 2**60 paths)."""
    import importlib
    S = importlib.import_module("autodiff.opt.simplify")   # the module, not the function
    calls = [0]
    real = S._range                                # the range of one node, from its operands'

    def counted(n, srcs):
        calls[0] += 1
        return real(n, srcs)
    monkeypatch.setattr(S, "_range", counted)
    got = {}

    def body(i):
        y = i
        for _ in range(3000):
            y = y + i
        z = i
        for _ in range(60):
            z = z + z
        got["deep"] = S.value_range(y.node)
        calls[0] = 0
        got["dag"], got["dag_calls"] = S.value_range(z.node), calls[0]
    ad.ir_for(range(4), body)
    assert got["deep"] == (0, 3001 * 3)
    assert got["dag"] is None                      # 3 * 2**60 is beyond float32's exact range
    assert got["dag_calls"] == 61                  # the index and 60 additions, once each
