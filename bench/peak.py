"""The machine's measured fp32 ceilings, next to which every GFLOP/s figure is reported.

* FMA: :file:`peak.c` (independent fused multiply-add chains on register-wide vectors, one
  POSIX thread per core, their values kept normal) compiled by the system C compiler at
  ``-O3 -march=native``: the physical limit, the base of the reports' *% of FMA peak*.
* SGEMM: numpy's ``float32`` 1024^3 matmul (OpenBLAS) with ``OPENBLAS_NUM_THREADS`` set to
  the thread count: what a tuned BLAS reaches on the same cores (below the FMA figure: 100
  against 162 GFLOP/s on one Emerald Rapids core).

Both run pinned to the CPUs the systems of that thread count are pinned to, at the start
of the run, under the same load: the best of a few tries is kept (a ceiling, not a
typical figure).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

SOURCE = Path(__file__).with_name("peak.c")

SGEMM = """
import time, numpy as np
a = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)
b = a.T.copy()
a @ b
best = min((lambda t: (a @ b, time.perf_counter() - t)[1])(time.perf_counter())
           for _ in range({tries}))
print(2 * 1024 ** 3 / best / 1e9)
"""


def _binary() -> Path | None:
    """The compiled FMA probe (built once per source version), or None without a C
    compiler."""
    return native(SOURCE, "-pthread")


def native(source: Path, *flags: str) -> Path | None:
    """``source`` compiled by the system C compiler (``$CC``, else ``cc`` or ``gcc``) at
    ``-O3 -march=native`` with ``flags`` into an executable cached under
    ``~/.cache/autodiff/bench`` (one per source version and flags), or None without a C
    compiler or when it fails."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        return None
    tag = hashlib.sha1(source.read_bytes() + " ".join(flags).encode()).hexdigest()[:12]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    exe = Path(base) / "autodiff" / "bench" / f"{source.stem}-{tag}"
    if not exe.exists():
        exe.parent.mkdir(parents=True, exist_ok=True)
        tmp = exe.with_suffix(f".{os.getpid()}")
        r = subprocess.run([cc, "-O3", "-march=native", str(source), "-o", str(tmp), *flags],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return None
        tmp.replace(exe)
    return exe


def _pin(cpus):
    return (lambda: os.sched_setaffinity(0, cpus)) if cpus else None


def measure(threads: int, cpus: list[int], env: dict, tries: int = 3) -> dict:
    """``{"fma_gflops": float | None, "sgemm_gflops": float | None}`` on ``threads``
    threads pinned to ``cpus``; ``env`` is the thread-pool environment of the systems.
    A figure that cannot be measured (no C compiler, a failing child) is None."""
    out: dict = {"fma_gflops": None, "sgemm_gflops": None}
    exe = _binary()
    if exe is not None:
        best = []
        for _ in range(tries):
            r = subprocess.run([str(exe), str(threads), "0.3"], capture_output=True, text=True,
                               preexec_fn=_pin(cpus))
            if r.returncode == 0:       # GFLOP/s, then the smallest |accumulator|
                best.append(float(r.stdout.split()[0]))
        out["fma_gflops"] = max(best) if best else None
    r = subprocess.run([sys.executable, "-c", SGEMM.format(tries=5 * tries)],
                       capture_output=True, text=True, env=dict(os.environ, **env),
                       preexec_fn=_pin(cpus))
    if r.returncode == 0:
        out["sgemm_gflops"] = float(r.stdout.strip().splitlines()[-1])
    return out
