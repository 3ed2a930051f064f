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


def test_a_member_of_another_size_fuses_only_where_it_can_be_inlined(monkeypatch):
    """``build``'s early test (before the fixpoint maps anything): a member of another
    size than the group joins only as an inlined producer (one temporary result read by
    no statement outside the group); read outside, the group fails, and it fails before
    any member's loads are looked at."""
    import autodiff.fusion.group as group
    from autodiff.procedural.ir import Apply
    y, x, i = Var("Y", 4), Var("X", 8), Var("I", 8)
    bias = Buffer("bias", (8,), "float32", BufferKind.PARAM)
    b2 = Buffer("b2", (8,), "float32", BufferKind.TEMP)
    h = Buffer("h", (4, 8), "float32", BufferKind.TEMP)
    out = Buffer("o", (4, 8), "float32", BufferKind.TEMP)
    prod = Elementwise((8,), (i,), (Output(b2, i, Apply("mul", (Load(bias, i), Load(bias, i)),
                                                        "float32")),))
    use = Elementwise((4, 8), (y, x), (Output(out, y * 8 + x, Apply(
        "add", (Load(h, y * 8 + x), Load(b2, x)), "float32")),))
    assert group.build(None, [prod, use], lambda b: False) is not None   # inlined
    looked = []
    real = group.member_loads
    monkeypatch.setattr(group, "member_loads", lambda m: looked.append(m) or real(m))
    assert group.build(None, [prod, use], lambda b: b is b2) is None     # read outside
    assert looked == []
