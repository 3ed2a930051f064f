"""Iteration blocks on the OpenCL device (``Loop.block``): a loop whose body is one
one-work-item chain launch and Receivers through rings runs up to ``RECEIVER_RING``
iterations per launch (``RING`` with Feeders through rings too; the dispatch kernel's
``reps`` argument). Every value still reaches its Receiver in order, the parameters are
bit-identical to one launch per iteration, and a failing Receiver still stops the run at
its own iteration with that iteration's parameters."""
import numpy as np
import pytest
import pyopencl as cl

import autodiff as ad
from autodiff.device.opencl import device
from autodiff.device.opencl.runtime import (CHECKPOINT, RING, Loop, RingFeed, _loops,
                                            checkpoint_every)
import autodiff.optim  # noqa: F401  (ad.optim)
from test_opencl_ring import R, _program, _run, check_failing_receiver

#: iterations between checkpoints of a loop with Receivers only (whole blocks of R)
EVERY = checkpoint_every(0, 15, R)

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)


@pytest.fixture
def launches(monkeypatch):
    """Names of the kernels enqueued during the test, in order."""
    seen, real = [], cl.enqueue_nd_range_kernel

    def spy(queue, kernel, *a, **kw):
        seen.append(kernel.function_name)
        return real(queue, kernel, *a, **kw)
    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", spy)
    return seen


def _loop(exe) -> Loop:
    (lp,) = [s for s in exe.steps if type(s) is Loop]
    return lp


def test_a_light_loop_runs_in_blocks(opencl_executables, launches, monkeypatch):
    """2 R + 5 iterations: the first alone (it times the JIT), then blocks cut to fill
    the ring exactly (R - 1, R, 5): 4 launches of the loop's kernel instead of 2 R + 5;
    every iteration's values as on the numpy device."""
    steps = 2 * R + 5
    got, w = _run(steps, "opencl")
    want, w_np = _run(steps, "numpy")
    lp = _loop(opencl_executables[0])
    assert lp.block == R
    name = lp.body[0].kernel.function_name
    blocked = launches.count(name)
    assert lp.body[0].reps == 1           # the kernel object is left as compiled
    from autodiff.device import opencl
    monkeypatch.setattr(opencl, "_mark_blocks", lambda *a: None)
    del launches[:]
    _run(steps, "opencl")
    assert launches.count(name) - blocked == steps - 4     # the same launches outside
    assert len(got) == len(want) == steps
    for g, r in zip(got, want):
        np.testing.assert_allclose(g[0], r[0], rtol=2e-5, atol=1e-6)
        np.testing.assert_array_equal(g[1], r[1])
        np.testing.assert_allclose(g[2], r[2], rtol=2e-5, atol=1e-6)
    np.testing.assert_allclose(w, w_np, rtol=2e-5, atol=1e-6)


def test_blocks_give_the_same_bits_as_one_launch_per_iteration(monkeypatch,
                                                               opencl_executables):
    steps = EVERY + R + 3          # across a checkpoint
    got, w = _run(steps, "opencl")
    assert _loop(opencl_executables[-1]).block == R
    exe = opencl_executables[-1]
    assert exe._spans == {id(_loop(exe)): EVERY} and exe.checkpoint_every == CHECKPOINT
    from autodiff.device import opencl
    monkeypatch.setattr(opencl, "_mark_blocks", lambda *a: None)
    plain, w_plain = _run(steps, "opencl")
    assert _loop(opencl_executables[-1]).block == 0
    np.testing.assert_array_equal(w, w_plain)
    np.testing.assert_array_equal([g[0] for g in got], [g[0] for g in plain])
    assert len(set(float(g[0]) for g in got)) == steps      # each iteration's own value


@pytest.mark.parametrize("s", [0, 5, R, 2 * R + 1, EVERY + 3])
def test_a_failing_receiver_stops_at_its_iteration(s, opencl_executables):
    """The Receiver of iteration ``s`` raises (seen up to two blocks later): a replay from
    the last checkpoint runs blocks too."""
    check_failing_receiver(s, EVERY + 3 * R)
    assert _loop(opencl_executables[-1]).block == R


