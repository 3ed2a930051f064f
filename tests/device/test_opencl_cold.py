"""Cold start on the OpenCL device: the float literals of one-point kernels live in the
arena (a run's configuration does not change the program source, so PoCL's disk cache
hits), and a helper process compiles PoCL's work-group functions ahead of the first
launches (:mod:`autodiff.device.opencl.prejit`) without changing any result."""
import os
import re
from pathlib import Path

import numpy as np
import pytest

import autodiff as ad
from autodiff.device.opencl import chain, device, prejit, render
from autodiff.device.opencl.runtime import Launch, Loop
from autodiff.optim import SGD
from autodiff.optim.lr_scheduler import CosineAnnealingLR

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)


@pytest.fixture(autouse=True)
def no_idle_helpers():
    """Each test starts and ends with no idle helper kept by this process."""
    prejit.end_idle()
    yield
    prejit.end_idle()


def _train(steps: int, dev: str = "opencl", **options):
    """SGD with a cosine schedule over ``steps`` steps on a [16, 24] linear layer: the
    schedule's constants (``steps`` among them) are one-point kernels' literals. Returns
    (losses, final weight, OpenCL program source, OpenCL stats) (the last two None on
    another device)."""
    rng = np.random.default_rng(5)
    w = ad.Tensor(rng.standard_normal((16, 24)).astype(np.float32) * 0.3, requires_grad=True)
    xs = [rng.standard_normal((8, 16)).astype(np.float32) for _ in range(steps)]
    opt = SGD([w], lr=0.05)
    sched = CosineAnnealingLR(opt, T_max=steps, eta_min=0.01)
    feed, losses = iter(xs), []

    def step():
        x = ad.Feeder(lambda: next(feed), [8, 16], name="x")
        opt.zero_grad()
        loss = ((x @ w).tanh() * 3.0 - 1.0).square().mean()
        loss.backward()
        opt.step()
        sched.step()
        ad.Receiver(lambda v: losses.append(float(v)), [loss], name="loss")
    ad.ir_for(steps, step)
    report = ad.execute(device=dev, **options)
    if dev != "opencl":
        return losses, w.numpy(), None, None
    st = report.stats["opencl"]
    with open(st["source_path"]) as f:
        src = f.read()
    return losses, w.numpy(), src, st


def _bodies(src: str) -> dict:
    """body name -> its source, from a program's source."""
    parts = re.split(r"(?=^static inline void k\d+_\w+_body\()", src, flags=re.M)
    return {re.match(r"static inline void (\w+)_body", p).group(1): p
            for p in parts if p.startswith("static inline void k")}


