"""Activation checkpointing on W2 (the 6-layer tiny transformer): the memory arena and the
step time with every layer wrapped in ``autodiff.checkpoint`` against the plain model (a
timing script, not a test).

For each variant it traces ``--steps`` SGD steps of W2's math (:mod:`bench.workloads.layers`)
in one ``ir_for``, runs them on ``--device`` and prints the arena, its lower bound (the peak
of live bytes), the run time per step (the first iteration, which also compiles lazily on
PoCL, excluded when the device reports it), and the ratios checked by issue 17: arena at
most 0.5x the plain plan, step time at most 1.4x, arena within 2% of its lower bound.

    python -m bench.checkpoint [--device opencl] [--steps 500] [--repeat 3]
"""
from __future__ import annotations

import argparse
import time

import autodiff as ad
from autodiff.optim import SGD

from .workloads import tiny_transformer as W2
from .workloads.frameworks import TENSOR as F
from .workloads.layers import attention, layer_norm, linear


def layer(P: dict, i: int, x):
    """Layer ``i`` of W2's post-LN encoder (the body of :func:`.workloads.layers.encoder`)."""
    x = layer_norm(F, P, f"layer{i}.ln1", x + attention(F, P, f"layer{i}", x, W2.HEADS))
    h = F.relu(linear(P, f"layer{i}.ff1", x))
    return layer_norm(F, P, f"layer{i}.ln2", x + linear(P, f"layer{i}.ff2", h))


def trace_w2(steps: int, checkpointed: bool, seed: int = 0) -> dict:
    """Trace ``steps`` SGD steps of W2 (each layer checkpointed or not); returns the
    parameters (name -> Tensor)."""
    ad.reset()
    P = {k: ad.Tensor(v, requires_grad=True, name=k) for k, v in W2.WORKLOAD.init(seed).items()}
    x0 = ad.Tensor(W2.full((W2.SEQ, W2.D), 0.3))
    opt = SGD(list(P.values()), lr=W2.WORKLOAD.lr)

    def step():
        opt.zero_grad()
        x = x0
        for i in range(W2.LAYERS):
            x = ad.checkpoint(layer, P, i, x) if checkpointed else layer(P, i, x)
        x.sum().backward()
        opt.step()

    ad.ir_for(steps, step)
    return P


def measure(device: str, steps: int, checkpointed: bool) -> dict:
    """Arena bytes, lower bound and seconds per step of one run."""
    trace_w2(steps, checkpointed)
    opts = {"ir": "procedural"} if device == "numpy" else {}
    rep = ad.execute(device=device, **opts)
    mem = rep.stats["memory"]
    dev = rep.stats.get(device, {}) if isinstance(rep.stats.get(device), dict) else {}
    steady = dev.get("steady_iteration_ms")
    per_step = steady / 1e3 if steady else rep.times["run"] / steps
    return {"arena": mem["arena_bytes"], "bound": mem["lower_bound_bytes"],
            "step_s": per_step}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.checkpoint",
                                description=__doc__.splitlines()[0])
    p.add_argument("--device", default="opencl")
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--repeat", type=int, default=3, help="runs per variant (best kept)")
    args = p.parse_args(argv)
    res = {}
    for ck in (False, True):
        runs = [measure(args.device, args.steps, ck) for _ in range(args.repeat)]
        res[ck] = min(runs, key=lambda r: r["step_s"])
        r = res[ck]
        print(f"W2 {'checkpointed' if ck else 'plain':>12}: arena {r['arena']:7d} B "
              f"(lower bound {r['bound']} B, {r['arena'] / r['bound']:.3f}x), "
              f"{r['step_s'] * 1e3:.3f} ms/step")
    a, b = res[False], res[True]
    print(f"checkpointed / plain: arena {b['arena'] / a['arena']:.3f}x (at most 0.5), "
          f"step time {b['step_s'] / a['step_s']:.3f}x (at most 1.4) on {args.device}, "
          f"{args.steps} steps, best of {args.repeat}")


if __name__ == "__main__":
    main()
