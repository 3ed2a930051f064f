"""A process that dies: ``kill`` (rank 1 exits outright during a run) or ``uncaught`` (rank
1 raises outside execute(), e.g. bad input at trace time): mpiexec must end the job with a
non-zero exit instead of rank 0 waiting forever in its next collective.

    mpiexec -n 2 python abort.py MODE DEVICE
"""
import os
import sys

import numpy as np

import autodiff as ad
import autodiff.distributed as dist

mode, device = sys.argv[1], sys.argv[2]
rank = dist.get_rank()
x = ad.Tensor(np.ones(3, np.float32))
if mode == "uncaught" and rank == 1:
    ad.Tensor(np.ones(3, np.float32)) @ ad.Tensor(np.ones(4, np.float32))   # ShapeError


def body(i):
    y = x * 1.0
    dist.all_reduce(y)
    ad.Receiver(lambda v, i: os._exit(7) if mode == "kill" and rank == 1 and int(i) == 3
                else None, [y, i])


ad.ir_for(50, body)
ad.execute(device=device)
print(f"rank {rank} finished", flush=True)