def test_a_changed_step_count_renders_the_same_program_and_the_same_numbers():
    """10 and 12 steps: the schedule differs (its T_max), the program source does not;
    each run matches the numpy device, and the one-point schedule kernel reads its
    constants from the arena while the [8, 24] kernels keep their literals."""
    l10, w10, s10, st = _train(10)
    l12, w12, s12, _ = _train(12)
    assert s10 == s12
    assert st["arena_bytes"] % 4 == 0
    r10, rw10, _, _ = _train(10, "numpy")
    np.testing.assert_allclose(l10, r10, rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(w10, rw10, rtol=2e-5, atol=1e-6)
    assert len(l12) == 12 and not np.allclose(w10, w12)
    bodies = _bodies(s10)
    lifted = [b for b in bodies.values() if "if (i >= 1) return;" in b and "buf[p" in b]
    assert lifted and not any(re.search(r"\d\.\d*f\b", b.split("{", 1)[1]) for b in lifted)
    assert any("3.0f" in b for b in bodies.values())    # the tanh * 3.0 of [8, 24] points


def test_lifting_gives_each_literal_of_a_body_its_own_slot():
    from autodiff.device.cstyle.kernels import Source
    from autodiff.device.opencl import _Kernels
    ks = _Kernels(base=100)
    src = Source("k1_elw", "static inline void k1_elw_body(__global float* restrict buf, "
                 "const int p0_, const int g0, const int g1, const int g2) {\n"
                 "  buf[p0_] = _ad_min(buf[p0_] * 0.5f, 2.0f) + 0.5f + 1e-05f;\n}",
                 (1,), (1,), params=("const int p0_",), args=(7,))
    out = ks.lift(src)
    assert out.params == ("const int p0_", "const int p1_", "const int p2_",
                          "const int p3_", "const int p4_")
    assert out.args == (7, 100, 101, 102, 103)
    assert ks.constants == [0.5, 2.0, 0.5, 1e-05]
    assert "const int p4_, const int g0" in out.src and not re.search(r"\d\.\d*f", out.src)
    assert "buf[p1_]" in out.src and "buf[p4_]" in out.src


def _dispatch_program(n: int):
    """A program of ``n`` dispatch kernels (one body each, local size 4, writing its index
    plus 1 at float offset 64 + 4 * (its position) + the work-item)."""
    from autodiff.device.cstyle.kernels import Source
    bodies, kernels = [], []
    for i in range(n):
        b = Source(f"k{i}_elw", f"static inline void k{i}_elw_body(__global float* restrict "
                   f"buf, const int p0_, const int g0, const int g1, const int g2) {{\n"
                   f"  buf[p0_ + g0] = {i + 1}.0f + g0;\n}}", (4,), (4,),
                   params=("const int p0_",), args=(64 + 4 * i,))
        bodies += [b, Source(f"k{i}_elw_block", chain.block_function(b), (1,), (1,))]
        kernels.append(chain.dispatch(f"d{i}_x1", [b]))
    return render.program(bodies + kernels), kernels


def _compiled(cache) -> dict:
    """kernel name -> work-group functions (.so files) in a PoCL cache directory."""
    out: dict = {}
    for p in cache.rglob("*.so"):
        out[p.parent.parent.name] = out.get(p.parent.parent.name, 0) + 1
    return out


def _done(helper) -> bool:
    """Whether ``helper`` signalled that it finished the program it was sent."""
    return os.path.exists(os.path.join(helper.claims, "done"))


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """The helper's PoCL cache (its environment): an empty directory."""
    _, dev = device.context()
    if not prejit.enabled(dev):
        pytest.skip("prejit needs PoCL on a CPU with more than one core")
    cache = tmp_path / "pocl"
    cache.mkdir()
    monkeypatch.setenv("POCL_CACHE_DIR", str(cache))
    return cache


def test_the_helper_alone_compiles_every_kernel_from_the_last(tmp_path, fresh_cache):
    """With no kernel claimed by the caller, the helper claims and compiles every kernel,
    the last first; each lands in the fresh cache."""
    _, dev = device.context()
    src, kernels = _dispatch_program(4)
    path = tmp_path / "p.cl"
    path.write_text(src)
    claims = tmp_path / "claims"
    claims.mkdir()
    helper = prejit.start(dev, str(claims))
    helper.send([str(path)], [(0, k.name, (8,), (4,)) for k in kernels])
    helper.wait(120)
    assert _done(helper) and helper.proc.poll() is None     # waiting for the next one
    assert sorted(os.listdir(claims)) == [str(i) for i in range(len(kernels))] + ["done"]
    helper.stop()
    assert not claims.exists()
    assert _compiled(fresh_cache) == {k.name: 1 for k in kernels}


def test_an_early_helper_warms_up_builds_its_part_signals_it_and_compiles(tmp_path,
                                                                          fresh_cache):
    """Started before the program exists, the helper waits; given two parts it builds its
    own (``mine``) first and says so (``built-1``), then compiles every kernel of either
    part from the last; ``wait_built`` returns once the signal is there."""
    _, dev = device.context()
    src, kernels = _dispatch_program(4)
    paths = []
    for i in range(2):
        paths.append(tmp_path / f"p{i}.cl")
        paths[-1].write_text(f"// part {i}\n" + src)
    helper = prejit.start(dev)
    assert helper.proc.poll() is None          # waiting for the program
    helper.send([str(p) for p in paths],
                [(i % 2, k.name, (8,), (4,)) for i, k in enumerate(kernels)], mine=1)
    helper.wait_built(1)
    assert os.path.exists(os.path.join(helper.claims, "built-1"))
    helper.wait(120)
    assert sorted(os.listdir(helper.claims)) == ["0", "1", "2", "3", "built-1", "done"]
    helper.stop()
    assert sum(_compiled(fresh_cache).values()) == len(kernels)


def test_a_helper_that_finished_is_lent_to_the_next_program(tmp_path, fresh_cache):
    """A helper that finished its program waits, idle, for the next: :func:`.acquire`
    lends the same process again (a new claims directory), it compiles the next program
    without a warm-up, and :func:`.end_idle` ends it."""
    _, dev = device.context()
    pids = []
    for n in (3, 5):
        src, kernels = _dispatch_program(n)
        path = tmp_path / f"p{n}.cl"
        path.write_text(f"// program {n}\n" + src)
        helper = prejit.acquire(dev)
        pids.append(helper.proc.pid)
        helper.send([str(path)], [(0, k.name, (8,), (4,)) for k in kernels])
        helper.wait(120)
        assert _done(helper)
        assert sorted(os.listdir(helper.claims)) == sorted([str(i) for i in range(n)] + ["done"])
        claims, proc = helper.claims, helper.proc
        helper.stop()
        assert not os.path.exists(claims) and proc.poll() is None
    assert pids[0] == pids[1]
    assert sum(_compiled(fresh_cache).values()) == 3 + 5
    prejit.end_idle()
    assert proc.poll() is not None
    assert prejit.acquire(dev).proc.pid != pids[0]


def test_a_helper_lent_back_before_it_finished_ends_that_program_early(tmp_path,
                                                                        fresh_cache):
    """A loan ended while the helper still works on the program (the caller compiled
    everything first) removes the claims directory: the helper finds no kernel left,
    ends that program with the kernel it is on, and takes the next program, which it
    compiles whole."""
    _, dev = device.context()
    src, kernels = _dispatch_program(24)
    path = tmp_path / "p.cl"
    path.write_text(src)
    launches = [(0, k.name, (8,), (4,)) for k in kernels]
    helper = prejit.acquire(dev)
    proc, claims = helper.proc, helper.claims
    helper.send([str(path)], launches)
    helper.stop()                       # at once: it has not finished
    assert proc.poll() is None and not os.path.exists(claims)
    src2, kernels2 = _dispatch_program(5)
    path2 = tmp_path / "p2.cl"
    path2.write_text("// the next program\n" + src2)
    again = prejit.acquire(dev)
    assert again.proc.pid == proc.pid
    again.send([str(path2)], [(0, k.name, (8,), (4,)) for k in kernels2])
    again.wait(120)
    assert _done(again) and sorted(os.listdir(again.claims)) == \
        sorted([str(i) for i in range(5)] + ["done"])
    again.stop()
    assert sum(_compiled(fresh_cache).values()) <= 5 + 1    # at most one of the first


def test_an_idle_helper_ends_by_itself_and_another_environment_gets_its_own(
        tmp_path, fresh_cache, monkeypatch):
    """An idle helper ends after :data:`.IDLE_S` without a program (and :func:`.acquire`
    then starts a new one); one started under another ``POCL_CACHE_DIR`` is not lent
    (it would compile into a cache this caller does not read)."""
    _, dev = device.context()
    monkeypatch.setattr(prejit, "IDLE_S", 1.0)
    helper = prejit.acquire(dev)
    proc = helper.proc
    helper.stop()                       # sent nothing: kept
    assert proc.poll() is None
    assert proc.wait(timeout=120) == 0  # ended by itself
    again = prejit.acquire(dev)
    kept = again.proc
    assert kept.pid != proc.pid
    again.stop()
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setenv("POCL_CACHE_DIR", str(other))
    third = prejit.acquire(dev)
    assert third.proc.pid != kept.pid and kept.poll() is None
    third.stop()


def test_an_unused_early_helper_ends_quietly(fresh_cache):
    _, dev = device.context()
    helper = prejit.start(dev)
    helper.proc.stdin.close()                   # the caller never needed it
    assert helper.proc.wait(timeout=120) == 0
    claims = helper.claims
    helper.stop()
    assert not os.path.exists(claims)


def test_caller_and_helper_split_the_kernels_and_the_program_runs(tmp_path, monkeypatch):
    """A program of 24 kernels no cache holds (a fresh nonce in its source): the caller
    compiles the first ones, a helper (sharing the caller's PoCL cache; started at the
    first kernel, as for a slow compile) the others, and every kernel then computes what
    it should."""
    monkeypatch.setattr(prejit, "_pending_after", lambda ev, seconds: True)
    import uuid
    import pyopencl as cl
    ctx, dev = device.context()
    if not prejit.enabled(dev):
        pytest.skip("prejit needs PoCL on a CPU with more than one core")
    src, kernels = _dispatch_program(24)
    src = f"// {uuid.uuid4()}\n" + src
    path = tmp_path / "p.cl"
    path.write_text(src)
    prg = cl.Program(ctx, src).build(devices=[dev])
    programs = prejit.Programs([str(path)], lambda p: None)
    programs.built[0] = prg
    launches = [(0, k.name, (8,), (4,)) for k in kernels]
    helper, mine = prejit.compile_all(ctx, dev, programs, launches)
    assert helper and 1 <= mine <= len(kernels)
    q = cl.CommandQueue(ctx, dev)
    arena = np.zeros(64 + 4 * len(kernels), np.float32)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=arena)
    for i, k in enumerate(kernels):
        kern = cl.Kernel(prg, k.name)
        kern.set_args(buf, np.int32(0), np.int32(64 + 4 * i), np.int32(1),   # reps 1,
                      np.int32(-1), np.int32(-1), np.int32(0))   # no counter, no words
        cl.enqueue_nd_range_kernel(q, kern, (4,), (4,))
    cl.enqueue_copy(q, arena, buf, is_blocking=True)
    np.testing.assert_array_equal(arena[64:].reshape(-1, 4),
                                  np.arange(1, len(kernels) + 1)[:, None] + np.arange(4))


