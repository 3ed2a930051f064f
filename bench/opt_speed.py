"""Time the graph passes (autodiff.opt) on a 6-layer post-LN transformer training step.

The model is written with plain Tensor ops (matmuls, multi-head attention through
reshape/permute, softmax, layer norm from mean/var, relu), traced once inside ``ir_for``
with its backward pass and an SGD update, then each pass runs on the output of the previous
one. Prints node counts and the best of ``--repeat`` times per pass; not a test.

    python bench/opt_speed.py [--layers 6] [--dim 64] [--heads 4] [--seq 16] [--repeat 5]
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

import autodiff as ad
from autodiff.graph.trace import TRACER
from autodiff.opt import PASSES, optimize


def layer_norm(x, gain, bias, eps: float = 1e-5):
    mu = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True, unbiased=False)
    return (x - mu) / (var + eps).sqrt() * gain + bias


_RNG = np.random.default_rng(0)


def param(*shape, scale: float = 0.02):
    """A float32 parameter drawn from N(0, scale**2)."""
    return ad.Tensor(_RNG.standard_normal(shape).astype(np.float32) * scale, requires_grad=True)


def build_layers(n_layers: int, d: int):
    layers = []
    for _ in range(n_layers):
        layers.append({
            "wq": param(d, d), "wk": param(d, d), "wv": param(d, d), "wo": param(d, d),
            "w1": param(d, 4 * d), "b1": param(4 * d), "w2": param(4 * d, d), "b2": param(d),
            "g1": param(d, scale=1.0), "n1": param(d), "g2": param(d, scale=1.0),
            "n2": param(d),
        })
    return layers


def block(x, p, heads: int):
    b, t, d = x.shape
    dh = d // heads

    def split(y):                                    # [B, T, D] -> [B, H, T, dh]
        return y.reshape(b, t, heads, dh).permute(0, 2, 1, 3)

    q, k, v = split(x @ p["wq"]), split(x @ p["wk"]), split(x @ p["wv"])
    att = (q @ k.transpose(-1, -2) * (1.0 / math.sqrt(dh))).softmax(-1)
    h = (att @ v).permute(0, 2, 1, 3).reshape(b, t, d) @ p["wo"]
    x = layer_norm(x + h, p["g1"], p["n1"])
    f = ((x @ p["w1"] + p["b1"]).relu()) @ p["w2"] + p["b2"]
    return layer_norm(x + f, p["g2"], p["n2"])


def trace_program(n_layers: int, d: int, heads: int, seq: int, batch: int = 4):
    layers = build_layers(n_layers, d)
    params = [t for p in layers for t in p.values()]
    data = np.random.default_rng(0).standard_normal((batch, seq, d)).astype(np.float32)

    def step():
        x = ad.Feeder(lambda: data, [batch, seq, d], name="x")
        for p in layers:
            x = block(x, p, heads)
        loss = (x * x).mean()
        loss.backward()
        with ad.no_grad():
            for t in params:
                t.sub_(t.grad, alpha=1e-3)
                t.grad = None
        ad.Receiver(lambda v: None, [loss], name="loss")

    ad.reset()
    ad.ir_for(range(10), step)
    return TRACER.finish()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    t0 = time.perf_counter()
    graph = trace_program(args.layers, args.dim, args.heads, args.seq)
    print(f"{args.layers}-layer post-LN transformer, d={args.dim}, {args.heads} heads: "
          f"traced {graph.count()} nodes in {(time.perf_counter() - t0) * 1e3:.0f} ms")
    g = graph
    total = 0.0
    print(f"  {'pass':<10} {'nodes':>6} {'change':>7} {'best ms':>9}")
    for name in PASSES:
        best = math.inf
        for _ in range(args.repeat):
            t = time.perf_counter()
            out = optimize(g, passes=[name])
            best = min(best, time.perf_counter() - t)
        total += best
        print(f"  {name:<10} {out.count():6d} {out.count() - g.count():+7d} {best * 1e3:9.1f}")
        g = out
    t = time.perf_counter()
    optimize(graph)
    print(f"  {'all':<10} {g.count():6d} {g.count() - graph.count():+7d} {total * 1e3:9.1f}"
          f"   (one optimize() call: {(time.perf_counter() - t) * 1e3:.1f} ms)")


if __name__ == "__main__":
    main()
