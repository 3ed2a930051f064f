"""Access expressions: the simplifier keeps values (property test) and folds what lowering
produces (reshape round trips, permutes, broadcasts) back to plain index arithmetic."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from autodiff.procedural.access import (And, Div, Lt, Mod, Num, Var, bounds, evaluate, flat,
                                        ge, render, simplify, space_vars, unflat)

VARS = [Var("X", 5), Var("Y", 3), Var("Z", 4), Var("W", 1)]


def _exprs():
    leaf = st.one_of(st.sampled_from(VARS), st.integers(-6, 12).map(Num))

    def grow(sub):
        pos = st.integers(1, 12).map(Num)
        return st.one_of(
            st.tuples(sub, sub).map(lambda t: t[0] + t[1]),
            st.tuples(sub, st.integers(-4, 8)).map(lambda t: t[0] * t[1]),
            st.tuples(sub, pos).map(lambda t: Div(t[0], t[1])),
            st.tuples(sub, pos).map(lambda t: Mod(t[0], t[1])),
            st.tuples(sub, sub).map(lambda t: Lt(t[0], t[1])),
            st.tuples(sub, sub).map(lambda t: And(Lt(t[0], t[1]), ge(t[1], t[0]))),
        )
    return st.recursive(leaf, grow, max_leaves=12)


def _grid():
    """Every assignment of VARS within their extents, as broadcastable arrays."""
    axes = np.meshgrid(*[np.arange(v.extent) for v in VARS], indexing="ij")
    return {v: a.ravel().astype(np.int64) for v, a in zip(VARS, axes)}


GRID = _grid()


@settings(max_examples=1000, deadline=None, derandomize=True, database=None)
@given(_exprs())
def test_simplified_expression_equals_the_original_for_every_index_in_range(e):
    s = simplify(e)
    want = np.broadcast_to(evaluate(e, GRID), GRID[VARS[0]].shape)
    got = np.broadcast_to(evaluate(s, GRID), GRID[VARS[0]].shape)
    np.testing.assert_array_equal(got, want, err_msg=f"{render(e)} -> {render(s)}")
    lo, hi = bounds(s)
    assert lo <= want.min() and want.max() <= hi, "bounds must contain every value"
    assert simplify(s) == s, "simplify is idempotent"


def test_printed_form_matches_the_original_project():
    x, y = Var("X", 255), Var("Y", 2)
    assert str(simplify(y * 255 + x)) == "((Y * 255) + X)"
    assert str(simplify(x + y * 255 + 0)) == "((Y * 255) + X)"


@pytest.mark.parametrize("shape,new", [((2, 3, 4), (6, 4)), ((2, 3, 4), (24,)),
                                       ((6, 4), (2, 3, 4)), ((4, 6), (2, 2, 6)),
                                       ((2, 1, 4), (8,))])
def test_reshape_round_trip_folds_back_to_the_flat_index(shape, new):
    vs = space_vars(new)
    # a view of ``shape`` read through a reshape to ``new``: flat(new) -> unflat(shape) -> flat
    e = flat(unflat(flat(vs, new), shape), shape)
    assert e == flat(vs, new), render(e)
    assert "//" not in render(e) and "%" not in render(e)


def test_permute_and_broadcast_are_plain_index_arithmetic():
    y, x = space_vars((3, 4))
    assert str(flat([x, y], (4, 3))) == "((X * 3) + Y)"      # transpose of a [4, 3] buffer
    assert str(flat([Num(0), x], (1, 4))) == "X"             # row vector broadcast over Y


@pytest.mark.parametrize("e,want", [
    (Div(Var("X", 4) + Var("Y", 3) * 4, Num(4)), "Y"),
    (Mod(Var("X", 4) + Var("Y", 3) * 4, Num(4)), "X"),
    (Div(Div(Var("X", 100), Num(4)), Num(5)), "(X // 20)"),
    (Mod(Mod(Var("X", 100), Num(12)), Num(4)), "(X % 4)"),
    (Div(Var("X", 8) * 2 + 1, Num(4)), "(X // 2)"),
    (Lt(Var("X", 4), Num(4)), "1"),
    (Lt(Var("X", 4), Num(0)), "0"),
])
def test_simplifier_rules(e, want):
    assert render(simplify(e)) == want


def test_division_by_a_variable_is_rejected():
    with pytest.raises(ValueError, match="positive constant"):
        simplify(Div(Var("X", 4), Var("Y", 3)))


def test_space_vars_name_the_innermost_dim_x():
    assert [v.name for v in space_vars((2, 3, 4))] == ["Z", "Y", "X"]
    assert [v.extent for v in space_vars((2, 3, 4))] == [2, 3, 4]
    names = [v.name for v in space_vars((1,) * 10)]
    assert len(set(names)) == 10