def test_results_are_the_same_with_and_without_the_helper(monkeypatch):
    """The same model with ``prejit`` on (a helper for its few kernels too, cached or
    not) and off: bit-identical losses and weights, the same program."""
    monkeypatch.setattr(prejit, "MIN_KERNELS", 1)
    monkeypatch.setattr(prejit, "_pending_after", lambda ev, seconds: True)
    l0, w0, s0, st0 = _train(6, prejit=False, chain_work=0)
    l1, w1, s1, st1 = _train(6, chain_work=0)
    assert s0 == s1 and st0["prejit"] is False
    assert st1["prejit"] is prejit.enabled(device.select())
    np.testing.assert_array_equal(l1, l0)
    np.testing.assert_array_equal(w1, w0)


def test_a_program_in_two_parts_gives_the_same_results(monkeypatch):
    """An early helper (forced for this small model) gets the program's second part:
    each side builds one part, the kernels of both run, and losses and weights equal
    those of one program compiled with no helper, bit for bit. A small model starts no
    early helper: one part."""
    _, dev = device.context()
    if not prejit.enabled(dev):
        pytest.skip("prejit needs PoCL on a CPU with more than one core")
    l0, w0, _, st0 = _train(6, prejit=False, chain_work=0)
    assert st0["program_parts"] == 1 and len(st0["source_paths"]) == 1
    monkeypatch.setattr(prejit, "EARLY_NODES", 1)
    monkeypatch.setattr(chain, "DISPATCH_MAX", 2)     # several dispatch kernels to split
    l1, w1, _, st1 = _train(6, chain_work=0)
    assert st1["program_parts"] == 2 and st1["prejit"] is True
    srcs = [Path(p).read_text() for p in st1["source_paths"]]
    assert all("__kernel void d" in x for x in srcs)
    np.testing.assert_array_equal(l1, l0)
    np.testing.assert_array_equal(w1, w0)


