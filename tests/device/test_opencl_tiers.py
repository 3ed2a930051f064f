"""Tiered compilation on the OpenCL device (:mod:`autodiff.device.opencl.tiers`): which
step lists get team chains as a second tier, that a run compiles it for the next one (or
during a long loop), and that the swap changes no number."""
import os
import time

import numpy as np
import pytest

import autodiff as ad
from autodiff.device.opencl import chain, device, tiers
from autodiff.device.opencl.runtime import Feed, Launch, Loop, Receive

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)


def _workers() -> int:
    from autodiff.device.opencl import context, prejit
    dev = context()[1]
    return chain.team_size(dev) if prejit.enabled(dev) else 0


needs_team = pytest.mark.skipif(
    _workers() == 0, reason="tiered team chains need a PoCL pthread device with two or more "
                            "threads and the pre-JIT helper (this machine has neither)")


def _launch(name, team=0):
    la = Launch(name, (1,), (1,))
    la.team = team
    return la


class _Spec:
    shape, dtype, dtypes = (1,), "float32", None


def test_plan_replaces_launch_runs_inside_loops_and_keeps_the_host_steps(monkeypatch):
    feed, recv = Feed(_Spec(), 0, (1,), "float32"), Receive(_Spec(), [])
    inner = Loop(range(1000), [_launch("a"), _launch("b"), _launch("c")], [])
    base = [_launch("init"), Loop(range(1000), [feed, _launch("k1"), _launch("k2"), inner,
                                                recv], [feed])]
    inner_t = Loop(range(1000), [_launch("t2", 2)], [])
    team_feed, team_recv = Feed(feed.spec, 0, (1,), "float32"), Receive(recv.spec, [])
    team = [_launch("init"), Loop(range(1000), [team_feed, _launch("t1", 2), inner_t,
                                                team_recv], [team_feed])]
    ups = tiers.plan(base, team)
    assert [len(u.launches) for u in ups] == [1, 1]
    outer = ups[0]
    assert outer.steps is base[1].body
    # the team body holds the base's own Feed, nested Loop and Receive objects
    assert outer.body[0] is feed and outer.body[2] is inner and outer.body[3] is recv
    assert ups[1].steps is inner.body and ups[1].body[0].name == "t2"
    # short runs save too little to compile (1000 + 1000 * 1000 * 2 launches above)
    short = [Loop(range(3), [_launch("k1"), _launch("k2")], [])]
    assert tiers.plan(short, [Loop(range(3), [_launch("t", 2)], [])]) == []
    # a loop run in blocks keeps its launch
    monkeypatch.setattr(tiers, "MIN_SAVING_S", 0.0)
    inner.block = 8
    assert [len(u.launches) for u in tiers.plan(base, team)] == [1]
    # host steps that do not pair up: nothing
    assert tiers.plan(base, [_launch("init"), Loop(range(1000), [team_recv], [])]) == []


def _tiered(monkeypatch, tmp_path):
    """Heavy bodies, any saving worth a second tier, other processes ignored (the test
    suite's other workers), a marker of the test's own."""
    monkeypatch.setattr(chain, "LIGHT_BODY", 0)
    monkeypatch.setattr(tiers, "MIN_SAVING_S", 0.0)
    monkeypatch.setattr(tiers, "BUSY", float("inf"))
    monkeypatch.setenv("POCL_CACHE_DIR", str(tmp_path))


def test_team_chains_run_while_other_processes_leave_the_cores_free(monkeypatch):
    """Sampled cores of other processes (the machine's busy time minus this process's):
    team chains once a sample of SAMPLE_S seconds shows at most BUSY cores in use by
    others, tier 1 while more."""
    from types import SimpleNamespace
    t = tiers.Tier("p.cl", [], [], "/nonexistent/marker")
    used = []

    def use(self, exe, team, k):
        used.append((k, team))
        self.team = team
    monkeypatch.setattr(tiers.Tier, "_done", lambda self: True)
    monkeypatch.setattr(tiers.Tier, "_use", use)
    clock = {"t": 0.0, "busy": 0.0, "own": 0.0}
    monkeypatch.setattr(tiers, "_clock", lambda: clock["t"])
    monkeypatch.setattr(tiers, "_sample", lambda: (clock["t"], clock["busy"], clock["own"]))

    def after(seconds, others, own=2.0):        # cores busy meanwhile
        clock["t"] += seconds
        clock["busy"] += (others + own) * seconds
        clock["own"] += own * seconds
    exe = SimpleNamespace(_iter0=None, device=None)
    t.begin(exe)
    after(0.6 * tiers.SAMPLE_S, 0.0)
    t.step(exe, 1, 0, 100)
    assert used == []                           # the sample is too short yet
    after(0.6 * tiers.SAMPLE_S, 0.0)
    t.step(exe, 2, 0, 100)
    assert used == [(2, True)]
    after(2 * tiers.SAMPLE_S, 1.5)              # another training process starts
    t.step(exe, 3, 0, 100)
    assert used == [(2, True), (3, False)] and t.busy == [1.5]
    after(2 * tiers.SAMPLE_S, 1.0)
    t.step(exe, 4, 0, 100)
    assert len(used) == 2
    after(2 * tiers.SAMPLE_S, 0.1)              # it ended
    t.step(exe, 5, 0, 100)
    assert used[-1] == (5, True)


