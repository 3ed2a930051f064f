"""Memory planner figures and planning time on the example programs (a timing script, not a
test).

For each program (examples/linear.py's MLP, examples/transformer.py's char LM with N layers,
a chain of elementwise ops) it traces one training loop, runs the graph passes, lowers (and
fuses) it, then plans its arena and prints: buffers, naive / lower bound / arena bytes,
% saved vs naive, arena / lower bound, the winning packer and every packer's arena, and the
time of liveness, each packer, the whole ``plan_memory`` and ``verify``.

    python bench/alloc_speed.py [--layers 6] [--alignment 128] [--repeat 3] [--plot DIR]
"""
from __future__ import annotations

import argparse
import importlib.util
import pathlib
import time

import numpy as np

import autodiff as ad
from autodiff import alloc, opt
from autodiff.alloc.inplace import merge_inplace
from autodiff.fusion import fuse
from autodiff.graph.trace import TRACER
from autodiff.optim import AdamW
from autodiff.procedural import lower

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def _example(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _finish():
    graph = opt.optimize(TRACER.finish())
    ad.reset()
    return graph


def linear_graph():
    linear = _example("linear")
    linear.trace(linear.build(), 10)
    return _finish()


def transformer_graph(layers: int):
    tr = _example("transformer")
    ad.manual_seed(0)
    model = tr.CharTransformer(103, 128, 4, layers, 64)
    sampler = tr.WindowSampler(np.arange(10000, dtype=np.int32) % 103, 16, 64, 0)
    adamw = AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)

    def step():
        x = ad.Feeder(sampler.tokens, [16, 64], "int32", name="tokens")
        y = ad.Feeder(sampler.targets, [16, 64], "int32", name="targets")
        adamw.zero_grad()
        loss = tr._lm_loss(model, x, y)
        loss.backward()
        adamw.step()
        ad.Receiver(lambda v: None, [loss], name="loss")

    ad.ir_for(10, step)
    return _finish()


def chain_graph(n: int = 24):
    y = ad.Feeder(lambda: None, [256, 1024], name="x")
    for k in range(n):
        y = y.exp() if k % 2 else y * 0.5
    ad.Receiver(lambda v: None, [y], name="y")
    return _finish()


def _best(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def bench(name, graph, alignment, repeat, plot_dir):
    prog = lower(graph)
    for label, program in (("unfused", prog), ("fused", fuse(prog))):
        t_live, live = _best(lambda: alloc.liveness(program, members=False), repeat)
        t_plan, plan = _best(lambda: alloc.plan_memory(program, alignment, graph.inplace,
                                                       members=False), repeat)
        t_ver, _ = _best(lambda: alloc.verify(plan), repeat)
        ranges, _ = merge_inplace(live.ranges, live.steps, live.buffers, graph.inplace)
        packs = {s: _best(lambda s=s: alloc.pack(ranges, alignment, [s]), repeat)[0]
                 for s in alloc.STRATEGIES}
        print(f"\n{name} ({label}): {len(live.steps)} steps, {len(live.ranges)} buffers, "
              f"{len(plan.aliases)} in place")
        print(f"  {plan.summary()}")
        print("  arena by packer: " + ", ".join(f"{k} {v} B" for k, v in plan.tried.items()))
        print(f"  time: plan_memory {t_plan * 1e3:.1f} ms (liveness {t_live * 1e3:.1f} ms; "
              + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in packs.items())
              + f"), verify {t_ver * 1e3:.1f} ms")
        if plot_dir:
            path = pathlib.Path(plot_dir) / f"alloc_{name}_{label}.png"
            alloc.plot(plan, path, title=f"{name} ({label}): {plan.summary()}")
            print(f"  picture: {path}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--alignment", type=int, default=128,
                   help="bytes (OpenCL CL_DEVICE_MEM_BASE_ADDR_ALIGN is often 1024 bits)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--plot", default="", help="directory for PNG pictures of the plans")
    args = p.parse_args(argv)
    bench("linear", linear_graph(), args.alignment, args.repeat, args.plot)
    bench(f"transformer{args.layers}", transformer_graph(args.layers), args.alignment,
          args.repeat, args.plot)
    bench("chain24", chain_graph(), args.alignment, args.repeat, args.plot)


if __name__ == "__main__":
    main()