def test_first_launches_lists_each_dispatch_kernel_once_in_launch_order(opencl_executables,
                                                                      monkeypatch):
    """What the helper is given: every dispatch kernel of the program, once per local
    size, in the order the host first launches it."""
    from autodiff.device.opencl import _first_launches
    monkeypatch.setattr(chain, "DISPATCH_MAX", 2)
    _train(3, chain_work=0)
    exe = opencl_executables[-1]
    names = {}
    order = []

    def visit(steps):
        for s in steps:
            if type(s) is Launch:
                names[s] = s.kernel.function_name
                order.append(s)
            elif type(s) is Loop:
                visit(s.body)
    visit(exe.steps)
    got = _first_launches(exe.steps, names, set(names.values()))
    want = []
    for s in order:
        key = (names[s], tuple(s.global_size), tuple(s.local_size))
        if (key[0], key[2]) not in [(w[0], w[2]) for w in want]:
            want.append(key)
    assert [(g[0], g[2]) for g in got] == [(w[0], w[2]) for w in want]
    assert len(got) >= 2 and os.path.exists(exe.stats["source_path"])


def test_no_helper_for_a_process_pinned_to_one_core(monkeypatch):
    """A helper inherits its parent's affinity: pinned to one core (the one-thread bench),
    it would only compete with the caller, so none starts."""
    _, dev = device.context()
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    assert prejit.usable_cores() == 1 and not prejit.enabled(dev)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert prejit.usable_cores() == 2