def test_no_block_where_the_host_works_each_iteration(opencl_executables):
    """A Feeder under a ``prefetch`` below ``2 RING - 1`` may have to wait for a
    Receiver's value inside a block: one launch per iteration."""
    _run(3, "opencl", feeder=True, prefetch=2 * RING - 2)
    assert all(lp.block == 0 for lp in _loops(opencl_executables[-1].steps))


def test_feeders_through_rings_run_in_blocks(opencl_executables, launches):
    """A Feeder (default ``prefetch``) writes each iteration's value into a ring slot that
    the chain copies in: the loop still runs in blocks, every value as on the numpy
    device, one Feeder call per iteration."""
    steps = CHECKPOINT + RING + 3
    got, w = _run(steps, "opencl", feeder=True)
    want, w_np = _run(steps, "numpy", feeder=True)
    lp = _loop(opencl_executables[0])
    assert lp.block == RING and lp.lead == 1 and type(lp.body[0]) is RingFeed
    assert launches.count(lp.body[1].kernel.function_name) < steps // 2
    assert len(got) == len(want) == steps
    np.testing.assert_allclose([g[0] for g in got], [r[0] for r in want], rtol=2e-5,
                               atol=1e-6)
    np.testing.assert_allclose(w, w_np, rtol=2e-5, atol=1e-6)


def _fed_program(steps, fail_feed=None, fail_recv=None):
    """A Feeder of a new input every iteration (call ``fail_feed`` raises) and a Receiver
    (call ``fail_recv`` raises); returns (weight, calls made)."""
    ad.reset()
    rng = np.random.default_rng(5)
    w = ad.Tensor(rng.standard_normal((4, 6)).astype(np.float32) * 0.5, requires_grad=True)
    xs = rng.standard_normal((steps, 5, 4)).astype(np.float32)
    opt = ad.optim.SGD([w], lr=0.05)
    calls = {"feed": 0, "recv": 0}

    def feed():
        if calls["feed"] == fail_feed:
            raise ValueError("no data")
        calls["feed"] += 1
        return xs[calls["feed"] - 1]

    def recv(v):
        if calls["recv"] == fail_recv:
            raise ValueError("receiver down")
        calls["recv"] += 1

    def step():
        opt.zero_grad()
        loss = (ad.Feeder(feed, [5, 4], name="x") @ w).tanh().square().mean()
        loss.backward()
        opt.step()
        ad.Receiver(recv, [loss], name="r")
    ad.ir_for(steps, step)
    return w, calls


@pytest.mark.parametrize("s", [0, 3, RING + 2, CHECKPOINT + 5])
@pytest.mark.parametrize("what", ["feeder", "receiver"])
def test_a_failing_callback_in_a_fed_block(what, s, opencl_executables, monkeypatch):
    """A Feeder or Receiver of iteration ``s`` fails inside a block: the same error and
    Feeder-call count as on the numpy device (the order rule holds per iteration inside a
    block), and the weight of the start of iteration ``s``, bit-identical to a run
    without blocks (slots written for iterations never run are discarded)."""
    from autodiff.device import opencl
    out = {}
    for run in ("numpy", "opencl", "no blocks"):
        if run == "no blocks":
            monkeypatch.setattr(opencl, "_mark_blocks", lambda *a: None)
        kw = {"fail_feed": s} if what == "feeder" else {"fail_recv": s}
        w, calls = _fed_program(CHECKPOINT + 3 * RING, **kw)
        with pytest.raises((ad.FeederError, ad.ReceiverError)) as info:
            ad.execute(device="numpy" if run == "numpy" else "opencl")
        out[run] = (w.numpy(), dict(calls), type(info.value), info.value.iteration,
                    info.value.feeder_calls)
        if run == "opencl":
            assert _loop(opencl_executables[-1]).block == RING
    np.testing.assert_array_equal(out["opencl"][0], out["no blocks"][0])
    np.testing.assert_allclose(out["opencl"][0], out["numpy"][0], rtol=1e-5, atol=1e-6)
    assert out["opencl"][1:] == out["numpy"][1:] == out["no blocks"][1:]
    assert out["opencl"][3] == (s,)