def _program(steps, hook=None):
    """A small two-layer model under AdamW with a Feeder and a Receiver; its loop body
    runs one by one as tier 1 (LIGHT_BODY patched to 0 by the tests)."""
    from autodiff import nn
    from autodiff.optim import AdamW
    ad.manual_seed(1)
    rng = np.random.default_rng(2)
    net = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.LayerNorm(64), nn.Linear(64, 8))
    opt = AdamW(net.parameters(), lr=1e-2)
    xs = [rng.standard_normal((256, 32)).astype(np.float32) for _ in range(steps)]
    got, calls = [], iter(range(steps))

    def feed():
        i = next(calls)
        if hook is not None:
            hook(i)
        return xs[i]

    def step():
        opt.zero_grad()
        x = ad.Feeder(feed, shape=[256, 32])
        loss = (net(x) ** 2).mean()
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: got.append(float(v)), [loss])
    ad.ir_for(range(steps), step)
    return net, got


def _run(opencl_executables, steps, hook=None, **options):
    ad.reset()
    net, got = _program(steps, hook)
    ad.execute(device="opencl", **options)
    return [p.numpy() for p in net.parameters()], got, opencl_executables[-1]


@needs_team
def test_a_run_compiles_the_second_tier_for_the_next_which_swaps_it_in_first(
        opencl_executables, monkeypatch, tmp_path):
    _tiered(monkeypatch, tmp_path)
    p_one, l_one, _ = _run(opencl_executables, 6, team=False)
    p1, l1, exe = _run(opencl_executables, 6)
    assert exe.stats["team_launches"] > 0 and exe.stats["team_compiled"] == "after"
    assert exe.stats["team_switches"] == []
    end = time.time() + 120                          # the detached helper compiles it
    while not os.path.exists(exe.tier.marker) and time.time() < end:
        time.sleep(0.05)
    assert os.path.exists(exe.tier.marker)
    def wait_for_the_switch(i):     # (a switch needs a sample of SAMPLE_S seconds)
        if i == 1:
            time.sleep(2 * tiers.SAMPLE_S)
    p2, l2, exe2 = _run(opencl_executables, 6, wait_for_the_switch)
    assert exe2.stats["team_switches"][0][1] == "team", exe2.stats
    assert exe2.stats["team_switches"][0][0] <= 3
    body = next(s for s in exe2.steps if type(s) is Loop).body
    assert sum(type(s) is Launch for s in body) == exe2.stats["team_launches"]
    for a, b, c in zip(p_one, p1, p2):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    assert l_one == l1 == l2


def _compiled_at(opencl_executables, at: int):
    """A Feeder hook: iteration ``at``'s Feeder waits for the running program's helper to
    finish, the next one for a sample of the cores (so the switch comes right after)."""
    def hook(i):
        tier = opencl_executables[-1].tier
        end = time.time() + 120
        while i == at and tier.helper is not None and time.time() < end and \
                not os.path.exists(os.path.join(tier.helper.claims, "done")):
            time.sleep(0.02)
        if i == at + 1:
            time.sleep(2 * tiers.SAMPLE_S)
    return hook


@needs_team
def test_a_long_loop_swaps_the_second_tier_in_while_it_runs(opencl_executables, monkeypatch,
                                                            tmp_path):
    _tiered(monkeypatch, tmp_path)
    monkeypatch.setattr(tiers, "BACKGROUND_S", 0.0)       # every loop counts as long
    monkeypatch.setattr(tiers, "ESTIMATE_AT", 2)
    steps = 40

    hook = _compiled_at(opencl_executables, 10)   # the switch comes after iteration 10
    p_one, l_one, _ = _run(opencl_executables, steps, team=False)
    p, got, exe = _run(opencl_executables, steps, hook)
    assert exe.stats["team_compiled"] == "during"
    (k, kind), = exe.stats["team_switches"]
    assert kind == "team" and 10 <= k <= 12
    for a, b in zip(p_one, p):
        np.testing.assert_array_equal(a, b)
    assert got == l_one


@needs_team
def test_a_feeder_failing_after_the_swap_keeps_the_last_completed_iteration(
        opencl_executables, monkeypatch, tmp_path):
    """The swap before iteration 3 or later (iteration 3's Feeder waits for the helper), a
    Feeder raising in iteration 12: the error names it and the parameters are those after
    12 iterations, as a clean 12-step run of one launch per kernel leaves them."""
    from autodiff.errors import FeederError
    _tiered(monkeypatch, tmp_path)
    monkeypatch.setattr(tiers, "BACKGROUND_S", 0.0)
    monkeypatch.setattr(tiers, "ESTIMATE_AT", 2)
    want, _, _ = _run(opencl_executables, 12, team=False)

    compiled = _compiled_at(opencl_executables, 3)

    def hook(i):
        compiled(i)
        if i == 12:
            raise ValueError("no more data")
    ad.reset()
    net, _ = _program(20, hook)
    with pytest.raises(FeederError, match="iteration 12"):
        ad.execute(device="opencl")
    exe = opencl_executables[-1]
    (k, kind), = exe.stats["team_switches"]
    assert kind == "team" and 3 <= k <= 12
    for a, p in zip(want, net.parameters()):
        np.testing.assert_array_equal(a, p.numpy())
