"""Pinned staging arrays outside the checkpoints' records (Feeders and host functions
outside any loop, :meth:`~autodiff.device.opencl.runtime.Executable._keep_unrecorded`): an
array goes back to the pool only after its write to the arena was enqueued and has
completed. Released any earlier, the next value taken can land in it before the device
copies it, and the arena receives the next value in place of this one: a real race (the
collectives test on two processes saw, about once in fifteen runs under load, one rank's
``all_reduce`` sum arrive with the next collective's values).

The device decides when a write runs, so the tests check the rule itself: every array
released back to the pool has a write from it enqueued since it was taken, and that write
is complete."""
from __future__ import annotations

import numpy as np
import pytest

import autodiff as ad
from autodiff.device import unavailable
from autodiff.device.opencl import runtime
from autodiff.device.opencl.runtime import STAGING_UNRECORDED

pytestmark = pytest.mark.skipif(unavailable("opencl") is not None,
                                reason=str(unavailable("opencl")))

N = STAGING_UNRECORDED + 8          # past the count that forces a sync and a release


def _ptr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@pytest.fixture
def releases(monkeypatch):
    """Watch the staging pool: ``violations`` lists each release of an array whose write
    from it (since it was taken) was not enqueued or not complete; ``violations.checked``
    counts the releases looked at."""
    import pyopencl as cl
    state: dict = {}                 # data pointer -> None (taken) or the write's event
    class Violations(list):
        checked = 0
    violations = Violations()
    Staging = runtime.Staging
    real_take, real_release, real_all = Staging.take, Staging.release, Staging.release_all

    def take(self, shape, dtype):
        a = real_take(self, shape, dtype)
        if a.size:
            state[_ptr(a)] = None
        return a

    def check(a):
        if a.size and _ptr(a) in state:
            violations.checked += 1
            ev = state.pop(_ptr(a))
            if ev is None or ev.command_execution_status != cl.command_execution_status.COMPLETE:
                violations.append("not written" if ev is None else "write in flight")

    def release(self, arrays):
        for a in arrays:
            check(a)
        return real_release(self, arrays)

    def release_all(self):
        for _, a in list(self._used.values()):
            check(a)
        return real_all(self)

    def wrote(a, ev):
        if _ptr(a) in state:
            state[_ptr(a)] = ev
        return ev

    real_transfers, real_copy = runtime._transfers, cl.enqueue_copy

    def transfers(raw=None):
        write, read = real_transfers(raw)
        return (lambda q, buf, a, at: wrote(a, write(q, buf, a, at))), read

    def enqueue_copy(queue, dest, src, **kw):
        ev = real_copy(queue, dest, src, **kw)
        return wrote(src, ev) if isinstance(src, np.ndarray) else ev
    monkeypatch.setattr(Staging, "take", take)
    monkeypatch.setattr(Staging, "release", release)
    monkeypatch.setattr(Staging, "release_all", release_all)
    monkeypatch.setattr(runtime, "_transfers", transfers)
    monkeypatch.setattr(cl, "enqueue_copy", enqueue_copy)
    return violations


def test_feeders_outside_loops_keep_their_staging_until_written(releases):
    xs = np.random.default_rng(0).standard_normal((N, 3, 4)).astype(np.float32)
    got = []
    ad.reset()
    for i in range(N):
        x = ad.Feeder(lambda i=i: xs[i], [3, 4], name=f"x{i}")
        ad.Receiver(lambda v: got.append(float(v)), [x.sum()], name=f"r{i}")
    ad.execute(device="opencl")
    np.testing.assert_allclose(got, xs.sum(axis=(1, 2)), rtol=1e-5, atol=1e-5)
    assert releases == [] and releases.checked >= N, releases


def test_host_functions_outside_loops_keep_their_staging_until_written(releases):
    xs = np.random.default_rng(1).standard_normal((N, 5)).astype(np.float32)
    ad.reset()
    outs = [ad.host_callback(lambda v, k=k: v * (k + 1), [ad.tensor(xs[k]) * 1], (5,),
                             name=f"h{k}") * 1 for k in range(N)]
    ad.execute(device="opencl")
    for k, t in enumerate(outs):
        np.testing.assert_allclose(t.numpy(), xs[k] * (k + 1), rtol=1e-6, atol=1e-6)
    assert releases == [] and releases.checked >= N, releases