def test_a_profiled_run_times_each_iteration(opencl_executables):
    """``profile=True`` records one launch per iteration (per-kernel device times stay
    per iteration): no blocks then."""
    steps = R + 3
    got = []
    _program(steps, lambda *a: got.append(a))
    ad.execute(device="opencl", profile=True)
    exe = opencl_executables[-1]
    lp = _loop(exe)
    assert lp.block == R and len(got) == steps
    assert exe.stats["kernel_us"][lp.body[0].name][0] == steps



def _indexed(steps: int, device: str, fail_at: int | None = None, feeder: bool = False,
             feed_fails_at: int | None = None):
    """An SGD loop whose batch is row ``i`` of a device-resident dataset (the loop index
    read by the chain: the dispatch kernel's ``ctr`` advances it per repeat), scaled by a
    Feeder's value with ``feeder``; returns the loss and the index of every iteration as
    its Receiver saw them, the weight, and the ReceiverError (when the Receiver of
    iteration ``fail_at`` raised)."""
    ad.reset()
    rng = np.random.default_rng(3)
    data = ad.Tensor(rng.standard_normal((steps, 4, 3)).astype(np.float32))
    w = ad.Tensor(rng.standard_normal((3, 2)).astype(np.float32), requires_grad=True)
    opt = ad.optim.SGD([w], lr=0.05)
    got = []
    scales = iter(np.linspace(0.5, 1.5, steps, dtype=np.float32).reshape(steps, 1))
    fed = []

    def scale():
        if len(fed) == feed_fails_at:
            raise RuntimeError("feeder down")
        fed.append(1)
        return next(scales)

    def take(loss, i):
        if len(got) == fail_at:
            raise RuntimeError("receiver down")
        got.append((float(loss), int(i)))

    def body(i):
        opt.zero_grad()
        x = data[i] * ad.Feeder(scale, [1], name="scale") if feeder else data[i]
        loss = ((x @ w).tanh() ** 2).sum()
        loss.backward()
        opt.step()
        ad.Receiver(take, [loss, i * 1])
    ad.ir_for(range(steps), body)
    err = None
    try:
        ad.execute(device=device)
    except (ad.errors.ReceiverError, ad.errors.FeederError) as e:
        err = e
    return got, w.numpy(), err