def _graph(width: int):
    """The graph IR of a small traced program whose shapes depend on ``width``."""
    from autodiff.graph.trace import TRACER
    ad.reset()
    x = ad.Tensor(np.ones((4, width), np.float32), requires_grad=True)
    (x.tanh() * 2.0).sum().backward()
    return TRACER.root.graph


def test_the_warm_up_key_is_the_programs_own_in_every_process():
    """:func:`.prejit.warm_key`: the same program gets the same key in another process
    (not Python's salted ``hash``), another program another key."""
    import subprocess
    import sys
    k8, k8_again, k9 = prejit.warm_key(_graph(8)), prejit.warm_key(_graph(8)), \
        prejit.warm_key(_graph(9))
    assert k8 == k8_again and k8 != k9 and 0 <= k8 < 2 ** 31
    code = ("import sys; sys.path.insert(0, 'tests/device'); import test_opencl_cold as t; "
            "from autodiff.device.opencl import prejit; print(prejit.warm_key(t._graph(8)))")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                         text=True, env={**os.environ, "PYTHONHASHSEED": "123"}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split()[-1]) == k8


def test_an_early_helper_warms_up_with_a_build_its_key_makes_new(fresh_cache):
    """A helper waiting for its program builds the warm-up source with its key: a key new
    to PoCL's cache is a real compile (it leaves the cache's first entry; a fixed source
    was a cache hit for every helper after the first, which then loaded the compiler only
    once the program came), and a second helper with another key compiles again."""
    import time
    _, dev = device.context()

    def entries():
        return len(list(fresh_cache.rglob("program.bc")))
    for n, key in enumerate((11, 12), start=1):
        helper = prejit.start(dev, key=key)
        end = time.monotonic() + 120
        while entries() < n and time.monotonic() < end and helper.proc.poll() is None:
            time.sleep(0.02)
        assert entries() == n
        helper.proc.stdin.close()
        assert helper.proc.wait(timeout=120) == 0
        helper.stop()


