"""Dropout and the device-side counter-based generator (``Op.RAND``, Philox-4x32-10)."""
from __future__ import annotations

import numpy as np
import pytest

import autodiff as ad
from autodiff import nn
from autodiff.device import DEVICES
from autodiff.graph import ops
from autodiff.graph.ir import LEAF, Op
from autodiff.graph.rng import philox4x32, philox_uniform
from autodiff.nn import functional as F

# Random123 tests/kat_vectors, the three "philox4x32 10" lines: counter, key, result.
KAT = [
    ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
    ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0],
     [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
]


@pytest.mark.parametrize("ctr,key,want", KAT)
def test_philox_known_answers(ctr, key, want):
    got = philox4x32(np.array(ctr, np.uint32)[:, None], key)[:, 0]
    assert [int(v) for v in got] == want


def test_philox_uniform_is_pure_and_keyed():
    a = philox_uniform(7, 1, (3, 2), (5, 7))
    np.testing.assert_array_equal(a, philox_uniform(7, 1, (3, 2), (5, 7)))
    assert a.dtype == np.float32 and a.shape == (5, 7) and 0 <= a.min() and a.max() < 1
    for other in (philox_uniform(8, 1, (3, 2), (5, 7)), philox_uniform(7, 2, (3, 2), (5, 7)),
                  philox_uniform(7, 1, (3, 3), (5, 7)), philox_uniform(7, 1, (4, 2), (5, 7))):
        assert (a != other).mean() > 0.99
    # element e is element e of a larger draw: the layout does not depend on the shape
    np.testing.assert_array_equal(philox_uniform(7, 1, (), (10,)),
                                  philox_uniform(7, 1, (), (3, 5)).reshape(-1)[:10])


def test_rand_is_a_leaf_node():
    assert Op.RAND in LEAF
    n = ops.rand((2, 3), 5, 6)
    assert n.op is Op.RAND and n.arg == (5, 6) and not n.requires_grad and n.srcs == ()
    with pytest.raises(ValueError):
        ops.rand((2,), -1, 0)


def test_zero_fraction_within_one_percent_of_p():
    p, n = 0.1, 1_000_000
    y = F.dropout(ad.ones(n), p, seed=1234)
    ad.execute()
    v = y.numpy()
    frac = float((v == 0).mean())
    assert abs(frac - p) <= 0.01 * p, frac
    np.testing.assert_allclose(v[v != 0], 1 / (1 - p), rtol=1e-6)   # survivors scaled


def _masks(device, seed=42, steps=3, shape=(64, 33)):
    drop = nn.Dropout(0.3, seed=seed)
    out = []

    def body():
        y = drop(ad.ones(*shape))
        ad.Receiver(lambda v: out.append(v), [y])

    ad.ir_for(steps, body)
    ad.execute(device=device)
    return out


@pytest.mark.parametrize("device", sorted(DEVICES))
def test_same_seed_same_masks_on_every_device(device):
    why = ad.device.unavailable(device)
    if why:
        pytest.skip(why)
    ref = _masks("numpy")
    got = _masks(device)
    assert len(got) == 3
    for a, b in zip(ref, got):
        np.testing.assert_array_equal(a, b)
    # the masks are the generator's: reproducible from the pure function alone
    seed = nn.Dropout(0.3, seed=42).rng.seed
    u = philox_uniform(seed, 0, (1,), (64, 33))
    np.testing.assert_array_equal(got[1] == 0, u < 0.3)


def test_new_mask_every_iteration_and_per_seed():
    a = _masks("numpy")
    assert (a[0] != a[1]).mean() > 0.2 and (a[1] != a[2]).mean() > 0.2
    b = _masks("numpy", seed=43)
    assert (a[0] != b[0]).mean() > 0.2


def test_two_calls_in_one_program_differ():
    drop = nn.Dropout(0.5, seed=3)
    x = ad.ones(1000)
    a, b = drop(x), drop(x)
    ad.execute()
    assert (a.numpy() != b.numpy()).mean() > 0.3


def test_eval_is_identity_and_train_restores():
    drop = nn.Dropout(0.5)
    x = ad.Tensor(np.arange(1, 11, dtype=np.float32))
    assert drop.eval()(x) is x
    drop.train()
    y = drop(x)
    ad.execute()
    assert (y.numpy() == 0).any()


def test_dropout_gradient_is_the_scaled_mask():
    x = ad.Tensor(np.ones(500, np.float32), requires_grad=True)
    y = F.dropout(x, 0.25, seed=9)
    y.backward()
    g = x.grad
    ad.execute()
    np.testing.assert_array_equal(g.numpy(), y.numpy())      # d(x * m)/dx = m, x = 1


def test_p_zero_one_and_bad_p():
    x = ad.Tensor(np.ones(10, np.float32))
    assert F.dropout(x, 0.0) is x
    z = F.dropout(x, 1.0)
    ad.execute()
    assert not z.numpy().any()
    with pytest.raises(ValueError):
        nn.Dropout(1.5)
    with pytest.raises(ValueError):
        F.dropout(ad.ones(2), -0.1)


def test_attention_dropout_only_in_training():
    mha = nn.MultiheadAttention(8, 2, dropout=0.5, batch_first=True, seed=1)
    x = ad.Tensor(np.random.default_rng(0).standard_normal((1, 6, 8)).astype(np.float32))
    _, w_train = mha(x, x, x, average_attn_weights=False)
    mha.eval()
    _, w_eval = mha(x, x, x, average_attn_weights=False)
    ad.execute()
    assert (w_train.numpy() == 0).mean() > 0.2
    np.testing.assert_allclose(w_eval.numpy().sum(-1), 1.0, rtol=1e-5)
