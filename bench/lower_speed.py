"""Time lowering (graph IR -> procedural IR) and fusion on a 6-layer transformer training
step (the program of ``bench/opt_speed.py``), on the raw and on the optimized graph, and on
2x and 4x as many layers to show the time grows linearly, then on the W2 tiny transformer
(``bench/workloads/tiny_transformer.py``: post-LN, 6 layers, d 64, [2, 64], SGD). Prints
kernel counts and the best of ``--repeat`` times; not a test.

    python bench/lower_speed.py [--layers 6] [--dim 64] [--heads 4] [--seq 16] [--repeat 3]
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from opt_speed import trace_program  # noqa: E402

from autodiff.fusion import fuse  # noqa: E402
from autodiff.opt import optimize  # noqa: E402
from autodiff.procedural.lower import lower  # noqa: E402


def best_of(fn, repeat: int):
    best, out = math.inf, None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def trace_w2():
    """The W2 training loop (3 iterations; the loop body is what is lowered) as a graph."""
    import autodiff as ad
    from autodiff.graph.trace import TRACER
    from autodiff.optim import SGD
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from bench.workloads.frameworks import TENSOR
    from bench.workloads.tiny_transformer import WORKLOAD as w

    ad.reset()
    P = {k: ad.Tensor(v, requires_grad=True, name=k) for k, v in w.init(0).items()}
    const = {k: ad.Tensor(v, name=k) for k, v in w.data(3).const.items()}
    opt = SGD(list(P.values()), lr=w.lr)

    def step():
        opt.zero_grad()
        loss = w.loss(TENSOR, P, dict(const))
        loss.backward()
        opt.step()
        ad.Receiver(lambda _: None, [loss], name="loss")
    ad.ir_for(range(3), step)
    return TRACER.finish()


def row(label: str, name: str, g, repeat: int) -> None:
    t_low, prog = best_of(lambda: lower(g), repeat)
    t_fuse, fused = best_of(lambda: fuse(prog), repeat)
    print(f"{label:>6} {name:>5} {g.count():6d} {len(prog.kernels()):8d} "
          f"{len(fused.kernels()):6d} {t_low * 1e3:9.1f} {t_fuse * 1e3:8.1f} "
          f"{(t_low + t_fuse) * 1e3:9.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'layers':>6} {'graph':>5} {'nodes':>6} {'kernels':>8} {'fused':>6} "
          f"{'lower ms':>9} {'fuse ms':>8} {'total ms':>9}")
    for layers in (args.layers, 2 * args.layers, 4 * args.layers):
        raw = trace_program(layers, args.dim, args.heads, args.seq)
        for name, g in (("raw", raw), ("opt", optimize(raw))):
            row(str(layers), name, g, args.repeat)
    raw = trace_w2()
    for name, g in (("raw", raw), ("opt", optimize(raw))):
        row("W2", name, g, args.repeat)

if __name__ == "__main__":
    main()