def test_execute_starts_the_helper_before_the_graph_passes_and_compile_uses_it(monkeypatch):
    """``execute()`` asks the device to :func:`~autodiff.device.opencl.prepare` the traced
    program: a large one gets its helper then, before the graph passes; the compile
    builds the program in two parts with that helper (no second one), the results are
    those of a compile with no helper, and the helper has ended when ``execute()``
    returns."""
    from autodiff.device import opencl
    _, dev = device.context()
    if not prejit.enabled(dev):
        pytest.skip("prejit needs PoCL on a CPU with more than one core")
    l0, w0, _, _ = _train(6, prejit=False, chain_work=0)
    monkeypatch.setattr(prejit, "EARLY_TRACED_NODES", 1)
    started, real_start, real_compile = [], prejit.start, opencl.compile
    seen = {}

    def start(*a, **k):
        started.append(real_start(*a, **k))
        return started[-1]

    def compile_(graph, report=None, prepared=None, **options):
        seen["prepared"] = prepared
        return real_compile(graph, report=report, prepared=prepared, **options)
    monkeypatch.setattr(prejit, "start", start)
    monkeypatch.setattr(opencl, "compile", compile_)
    l1, w1, _, st1 = _train(6, chain_work=0)
    assert len(started) == 1 and seen["prepared"] is started[0]
    assert st1["program_parts"] == 2 and st1["prejit"] is True
    assert started[0].proc is None                          # its loan ended
    np.testing.assert_array_equal(l1, l0)
    np.testing.assert_array_equal(w1, w0)
    l2, w2, _, st2 = _train(6, chain_work=0)    # the next program: the same helper, idle
    assert len(started) == 1 and seen["prepared"] is not started[0]
    assert seen["prepared"] is not None and st2["prejit"] is True
    np.testing.assert_array_equal(l2, l0)


def test_a_prepared_helper_ends_when_the_graph_passes_fail(monkeypatch):
    import autodiff.runtime as rt
    _, dev = device.context()
    if not prejit.enabled(dev):
        pytest.skip("prejit needs PoCL on a CPU with more than one core")
    monkeypatch.setattr(prejit, "EARLY_TRACED_NODES", 1)
    started, real_start = [], prejit.start

    def start(*a, **k):
        started.append(real_start(*a, **k))
        return started[-1]

    def broken(*a, **k):
        raise RuntimeError("a graph pass failed")
    monkeypatch.setattr(prejit, "start", start)
    monkeypatch.setattr(rt, "optimize", broken)
    ad.reset()
    x = ad.Tensor(np.ones((4, 4), np.float32), requires_grad=True)
    (x * 2.0).sum().backward()
    with pytest.raises(RuntimeError, match="a graph pass failed"):
        ad.execute(device="opencl")
    assert len(started) == 1 and started[0].proc is None
    ad.reset()


def test_a_source_file_written_by_several_processes_at_once_is_read_whole(tmp_path,
                                                                         monkeypatch):
    """Ranks of a data-parallel job render the same program at once: whoever finds the
    file there reads it whole (it appears by a rename), never a half-written one."""
    import threading
    from autodiff.device.opencl import runtime
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for trial in range(3):
        src = f"// trial {trial}\n" + "__kernel void k(__global float* b) { b[0] = 1.0f; }\n" * 40000
        seen = []

        def render():
            path = runtime.write_source(src)
            with open(path) as f:
                seen.append(f.read() == src)
        threads = [threading.Thread(target=render) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert seen == [True] * 8, trial
    assert not list((tmp_path / "autodiff" / "opencl").glob("*.tmp"))


def test_the_helpers_part_is_built_here_between_kernels_once_it_says_so():
    """:meth:`.Programs.get_ready`: the part the helper builds is built here (from the
    cache) as soon as the helper has signalled it, not after this process's last kernel;
    before the signal, or with no helper, nothing is built."""
    built = []
    programs = prejit.Programs(["a.cl", "b.cl"], lambda p: built.append(p) or p)

    class Stub:
        mine, ready, proc = 1, False, None

        def built(self):
            return self.ready

        def wait_built(self, part):
            pass
    helper = Stub()
    programs.get_ready(None)
    programs.get_ready(helper)
    assert built == []
    helper.ready = True
    programs.get_ready(helper)
    programs.get_ready(helper)
    assert built == ["b.cl"] and programs.get(1) == "b.cl"


def _every(n: int, steps: int, dev: str = "opencl", **options):
    """A trained [6, 5] weight whose loss is received every step and whose weight norm is
    received every ``n`` th step (``ir_if((i + 1) % n == 0)``, the main example's in-loop
    validation). Returns (what the Receivers got, in order; the final weight; the stats)."""
    rng = np.random.default_rng(3)
    w = ad.Tensor(rng.standard_normal((6, 5)).astype(np.float32), requires_grad=True)
    xs = [rng.standard_normal((4, 6)).astype(np.float32) for _ in range(steps)]
    opt, feed, got = SGD([w], lr=0.1), iter(xs), []

    def step(i):
        x = ad.Feeder(lambda: next(feed), [4, 6], name="x")
        opt.zero_grad()
        loss = (x @ w).sin().square().mean()
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: got.append(("loss", float(v))), [loss], name="loss")
        ad.ir_if((i + 1) % n == 0, lambda: ad.Receiver(
            lambda v, t: got.append(("norm", int(t), float(v))),
            [(w.exp() * 0.5).sum().sqrt(), i], name="norm"))
    ad.ir_for(steps, step)
    report = ad.execute(device=dev, **options)
    return got, w.numpy(), report.stats.get(dev)


