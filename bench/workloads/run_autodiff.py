"""Workloads on autodiff: the whole training loop traced once with ``ir_for`` and run by
one ``execute()`` on a device; a Receiver timestamps every iteration on the host."""
from __future__ import annotations

import time

import numpy as np

from .frameworks import TENSOR
from .spec import Data, Outcome, Workload


def run(w: Workload, params: dict, data: Data, steps: int, device: str) -> Outcome:
    """Train ``w`` for ``steps`` SGD steps on autodiff's ``device``.

    Raises:
        ImportError: the device's backend cannot be imported (reported as missing).
    """
    import autodiff as ad
    from autodiff.device import get
    from autodiff.optim import SGD

    get(device)                       # an unusable backend fails here, before timing
    ad.reset()
    t0 = time.perf_counter()
    P = {k: ad.Tensor(v, requires_grad=True, name=k) for k, v in params.items()}
    const = {k: ad.Tensor(v, name=k) for k, v in data.const.items()}
    opt = SGD(list(P.values()), lr=w.lr)
    stamps: list[float] = []
    cpu: list[float] = []

    def clock(_):
        stamps.append(time.perf_counter() - t0)
        cpu.append(time.process_time())

    def step():
        opt.zero_grad()
        inputs = dict(const)
        for k, arr in data.stream.items():
            rows = iter(arr)
            inputs[k] = ad.Feeder(lambda rows=rows: next(rows), arr.shape[1:], name=k)
        loss = w.loss(TENSOR, P, inputs)
        loss.backward()
        opt.step()
        ad.Receiver(clock, [loss], name="clock")

    ad.ir_for(range(steps), step)
    t_traced = time.perf_counter() - t0
    report = ad.execute(device=device)
    final = {k: p.numpy() for k, p in P.items()}
    total = time.perf_counter() - t0
    stats = {"trace_s": t_traced, "times": dict(report.times), "nodes": dict(report.nodes),
             "device_stats": jsonable(report.stats)}
    return Outcome(stamps[0], total, stamps, None, final, stats, cpu=cpu)


def jsonable(x):
    """``x`` with every value made JSON-serialisable (numbers kept, others as strings)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (bool, int, float, str)) or x is None:
        return x
    if isinstance(x, np.generic):
        return x.item()
    return str(x)
