"""Item 1: an out-of-range index (an Embedding fed bad ids, a cross_entropy class target)
stops the run in its iteration on every device: ``IndexError`` naming the op, the user's
``file:line``, the iteration and the bad value; Receivers of that iteration after the bad
op do not run; variables equal a clean run of the completed iterations, exactly; the
error says how many Feeder calls were made beyond them."""
from __future__ import annotations

import os

import numpy as np
import pytest

import autodiff as ad
from autodiff import nn
from autodiff.nn import functional as F
from autodiff.optim import Adam

HERE = os.path.basename(__file__)
ROWS, STEPS, BAD_AT = 10, 12, 5


def _ids(bad, bad_at=BAD_AT):
    def feed():
        i = feed.n
        feed.n += 1
        ids = np.array([i % ROWS, (3 * i) % ROWS, 1], np.int32)
        if i == bad_at:
            ids[1] = bad
        return ids
    feed.n = 0
    return feed


def _program(bad, receivers=True, bad_at=BAD_AT):
    ad.manual_seed(0)
    emb = nn.Embedding(ROWS, 4)
    head = nn.Linear(4, 3)
    opt = Adam(list(emb.parameters()) + list(head.parameters()), lr=0.01)
    seen = []
    feed = _ids(bad, bad_at)

    def body():
        opt.zero_grad()
        ids = ad.Feeder(feed, [3], dtype="int32", name="ids")
        h = emb(ids)                                            # the gather
        loss = (head(h).tanh() ** 2).sum()
        loss.backward()
        opt.step()
        if receivers:
            ad.Receiver(lambda v: seen.append(float(v)), [loss], name="loss")
    ad.ir_for(STEPS, body)
    line = f"{HERE}:{body.__code__.co_firstlineno + 3}"
    return emb, head, opt, seen, feed, line


def _state(emb, head, opt):
    return [t.numpy() for t in list(emb.parameters()) + list(head.parameters())
            + opt.state_tensors()]


def _reference(device, steps):
    """Variables and losses after ``steps`` clean iterations on ``device``."""
    global STEPS
    saved, STEPS = STEPS, steps
    try:
        ad.reset()
        emb, head, opt, seen, _, _ = _program(0, bad_at=-1)
        ad.execute(device=device)
        return _state(emb, head, opt), seen
    finally:
        STEPS = saved
        ad.reset()


@pytest.mark.parametrize("bad", [ROWS, -1, 2 ** 31 - 1])
@pytest.mark.parametrize("receivers", [True, False])
def test_bad_embedding_index_stops_in_its_iteration(device, bad, receivers):
    want, want_seen = _reference(device, BAD_AT)
    emb, head, opt, seen, feed, line = _program(bad, receivers)
    with pytest.raises(IndexError) as info:
        ad.execute(device=device, prefetch=0)
    e = info.value
    msg = str(e)
    assert e.op == "gather" and e.iteration == (BAD_AT,) and e.value == bad, msg
    assert msg.startswith("gather: index") and f"index {bad} is out of range [0, {ROWS})" \
        in msg and f"iteration {BAD_AT}" in msg and line in msg, msg
    assert e.completed == BAD_AT and e.feeder_calls == 1, msg
    assert f"after {BAD_AT} completed iterations" in msg, msg
    assert feed.n == BAD_AT + 1                       # strict order: no Feeder ran ahead
    if receivers:
        assert seen == want_seen                      # Receivers of iterations 0-4 only
    for got, exp in zip(_state(emb, head, opt), want):
        np.testing.assert_array_equal(got, exp)


def test_several_bad_indices_in_one_iteration(device):
    def feed():
        feed.n += 1
        return np.array([1, -3, 12, 11] if feed.n == 3 else [1, 2, 3, 4], np.int32)
    feed.n = 0
    table = ad.Tensor(np.arange(ROWS * 2, dtype=np.float32).reshape(ROWS, 2))
    acc = ad.Tensor(np.zeros((4, 2), np.float32))

    def body():
        with ad.no_grad():
            acc.add_(F.embedding(ad.Feeder(feed, [4], dtype="int32"), table))
    ad.ir_for(5, body)
    with pytest.raises(IndexError) as info:
        ad.execute(device=device, prefetch=0)
    msg = str(info.value)
    assert info.value.iteration == (2,) and "3 indices out of range [0, 10)" in msg, msg
    assert "from -3 to 12" in msg, msg
    np.testing.assert_array_equal(acc.numpy(), 2 * np.arange(2, 10, dtype=np.float32)
                                  .reshape(4, 2))


@pytest.mark.parametrize("bad", [5, -1, -7])
def test_cross_entropy_target_out_of_range(device, bad):
    logits = ad.Tensor(np.zeros((3, 5), np.float32), requires_grad=True)
    seen = []

    def feed():
        feed.n += 1
        return np.array([1, bad if feed.n == 3 else 4, -100], np.int32)
    feed.n = 0

    def body():
        t = ad.Feeder(feed, [3], dtype="int32", name="target")
        loss = F.cross_entropy(logits, t)             # ignore_index -100 is fine
        ad.Receiver(lambda v: seen.append(float(v)), [loss])
    ad.ir_for(4, body)
    line = f"{HERE}:{body.__code__.co_firstlineno + 2}"
    with pytest.raises(IndexError) as info:
        ad.execute(device=device, prefetch=0)
    msg = str(info.value)
    assert msg.startswith(f"cross_entropy: target {bad} is out of range [0, 5)"), msg
    assert info.value.iteration == (2,) and line in msg and info.value.value == bad, msg
    np.testing.assert_allclose(seen, [np.log(5)] * 2, rtol=1e-6)


def test_cross_entropy_ignore_index_only_is_fine(device):
    logits = ad.Tensor(np.zeros((2, 3), np.float32))
    loss = F.cross_entropy(logits, ad.Tensor(np.array([-100, 2], np.int32)))
    ad.execute(device=device)
    np.testing.assert_allclose(loss.numpy(), np.log(3), rtol=1e-6)