def test_kernels_the_first_iteration_does_not_run_are_compiled_later(monkeypatch):
    """A branch on the step index that the first iteration does not take: its own bodies
    go to dispatch kernels of their own, left out of the compile before the first
    iteration (``prejit_later``: how many, whether an idle helper took them); each
    compiles by its first launch at the latest. What the Receivers get and the weight are
    the numpy device's."""
    monkeypatch.setattr(chain, "DISPATCH_MAX", 2)        # several dispatch kernels
    got, w, st = _every(3, 7, chain_work=0)
    ref, rw, _ = _every(3, 7, "numpy")
    assert st["prejit_later"][0] >= 1
    assert [g[0] for g in got] == [r[0] for r in ref]
    assert [g[1] for g in got if g[0] == "norm"] == [r[1] for r in ref if r[0] == "norm"] \
        == [2, 5]
    np.testing.assert_allclose([g[-1] for g in got], [r[-1] for r in ref], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(w, rw, rtol=1e-5, atol=1e-6)


def test_a_branch_never_taken_over_the_loop_is_not_compiled():
    """Over 4 steps ``(i + 1) % 100 == 0`` is never true: the graph passes decide it and
    the branch's kernels are neither compiled nor deferred; the run matches the numpy
    device."""
    got, w, st = _every(100, 4)
    ref, rw, _ = _every(100, 4, "numpy")
    assert "prejit_later" not in st and [g[0] for g in got] == ["loss"] * 4
    np.testing.assert_allclose([g[-1] for g in got], [r[-1] for r in ref], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(w, rw, rtol=1e-5, atol=1e-6)


def test_compile_later_lends_an_idle_helper_until_it_is_done(opencl_executables,
                                                            monkeypatch):
    """:func:`prejit.compile_later` gives the launches to this process's idle helper,
    which compiles them and goes back to the idle ones; with no idle helper it starts
    none and returns False."""
    import time
    monkeypatch.setattr(chain, "DISPATCH_MAX", 2)
    _train(3, chain_work=0)
    exe = opencl_executables[-1]
    dev = exe.queue.device
    if not prejit.enabled(dev):
        pytest.skip("a helper needs a PoCL CPU device with more than one core")
    names = {}

    def visit(steps):
        for s in steps:
            if type(s) is Launch:
                names[s] = s.kernel.function_name
            elif type(s) is Loop:
                visit(s.body)
    visit(exe.steps)
    from autodiff.device.opencl import _first_launches
    launches = [(0, *x) for x in _first_launches(exe.steps, names, set(names.values()))]
    paths = exe.stats["source_paths"]
    assert prejit.compile_later(dev, paths, launches) is False      # none idle
    prejit.acquire(dev).stop()                                      # one idle now
    assert len(prejit.idle_pids()) == 1
    assert prejit.compile_later(dev, paths, launches) is True
    assert prejit.idle_pids() == [] and len(prejit._BUSY) == 1
    end = time.perf_counter() + 60
    while prejit._BUSY and time.perf_counter() < end:
        time.sleep(0.01)
    assert not prejit._BUSY and len(prejit.idle_pids()) == 1