@pytest.mark.parametrize("feeder", [False, True])
def test_a_loop_reading_its_counter_runs_in_blocks(opencl_executables, launches,
                                                   monkeypatch, feeder):
    """A body indexing a device-resident dataset by the loop index (with a Feeder too, or
    not) runs in blocks: the chain advances the counter between repeats, so every
    iteration reads its own row (bit-identical to one launch per iteration, as the numpy
    device up to rounding)."""
    block, every = (RING, CHECKPOINT) if feeder else (R, EVERY)
    steps = every + 2 * block + 3
    got, w, _ = _indexed(steps, "opencl", feeder=feeder)
    lp = _loop(opencl_executables[-1])
    la = lp.body[lp.lead]
    assert lp.block == block and la.counters and lp.lead == int(feeder)
    assert launches.count(la.kernel.function_name) < steps // 2
    assert la.ctr == -1 and la.reps == 1            # the kernel object left as compiled
    assert [i for _, i in got] == list(range(steps))
    want, w_np, _ = _indexed(steps, "numpy", feeder=feeder)
    np.testing.assert_allclose([g for g, _ in got], [g for g, _ in want], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(w, w_np, rtol=1e-5, atol=1e-6)
    from autodiff.device import opencl
    monkeypatch.setattr(opencl, "_mark_blocks", lambda *a: None)
    plain, w_plain, _ = _indexed(steps, "opencl", feeder=feeder)
    assert _loop(opencl_executables[-1]).block == 0
    np.testing.assert_array_equal(w, w_plain)
    assert got == plain


@pytest.mark.parametrize("s", [3, R + 2, EVERY + 5])
def test_a_failing_receiver_in_a_counter_block_keeps_its_iteration(s, opencl_executables):
    """The Receiver of iteration ``s`` raises: the run stops there with the weight of a
    clean run of ``s`` iterations over the same rows (a replay from a checkpoint re-runs
    blocks with the counter rewritten)."""
    steps = EVERY + 2 * R + 3
    got, w, err = _indexed(steps, "opencl", fail_at=s)
    assert _loop(opencl_executables[-1]).block == R
    assert err is not None and err.iteration[0] == s and len(got) == s
    _, w_np, err_np = _indexed(steps, "numpy", fail_at=s)
    assert err_np.iteration[0] == s
    np.testing.assert_allclose(w, w_np, rtol=1e-5, atol=1e-6)
    _, w_again, _ = _indexed(steps, "opencl", fail_at=s)
    np.testing.assert_array_equal(w, w_again)


@pytest.mark.parametrize("s", [5, RING + 3, CHECKPOINT + 9])
def test_a_failing_feeder_in_a_counter_block_keeps_its_iteration(s, opencl_executables):
    """The Feeder of iteration ``s`` raises inside a block of a body that also reads the
    loop index: the iterations fed before it run from their own rows, and the run stops
    with the weight the numpy device has at the same point."""
    steps = CHECKPOINT + 2 * RING + 3
    got, w, err = _indexed(steps, "opencl", feeder=True, feed_fails_at=s)
    assert _loop(opencl_executables[-1]).block == RING
    assert isinstance(err, ad.errors.FeederError) and err.iteration[0] == s
    got_np, w_np, err_np = _indexed(steps, "numpy", feeder=True, feed_fails_at=s)
    assert err_np.iteration[0] == s and len(got) == len(got_np)
    assert [i for _, i in got] == [i for _, i in got_np]
    np.testing.assert_allclose(w, w_np, rtol=1e-5, atol=1e-6)


def _dropout_loop(steps: int, device: str, depth2: bool = False):
    """A light SGD loop with dropout (a Philox draw per iteration) whose Receiver gets the
    dropped activations; ``depth2``: the loop nested in a 2-iteration outer loop (the
    inner index enters the iteration words' second word). Returns the values received
    and the weight."""
    ad.reset()
    rng = np.random.default_rng(5)
    x = ad.Tensor(rng.standard_normal((4, 3)).astype(np.float32))
    w = ad.Tensor(rng.standard_normal((3, 6)).astype(np.float32), requires_grad=True)
    opt = ad.optim.SGD([w], lr=0.05)
    drop = ad.nn.Dropout(0.5, seed=7)
    got = []

    def body():
        opt.zero_grad()
        h = drop((x @ w).tanh())
        loss = (h ** 2).sum()
        loss.backward()
        opt.step()
        ad.Receiver(lambda a: got.append(a), [h])
    if depth2:
        ad.ir_for(range(2), lambda: ad.ir_for(range(steps), body))
    else:
        ad.ir_for(range(steps), body)
    ad.execute(device=device)
    return got, w.numpy()


@pytest.mark.parametrize("depth2", [False, True])
def test_a_loop_drawing_random_numbers_runs_in_blocks(opencl_executables, monkeypatch,
                                                      depth2):
    """Dropout in a light body: the chain advances the Philox iteration word between
    repeats, so every iteration draws its own mask -- the same masks as the numpy device
    and as one launch per iteration, bit for bit."""
    import autodiff.nn  # noqa: F401  (ad.nn)
    steps = 2 * R + 5
    got, w = _dropout_loop(steps, "opencl", depth2)
    lps = list(_loops(opencl_executables[-1].steps))
    lp = lps[-1]
    assert lp.block == R and lp.body[lp.lead].rand
    want, w_np = _dropout_loop(steps, "numpy", depth2)
    assert len(got) == len(want) == steps * (2 if depth2 else 1)
    for g, r in zip(got, want):
        np.testing.assert_array_equal(g == 0, r == 0)           # the same masks
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w, w_np, rtol=1e-5, atol=1e-6)
    assert len({(g == 0).tobytes() for g in got}) > steps // 2   # masks change per step
    from autodiff.device import opencl
    monkeypatch.setattr(opencl, "_mark_blocks", lambda *a: None)
    plain, w_plain = _dropout_loop(steps, "opencl", depth2)
    np.testing.assert_array_equal(w, w_plain)
    for g, p in zip(got, plain):
        np.testing.assert_array_equal(g, p)


