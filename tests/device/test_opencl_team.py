"""Team chains on the OpenCL device (:func:`autodiff.device.opencl.chain.team`): which
bodies may share a phase between two barriers, how many work-groups a team gets, and that
a heavy loop body run as team chains computes exactly what its kernels launched one by
one compute."""
import time
from types import SimpleNamespace

import numpy as np
import pytest

import autodiff as ad
from autodiff.device.cstyle.kernels import Source
from autodiff.device.opencl import chain, device, prejit
from autodiff.device.opencl.runtime import Launch, Loop
from autodiff.procedural.ir import Buffer, BufferKind

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)


def _buf(name, n):
    return Buffer(name, (n,), "float32", BufferKind.TEMP)


OFF = {"a": 0, "b": 100, "c": 200, "d": 250}
A, B, C, D = _buf("a", 100), _buf("b", 100), _buf("c", 50), _buf("d", 10)


def _body(name, reads, writes, groups=4, **kw):
    s = Source(name, "", (groups * 16,), (16,))
    s.touch = chain.touches(reads, writes, OFF, **kw)
    s.after = False
    return s


def test_touches_gives_word_ranges_of_reads_and_writes():
    touched, written = chain.touches([A, C], [B], OFF)
    assert written == [(100, 200)]
    assert sorted(touched) == [(0, 100), (100, 200), (200, 250)]
    _, written = chain.touches([A], [B], OFF, scratch=True, flag=(8, 16))
    assert chain.SCRATCH in written and (8, 16) in written
    # a buffer with no arena offset is a fused group's register: it touches nothing
    assert chain.touches([A, _buf("register", 4)], [B, _buf("reg2", 4)], OFF) == \
        ([(0, 100), (100, 200)], [(100, 200)])


def test_independent_bodies_share_a_phase_and_every_hazard_splits_it():
    x = _body("x", [A], [B])
    assert chain.independent([x], _body("y", [A], [C]))          # both only read a
    assert not chain.independent([x], _body("y", [B], [C]))      # read after write
    assert not chain.independent([x], _body("y", [C], [A]))      # write after read
    assert not chain.independent([x], _body("y", [C], [B]))      # write after write
    assert chain.independent([x], _body("y", [C], [D]))
    # the shared scratch of two packing matmuls is one resource
    p = _body("p", [A], [B], scratch=True)
    assert not chain.independent([p], _body("q", [C], [D], scratch=True))
    # no ranges, a guard, or the second part of the same statement: a barrier
    unknown = Source("r", "", (16,), (16,))
    assert not chain.independent([x], unknown) and not chain.independent([unknown], x)
    g = _body("g", [C], [D])
    g.guard = "buf[3] > 0"
    assert not chain.independent([x], g)
    late = _body("late", [C], [D])
    late.after = True
    assert not chain.independent([x], late)


def test_a_team_chain_hands_out_every_group_once_and_meets_between_dependent_bodies():
    bodies = [_body("k0", [A], [B], groups=3), _body("k1", [A], [C], groups=1),
              _body("k2", [B, C], [D], groups=5)]
    for b in bodies:
        b.args = (7,)
    src = chain.team("c0_x3", bodies, 2, 64)
    assert src.global_size == (2,) and src.local_size == (1,)
    text = src.src
    # k0 and k1 are independent (one phase), k2 reads both: one barrier, then the last
    assert text.count("team_sync(s_, 2);") == 2
    assert text.index("k1_block") < text.index("team_sync") < text.index("k2_block")
    # tickets 0-2 are k0's groups, 3 k1's, 4-8 k2's
    assert "e_ = 3;" in text and "e_ = 4;" in text and "e_ = 9;" in text
    assert f"{chain.block_name(bodies[2])}(buf, 7, q_ % 5, 0, 0)" in text and "t_ - 4;" in text
    assert "if (g0 == 0) atomic_xchg(s_ + 32, 0);" in text
    assert "(__global int*)buf + 64" in text


def _pocl(name="pthread-x86-64", units=4):
    import pyopencl as cl
    return SimpleNamespace(type=cl.device_type.CPU, name=name, max_compute_units=units,
                           platform=SimpleNamespace(name="Portable Computing Language"))


def test_team_size_is_the_worker_threads_of_a_pocl_pthread_device(monkeypatch):
    import pyopencl as cl
    monkeypatch.setattr(prejit, "usable_cores", lambda: 4)
    assert chain.team_size(_pocl()) == 4
    assert chain.team_size(_pocl(units=8)) == 4          # this process's cores bound it
    assert chain.team_size(_pocl(units=1)) == 0          # one thread: plain chains
    assert chain.team_size(_pocl(name="basic")) == 0     # PoCL's one-thread driver
    gpu = _pocl()
    gpu.type = cl.device_type.GPU
    assert chain.team_size(gpu) == 0
    # data-parallel processes share the machine's cores
    monkeypatch.setattr(chain, "_processes", lambda: 2)
    assert chain.team_size(_pocl()) == 2
    monkeypatch.setattr(chain, "_processes", lambda: 3)
    assert chain.team_size(_pocl()) == 0


