"""Workloads on PyTorch: eager, or the loss compiled with ``torch.compile`` (default mode,
Inductor); backward through autograd and ``torch.optim.SGD(foreach=True)`` in both."""
from __future__ import annotations

import os
import time

from .frameworks import TENSOR
from .spec import Data, Outcome, Workload


def run(w: Workload, params: dict, data: Data, steps: int, mode: str) -> Outcome:
    """Train ``w`` for ``steps`` steps; ``mode`` is ``"eager"`` or ``"compile"`` (on the CPU),
    ``"eager-cuda"`` (on the GPU; each step waits for the GPU before its time stamp).

    Raises:
        ImportError: PyTorch is not installed.
    """
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dev = "cuda" if mode.endswith("-cuda") else "cpu"
    mode = mode.removesuffix("-cuda")
    t0 = time.perf_counter()
    P = {k: torch.tensor(v, requires_grad=True, device=dev) for k, v in params.items()}
    const = {k: torch.from_numpy(v).to(dev) for k, v in data.const.items()}
    stream = {k: torch.from_numpy(v).to(dev) for k, v in data.stream.items()}

    def loss_fn(P, D):
        return w.loss(TENSOR, P, D)

    if mode == "compile":
        loss_fn = torch.compile(loss_fn)
    elif mode != "eager":
        raise ValueError(f"torch mode must be 'eager' or 'compile', got {mode!r}")
    opt = torch.optim.SGD(list(P.values()), lr=w.lr, foreach=True)
    stamps: list[float] = []
    cpu: list[float] = []
    for i in range(steps):
        D = dict(const)
        D.update({k: v[i] for k, v in stream.items()})
        opt.zero_grad(set_to_none=True)
        loss_fn(P, D).backward()
        opt.step()
        if dev == "cuda":
            torch.cuda.synchronize()
        stamps.append(time.perf_counter() - t0)
        cpu.append(time.process_time())
    final = {k: p.detach().cpu().numpy().copy() for k, p in P.items()}
    total = time.perf_counter() - t0
    return Outcome(stamps[0], total, stamps, None, final,
                   {"torch": torch.__version__, "threads": torch.get_num_threads()}, cpu=cpu)
