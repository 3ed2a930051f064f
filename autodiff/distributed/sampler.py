"""``DistributedSampler``: which rows of the data each process reads.

Two views of one deterministic order (every process computes the same permutation of the
dataset for an epoch, from ``(seed, epoch)``; no communication):

* PyTorch's: iterating the sampler gives this process's indices of the epoch
  (``indices[rank::num_replicas]``, the epoch padded by repeating its start so every
  process gets as many; ``drop_last`` cuts instead), ``set_epoch`` reshuffles.
* Global batches for Feeders (:meth:`DistributedSampler.batches`,
  :meth:`DistributedSampler.feeders`): global batch ``k`` is the next ``B`` indices of the
  epochs' permutations, exactly the batch one process training with batch ``B`` reads;
  process ``r`` reads its contiguous shard of it (:meth:`shard`: sizes differ by at most
  one, the first ``B % N`` processes get the extra row). With the gradients averaged
  (``DistributedDataParallel``) and each process's loss weighted by
  :meth:`loss_weight` (1 for a mean loss on equal shards), N processes make the update
  that one process makes with the whole batch, up to floating-point reassociation.
"""
from __future__ import annotations

import math

import numpy as np

from ..graph import dtypes
from . import state


class DistributedSampler:
    """This process's share of a dataset (``torch.utils.data.distributed.
    DistributedSampler``) and of every global batch.

    Args:
        dataset: a sized object (its ``len()``) or the number of samples.
        num_replicas: process count (default: the world size).
        rank: this process's rank (default: from MPI).
        shuffle: permute the samples every epoch (numpy's generator seeded by
            ``(seed, epoch)``; PyTorch's own permutation differs).
        seed: the same on every process.
        drop_last: drop the tail of an epoch that does not divide evenly (else pad by
            repeating its start).

    Raises:
        ValueError: ``rank`` outside ``[0, num_replicas)``, or an empty dataset.
    """

    def __init__(self, dataset, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False):
        n = int(dataset) if isinstance(dataset, (int, np.integer)) else len(dataset)
        if num_replicas is None:
            num_replicas = state.get_world_size()
        if rank is None:
            rank = state.get_rank() if num_replicas > 1 else 0
        if not 0 <= rank < num_replicas:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        if n <= 0:
            raise ValueError("DistributedSampler: the dataset is empty")
        self.n, self.num_replicas, self.rank = n, int(num_replicas), int(rank)
        self.shuffle, self.seed, self.drop_last = bool(shuffle), int(seed), bool(drop_last)
        self.epoch = 0
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    # -- PyTorch's interface ------------------------------------------------------------
    def order(self, epoch: int) -> np.ndarray:
        """The permutation of all ``n`` sample indices for ``epoch`` (int64; the same on
        every process)."""
        if not self.shuffle:
            return np.arange(self.n, dtype=np.int64)
        return np.random.default_rng((self.seed, int(epoch))).permutation(self.n)

    def __iter__(self):
        idx = self.order(self.epoch)
        if self.drop_last:
            idx = idx[:self.total_size]
        elif self.total_size > len(idx):
            idx = np.resize(idx, self.total_size)        # repeats from the start
        return iter(idx[self.rank:self.total_size:self.num_replicas].tolist())

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next iteration (and :meth:`batches`) starts from."""
        self.epoch = int(epoch)

    # -- global batches --------------------------------------------------------------------
    def shard(self, batch_size: int) -> slice:
        """This process's rows of a global batch of ``batch_size`` rows: a contiguous
        slice; the first ``batch_size % num_replicas`` processes get one row more.

        Raises:
            ValueError: fewer rows than processes.
        """
        b, n = int(batch_size), self.num_replicas
        if b < n:
            raise ValueError(f"a global batch of {b} rows cannot give each of {n} "
                             f"processes a row")
        q, r = divmod(b, n)
        lo = self.rank * q + min(self.rank, r)
        return slice(lo, lo + q + (self.rank < r))

    def loss_weight(self, batch_size: int, reduction: str = "mean") -> float:
        """What to multiply this process's loss by so that averaging the processes'
        gradients gives the gradient of the global batch's loss: ``num_replicas *
        rows / batch_size`` for a mean over the rows (1.0 on equal shards), ``num_replicas``
        for a sum.

        Raises:
            ValueError: another ``reduction``.
        """
        if reduction == "sum":
            return float(self.num_replicas)
        if reduction != "mean":
            raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
        s = self.shard(batch_size)
        return self.num_replicas * (s.stop - s.start) / int(batch_size)

    def batches(self, batch_size: int):
        """An endless iterator over this process's index arrays (int64), one per global
        batch of ``batch_size``: global batch ``k`` is the ``k``-th run of ``batch_size``
        indices of the epochs' permutations (from :attr:`epoch` on; an epoch's last
        partial batch is dropped, so batches never straddle epochs), this process its
        :meth:`shard`.

        Raises:
            ValueError: ``batch_size`` is larger than the dataset, or smaller than the
                process count.
        """
        b = int(batch_size)
        if b > self.n:
            raise ValueError(f"a global batch of {b} rows is larger than the dataset "
                             f"({self.n})")
        part = self.shard(b)
        epoch = self.epoch
        while True:
            idx = self.order(epoch)
            for k in range(self.n // b):
                yield idx[k * b:(k + 1) * b][part]
            epoch += 1

    def feeders(self, arrays, batch_size: int, names=None) -> list:
        """Feeders (traced where called, e.g. in an ``ir_for`` body) that give this
        process's rows of the next global batch of each array in ``arrays`` (all with the
        dataset's samples along dim 0): call ``k`` of every Feeder reads global batch
        ``k`` (:meth:`batches`), whatever order a device calls them in. Float arrays are
        fed as float32.

        Returns:
            One Feeder tensor per array, of shape ``[rows of this process, *rest]``.

        Raises:
            ValueError: an array's length differs from the dataset's.
        """
        from ..graph.loop import Feeder
        arrays = [np.asarray(a) for a in arrays]
        for a in arrays:
            if len(a) != self.n:
                raise ValueError(f"feeders: an array has {len(a)} rows, the dataset "
                                 f"{self.n}")
        part = self.shard(batch_size)
        rows = part.stop - part.start
        it = self.batches(batch_size)
        cache: dict[int, np.ndarray] = {}
        calls = [0] * len(arrays)
        made = [0]

        def indices(k: int) -> np.ndarray:
            while made[0] <= k:
                cache[made[0]] = next(it)
                made[0] += 1
            idx = cache[k]
            if min(calls) > k:
                del cache[k]
            return idx

        def make(j: int, dt: str):
            host = dtypes.host(dt)

            def fn() -> np.ndarray:
                k = calls[j]
                calls[j] += 1
                return np.ascontiguousarray(arrays[j][indices(k)], dtype=host)
            return fn

        out = []
        for j, a in enumerate(arrays):
            dt = "float32" if a.dtype.kind == "f" and a.dtype.itemsize > 2 else \
                dtypes.name(a.dtype)
            name = names[j] if names else f"shard{j}"
            out.append(Feeder(make(j, dt), (rows,) + a.shape[1:], dt, name=name))
        return out
