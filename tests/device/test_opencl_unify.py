"""Kernel bodies differing only in int literals merge into one body with those literals as
arguments (:mod:`autodiff.device.opencl.unify`), where a literal is not a loop's bound or
stride, a divisor or an array length."""
import inspect

import numpy as np
import pytest

import autodiff as ad
from autodiff import nn
from autodiff.device.cstyle.kernels import Source
from autodiff.device.opencl import chain, device, unify

HEAD = ("static inline void {n}_body(__global float* restrict buf, const int p0_, "
        "const int g0, const int g1, const int g2) {{\n")


def _body(name: str, code: str, local=(64,), args=(100,)) -> Source:
    return Source(name, HEAD.format(n=name) + code + "\n}", (128,), local,
                  params=("const int p0_",), args=args)


def _launches(*bodies):
    return {i: (False, [b]) for i, b in enumerate(bodies)}


def test_literals_outside_loops_become_arguments():
    a = _body("k1_elw", "  const int i = g0;\n  if (i >= 40) return;\n"
                        "  buf[p0_ + i * 128] = 1.5f * buf[i];", args=(100,))
    b = _body("k2_elw", "  const int i = g0;\n  if (i >= 72) return;\n"
                        "  buf[p0_ + i * 512] = 1.5f * buf[i];", args=(200,))
    c = _body("k3_elw", "  const int i = g0;\n  if (i >= 72) return;\n"
                        "  buf[p0_ + i * 512] = 2.5f * buf[i];")     # another float: stays
    launches = _launches(a, b, c, b)
    out = unify.unify([a, b, c], launches)
    assert [x.name for x in out] == ["k1_elw", "k3_elw"]
    merged = out[0]
    assert merged.params == ("const int p0_", "const int p1_", "const int p2_")
    assert "const int p2_, const int g0" in merged.src
    assert "if (i >= p1_) return;" in merged.src and "i * p2_" in merged.src
    got = [(s.name, s.args) for _, (_, srcs) in sorted(launches.items()) for s in srcs]
    assert got == [("k1_elw", (100, 40, 128)), ("k1_elw", (200, 72, 512)),
                   ("k3_elw", (100,)), ("k1_elw", (200, 72, 512))]
    assert all(s.src == merged.src for _, (_, srcs) in launches.items() for s in srcs
               if s.name == "k1_elw")


def test_a_launch_keeps_its_guard_and_touches():
    """What the device's compile sets on a launch's source (a branch decided on the device
    guards it; the buffers it reads and writes order team chains) stays on it."""
    a = _body("k1_g", "  if (g0 >= 40) return;\n  buf[p0_ + g0] = 1.0f;")
    b = _body("k2_g", "  if (g0 >= 72) return;\n  buf[p0_ + g0] = 1.0f;")
    b.guard, b.touch, b.after = "buf[3] > 0", ("reads", "writes"), True
    launches = _launches(a, b)
    assert [x.name for x in unify.unify([a, b], launches)] == ["k1_g"]
    got = launches[1][1][0]
    assert (got.name, got.args) == ("k1_g", (100, 72))
    assert (got.guard, got.touch, got.after) == ("buf[3] > 0", ("reads", "writes"), True)
    assert launches[0][1][0].guard is None


@pytest.mark.parametrize("code", [
    "  for (int j = 0; j < {n}; j++) buf[p0_ + j] = 0.0f;",           # a loop bound
    "  for (int j = 0; j < 8; j++) {{ buf[p0_ + j * {n}] = 0.0f; }}",  # a stride in a loop
    "  buf[p0_] = buf[g0 / {n}];",                                     # a divisor
    "  buf[p0_] = buf[g0 % {n}];",
    "  float t_[{n}];\n  t_[0] = 1.0f; buf[p0_] = t_[0];",             # an array length
    "  float t_[64];\n  t_[{n}] = 1.0f; buf[p0_] = t_[{n}];",          # a bare index
    "  const float4 v = __builtin_shufflevector((float4)(1.0f), (float4)(2.0f), 0, 1, 2, "
    "{n} % 8);\n  buf[p0_] = v.s0;",                                    # a builtin's operand
])
def test_literals_where_code_depends_on_them_stay(code):
    a, b = _body("k1_x", code.format(n=16)), _body("k2_x", code.format(n=32))
    launches = _launches(a, b)
    assert unify.unify([a, b], launches) == [a, b]
    assert [s for _, (_, srcs) in launches.items() for s in srcs] == [a, b]


def test_other_local_sizes_merge_and_keep_their_own_block_functions():
    """A body launched with two local sizes: one body, a block function per size."""
    code = "  if (g0 >= {n}) return;\n  buf[p0_ + g0] = 0.0f;"
    a, b = _body("k1_e", code.format(n=3)), _body("k2_e", code.format(n=5), local=(16,))
    launches = _launches(a, b)
    assert [x.name for x in unify.unify([a, b], launches)] == ["k1_e"]
    (_, (_, (x,))), (_, (_, (y,))) = sorted(launches.items())
    assert (x.name, x.local_size, y.name, y.local_size) == ("k1_e", (64,), "k1_e", (16,))
    assert chain.block_name(x) == "k1_e_block64x1x1" != chain.block_name(y)
    assert "l0 < 16" in chain.block_function(y) and "l0 < 64" in chain.block_function(x)


