"""Team runs on the OpenCL device (:mod:`autodiff.device.opencl.runs`, switched by
:mod:`autodiff.device.opencl.tiers`): how entries are shared out among dispatch kernels,
which launches merge, when the team runs are in place, and that they change no number."""
import time

import numpy as np
import pytest

import autodiff as ad
from autodiff.device.opencl import chain, device, runs, tiers
from autodiff.device.opencl.runtime import Feed, Launch, Loop

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)


def _workers() -> int:
    from autodiff.device.opencl import context
    return chain.team_size(context()[1])


needs_team = pytest.mark.skipif(
    _workers() == 0, reason="team runs need a PoCL pthread device with two or more threads "
                            "(this machine has none)")


class _Spec:
    shape, dtype, dtypes = (1,), "float32", None


def _breaks(parts, uses) -> int:
    where = {e: i for i, p in enumerate(parts) for e in p}
    return sum(where[a] != where[b] for a, b in zip(uses, uses[1:]))


def test_partition_keeps_consecutive_launches_in_one_kernel():
    """A forward pass of entries 0-29 run twice (two layers), then a backward of entries
    30-49 that launches forward entries 0-4 again between its own: every kernel holds at
    most ``most`` entries, each entry is in one kernel, in first-launch order, and fewer
    launch pairs straddle two kernels than with chunks in launch order; the same answer
    every time (the program's source must not change from run to run)."""
    fwd = list(range(30))
    bwd = [e for i in range(30, 50) for e in (i, i % 5)]
    uses = fwd + fwd + bwd + bwd
    parts = runs.partition(uses, 50, 24)
    assert len(parts) == 3 and all(len(p) <= 24 for p in parts)
    assert sorted(e for p in parts for e in p) == list(range(50))
    assert all(p == sorted(p) for p in parts)
    chunks = [list(range(i, min(i + 24, 50))) for i in range(0, 50, 24)]
    assert _breaks(parts, uses) < _breaks(chunks, uses)
    assert runs.partition(uses, 50, 24) == parts
    assert runs.partition(uses[:40], 30, 32) == [list(range(30))]


def _launch(name, kernel, args, groups=(1, 1, 1)):
    la = Launch(name, groups, (1, 1, 1))
    kernel[la], args[la] = name.split(".")[0], args.get("_", (0,)) + chain.ONCE
    return la


def test_upgrades_merge_runs_of_one_kernel_inside_loops(monkeypatch):
    """Consecutive launches of one team-mode kernel inside a loop become one team launch
    (its table: a barrier where a launch touches what the run wrote); host steps and
    launches of other kernels stay where they are; nothing merges outside loops or in a
    loop run in blocks; a run too short to save MIN_SAVING_S gets nothing."""
    kernel, args = {}, {}
    members = {}
    tables = []

    def table(ints):
        tables.append(list(ints))
        return 100 * len(tables)

    def body(name, reads, writes):
        b = chain.Source(name, "", (1,), (1,))
        span = [(w, w + 1) for w in writes]
        b.touch, b.after = ([(r, r + 1) for r in reads] + span, span), False
        return b
    la = {n: _launch(n, kernel, args) for n in ("d0.a", "d0.b", "d0.c", "d1.x", "d0.e",
                                                 "d0.f", "d0.top", "d0.top2")}
    members.update({la["d0.a"]: [body("a", [1], [2])], la["d0.b"]: [body("b", [1], [3])],
                    la["d0.c"]: [body("c", [2], [4])], la["d1.x"]: [body("x", [], [9])],
                    la["d0.e"]: [body("e", [], [5])], la["d0.f"]: [body("f", [], [6])],
                    la["d0.top"]: [body("t", [], [7])], la["d0.top2"]: [body("u", [], [8])]})
    feed = Feed(_Spec(), 0, (1,), "float32")
    inner = Loop(range(1000), [la["d0.e"], la["d0.f"]], [])
    outer = Loop(range(10000), [feed, la["d0.a"], la["d0.b"], la["d0.c"], la["d1.x"], inner],
                 [feed])
    steps = [la["d0.top"], la["d0.top2"], outer]
    base = list(outer.body)
    ups = runs.upgrades(steps, members, kernel, args, {"d0", "d1"}, 2, table)
    assert [u.steps is outer.body or u.steps is inner.body for u in ups] == [True, True]
    u = next(u for u in ups if u.steps is outer.body)
    assert u.steps == base                          # changed only when swapped in
    assert u.body[0] is feed and u.body[2] is la["d1.x"] and u.body[3] is inner
    team = u.body[1]
    assert team.global_size == (2,) and team.local_size == (1,) and team.name == "d0"
    # c reads what a wrote: a barrier before it; b is independent of a: none
    rows = next(t for t in tables if t[0] == 3)
    width = len(rows[1:]) // 3
    assert [rows[1 + i * width] for i in range(3)] == [0, 0, 1]
    assert u.args[team][0] < -1 and u.args[team][-4:] == chain.ONCE
    assert steps[:2] == [la["d0.top"], la["d0.top2"]]
    inner.block = 8                                 # a loop run in blocks keeps its launches
    assert [x.steps is outer.body for x in
            runs.upgrades(steps, members, kernel, args, {"d0", "d1"}, 2, table)] == [True]
    inner.block = 0
    short = [Loop(range(3), [la["d0.a"], la["d0.b"]], [])]
    assert runs.upgrades(short, members, kernel, args, {"d0"}, 2, table) == []
    monkeypatch.setattr(runs, "MIN_SAVING_S", 0.0)
    assert len(runs.upgrades(short, members, kernel, args, {"d0"}, 2, table)) == 1
    assert runs.upgrades(short, members, kernel, args, set(), 2, table) == []


