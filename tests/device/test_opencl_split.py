"""A program split into parts that build in parallel (:mod:`autodiff.device.opencl.split`):
every kernel in exactly one part with every function it calls, parts balanced by code."""
import pytest

from autodiff.device.cstyle.kernels import Source
from autodiff.device.opencl import split


def _fn(name: str, calls: list[str], pad: int = 0, body: bool = False) -> Source:
    fname = f"{name}_body" if body else name
    text = f"static void {fname}(__global float* buf) {{\n" + \
        "".join(f"  {c}(buf);\n" for c in calls) + " " * pad + "}"
    return Source(name, text, (1,), (1,))


def _kernel(name: str, calls: list[str], pad: int = 0) -> Source:
    return Source(name, f"__kernel void {name}(__global float* buf, const int which) {{\n"
                  + "".join(f"  {c}(buf);\n" for c in calls) + " " * pad + "}", (1,), (1,))


SOURCES = [_fn("k1_elw", [], 500, body=True), _fn("k2_dp", [], 3000, body=True),
           _fn("k1_elw_block", ["k1_elw_body"]), _fn("k2_dp_block", ["k2_dp_body"]),
           _fn("shared", ["k1_elw_body"]),
           _kernel("d1_x1", ["k1_elw_block", "shared"]), _kernel("d2_x1", ["k2_dp_block"]),
           _kernel("d3_x1", ["shared", "vload16", "k1_elw_block"], 100)]


def test_callees_and_closure_follow_calls_by_name():
    calls = split.callees(SOURCES)
    assert calls["k1_elw_block"] == {"k1_elw"}          # its body function, by its C name
    assert calls["d3_x1"] == {"shared", "k1_elw_block"}  # builtins are no sources
    assert split.closure("d1_x1", calls) == {"d1_x1", "k1_elw_block", "k1_elw", "shared"}


def test_every_kernel_in_one_part_with_its_callees_in_program_order():
    kernels = ["d1_x1", "d2_x1", "d3_x1"]
    parts = split.split(SOURCES, kernels, 2)
    names = [[s.name for s in p] for p in parts]
    for k in kernels:
        assert sum(k in n for n in names) == 1
    order = [s.name for s in SOURCES]
    for n in names:
        assert n == sorted(n, key=order.index)
        calls = split.callees(SOURCES)
        for k in set(n) & set(kernels):
            assert split.closure(k, calls) <= set(n)
    # the big matmul kernel alone; the two small ones (sharing functions) together
    assert {frozenset(set(n) & set(kernels)) for n in names} == \
        {frozenset({"d2_x1"}), frozenset({"d1_x1", "d3_x1"})}


def test_one_part_is_the_program_and_bad_arguments_are_refused():
    assert split.split(SOURCES, ["d1_x1"], 1) == [SOURCES]
    with pytest.raises(ValueError, match="at least 1"):
        split.split(SOURCES, ["d1_x1"], 0)
    with pytest.raises(ValueError, match="no source for kernels"):
        split.split(SOURCES, ["d9_x1"], 2)


def test_a_function_several_kernels_call_counts_once_per_kernel():
    """PoCL compiles a dispatch kernel with every function it calls, so a function that
    two kernels call is compiled twice: two kernels sharing a large function weigh what
    both their closures do. Balancing by each part's code alone put a third, small kernel
    beside them (its code 1500 characters against the other part's 1300, but 2500
    compiled against 1300); weighted by the kernels' closures it joins the other part."""
    big = _fn("tile", [], 1000)
    sources = [big, _fn("c_own", [], 1300), _fn("e_own", [], 300),
               _kernel("a", ["tile"], 60), _kernel("b", ["tile"], 60),
               _kernel("c", ["c_own"]), _kernel("e", ["e_own"])]
    parts = split.split(sources, ["a", "b", "c", "e"], 2)
    kernels = {frozenset(s.name for s in p if s.name in "abce") for p in parts}
    assert kernels == {frozenset("ab"), frozenset("ce")}
    # the shared function is in both kernels' part once
    assert sum(s.name == "tile" for p in parts for s in p) == 1


def test_the_functions_a_program_adds_are_counted_but_not_kept():
    """The shared tile loops and transposes that :func:`render.program` adds to a part
    are sources of the split's count only: every kernel calling one weighs it, and the
    parts hold none of them (each part's program adds its own)."""
    from autodiff.device.opencl import _parts, render
    from autodiff.device.cstyle.kernels import TRANSPOSE16
    calls = [f"{TRANSPOSE16}", "_ad_mm8x16x2p"]
    sources = [_kernel("d1_x1", calls), _kernel("d2_x1", calls), _kernel("d3_x1", [], 40)]
    shared = render.shared_functions(sources)
    assert [s.name for s in shared] == ["_ad_mm8x16x2p", TRANSPOSE16]
    assert all(len(s.src) > 500 for s in shared)
    texts, part_of = _parts(sources, {"d1_x1", "d2_x1", "d3_x1"}, 2, False)
    assert part_of["d1_x1"] != part_of["d2_x1"]      # each weighs both shared functions
    for k in ("d1_x1", "d2_x1"):                     # each part defines what it calls, once
        t = texts[part_of[k]]
        assert t.count(f"void {TRANSPOSE16}(") == 1 and t.count("void _ad_mm8x16x2p(") == 1
    assert all(t.count(f"void {TRANSPOSE16}(") == (f"{TRANSPOSE16}(buf)" in t) for t in texts)
