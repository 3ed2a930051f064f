"""Recurrent layers: the time loop unrolled at trace time against one ``scan`` (a timing
script, not a test; it chose ``autodiff.nn.rnn.SCAN_MIN_STEPS``).

For each sequence length it traces ``--steps`` SGD steps of an ``nn.LSTM`` (batch
``--batch``, input and hidden ``--hidden``) regressing the last output, once with the
time loop unrolled and once as a scan, and prints the traced node count, the compile time
(graph passes, lowering, fusion, planning, kernel build) and the run time per step, each
the second of two runs (the first fills the device's kernel cache).

    python -m bench.rnn_scan [--device opencl] [--lengths 4,8,16,32,64] [--steps 50]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import autodiff as ad
from autodiff import nn
from autodiff.nn import rnn
from autodiff.optim import SGD


def measure(device: str, length: int, scan: bool, hidden: int, batch: int, steps: int):
    saved = rnn.SCAN_MIN_STEPS
    rnn.SCAN_MIN_STEPS = 1 if scan else 1 << 30
    try:
        ad.reset()
        ad.manual_seed(0)
        lstm = nn.LSTM(hidden, hidden)
        opt = SGD(lstm.parameters(), lr=0.01)
        rng = np.random.default_rng(0)
        x = ad.tensor(rng.standard_normal((length, batch, hidden)).astype(np.float32))
        y = ad.tensor(rng.standard_normal((batch, hidden)).astype(np.float32))

        def step():
            opt.zero_grad()
            out, _ = lstm(x)
            ((out[-1] - y) ** 2).mean().backward()
            opt.step()

        t0 = time.perf_counter()
        ad.ir_for(steps, step)
        nodes = ad.graph.trace.TRACER.root.graph.count()
        rep = ad.execute(device=device, **({"ir": "procedural"} if device == "numpy" else {}))
        trace_s = rep.times["total"] - rep.times["optimize"] - rep.times["compile"] - \
            rep.times["run"] + (time.perf_counter() - t0 - rep.times["total"])
        run_ms = rep.times["run"] / steps * 1e3
        return nodes, rep.times["optimize"] + rep.times["compile"] + max(trace_s, 0), run_ms
    finally:
        rnn.SCAN_MIN_STEPS = saved


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.rnn_scan",
                                description=__doc__.splitlines()[0])
    p.add_argument("--device", default="opencl")
    p.add_argument("--lengths", default="4,8,16,32,64")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=50)
    args = p.parse_args(argv)
    print(f"nn.LSTM({args.hidden}, {args.hidden}), batch {args.batch}, {args.steps} SGD "
          f"steps on {args.device}")
    print(f"{'length':>6} | {'unrolled: nodes':>15} {'build s':>8} {'ms/step':>8} | "
          f"{'scan: nodes':>11} {'build s':>8} {'ms/step':>8}")
    for n in (int(v) for v in args.lengths.split(",")):
        u, s = (measure(args.device, n, scan, args.hidden, args.batch, args.steps)
                for scan in (False, True))     # first runs: kernels built (PoCL caches)
        u, s = (measure(args.device, n, scan, args.hidden, args.batch, args.steps)
                for scan in (False, True))
        print(f"{n:>6} | {u[0]:>15} {u[1]:>8.2f} {u[2]:>8.3f} | {s[0]:>11} {s[1]:>8.2f} "
              f"{s[2]:>8.3f}")


if __name__ == "__main__":
    main()