def test_team_runs_run_while_other_processes_leave_the_cores_free(monkeypatch):
    """Sampled cores of other processes (the machine's busy time minus this process's):
    team runs once a sample of SAMPLE_S seconds shows at most BUSY cores in use by
    others, tier 1 while more."""
    from types import SimpleNamespace
    t = tiers.Tier([])
    used = []

    def use(self, exe, team, k):
        used.append((k, team))
        self.team = team
    monkeypatch.setattr(tiers.Tier, "_use", use)
    clock = {"t": 0.0, "busy": 0.0, "own": 0.0}
    monkeypatch.setattr(tiers, "_clock", lambda: clock["t"])
    monkeypatch.setattr(tiers, "_sample", lambda: (clock["t"], clock["busy"], clock["own"]))

    def after(seconds, others, own=2.0):        # cores busy meanwhile
        clock["t"] += seconds
        clock["busy"] += (others + own) * seconds
        clock["own"] += own * seconds
    exe = SimpleNamespace()
    t.begin(exe)
    after(0.6 * tiers.SAMPLE_S, 0.0)
    t.step(exe, 1)
    assert used == []                           # the sample is too short yet
    after(0.6 * tiers.SAMPLE_S, 0.0)
    t.step(exe, 2)
    assert used == [(2, True)]
    after(2 * tiers.SAMPLE_S, 1.5)              # another training process starts
    t.step(exe, 3)
    assert used == [(2, True), (3, False)] and t.busy == [1.5]
    after(2 * tiers.SAMPLE_S, 1.0)
    t.step(exe, 4)
    assert len(used) == 2
    after(2 * tiers.SAMPLE_S, 0.1)              # it ended
    t.step(exe, 5)
    assert used[-1] == (5, True)


def _program(steps, hook=None):
    """A small two-layer model under AdamW with a Feeder and a Receiver; its loop body
    is heavy (LIGHT_BODY patched to 0 by the tests): one launch per kernel, or team runs."""
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


def test_a_sample_from_the_end_of_the_compile_decides_the_first_iteration(monkeypatch):
    """``watch()`` at the end of the compile starts the first sample, so that the check
    before iteration 0 already covers SAMPLE_S seconds (the host enqueues iterations
    ahead: a sample first taken at the run's start decided only several iterations in)."""
    from types import SimpleNamespace
    t = tiers.Tier([])
    used = []
    monkeypatch.setattr(tiers.Tier, "_use", lambda self, exe, team, k: used.append((k, team)))
    clock = {"t": 0.0}
    monkeypatch.setattr(tiers, "_clock", lambda: clock["t"])
    monkeypatch.setattr(tiers, "_sample", lambda: (clock["t"], 2.0 * clock["t"], 2.0 * clock["t"]))
    t.watch()
    clock["t"] += 2 * tiers.SAMPLE_S             # parameters uploaded, first launches made
    exe = SimpleNamespace()
    t.begin(exe)
    t.step(exe, 0)
    assert used == [(0, True)]


def _teamed(monkeypatch):
    """Heavy bodies (no whole-body chain), any saving worth team runs, other processes
    ignored (the test suite's other workers)."""
    monkeypatch.setattr(chain, "LIGHT_BODY", 0)
    monkeypatch.setattr(runs, "MIN_SAVING_S", 0.0)
    monkeypatch.setattr(tiers, "BUSY", float("inf"))


def _sampled(i):
    """A Feeder hook: iteration 1 waits for a sample of the cores (the switch then comes
    before iteration 2 or 3)."""
    if i == 1:
        time.sleep(2 * tiers.SAMPLE_S)


@needs_team
def test_team_runs_give_the_numbers_of_one_launch_per_kernel(opencl_executables, monkeypatch):
    """From the first run of a program (nothing compiled beyond tier 1): team runs in
    place from iteration 2 or 3 on, fewer launches per iteration, no small kernels
    chained, and losses and weights bit for bit those of one launch per kernel."""
    _teamed(monkeypatch)
    p_one, l_one, one = _run(opencl_executables, 6, team=False)
    p, got, exe = _run(opencl_executables, 6, _sampled)
    assert exe.stats["team_launches"] > 0 and one.tier is None
    # the heavy body chains none of its small kernels (a chain is one work-group)
    assert exe.stats["chains"] == 0 < one.stats["chains"]
    (k, kind), = exe.stats["team_switches"]
    assert kind == "team" and k <= 3
    body = next(s for s in exe.steps if type(s) is Loop).body
    launches = sum(type(s) is Launch for s in body)
    assert launches < exe.stats["launches"] - 1
    assert all(s.team == _workers() for s in body if type(s) is Launch and s.team)
    for a, b in zip(p_one, p):
        np.testing.assert_array_equal(a, b)
    assert got == l_one


@needs_team
def test_a_feeder_failing_after_the_swap_keeps_the_last_completed_iteration(
        opencl_executables, monkeypatch):
    """Team runs from iteration 2 or 3, a Feeder raising in iteration 12: the error names
    it and the parameters are those after 12 iterations, as a clean 12-step run of one
    launch per kernel leaves them."""
    from autodiff.errors import FeederError
    _teamed(monkeypatch)
    want, _, _ = _run(opencl_executables, 12, team=False)

    def hook(i):
        _sampled(i)
        if i == 12:
            raise ValueError("no more data")
    ad.reset()
    net, _ = _program(20, hook)
    with pytest.raises(FeederError, match="iteration 12"):
        ad.execute(device="opencl")
    exe = opencl_executables[-1]
    (k, kind), = exe.stats["team_switches"]
    assert kind == "team" and k <= 3
    for a, p in zip(want, net.parameters()):
        np.testing.assert_array_equal(a, p.numpy())
