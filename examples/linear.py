"""The original project's MLP: Linear(255,255) -> Sigmoid -> Linear(255,255), loss = sum of
the output, SGD lr 0.01, 1000 iterations traced once with ir_for.

    python examples/linear.py [--device opencl|numpy|tvm] [--steps 1000]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import autodiff as ad
from autodiff.nn import Linear, Sequential, Sigmoid
from autodiff.optim import SGD


def build(seed: int = 0):
    ad.manual_seed(seed)
    return Sequential(Linear(255, 255), Sigmoid(), Linear(255, 255))


def trace(net, steps: int = 1000, lr: float = 0.01) -> list[float]:
    """Trace ``steps`` SGD steps on a constant [2, 255] batch of 0.2 (nothing runs yet).

    Returns the list the loss Receiver appends each iteration's loss (float) to.
    """
    opt = SGD(net.parameters(), lr=lr)
    batch = np.full((2, 255), 0.2, dtype=np.float32)
    losses: list[float] = []

    def step():
        opt.zero_grad()
        x = ad.Feeder(lambda: batch, shape=[2, 255], name="x")
        loss = net(x).sum()
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: losses.append(float(v)), [loss], name="loss")

    ad.ir_for(range(steps), step)
    return losses


def train(net, steps: int = 1000, device: str | None = None, lr: float = 0.01, **options):
    """Trace and run ``steps`` SGD steps (see :func:`trace`).

    Returns ``(losses, report)``: the per-iteration losses (float) and the execute report.
    """
    losses = trace(net, steps, lr)
    report = ad.execute(device=device, **options)
    return losses, report


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None,
                   help="numpy, opencl or tvm (default: $AUTODIFF_DEVICE, else opencl)")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args()
    net = build()
    t = time.perf_counter()
    losses, report = train(net, args.steps, args.device, verbose=args.verbose)
    wall = time.perf_counter() - t
    print(f"device {report.device}: {args.steps} steps")
    print(f"compile {report.times['optimize'] + report.times['compile']:.3f} s, "
          f"run {report.times['run']:.3f} s ({report.times['run'] / args.steps * 1e3:.3f} ms/step), "
          f"wall {wall:.3f} s")
    print(f"loss first {losses[0]:.4f}, last {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