def _nested_indexed(device: str, outer: int = 3, inner: int = 2 * R + 3):
    """An inner loop (a block) reading both loop indices: row ``i * inner + j`` of a
    device-resident dataset; returns the (i, j, loss) its Receiver saw and the weight."""
    ad.reset()
    rng = np.random.default_rng(9)
    data = ad.Tensor(rng.standard_normal((outer * inner, 4, 3)).astype(np.float32))
    w = ad.Tensor(rng.standard_normal((3, 2)).astype(np.float32), requires_grad=True)
    opt = ad.optim.SGD([w], lr=0.05)
    got = []

    def inner_body(i, j):
        opt.zero_grad()
        loss = ((data[i * inner + j] @ w).tanh() ** 2).sum()
        loss.backward()
        opt.step()
        ad.Receiver(lambda a, b, c: got.append((int(a), int(b), float(c))), [i * 1, j * 1, loss])
    ad.ir_for(range(outer), lambda i: ad.ir_for(range(inner), lambda j: inner_body(i, j)))
    ad.execute(device=device)
    return got, w.numpy()


def test_an_inner_loop_reading_both_counters_runs_in_blocks(opencl_executables):
    """The outer index is written by the host once per outer iteration, the inner one
    advanced by the chain: every inner iteration reads its own row."""
    got, w = _nested_indexed("opencl")
    inner = [lp for lp in _loops(opencl_executables[-1].steps) if lp.block]
    assert inner and inner[0].body[inner[0].lead].counters
    assert [(i, j) for i, j, _ in got] == [(i, j) for i in range(3) for j in range(2 * R + 3)]
    want, w_np = _nested_indexed("numpy")
    np.testing.assert_allclose([c for *_, c in got], [c for *_, c in want], rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(w, w_np, rtol=1e-5, atol=1e-6)


def test_transfers_without_pyopencls_bindings_give_the_same_run(monkeypatch):
    """Where pyopencl lacks ``_enqueue_write_buffer``/``_enqueue_read_buffer`` the
    per-iteration Feeder writes and Receiver reads go through ``enqueue_copy``: the same
    values and weight."""
    steps = 2 * RING + 3
    got, w, _ = _indexed(steps, "opencl", feeder=True)
    import types
    from autodiff.device.opencl import runtime
    real = runtime._transfers
    write, read = real(types.SimpleNamespace())       # a pyopencl without the bindings
    assert "enqueue_copy" in write.__code__.co_names + read.__code__.co_names
    monkeypatch.setattr(runtime, "_transfers", lambda: real(types.SimpleNamespace()))
    again, w_again, _ = _indexed(steps, "opencl", feeder=True)
    assert again == got
    np.testing.assert_array_equal(w_again, w)


@pytest.mark.parametrize("count, m", [(0, RING), (3, 5), (5, 6), (RING - 1, 2), (9, RING)])
def test_a_blocks_feeder_values_go_to_consecutive_ring_slots(count, m):
    """A block's ``m`` Feeder values (rows of one staging array) are written into the
    ring's next ``m`` slots: one write where they fit before the ring's end, two where it
    wraps around; the ring's count moves on by ``m``."""
    from types import SimpleNamespace

    from autodiff.device.opencl.runtime import Executable
    spec = SimpleNamespace(shape=(2, 3), dtype="float32")
    f = RingFeed(spec, 0, (2, 3), "float32", ring=1000, slots=RING, stride=24, count=count)
    rows = np.arange(m * 6, dtype=np.float32).reshape(m, 2, 3)
    writes = []
    exe = SimpleNamespace(queue=None, arena=None, _events=[],
                          _write=lambda q, buf, a, at: writes.append((a.copy(), at)) or at,
                          _release_unrecorded=lambda: None)
    Executable._write_rows(exe, [f], [rows], m)
    slots = np.full((RING, 2, 3), np.nan, np.float32)
    for a, at in writes:
        first = (at - 1000) // 24
        slots[first:first + len(a)] = a
    for i in range(m):
        np.testing.assert_array_equal(slots[(count + i) % RING], rows[i])
    assert len(writes) == (1 if count % RING + m <= RING else 2) == len(exe._events)
    assert f.count == count + m


def test_a_fed_blocks_staging_arrays_are_released_with_their_checkpoint(opencl_executables):
    """Over five checkpoint spans of a fed loop, the staging arrays in use (block arrays
    whose rows the Feeder record views) stay within what two checkpoints' records hold:
    each is released when its checkpoint is dropped, not only at the run's end."""
    steps = 5 * CHECKPOINT
    in_use = []

    def recv(v):
        in_use.append(opencl_executables[-1]._staging.in_use)
    ad.reset()
    rng = np.random.default_rng(1)
    w = ad.Tensor(rng.standard_normal((4, 6)).astype(np.float32), requires_grad=True)
    xs = iter(rng.standard_normal((steps, 5, 4)).astype(np.float32))
    opt = ad.optim.SGD([w], lr=0.01)

    def step():
        opt.zero_grad()
        loss = (ad.Feeder(lambda: next(xs), [5, 4], name="x") @ w).square().mean()
        loss.backward()
        opt.step()
        ad.Receiver(recv, [loss], name="r")
    ad.ir_for(steps, step)
    ad.execute(device="opencl")
    assert _loop(opencl_executables[-1]).block == RING and len(in_use) == steps
    # 3 checkpoints' spans at most (the one being dropped, two kept), a block each RING
    assert max(in_use) <= 3 * (CHECKPOINT // RING + 2)
    assert opencl_executables[-1]._staging.in_use == 0


def test_cut_blocks_take_rows_of_whole_block_arrays(opencl_executables):
    """Blocks cut short (the synced first iteration, checkpoints, the run's end) take
    rows of the same ``[RING, *shape]`` staging arrays as whole blocks: one array shape per
    Feeder, and every iteration's value reaches the device."""
    steps = CHECKPOINT + RING + 3   # blocks 1 (synced), 8, ..., 7 (to the checkpoint), 8, 3
    ad.reset()
    rng = np.random.default_rng(3)
    w = ad.Tensor(rng.standard_normal((4, 6)).astype(np.float32), requires_grad=True)
    xs = rng.standard_normal((steps, 5, 4)).astype(np.float32)
    it = iter(xs)
    opt = ad.optim.SGD([w], lr=0.01)
    losses = []

    def step():
        opt.zero_grad()
        loss = (ad.Feeder(lambda: next(it), [5, 4], name="x") @ w).square().mean()
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: losses.append(float(v)), [loss], name="r")
    w0 = w.numpy().copy()
    ad.ir_for(steps, step)
    ad.execute(device="opencl")
    exe = opencl_executables[-1]
    assert _loop(exe).block == RING and len(losses) == steps
    shapes = {(shape, np.dtype(dt)) for (shape, dt), free in exe._staging._free.items()
              if free}
    assert shapes == {((RING, 5, 4), np.dtype(np.float32))}, shapes
    ref = w0                               # the values reached every iteration
    for k in range(steps):
        g = 2 * xs[k].T @ (xs[k] @ ref) / (5 * 6)
        np.testing.assert_allclose(losses[k], np.mean(np.square(xs[k] @ ref)),
                                   rtol=1e-5, atol=1e-6)
        ref = ref - 0.01 * g
    np.testing.assert_allclose(w.numpy(), ref, rtol=1e-4, atol=1e-6)


def test_a_block_feeds_0d_values_as_the_numpy_device_does(opencl_executables):
    """Feeders of a 0-d value and of a vector in a block loop: each iteration's values
    reach the device (rows of the block's staging arrays; a 0-d row is a view too)."""
    steps = 2 * RING + 3

    def run(device):
        ad.reset()
        w = ad.Tensor(np.ones(3, np.float32), requires_grad=True)
        scales = iter(np.linspace(0.5, 2.0, steps).astype(np.float32))
        xs = iter(np.random.default_rng(2).standard_normal((steps, 3)).astype(np.float32))
        opt = ad.optim.SGD([w], lr=0.1)
        got = []

        def step():
            opt.zero_grad()
            s = ad.Feeder(lambda: np.array(next(scales)), [], name="s")
            x = ad.Feeder(lambda: next(xs), [3], name="x")
            loss = (w * x * s).sum()
            loss.backward()
            opt.step()
            ad.Receiver(lambda v: got.append(float(v)), [loss], name="r")
        ad.ir_for(steps, step)
        ad.execute(device=device)
        return got, w.numpy()
    got, w = run("opencl")
    lp = _loop(opencl_executables[-1])
    assert lp.block == RING and lp.lead == 2
    want, w_np = run("numpy")
    assert len(set(want)) == steps                  # every iteration's own values
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w, w_np, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("feed_bytes, prefetch, ring, want", [
    (0, 15, RING, CHECKPOINT),                  # the default
    (0, 15, 32, 96),                            # two blocks of 32 lag: 65, in whole blocks
    (0, 100, RING, 101),                        # Receivers lag prefetch + 1
    (64 << 20, 15, RING, 17),                   # a big Feeder: few recorded, still > lag
    (0, 15, 16, CHECKPOINT),                    # 33 lag, CHECKPOINT is whole blocks
])
def test_checkpoint_every(feed_bytes, prefetch, ring, want):
    assert checkpoint_every(feed_bytes, prefetch, ring) == want


def _two_loops(device: str):
    """A loop of Receivers only, then a loop with a Feeder, over one weight; returns each
    loop's losses as its Receiver saw them."""
    ad.reset()
    rng = np.random.default_rng(4)
    w = ad.Tensor(rng.standard_normal((4, 6)).astype(np.float32), requires_grad=True)
    x0 = rng.standard_normal((5, 4)).astype(np.float32)
    opt = ad.optim.SGD([w], lr=0.01)
    got = {"a": [], "b": []}

    def body(x, key):
        opt.zero_grad()
        loss = (x @ w).tanh().square().mean()
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: got[key].append(float(v)), [loss])
    ad.ir_for(2 * R + 3, lambda: body(ad.Tensor(x0), "a"))
    ad.ir_for(20, lambda: body(ad.Feeder(lambda: x0, [5, 4], name="x"), "b"))
    ad.execute(device=device)
    return got


def test_deep_rings_set_only_their_own_loops_checkpoint_span(opencl_executables, monkeypatch):
    """A program with a loop of Receivers only (rings of R: checkpoints EVERY apart, in
    whole blocks) and a loop with a Feeder whose recorded values bound its span
    (``RECORD_BYTES``): the fed loop keeps its short span, and both loops' values are
    the numpy device's."""
    from autodiff.device.opencl import runtime
    monkeypatch.setattr(runtime, "RECORD_BYTES", 1000)    # 12 Feeder values of 80 bytes
    got = _two_loops("opencl")
    exe = opencl_executables[-1]
    ringed, fed = list(_loops(exe.steps))
    assert ringed.block == R and not ringed.feeds and fed.feeds
    assert exe._spans == {id(ringed): EVERY} and exe.checkpoint_every == 2 * RING + 1
    want = _two_loops("numpy")
    for k in ("a", "b"):
        assert len(got[k]) == len(want[k])
        np.testing.assert_allclose(got[k], want[k], rtol=2e-5, atol=1e-6)
