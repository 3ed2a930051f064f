"""The original project's MLP: Linear(255,255) -> Sigmoid -> Linear(255,255), loss = sum of
the output, SGD lr 0.01, 1000 iterations traced once with ir_for.

    python examples/linear.py [--device opencl|numpy|tvm] [--steps 1000]

Data-parallel on N processes: ``mpiexec -n N python examples/linear.py --data-parallel
--batch 2N`` (each process takes its rows of the global batch; the gradients of the summed
loss are averaged, so the loss is scaled by N; rank 0 prints the global loss).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import autodiff as ad
import autodiff.distributed as dist
from autodiff.nn import Linear, Sequential, Sigmoid
from autodiff.optim import SGD


def build(seed: int = 0):
    ad.manual_seed(seed)
    return Sequential(Linear(255, 255), Sigmoid(), Linear(255, 255))


def trace(net, steps: int = 1000, lr: float = 0.01, batch: int = 2,
          data_parallel: bool = False) -> list[float]:
    """Trace ``steps`` SGD steps on a constant [batch, 255] batch of 0.2 (nothing runs yet).

    ``data_parallel``: ``net`` is a ``DistributedDataParallel`` and this process feeds its
    rows of the global batch; the loss is scaled by the process count (gradients of a sum
    are averaged) and the loss received is the global batch's (an all-reduce).

    Returns the list the loss Receiver appends each iteration's loss (float) to.
    """
    opt = SGD(net.parameters(), lr=lr)
    rows, scale = batch, None
    if data_parallel:
        shards = dist.DistributedSampler(batch, shuffle=False)
        part = shards.shard(batch)
        rows, scale = part.stop - part.start, shards.loss_weight(batch, "sum")
    data = np.full((rows, 255), 0.2, dtype=np.float32)
    losses: list[float] = []

    def step():
        opt.zero_grad()
        x = ad.Feeder(lambda: data, shape=[rows, 255], name="x")
        loss = net(x).sum()
        if scale is None:
            loss.backward()
        else:
            (loss * scale).backward()
            dist.all_reduce(loss)                  # the global batch's loss
        opt.step()
        ad.Receiver(lambda v: losses.append(float(v)), [loss], name="loss")

    ad.ir_for(range(steps), step)
    return losses


def train(net, steps: int = 1000, device: str | None = None, lr: float = 0.01,
          batch: int = 2, data_parallel: bool = False, **options):
    """Trace and run ``steps`` SGD steps (see :func:`trace`).

    Returns ``(losses, report)``: the per-iteration losses (float) and the execute report.
    """
    losses = trace(net, steps, lr, batch, data_parallel)
    report = ad.execute(device=device, **options)
    return losses, report


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None,
                   help="numpy, opencl or tvm (default: $AUTODIFF_DEVICE, else opencl)")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--batch", type=int, default=2, help="rows of the (global) batch")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--data-parallel", action="store_true",
                   help="one of the processes of `mpiexec -n N`: a shard of each batch, "
                        "gradients averaged")
    args = p.parse_args()
    net = build()
    rank = 0
    if args.data_parallel:
        rank, net = dist.get_rank(), dist.DistributedDataParallel(net)
    t = time.perf_counter()
    losses, report = train(net, args.steps, args.device, batch=args.batch,
                           data_parallel=args.data_parallel, verbose=args.verbose and rank == 0)
    wall = time.perf_counter() - t
    if rank:
        return
    procs = f" on {dist.get_world_size()} processes" if args.data_parallel else ""
    print(f"device {report.device}: {args.steps} steps of batch {args.batch}{procs}")
    print(f"compile {report.times['optimize'] + report.times['compile']:.3f} s, "
          f"run {report.times['run']:.3f} s ({report.times['run'] / args.steps * 1e3:.3f} ms/step), "
          f"wall {wall:.3f} s")
    print(f"loss first {losses[0]:.4f}, last {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
