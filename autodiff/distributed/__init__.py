"""Data-parallel training on several processes or machines, on MPI (``torch.distributed``'s
vocabulary).

Launch one process per device or node with ``mpiexec -n N python train.py``; rank and world
size come from MPI (mpi4py; ``pip install -e '.[distributed]'`` brings the MPICH wheel with
``mpiexec``). Each process traces and compiles the same program; collectives are traced ops
(graph IR ``CALLBACK`` nodes running an MPI collective on the host), so a whole training
loop with its gradient all-reduce stays one compiled ``ir_for``:

* :func:`init_process_group` / :func:`init` (implicit on first use), :func:`get_rank`,
  :func:`get_world_size`, :func:`barrier`, :func:`is_initialized`, :func:`is_available`.
* :func:`all_reduce` (``ReduceOp.SUM``, ``AVG``, ``MAX``, ``MIN``), :func:`broadcast`,
  :func:`reduce`: in place, traced, differentiable (:mod:`.collectives`);
  :mod:`autodiff.distributed.nn.functional` has the out-of-place forms.
* :class:`DistributedDataParallel`: parameters broadcast from rank 0, gradients averaged
  once per ``backward()`` in ~25 MB buckets (:mod:`.ddp`).
* :class:`DistributedSampler`: each process's shard of every global batch (:mod:`.sampler`).
* :func:`seed_by_rank`: device random draws (dropout) differ per process by default.

Failures: if one process raises, every process stops with a
:class:`~autodiff.DistributedError` naming the failing rank and iteration, variables as
after the last iteration every process completed (:mod:`.agreement`). Every ``execute()``
of a program holding collectives must be made by every process, as every collective.
"""
from .collectives import ReduceOp, all_reduce, broadcast, reduce, seed_by_rank
from .ddp import DistributedDataParallel, sync_module_states
from .sampler import DistributedSampler
from .state import (barrier, destroy_process_group, get_rank, get_world_size, init,
                    init_process_group, is_available, is_initialized)

__all__ = ["init", "init_process_group", "is_initialized", "is_available", "get_rank",
           "get_world_size", "barrier", "destroy_process_group", "ReduceOp", "all_reduce",
           "broadcast", "reduce", "seed_by_rank", "DistributedDataParallel",
           "sync_module_states", "DistributedSampler"]