def test_work_group_kernels_stay_apart():
    w = Source("k3_w", "__kernel void k3_w(__global float* restrict buf) { buf[7] = 0; }",
               (64,), (64,), whole=True)
    v = Source("k4_w", "__kernel void k4_w(__global float* restrict buf) { buf[9] = 0; }",
               (64,), (64,), whole=True)
    assert unify.unify([w, v], _launches(w, v)) == [w, v]


def test_loops_are_found_with_and_without_braces():
    toks = unify.TOKEN.findall("a = 1; for (int j = 0; j < 2; j++) b[j] = 3; c = 4; "
                               "while (d < 5) { e = 6; } f = 7;")
    inside = unify._in_loops(toks)
    lits = {t: inside[i] for i, t in enumerate(toks) if t.isdigit()}
    assert lits == {"1": False, "0": True, "2": True, "3": True, "4": False, "5": True,
                    "6": True, "7": False}


try:
    device.candidates()
    _OPENCL = None
except device.OpenCLUnavailable as e:
    _OPENCL = f"no OpenCL platform: {e}"


@pytest.mark.skipif(_OPENCL is not None, reason=str(_OPENCL))
def test_checked_gathers_of_two_tables_share_a_body(monkeypatch):
    """Two embedding tables of the same shape: the lookups differ in the id their index
    check records, which becomes an argument. The run is the same bit for bit as with
    every body distinct, and an index out of range still names its own lookup."""
    def run():
        ad.reset()
        ad.manual_seed(0)
        rng = np.random.default_rng(3)
        e1, e2 = nn.Embedding(11, 16), nn.Embedding(11, 16)
        ids = ad.Tensor(rng.integers(0, 11, (2, 5)).astype(np.int64))
        ids2 = ad.Tensor(rng.integers(0, 11, (2, 5)).astype(np.int64))
        out = []
        ad.Receiver(lambda a, b: out.extend([a, b]), [e1(ids).sin(), e2(ids2).cos()])
        report = ad.execute(device="opencl")
        return report.stats["opencl"]["distinct_kernels"], out
    n, got = run()
    monkeypatch.setattr(unify, "unify", lambda bodies, launches: bodies)
    n_apart, want = run()
    assert n < n_apart
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    monkeypatch.undo()
    ad.reset()
    e1, e2 = nn.Embedding(11, 16), nn.Embedding(11, 16)
    good = ad.Tensor(np.zeros((2, 5), np.int64))
    bad = ad.Tensor(np.full((2, 5), 11, np.int64))
    first = e1(good)
    second, line = e2(bad), inspect.currentframe().f_lineno
    ad.Receiver(lambda a, b: None, [first, second])
    with pytest.raises(IndexError, match="out of range") as err:
        ad.execute(device="opencl")
    assert f"test_opencl_unify.py:{line})" in str(err.value)


@pytest.mark.skipif(_OPENCL is not None, reason=str(_OPENCL))
def test_merged_kernels_in_a_branch_decided_on_the_device_keep_their_guard(monkeypatch):
    """Two checked lookups inside a branch the device decides (taken in two of four
    iterations) share a body; each launch still runs only when the branch is taken, as on
    the numpy device (with the guard lost, the skipped iterations' lookups read indices
    the branch never computed)."""
    def program():
        ad.reset()
        rng = np.random.default_rng(0)
        t1, t2 = (ad.Tensor(rng.standard_normal((11, 16)).astype(np.float32))
                  for _ in range(2))
        i1, i2 = (ad.Tensor(rng.integers(0, 11, 5).astype(np.int64)) for _ in range(2))
        w1, w2 = (nn.Parameter(ad.Tensor(np.zeros((5, 16), np.float32))) for _ in range(2))
        outs = []

        def step(i):
            def taken():
                with ad.no_grad():
                    w1.add_(t1[i1])
                    w2.add_(t2[i2] * 2.0)
            ad.ir_if((w1.sum() * 0 + i) < 1.5, taken, lambda: None)
            ad.Receiver(lambda a, b: outs.append((a.copy(), b.copy())), [w1, w2])
        ad.ir_for(4, step)
        return outs
    guarded = []
    real = unify.unify

    def spy(bodies, launches):
        out = real(bodies, launches)
        guarded.extend(s.name for _, srcs in launches.values() for s in srcs
                       if getattr(s, "guard", None) and "gather" in s.name)
        return out
    monkeypatch.setattr(unify, "unify", spy)
    got = program()
    ad.execute(device="opencl")
    assert len(guarded) == 2 and len(set(guarded)) == 1     # one body, two launches
    want = program()
    ad.execute(device="numpy")
    assert len(got) == len(want) == 4
    for (a, b), (c, d) in zip(got, want):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)
