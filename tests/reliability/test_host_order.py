"""Item 3: the order of host callbacks is an explicit contract, the same on every device.
``prefetch=0``: program order (a Feeder may use what the previous iteration's Receiver
saw); ``prefetch=n``: Feeders exactly ``n`` iterations ahead of the Receivers. After an
error the number of Feeder calls beyond the completed iterations is exact, stated in the
error and identical on every device."""
from __future__ import annotations

import numpy as np
import pytest

import autodiff as ad
from autodiff.device.host import DEFAULT_PREFETCH
from autodiff.nn.functional import embedding

N = 9


def _program(events, fail=None):
    """w += x_k each iteration; Receivers r1 (after the update) and r2; Feeders x (start)
    and y (after r1). ``fail``: ("x" | "r1" | "index", iteration)."""
    w = ad.Tensor(np.zeros(2, np.float32), name="w")
    table = ad.Tensor(np.eye(3, dtype=np.float32)[:, :2])
    seen = {"loss": 0.0}

    def feeder(name):
        def fn():
            k = sum(e.startswith(f"feed {name}") for e in events)
            if fail == (name, k):
                events.append(f"feed {name} {k} FAILS")
                raise RuntimeError("no data")
            events.append(f"feed {name} {k}")
            # a feedback loop: x depends on the last loss a Receiver saw
            return np.full(2, 1.0 + seen["loss"], np.float32)
        return fn

    def r1(v):
        k = sum(e.startswith("recv r1") for e in events)
        if fail == ("r1", k):
            raise ValueError("receiver down")
        events.append(f"recv r1 {k}")
        seen["loss"] = float(v[0])

    def idx():
        k = sum(e.startswith("feed i") for e in events)
        events.append(f"feed i {k}")
        return np.array([7 if fail == ("index", k) else 1], np.int32)

    def body():
        x = ad.Feeder(feeder("x"), [2], name="x")
        i = ad.Feeder(idx, [1], dtype="int32", name="i")
        with ad.no_grad():
            w.add_(x * 0.5 + embedding(i, table)[0])
        ad.Receiver(r1, [w], name="r1")
        y = ad.Feeder(feeder("y"), [2], name="y")
        ad.Receiver(lambda v: events.append("recv r2"), [y * 2.0], name="r2")
    ad.ir_for(N, body)
    return w


def _events(device, prefetch, fail=None):
    ad.reset()
    events = []
    w = _program(events, fail)
    err = None
    try:
        ad.execute(device=device, prefetch=prefetch)
    except (ad.FeederError, ad.ReceiverError, IndexError) as e:
        err = e
    out = (events, w.numpy(), err)
    ad.reset()
    return out


def _expected(prefetch, n=N):
    """The order the contract prescribes (Feeders x, i, y; Receivers r1, r2)."""
    if prefetch == 0:
        return [e for k in range(n) for e in
                (f"feed x {k}", f"feed i {k}", f"recv r1 {k}", f"feed y {k}", "recv r2")]
    out, fed = [], -1
    for k in range(n):
        while fed < min(k + prefetch, n - 1):
            fed += 1
            out += [f"feed x {fed}", f"feed i {fed}", f"feed y {fed}"]
        out += [f"recv r1 {k}", "recv r2"]
    return out


@pytest.mark.parametrize("prefetch", [0, 1, 3])
def test_order_is_the_contract_on_every_device(device, prefetch):
    events, w, err = _events(device, prefetch)
    assert err is None
    assert events == _expected(prefetch)
    ref, ref_w, _ = _events("numpy", prefetch)
    assert events == ref
    np.testing.assert_array_equal(w, ref_w)


def test_default_prefetch(device):
    events, _, _ = _events(device, None)
    assert events == _expected(DEFAULT_PREFETCH)


def test_strict_order_makes_a_feedback_loop_exact(device):
    """With prefetch=0 each Feeder sees the loss of the previous iteration: w follows the
    recurrence w += (1 + w_prev) * 0.5 + e_1."""
    _, w, _ = _events(device, 0)
    want = np.zeros(2, np.float32)
    for _ in range(N):
        want = want + ((1.0 + np.float32(want[0])) * np.float32(0.5) + np.float32([0, 1]))
        want = want.astype(np.float32)
    np.testing.assert_array_equal(w, want)


def _calls_beyond(events, k):
    """Feeder calls made for iterations >= k (failed calls included)."""
    return sum(1 for e in events if e.startswith("feed") and int(e.split()[2]) >= k)


@pytest.mark.parametrize("prefetch", [0, 3])
@pytest.mark.parametrize("fail", [("r1", 4), ("x", 5), ("index", 3), ("r1", N - 1)],
                         ids=["receiver", "feeder", "index", "receiver-last"])
def test_feeder_calls_after_an_error_are_exact(device, prefetch, fail):
    events, w, err = _events(device, prefetch, fail)
    ref_events, ref_w, ref_err = _events("numpy", prefetch, fail)
    k = fail[1]
    assert type(err) is type(ref_err) and err.iteration == (k,)
    assert events == ref_events                               # same calls, same order
    assert err.completed == k
    assert err.feeder_calls == _calls_beyond(events, k) == ref_err.feeder_calls
    if fail[0] == "x":                       # x of iteration k fails: no call after it
        want = 1
    elif prefetch == 0:                      # program order: x and i of iteration k ran
        want = 2
    else:                                    # every Feeder of iterations k .. k + prefetch
        want = 3 * (min(k + prefetch, N - 1) - k + 1)
    assert err.feeder_calls == want, (events, err)
    assert f"{want} Feeder call" in str(err) and f"after {k} completed" in str(err)
    np.testing.assert_array_equal(w, ref_w)


def test_resume_skips_exactly_the_extra_calls(device):
    """The issue's case: a Receiver fails at iteration 70; the data iterator has been
    advanced ``completed + feeder_calls`` times, so a resume knows what to skip."""
    data = iter(range(1000))
    used = []
    w = ad.Tensor(np.zeros(1, np.float32))

    def feed():
        v = next(data)
        used.append(v)
        return np.array([v], np.float32)

    def recv(v):
        if recv.n == 70:
            raise ValueError("disk full")
        recv.n += 1
    recv.n = 0

    def body():
        with ad.no_grad():
            w.add_(ad.Feeder(feed, [1]))
        ad.Receiver(recv, [w])
    ad.ir_for(100, body)
    with pytest.raises(ad.ReceiverError) as info:
        ad.execute(device=device)
    e = info.value
    assert e.completed == 70 and len(used) == 70 + e.feeder_calls
    assert e.feeder_calls == min(DEFAULT_PREFETCH + 1, 30)
    np.testing.assert_array_equal(w.numpy(), [sum(range(70))])
