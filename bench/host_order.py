"""What the strict order of host callbacks costs: ``execute(prefetch=0)`` against
Feeders running ahead (``prefetch=n``), ms per training step.

Workloads (each with a Feeder and a Receiver per step, as real training loops have):
W1 mlp255 and W2 tiny_transformer with their input fed every step (instead of the
benchmark's constant), and the main job (``examples/transformer.py``, default model,
fewer steps). Steady state: OpenCL's ``steady_iteration_ms`` (the first iteration, with
PoCL's lazy JIT, excluded), TVM's run time per step after a warm-up run.

Run: ``python -m bench.host_order [--devices opencl,tvm] [--prefetch 0,1,15] [--repeat 3]``.
"""
from __future__ import annotations

import argparse
import statistics

import numpy as np


def _workload_program(name: str, steps: int):
    """Trace W1 or W2 with its input fed each step; returns nothing (the program)."""
    import autodiff as ad
    from autodiff.optim import SGD

    from .workloads import WORKLOADS
    from .workloads.frameworks import TENSOR
    w = WORKLOADS[name]
    params = w.init(0)
    data = w.data(steps)
    P = {k: ad.Tensor(v, requires_grad=True, name=k) for k, v in params.items()}
    opt = SGD(list(P.values()), lr=w.lr)
    rows = {k: np.broadcast_to(v, (steps,) + v.shape).copy() for k, v in data.const.items()}
    its = {k: iter(v) for k, v in rows.items()}
    seen = []

    def step():
        opt.zero_grad()
        inputs = {k: ad.Feeder(lambda k=k: next(its[k]), v.shape[1:], name=k)
                  for k, v in rows.items()}
        loss = w.loss(TENSOR, P, inputs)
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: seen.append(float(v)), [loss], name="loss")
    ad.ir_for(steps, step)


def _example():
    import importlib.util

    from .workloads.charlm import EXAMPLE
    spec = importlib.util.spec_from_file_location("host_order_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _main_job_program(steps: int):
    import autodiff as ad
    t = _example()
    args = t.parse_args([])
    ad.manual_seed(args.seed)
    text = t.load_text()
    vocab = t.Vocab(text)
    ids = vocab.encode(text)
    model = t.CharTransformer(len(vocab), args.d_model, args.heads, args.layers, args.seq,
                              args.dropout)
    sampler = t.WindowSampler(ids[:int(0.9 * len(ids))], args.batch, args.seq, args.seed)
    opt = t.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)

    def step():
        x = ad.Feeder(sampler.tokens, [sampler.batch, sampler.seq], "int32", name="tokens")
        y = ad.Feeder(sampler.targets, [sampler.batch, sampler.seq], "int32", name="targets")
        opt.zero_grad()
        loss = t._lm_loss(model, x, y)
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: None, [loss], name="loss")
    ad.ir_for(steps, step)


def measure(job: str, device: str, prefetch: int, steps: int) -> float:
    """Steady ms per step of ``job`` on ``device`` with ``prefetch``."""
    import autodiff as ad
    ad.reset()
    if job == "main":
        _main_job_program(steps)
    else:
        _workload_program(job, steps)
    report = ad.execute(device=device, prefetch=prefetch)
    stats = report.stats.get(device, {})
    if "steady_iteration_ms" in stats:
        return float(stats["steady_iteration_ms"])
    return report.times["run"] / steps * 1e3


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", default="opencl,tvm")
    p.add_argument("--jobs", default="mlp255,tiny_transformer,main")
    p.add_argument("--prefetch", default="0,15")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--main-steps", type=int, default=60)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    prefetches = [int(x) for x in args.prefetch.split(",")]
    print("| job | device | " + " | ".join(f"prefetch={n} ms/step" for n in prefetches) +
          " | strict / fastest |")
    print("|---|---|" + "---|" * len(prefetches) + "---|")
    for job in args.jobs.split(","):
        steps = args.main_steps if job == "main" else args.steps
        for device in args.devices.split(","):
            measure(job, device, prefetches[-1], min(steps, 20))        # warm caches
            got = {n: [] for n in prefetches}
            for _ in range(args.repeat):             # interleaved: load drifts evenly
                for n in prefetches:
                    got[n].append(measure(job, device, n, steps))
            med = {n: statistics.median(v) for n, v in got.items()}
            ratio = med[prefetches[0]] / min(med.values())
            print(f"| {job} | {device} | " +
                  " | ".join(f"{med[n]:.3f}" for n in prefetches) + f" | {ratio:.2f}x |",
                  flush=True)


if __name__ == "__main__":
    main()
