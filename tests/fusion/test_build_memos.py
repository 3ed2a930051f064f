"""The per-statement and identity memos of ``fusion.group`` give what they stand for."""
from __future__ import annotations

from autodiff.fusion.group import (_within, invert, member_load_inversions,
                                   output_inversion)
from autodiff.procedural.access import Var
from autodiff.procedural.ir import Buffer, BufferKind, Elementwise, Load, Output


def _kernel():
    y, x = Var("Y", 4), Var("X", 8)
    a = Buffer("a", (4, 8), "float32", BufferKind.TEMP)
    at = Buffer("at", (8, 4), "float32", BufferKind.TEMP)
    out = Buffer("o", (4, 8), "float32", BufferKind.TEMP)
    k = Elementwise((4, 8), (y, x), (
        Output(out, y * 8 + x, Load(a, y * 8 + x)),
        Output(at, x * 4 + y, Load(a, y * 8 + x))))
    return k, (y, x), (a, at, out)


def test_member_load_inversions_are_inversions_of_the_loads():
    k, vs, (a, _, _) = _kernel()
    got = member_load_inversions(k)
    assert [b for b, _ in got] == [a, a]
    for (_, inv), o in zip(got, k.outs):
        assert inv == invert(o.value.index, k.vars)
    assert member_load_inversions(k) is got                 # computed once


def test_output_inversion_per_output():
    k, vs, _ = _kernel()
    first, second = (output_inversion(k, o) for o in k.outs)
    assert first == invert(k.outs[0].index, k.vars)
    assert second == invert(k.outs[1].index, k.vars)
    assert first[0] != second[0]                             # not one entry for both outputs
    assert output_inversion(k, k.outs[1]) is second


def test_within_checks_the_variables_of_index_and_value():
    k, (y, x), (a, _, _) = _kernel()
    z = Var("Z", 3)
    o = k.outs[0]
    assert _within(o.index, o.value, (y, x))
    assert not _within(o.index, o.value, (y,))               # X is not in the space
    assert not _within(o.index, Load(a, z * 8 + x), (y, x))  # a value with another var
    assert _within(o.index, o.value, (y, x, z))
