"""Item 5: tracing state is per thread (two threads trace and run two programs at once,
interleaved, each correct), and a variable owned by a running ``execute()`` is not
written by another thread until that run finishes (a read-only run in a second thread
waits and sees the trained values; it never resets them)."""
from __future__ import annotations

import threading
import time

import numpy as np

import autodiff as ad
from autodiff.nn import Linear
from autodiff.optim import SGD

TIMEOUT = 60


def _thread(fn):
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:          # reported by the test, not lost in the thread
            out["error"] = e
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def _result(t, out):
    t.join(TIMEOUT)
    assert not t.is_alive(), "thread did not finish"
    if "error" in out:
        raise out["error"]
    return out["value"]


def test_two_threads_trace_interleaved_programs(device):
    """Each thread traces half its program, waits for the other, then finishes and runs
    it: with one tracer for both they mixed, or saw each other's loop scope."""
    barrier = threading.Barrier(2, timeout=TIMEOUT)

    def program(scale):
        w = ad.Tensor(np.full(3, scale, np.float32))
        seen = []

        def body():
            barrier.wait()                  # both threads are inside their loop body now
            with ad.no_grad():
                w.mul_(2.0)
            barrier.wait()
            ad.Receiver(lambda v: seen.append(v.copy()), [w * 1.0])
        ad.ir_for(4, body)
        y = w + scale
        ad.execute(device=device)
        return w.numpy(), y.numpy(), seen

    ts = [_thread(lambda s=s: program(s)) for s in (1.0, 10.0)]
    for (t, out), s in zip(ts, (1.0, 10.0)):
        w, y, seen = _result(t, out)
        np.testing.assert_array_equal(w, np.full(3, 16 * s, np.float32))
        np.testing.assert_array_equal(y, np.full(3, 17 * s, np.float32))
        assert [float(v[0]) for v in seen] == [2 * s, 4 * s, 8 * s, 16 * s]


def _train(device, lin, steps, hold=None):
    opt = SGD(lin.parameters(), lr=0.1)

    def recv(loss):
        if hold is not None and hold["at"] == recv.n:
            hold["running"].set()
            assert hold["go"].wait(TIMEOUT)
        recv.n += 1
    recv.n = 0

    def body():
        opt.zero_grad()
        x = ad.Feeder(lambda: np.ones((2, 3), np.float32), [2, 3])
        loss = (lin(x) ** 2).sum()
        loss.backward()
        opt.step()
        ad.Receiver(recv, [loss])
    ad.ir_for(steps, body)
    ad.execute(device=device)


def test_read_only_run_in_second_thread_waits_for_training(device):
    ad.manual_seed(0)
    lin = Linear(3, 2)
    ad.manual_seed(0)
    ref = Linear(3, 2)
    _train(device, ref, 5)
    trained = ref.weight.numpy()
    ad.reset()
    hold = {"at": 2, "running": threading.Event(), "go": threading.Event()}
    t1, o1 = _thread(lambda: _train(device, lin, 5, hold))
    assert hold["running"].wait(TIMEOUT)

    def evaluate():                         # a read-only program on the same weights
        y = lin(ad.Tensor(np.ones((1, 3), np.float32)))
        ad.execute(device=device)
        return lin.weight.numpy(), y.numpy()
    t2, o2 = _thread(evaluate)
    time.sleep(0.3)
    assert t2.is_alive()                    # waits for the training run to finish
    hold["go"].set()
    _result(t1, o1)
    w_seen, y = _result(t2, o2)
    np.testing.assert_array_equal(lin.weight.numpy(), trained)     # not reset
    np.testing.assert_array_equal(w_seen, trained)                 # saw the trained values
    want = np.ones((1, 3), np.float32) @ trained.T + ref.bias.numpy()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_load_state_dict_from_another_thread_waits_for_the_run(device):
    ad.manual_seed(0)
    lin = Linear(3, 2)
    hold = {"at": 1, "running": threading.Event(), "go": threading.Event()}
    t1, o1 = _thread(lambda: _train(device, lin, 4, hold))
    assert hold["running"].wait(TIMEOUT)
    new = {"weight": np.full((2, 3), 7.0, np.float32), "bias": np.zeros(2, np.float32)}
    t2, o2 = _thread(lambda: lin.load_state_dict(new))
    time.sleep(0.3)
    assert t2.is_alive()                    # the run owns the weights
    hold["go"].set()
    _result(t1, o1)
    _result(t2, o2)
    np.testing.assert_array_equal(lin.weight.numpy(), new["weight"])   # not overwritten
