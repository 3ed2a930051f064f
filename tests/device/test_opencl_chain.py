"""Launch chaining on the OpenCL device (:mod:`autodiff.device.opencl.chain`): which kernels
join a chain, that a chain never crosses a large kernel, a Feeder or a Receiver, and that
chained and NDRange launches compute the same numbers."""
import sys
from pathlib import Path

import numpy as np
import pytest

import autodiff as ad
from autodiff.device.opencl import chain, device
from autodiff.device.opencl.runtime import Feed, Launch, Loop, Receive

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import linear  # noqa: E402


def _linear(steps: int, **options):
    net = linear.build(seed=1)
    losses, report = linear.train(net, steps, device="opencl", **options)
    return losses, [p.numpy() for p in net.parameters()], report.stats["opencl"]


def _body_runs(steps) -> str:
    """The host steps of the first loop body: C = chain launch, L = one-kernel launch,
    F = Feeder write, R = Receiver read."""
    lp = next(s for s in steps if type(s) is Loop)
    kinds = {Feed: "F", Receive: "R"}
    return "".join("C" if type(s) is Launch and s.name.startswith("c") else
                   kinds.get(type(s), "L") for s in lp.body)


def test_work_counts_flops_of_dot_products_and_points_otherwise():
    from autodiff import procedural
    rng = np.random.default_rng(0)
    x = ad.Tensor(rng.standard_normal((6, 5)).astype(np.float32))
    w = ad.Tensor(rng.standard_normal((5, 7)).astype(np.float32))
    y = (x @ w).tanh().sum(-1)
    ad.execute(device="numpy")
    prog = procedural.lower(ad.runtime.TRACER.last.optimized)
    sizes = {type(s).__name__: chain.work(s) for s, _ in prog.walk()}
    assert sizes["DotProduct"] == 2 * 6 * 7 * 5
    assert sizes["Reduce"] == chain.POINT_FLOPS * 6 * 7
    assert y.numpy().shape == (6,)


def test_chained_and_ndrange_launches_agree_on_the_linear_example(opencl_executables):
    """Sizes 2x255 @ 255x255: every kernel is small, so the loop body is one chain; with
    ``chain_work=0`` every kernel is its own launch. Both match after 30 SGD steps."""
    l0, p0, s0 = _linear(30, chain_work=0)
    l1, p1, s1 = _linear(30)
    assert s0["launches"] == s0["kernels"] and s0["chains"] == 0
    assert set(_body_runs(opencl_executables[0].steps)) <= {"L", "F", "R"}
    assert s0["rings"] == 0 and s1["rings"] >= 1     # rings need chains: their copies
    assert s1["kernels"] - s1["rings"] == s0["kernels"] and s1["chains"] >= 1
    assert _body_runs(opencl_executables[1].steps).count("C") >= 1
    assert s1["launches"] < s1["kernels"]
    np.testing.assert_allclose(l1, l0, rtol=1e-6, atol=0)
    for a, b in zip(p1, p0):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_a_large_kernel_and_host_commands_end_a_chain(opencl_executables):
    """A small model (16x16 parameter, its loss, backward and SGD step: small kernels), a
    Feeder and a 192^3 matmul of the fed value (14 Mflop, above CHAIN_WORK, its own
    launch), a Receiver of both: chains form between the large launch and the host
    commands, never two chains in a row."""
    from autodiff.optim import SGD
    rng = np.random.default_rng(2)
    w0 = rng.standard_normal((16, 16)).astype(np.float32)
    xs = [rng.standard_normal((192, 192)).astype(np.float32) for _ in range(3)]
    w = ad.Tensor(w0, requires_grad=True)
    opt = SGD([w], lr=0.1)
    feed, got = iter(xs), []

    def step():
        opt.zero_grad()
        x = ad.Feeder(lambda: next(feed), shape=[192, 192])
        big = (x @ x).sigmoid().sum()
        loss = ((w @ w * 0.5).tanh() ** 2).sum()
        ad.Receiver(lambda a, b: got.append((float(a), float(b))), [loss, big])
        loss.backward()
        opt.step()
    ad.ir_for(range(3), step)
    # as on 2+ cores; prefetch=0: a plain write and read (no rings), host commands here
    ad.execute(device="opencl", chain_work=chain.CHAIN_WORK, prefetch=0)
    runs = _body_runs(opencl_executables[-1].steps)
    assert {"C", "L", "F", "R"} <= set(runs), runs
    assert "CC" not in runs, runs
    wk = w0.astype(np.float64)
    for (loss, big), x in zip(got, xs):
        x64 = x.astype(np.float64)
        np.testing.assert_allclose(big, np.sum(1 / (1 + np.exp(-(x64 @ x64)))), rtol=1e-5)
        t = np.tanh(wk @ wk * 0.5)
        np.testing.assert_allclose(loss, np.sum(t ** 2), rtol=1e-5)
        g = 2 * t * (1 - t ** 2) * 0.5                 # d loss / d (w @ w)
        wk = wk - 0.1 * (g @ wk.T + wk.T @ g)
    np.testing.assert_allclose(w.numpy(), wk, rtol=1e-4, atol=1e-5)


