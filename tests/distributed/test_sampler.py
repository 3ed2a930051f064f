"""``DistributedSampler`` (no MPI needed: ranks given explicitly): PyTorch's per-epoch
indices, shards of global batches that together are one process's batches, loss weights,
and Feeders that read a rank's rows."""
from __future__ import annotations

import numpy as np
import pytest
import torch.utils.data.distributed as tdist

import autodiff as ad
from autodiff.distributed import DistributedSampler


@pytest.mark.parametrize("n, replicas", [(10, 3), (12, 4), (7, 2), (5, 5)])
@pytest.mark.parametrize("drop_last", [False, True])
def test_epoch_indices_are_pytorchs_without_shuffle(n, replicas, drop_last):
    data = list(range(n))
    for rank in range(replicas):
        ours = DistributedSampler(n, replicas, rank, shuffle=False, drop_last=drop_last)
        theirs = tdist.DistributedSampler(data, replicas, rank, shuffle=False,
                                          drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_shuffled_epochs_partition_the_data_and_change_with_set_epoch():
    parts = [DistributedSampler(12, 3, r, seed=4) for r in range(3)]
    first = [list(p) for p in parts]
    assert sorted(sum(first, [])) == list(range(12))
    for p in parts:
        p.set_epoch(1)
    assert [list(p) for p in parts] != first


@pytest.mark.parametrize("batch, replicas", [(8, 2), (8, 3), (7, 3), (3, 3)])
def test_shards_of_global_batches_are_one_process_batches(batch, replicas):
    one = DistributedSampler(20, 1, 0, seed=1).batches(batch)
    each = [DistributedSampler(20, replicas, r, seed=1).batches(batch)
            for r in range(replicas)]
    sizes = [DistributedSampler(20, replicas, r).shard(batch) for r in range(replicas)]
    assert [s.stop - s.start for s in sizes] == \
        [batch // replicas + (r < batch % replicas) for r in range(replicas)]
    for _ in range(7):                     # crosses epochs (20 // batch batches each)
        whole = next(one)
        np.testing.assert_array_equal(np.concatenate([next(it) for it in each]), whole)


def test_loss_weights_make_the_averaged_gradient_the_global_one():
    b, n = 7, 3                            # shards of 3, 2, 2 rows
    w = [DistributedSampler(30, n, r).loss_weight(b) for r in range(n)]
    np.testing.assert_allclose(w, [9 / 7, 6 / 7, 6 / 7])
    # mean over ranks of weight_r * mean_r(l) == mean over the global batch of l
    rows = np.random.default_rng(0).standard_normal(b)
    shards = [rows[DistributedSampler(30, n, r).shard(b)] for r in range(n)]
    np.testing.assert_allclose(np.mean([wr * s.mean() for wr, s in zip(w, shards)]),
                               rows.mean(), rtol=1e-12)
    assert DistributedSampler(30, n, 1).loss_weight(b, "sum") == 3.0
    with pytest.raises(ValueError, match="reduction"):
        DistributedSampler(30, n, 1).loss_weight(b, "max")


def test_feeders_give_a_ranks_rows_of_each_global_batch():
    x = np.arange(40, dtype=np.float64).reshape(20, 2)
    y = np.arange(20, dtype=np.int64) * 10
    s = DistributedSampler(20, 3, 1, seed=2)
    want = DistributedSampler(20, 3, 1, seed=2).batches(8)
    got = []

    def body():
        xb, yb = s.feeders([x, y], 8, names=["x", "y"])
        assert xb.shape == (3, 2) and xb.dtype == ad.float32 and yb.dtype == ad.int64
        ad.Receiver(lambda a, b: got.append((a, b)), [xb, yb])
    ad.ir_for(5, body)
    ad.execute(device="numpy")
    for a, b in got:
        idx = next(want)
        np.testing.assert_array_equal(a, x[idx].astype(np.float32))
        np.testing.assert_array_equal(b, y[idx])


def test_bad_arguments():
    with pytest.raises(ValueError, match="Invalid rank 3"):
        DistributedSampler(10, 3, 3)
    with pytest.raises(ValueError, match="cannot give each of 4 processes a row"):
        DistributedSampler(10, 4, 0).shard(3)
    with pytest.raises(ValueError, match="larger than the dataset"):
        next(DistributedSampler(10, 2, 0).batches(11))
