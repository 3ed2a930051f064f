"""Kernel table: each op alone in an ``ir_for`` on OpenCL, one thread, against the same work
as hand-written C loops compiled by the system compiler.

    python -m bench.kernels [--cases matmul,softmax_fb] [--iters 2000] [--json F]

Each case is the protocol of the kernel table in the compute-bound speed issue: the op
alone in an ``ir_for`` loop, traced once, plus a ``sum`` for a Receiver every iteration
(``forward`` cases); or, for ``_fb`` cases, a training step on the op alone --
``loss = (op(x) * G).sum()`` with a fixed random ``G`` (so the gradient reaching the op is
not a constant; ``cross_entropy`` is its own loss), ``loss.backward()``, SGD on the op's
inputs, the loss to a Receiver. Each runs in a child process pinned to the idlest CPU with
one PoCL thread
(``POCL_MAX_PTHREAD_COUNT=1``, as ``python -m bench --threads 1``); its time per iteration
is the device's ``steady_iteration_ms``: the wall time from the end of the first iteration
to the end of the last, over the other iterations.

The reference, :file:`kernels.c`, does the same work per iteration in the plain loops a
programmer would write (row loops; contiguous inner loops marked ``#pragma omp simd``),
compiled with ``-O3 -march=native -fopenmp-simd`` (no ``-ffast-math``: libm's ``expf`` and
``erff`` stay scalar calls): does PoCL's code generation limit a kernel kind, or the
kernels autodiff generates?

The same source is also compiled with ``-ffast-math`` added, with which gcc calls
glibc's vector ``expf``/``erff`` (libmvec) and reorders float sums freely: the faster of
the two is the reference. The C ``max`` reductions are ``x > m ? x : m`` (a NaN is not
propagated); autodiff's ``amax``, softmax and cross-entropy propagate NaN as PyTorch does.

Columns: milliseconds per iteration, autodiff's rate -- GB/s of the least memory traffic the
case needs (:attr:`Case.nbytes`: the arrays read and written once, as float32), GFLOP/s for
the matmul -- the two C timings, and autodiff's time over the faster C one (under 1:
autodiff faster). The matmul's reference is the machine's SGEMM ceiling rather than this
loop (``python -m bench`` measures it; :mod:`bench.peak`).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.peak import native  # noqa: E402
from bench.systems import idlest_cpus, thread_env  # noqa: E402

SOURCE = Path(__file__).with_name("kernels.c")
F32 = 4


@dataclass(frozen=True)
class Case:
    """One row of the table.

    Attributes:
        name: the case's name here and in :file:`kernels.c`.
        title: the op and its shape, as the table shows it.
        shapes: the float32 inputs' shapes, in ``build``'s order (the first one is ``x``).
        build: ``(ad, F, tensors) -> scalar Tensor`` for the Receiver, traced inside the
            loop body (``tensors``: the inputs as autodiff Tensors).
        nbytes: the least memory traffic of one iteration (bytes): each array read or
            written once.
        flops: floating-point operations of one iteration (the matmul's), else 0.
        train: whether the case is a training step (``_fb``): the first ``trainable``
            inputs require gradients and SGD updates them; the last input is ``G`` where
            the op's value is not a loss already (not for ``cross_entropy``).
        trainable: how many of the inputs (from the first) a training step updates.
    """
    name: str
    title: str
    shapes: tuple
    build: Callable
    nbytes: int
    flops: int = 0
    train: bool = False
    trainable: int = 1


def targets(rows: int, classes: int) -> np.ndarray:
    """The cross-entropy cases' int32 class targets ``[rows]`` (as :file:`kernels.c`)."""
    return np.array([(i * 37) % classes for i in range(rows)], np.int32)


def _targets(ad, rows: int, classes: int):
    return ad.Tensor(targets(rows, classes))


def _cases() -> dict[str, Case]:
    H, LN, SM, CE = (1024, 512), (1024, 128), (4096, 64), (1024, 103)
    n = lambda s: s[0] * s[1] * F32         # noqa: E731
    cases = [
        Case("matmul", "matmul x @ W.T, [1024,128] x [512,128]^T", ((1024, 128), (512, 128)),
             lambda ad, F, t: (t[0] @ t[1].T).sum(), (1024 * 128 + 512 * 128) * F32 + n(H),
             flops=2 * 1024 * 128 * 512),
        Case("scale_shift", "H * 2 + 1, [1024,512]", (H,),
             lambda ad, F, t: (t[0] * 2 + 1).sum(), 2 * n(H)),
        Case("sum_last", "sum(dim=-1), [1024,512]", (H,),
             lambda ad, F, t: t[0].sum(dim=-1).sum(), n(H)),
        Case("amax_last", "amax(dim=-1), [1024,512]", (H,),
             lambda ad, F, t: t[0].amax(dim=-1).sum(), n(H)),
        Case("sum_first", "sum(dim=0), [1024,512]", (H,),
             lambda ad, F, t: t[0].sum(dim=0).sum(), n(H)),
        Case("layer_norm", "layer_norm, [1024,128], forward", (LN, (128,), (128,)),
             lambda ad, F, t: F.layer_norm(t[0], (128,), t[1], t[2]).sum(), 2 * n(LN)),
        Case("layer_norm_fb", "layer_norm, [1024,128], forward + backward + SGD",
             (LN, (128,), (128,), LN),
             lambda ad, F, t: (F.layer_norm(t[0], (128,), t[1], t[2]) * t[3]).sum(),
             3 * n(LN), train=True, trainable=3),
        Case("softmax", "softmax(dim=-1), [4096,64], forward", (SM,),
             lambda ad, F, t: F.softmax(t[0], dim=-1).sum(), 2 * n(SM)),
        Case("softmax_fb", "softmax(dim=-1), [4096,64], forward + backward + SGD", (SM, SM),
             lambda ad, F, t: (F.softmax(t[0], dim=-1) * t[1]).sum(), 3 * n(SM),
             train=True),
        Case("cross_entropy", "cross_entropy, [1024,103], forward", (CE,),
             lambda ad, F, t: F.cross_entropy(t[0], _targets(ad, *CE)), n(CE)),
        Case("cross_entropy_fb", "cross_entropy, [1024,103], forward + backward + SGD",
             (CE,), lambda ad, F, t: F.cross_entropy(t[0], _targets(ad, *CE)), 2 * n(CE),
             train=True),
        Case("gelu", "gelu (erf), [1024,512], forward", (H,),
             lambda ad, F, t: F.gelu(t[0]).sum(), 2 * n(H)),
    ]
    return {c.name: c for c in cases}


CASES = _cases()


def inputs(case: Case) -> list[np.ndarray]:
    """The float32 inputs of ``case`` (uniform in [-1, 1), seed 0), in ``case.shapes``'
    order."""
    rng = np.random.default_rng(0)
    return [rng.uniform(-1, 1, s).astype(np.float32) for s in case.shapes]


def trace(case: Case, iters: int, receive: Callable) -> None:
    """Trace ``case``'s loop of ``iters`` iterations (after ``ad.reset()``): each iteration
    hands the Receiver's value to ``receive``; run it with ``ad.execute``."""
    import autodiff as ad
    import autodiff.nn.functional as F
    from autodiff.optim import SGD

    ad.reset()
    tensors = [ad.Tensor(a, requires_grad=case.train and i < case.trainable)
               for i, a in enumerate(inputs(case))]
    opt = SGD(tensors[:case.trainable], lr=1e-6) if case.train else None

    def step():
        if opt is not None:
            opt.zero_grad()
        loss = case.build(ad, F, tensors)
        if opt is not None:
            loss.backward()
            opt.step()
        ad.Receiver(receive, [loss], name="clock")

    ad.ir_for(range(iters), step)


def autodiff_seconds(case: Case, iters: int) -> float:
    """Seconds per iteration of ``case`` on OpenCL in this process (see the module
    docstring); the caller sets the thread environment before PoCL starts.

    Raises:
        autodiff.device.opencl.OpenCLUnavailable: no OpenCL platform."""
    import autodiff as ad

    trace(case, iters, lambda _: None)
    report = ad.execute(device="opencl")
    return report.stats["opencl"]["steady_iteration_ms"] / 1e3


def c_seconds(case: Case, cpus: list[int], fast_math: bool = False,
              budget_s: float = 0.5) -> float | None:
    """Seconds per iteration of :file:`kernels.c`'s ``case``, pinned to ``cpus``
    (``fast_math``: compiled with ``-ffast-math`` too, so that gcc calls glibc's vector
    ``expf``/``erff``); None without a C compiler.

    Raises:
        subprocess.CalledProcessError: the compiled program failed (an unknown case)."""
    exe = native(SOURCE, "-fopenmp-simd", *(["-ffast-math"] if fast_math else []), "-lm")
    if exe is None:
        return None
    r = subprocess.run([str(exe), case.name, str(budget_s)], capture_output=True, text=True,
                       preexec_fn=lambda: os.sched_setaffinity(0, cpus), check=True)
    return float(r.stdout)


def measure(names: list[str], iters: int) -> list[dict]:
    """One row per case: ``{"case", "title", "autodiff_ms", "c_ms", "c_fast_ms", "ratio",
    "gb_s", "gflops"}``: ``c_ms`` and ``c_fast_ms`` from :file:`kernels.c` without and with
    ``-ffast-math``, ``ratio`` autodiff's time over the faster of the two (the C figures
    and ``ratio`` None without a C compiler).

    Raises:
        RuntimeError: a case's autodiff child failed (its stderr's end in the message).
        subprocess.CalledProcessError: a case's C program failed."""
    rows = []
    for name in names:
        case = CASES[name]
        cpus = idlest_cpus(1)
        env = dict(os.environ, **thread_env(1))
        r = subprocess.run([sys.executable, "-m", "bench.kernels", "--child", name,
                            "--iters", str(iters)], capture_output=True, text=True, env=env,
                           cwd=ROOT, preexec_fn=lambda: os.sched_setaffinity(0, cpus))
        if r.returncode != 0:
            raise RuntimeError(f"bench.kernels: case {name} failed:\n{r.stderr[-3000:]}")
        ours = float(r.stdout.strip().splitlines()[-1])
        strict, fast = c_seconds(case, cpus), c_seconds(case, cpus, fast_math=True)
        best = min((x for x in (strict, fast) if x is not None), default=None)
        ms = lambda x: None if x is None else x * 1e3       # noqa: E731
        rows.append({
            "case": name, "title": case.title, "autodiff_ms": ours * 1e3,
            "c_ms": ms(strict), "c_fast_ms": ms(fast),
            "ratio": None if best is None else ours / best,
            "gb_s": case.nbytes / ours / 1e9,
            "gflops": case.flops / ours / 1e9 if case.flops else None})
        print(_line(rows[-1]), flush=True)
    return rows


HEADER = ("| case | autodiff ms/iter | autodiff rate | C -O3 ms/iter | C -O3 -ffast-math "
          "ms/iter | autodiff / best C |\n|---|---|---|---|---|---|")


def _line(row: dict) -> str:
    f = lambda v, spec: "-" if v is None else format(v, spec)   # noqa: E731
    rate = f"{row['gflops']:.0f} GFLOP/s" if row["gflops"] else f"{row['gb_s']:.1f} GB/s"
    return (f"| {row['title']} | {row['autodiff_ms']:.4f} | {rate} | {f(row['c_ms'], '.4f')} "
            f"| {f(row['c_fast_ms'], '.4f')} | {f(row['ratio'], '.2f')}x |")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    p.add_argument("--iters", type=int, default=2000, help="loop iterations per case")
    p.add_argument("--json", default=None, help="also write the rows to this JSON file")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(autodiff_seconds(CASES[args.child], args.iters))
        return
    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        p.error(f"unknown case(s) {unknown}; choose from {sorted(CASES)}")
    print(HEADER)
    rows = measure(names, args.iters)
    if args.json:
        Path(args.json).write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                     time.gmtime()),
                                               "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