def _heavy_program(steps: int = 4):
    """An embedding, a LayerNorm, dropout and two matmuls under AdamW: gathers (the
    index-error record), random numbers, packed matmuls, reductions and the optimizer's
    in-place updates in one loop body."""
    from autodiff import nn
    from autodiff.optim import AdamW
    ad.manual_seed(3)
    rng = np.random.default_rng(5)
    emb, norm = nn.Embedding(50, 48), nn.LayerNorm(48)
    fc1, fc2 = nn.Linear(48, 96), nn.Linear(96, 50)
    drop = nn.Dropout(0.1)
    params = [*emb.parameters(), *norm.parameters(), *fc1.parameters(), *fc2.parameters()]
    opt = AdamW(params, lr=1e-2)
    xs = iter([rng.integers(0, 50, (64,)) for _ in range(steps)])
    ys = iter([rng.integers(0, 50, (64,)) for _ in range(steps)])
    got = []

    def step():
        opt.zero_grad()
        x = ad.Feeder(lambda: next(xs), shape=[64], dtype="int64")
        y = ad.Feeder(lambda: next(ys), shape=[64], dtype="int64")
        h = drop(fc1(norm(emb(x))).relu())
        loss = ad.nn.functional.cross_entropy(fc2(h), y)
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: got.append(float(v)), [loss])
    ad.ir_for(range(steps), step)
    return params, got


def _run(**options):
    ad.reset()
    params, got = _heavy_program()
    ad.execute(**options)
    return [p.numpy() for p in params], got


def test_a_heavy_loop_body_runs_as_team_chains_with_the_same_numbers(opencl_executables,
                                                                      monkeypatch):
    """Bodies above LIGHT_BODY: with team chains the iteration is one launch of a
    ``(workers,)`` grid (or a few, between host commands); its results equal the same
    kernels launched one by one bit for bit, and the numpy reference within float32
    rounding."""
    from autodiff.device.opencl import context
    workers = chain.team_size(context()[1])
    if workers == 0:
        pytest.skip("team chains need a PoCL pthread device with two or more threads "
                    "(this one has one, or is not PoCL's pthread driver)")
    monkeypatch.setattr(chain, "LIGHT_BODY", 0)          # every body is heavy
    p_team, l_team = _run(device="opencl", team=True)     # from the first iteration
    body = next(s for s in opencl_executables[-1].steps if type(s) is Loop).body
    launches = [s for s in body if type(s) is Launch]
    assert all(la.team == workers and tuple(la.global_size) == (workers,)
               for la in launches if la.name.startswith("c")), launches
    assert len(launches) <= 3, [la.name for la in launches]
    p_one, l_one = _run(device="opencl", team=False)
    body = next(s for s in opencl_executables[-1].steps if type(s) is Loop).body
    assert sum(type(s) is Launch for s in body) > 10
    for a, b in zip(p_team, p_one):
        np.testing.assert_array_equal(a, b)
    assert l_team == l_one
    p_ref, l_ref = _run(device="numpy")
    for a, b in zip(p_team, p_ref):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    np.testing.assert_allclose(l_team, l_ref, rtol=2e-5)


@pytest.mark.parametrize("team", [True, None], ids=["chain", "runs"])
def test_a_branch_decided_on_the_device_inside_a_team_chain(opencl_executables,
                                                            monkeypatch, team):
    """``ir_if`` on a tensor inside a heavy loop body: its guarded kernels join the team
    chain, or the team runs of the dispatch kernels (every worker evaluates the guard,
    consumes the guarded body's tickets and meets the others at the barriers); both
    branches are taken over the iterations run as a team, and the results equal the
    kernels launched one by one, bit for bit."""
    from autodiff.device.opencl import context, runs, tiers
    if chain.team_size(context()[1]) == 0:
        pytest.skip("team chains need a PoCL pthread device with two or more threads")
    monkeypatch.setattr(chain, "LIGHT_BODY", 0)
    monkeypatch.setattr(runs, "MIN_SAVING_S", 0.0)
    monkeypatch.setattr(tiers, "BUSY", float("inf"))     # the suite's other workers
    rng = np.random.default_rng(6)
    a0 = rng.standard_normal((128, 128)).astype(np.float32) * 0.1
    signs_list = [1.0, -1.0, 1.0, 1.0, -1.0, -1.0]

    def run(**options):
        ad.reset()
        x = ad.Tensor(a0)
        acc = ad.Tensor(np.zeros((128, 128), np.float32))
        outs, feed, calls = [], iter(list(signs_list)), iter(range(6))

        def sign():
            if next(calls) == 1:                  # a sample of the cores: runs from 2 or 3
                time.sleep(2 * tiers.SAMPLE_S)
            return np.array(next(feed), np.float32)

        def step(i):
            s = ad.Feeder(sign, shape=[])
            y = (x @ x).tanh() * s
            ad.ir_if(y.sum() > 0, lambda: acc.copy_(acc + y), lambda: acc.copy_(acc * 0.5 - y))
            ad.Receiver(lambda v: outs.append(v.copy()), [acc])
        ad.ir_for(range(6), step)
        ad.execute(device="opencl", **options)
        return outs, opencl_executables[-1]
    got, exe = run(team=team)
    text = str(exe.stages["opencl"])
    assert "team_sync" in text and "if (" in text
    if team is None:
        (k, kind), = exe.stats["team_switches"]
        assert kind == "team" and k <= 3
    want, _ = run(team=False)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    y = np.tanh(a0.astype(np.float64) @ a0.astype(np.float64))
    ref = np.zeros_like(y)
    for s in signs_list:
        ref = ref + s * y if (s * y).sum() > 0 else ref * 0.5 - s * y
    np.testing.assert_allclose(got[-1], ref, rtol=1e-4, atol=1e-5)