def test_gpu_devices_get_no_chains_and_one_core_chains_everything(monkeypatch):
    import pyopencl as cl
    from autodiff.device.opencl import prejit

    class Dev:
        def __init__(self, t, units=2):
            self.type, self.max_compute_units = t, units
    monkeypatch.setattr(prejit, "usable_cores", lambda: 2)
    assert chain.default_work(Dev(cl.device_type.CPU)) == chain.CHAIN_WORK
    assert chain.default_work(Dev(cl.device_type.GPU)) == 0
    assert not chain.is_cpu(Dev(cl.device_type.ACCELERATOR))
    # one compute unit (POCL_MAX_PTHREAD_COUNT=1), or a process pinned to one core
    assert chain.default_work(Dev(cl.device_type.CPU, units=1)) == chain.ONE_CORE_WORK
    monkeypatch.setattr(prejit, "usable_cores", lambda: 1)
    assert chain.default_work(Dev(cl.device_type.CPU)) == chain.ONE_CORE_WORK
    assert chain.default_work(Dev(cl.device_type.GPU)) == 0


def test_dispatch_kernels_agree_with_one_wrapper_per_body(opencl_executables, monkeypatch):
    """With no chains (``chain_work=0``) every kernel of the linear example is an NDRange
    launch: by default the bodies of one local size share a dispatch kernel (a ``switch``
    on its first argument); with ``DISPATCH_MAX = 1`` each body has its own wrapper. Both
    give the same losses and parameters (over 1-D and 2-D work-groups), and the dispatch
    program has fewer kernels."""
    l0, p0, s0 = _linear(20, chain_work=0)
    monkeypatch.setattr(chain, "DISPATCH_MAX", 1)
    l1, p1, s1 = _linear(20, chain_work=0)
    src0, src1 = (str(e.stages["opencl"]) for e in opencl_executables)
    assert "switch (which)" in src0 and "switch (which)" not in src1
    # one work-item per group calls the entry's block function (never inlined) for the
    # whole group: PoCL compiles each body once, not inlined into every switch
    assert "_block(buf, p0_" in src0 and "__attribute__((noinline)) static void" in src0
    assert "if ((int)get_local_id(0) | (int)get_local_id(1) | (int)get_local_id(2)) return;" \
        in src0
    assert s0["program_kernels"] < s1["program_kernels"] == s1["distinct_kernels"]
    assert s0["launches"] == s1["launches"] == s0["kernels"]
    np.testing.assert_allclose(l0, l1, rtol=1e-6, atol=0)
    for a, b in zip(p0, p1):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_dispatch_holds_chains_and_guarded_bodies(opencl_executables):
    """A device-decided branch (``ir_if`` on a tensor) guards its kernels inside the
    dispatch kernel's cases; chained and NDRange launches mix. The result matches numpy."""
    rng = np.random.default_rng(3)
    a0 = rng.standard_normal((64, 64)).astype(np.float32)
    x = ad.Tensor(a0, requires_grad=False)
    acc = ad.Tensor(np.zeros((64, 64), np.float32))
    outs = []

    def step(i):
        y = (x @ x).tanh()
        ad.ir_if(y.sum() > 0, lambda: acc.copy_(acc + y), lambda: acc.copy_(acc - y))
        ad.Receiver(lambda v: outs.append(v.copy()), [acc])
    ad.ir_for(range(3), step)
    ad.execute(device="opencl")
    cases = [ln for ln in str(opencl_executables[-1].stages["opencl"]).splitlines()
             if ln.startswith("  case ")]
    assert any("if (" in ln for ln in cases), cases          # a guarded body
    assert any("_x" in ln.split(":")[1].split("(")[0] for ln in cases), cases  # a chain
    y = np.tanh(a0.astype(np.float64) @ a0.astype(np.float64))
    want = np.zeros_like(y)
    for k in range(3):
        want = want + y if y.sum() > 0 else want - y
        np.testing.assert_allclose(outs[k], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("team", [None, (2, 640)])
def test_a_dispatch_kernels_switch_and_team_mode_are_functions_it_calls(team):
    """PoCL compiles a kernel's body three times (work-group function, fast variant,
    kernel): the switch over the entries and the team mode are functions of their own
    (``<kernel>_run``, ``<kernel>_team``) and the kernel only calls them."""
    from autodiff.device.cstyle.kernels import Source
    entries = [Source("k1", "", (8,), (1,), params=("const int a",)),
               Source("k2", "", (8,), (1,), params=("const int a", "const int b"))]
    src = chain.dispatch("d0_x2", entries, team=team).src
    kernel = src[src.index("__kernel void d0_x2("):]
    assert "case " not in kernel and "atomic_inc" not in kernel
    assert kernel.count("d0_x2_run(buf, which, p0_, p1_, reps, ctr, wrd, wstep, b0, b1, b2)") == 1
    assert "static void d0_x2_run(" in src and "case 1: k2_block(buf, p0_, p1_, b0, b1, b2)" in src
    assert chain.has_team_mode(chain.dispatch("d0_x2", entries, team=team)) == (team is not None)
    if team is not None:
        assert "d0_x2_team(buf, which, b0); return;" in kernel
        assert "static void d0_x2_team(" in src and "team_sync(s_, 2)" in src


def _light_program(steps: int = 3):
    """A 16x16 SGD model and a 96^3 matmul of a Feeder (1.8 Mflop, above CHAIN_WORK): a
    light loop body (below LIGHT_BODY) with one kernel that two cores could split."""
    from autodiff.optim import SGD
    rng = np.random.default_rng(4)
    w = ad.Tensor(rng.standard_normal((16, 16)).astype(np.float32), requires_grad=True)
    xs = [rng.standard_normal((96, 96)).astype(np.float32) for _ in range(steps)]
    opt = SGD([w], lr=0.1)
    feed, got = iter(xs), []

    def step():
        opt.zero_grad()
        x = ad.Feeder(lambda: next(feed), shape=[96, 96])
        big = (x @ x).sigmoid().sum()
        loss = ((w @ w * 0.5).tanh() ** 2).sum() + big * 0.0
        loss.backward()
        opt.step()
        ad.Receiver(lambda a: got.append(float(a)), [loss])
    ad.ir_for(range(steps), step)
    return w, got


def test_a_light_loop_body_is_one_chain_on_two_cores(opencl_executables, monkeypatch):
    """On two cores (chain limit CHAIN_WORK) a loop body of little work in all chains all
    its kernels, the one above CHAIN_WORK too: launches would cost more than the second
    core saves. An explicit ``chain_work``, or a LIGHT_BODY below the body's work with
    team chains off, keeps the large kernel its own launch; results agree."""
    monkeypatch.setattr(chain, "default_work", lambda dev: chain.CHAIN_WORK)
    w, got = _light_program()
    ad.execute(device="opencl")
    light = opencl_executables[-1]
    body = next(s for s in light.steps if type(s) is Loop).body
    assert [type(s) for s in body].count(Launch) == 1
    ad.reset()
    w2, got2 = _light_program()
    ad.execute(device="opencl", chain_work=chain.CHAIN_WORK)
    body2 = next(s for s in opencl_executables[-1].steps if type(s) is Loop).body
    assert [type(s) for s in body2].count(Launch) > 1
    np.testing.assert_allclose(got, got2, rtol=1e-6)
    np.testing.assert_array_equal(w.numpy(), w2.numpy())
    ad.reset()
    monkeypatch.setattr(chain, "LIGHT_BODY", 1000)
    _light_program()
    ad.execute(device="opencl", team=False)
    body3 = next(s for s in opencl_executables[-1].steps if type(s) is Loop).body
    assert [type(s) for s in body3].count(Launch) > 1
    # with team chains (team=True, where PoCL has two threads or more) the heavy body is
    # one launch again, of one work-group per thread
    from autodiff.device.opencl import context
    workers = chain.team_size(context()[1])
    if workers:                 # else: no team chains here (one PoCL thread)
        ad.reset()
        _, got4 = _light_program()
        ad.execute(device="opencl", team=True)
        body4 = next(s for s in opencl_executables[-1].steps if type(s) is Loop).body
        launches = [s for s in body4 if type(s) is Launch]
        assert len(launches) == 1 and launches[0].team == workers
        assert tuple(launches[0].global_size) == (workers,)
        np.testing.assert_allclose(got4, got, rtol=1e-6)
