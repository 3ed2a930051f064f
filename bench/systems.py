"""The systems under test, their thread settings, and the machine they run on."""
from __future__ import annotations

import datetime
import importlib.util
import os
import platform
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class System:
    """One way of running a workload.

    Attributes:
        name: table label (``"autodiff:numpy"``, ``"torch-eager"``, ...).
        framework: ``"autodiff"``, ``"torch"`` or ``"jax"``.
        mode: the autodiff device, or ``"eager"``/``"compile"`` (torch), ``"jit"``/``"fori"``
            (JAX).
        options: ``(name, value)`` pairs passed to ``autodiff.execute`` (autodiff only).
        full_only: skipped under ``--quick``.
        timeout_s: time limit of one pair when longer than ``--timeout`` (seconds).
    """
    name: str
    framework: str
    mode: str
    options: tuple = ()
    full_only: bool = False
    timeout_s: float | None = None

    @property
    def peer(self) -> bool:
        """Whether this is a reference framework (the rows ratios are taken against)."""
        return self.framework != "autodiff"


PEERS = (System("torch-eager", "torch", "eager"), System("torch.compile", "torch", "compile"),
         System("jax-jit", "jax", "jit"), System("jax-fori", "jax", "fori"))

#: The peers of ``autodiff:cuda`` on the GPU (modes ending in ``-cuda``); like it, they run
#: only where a GPU is usable and are reported as missing, with the reason, elsewhere.
GPU_PEERS = (System("torch-eager:cuda", "torch", "eager-cuda"),
             System("jax-jit:cuda", "jax", "jit-cuda"))


#: Extra autodiff configurations after the plain devices: the TVM device with its
#: matmul kernels tuned by meta_schedule (records kept in the tuning database under the
#: user's cache dir, so a rerun tunes nothing); tuning takes minutes, so full runs only.
#: A first tuning of W2 on 2 loaded cores ran over 600 s, hence the longer pair limit.
VARIANTS = (System("autodiff:tvm-tuned", "autodiff", "tvm", (("tune", True),), True, 1800.0),)


def systems() -> list[System]:
    """Every autodiff device in :data:`autodiff.device.DEVICES`, then :data:`VARIANTS`,
    then the peers."""
    from autodiff.device import DEVICES
    return [System(f"autodiff:{d}", "autodiff", d) for d in DEVICES] + \
        [v for v in VARIANTS if v.mode in DEVICES] + list(PEERS) + list(GPU_PEERS)


def gpu_missing(framework: str) -> str | None:
    """Why ``framework`` (``"autodiff"``, ``"torch"``, ``"jax"``) cannot use a GPU here, or
    None."""
    try:
        if framework == "autodiff":
            from autodiff.device.cuda.driver import missing as why
            return why()
        if framework == "torch":
            import torch
            return None if torch.cuda.is_available() else \
                f"torch {torch.__version__} sees no CUDA GPU"
        import jax
        return None if any(d.platform == "gpu" for d in jax.devices()) else \
            "jax sees no GPU (needs jax[cuda] and a GPU)"
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def missing(system: System) -> str | None:
    """Why ``system`` cannot run here (its framework is not installed), or None.

    An autodiff device whose backend fails to import is found out in its child process.
    """
    if system.peer and importlib.util.find_spec(system.framework) is None:
        return f"{system.framework} not installed (pip install -e '.[bench]')"
    if system.mode == "cuda" or system.mode.endswith("-cuda"):
        why = gpu_missing(system.framework)
        return f"no GPU here: {why}" if why else None
    return None


def thread_env(threads: int) -> dict:
    """Environment that pins every framework's CPU thread pools to ``threads`` threads.

    OpenBLAS/OpenMP/MKL (numpy, PyTorch), XLA's Eigen pool (JAX), PoCL's pthread device and
    Inductor's compile workers. Multi-threaded OpenBLAS collapses on a loaded 2-core machine,
    so the default is one thread for everyone.
    """
    env = {k: str(threads) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                     "MKL_NUM_THREADS", "POCL_MAX_PTHREAD_COUNT")}
    env["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    if threads == 1:
        env["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false"
    return env


def idlest_cpus(n: int, window_s: float = 0.2) -> list[int]:
    """The ``n`` CPUs this process may use that were idlest over ``window_s`` seconds.

    Children are pinned to them (``os.sched_setaffinity``): JAX's XLA CPU runtime ignores
    its thread flags, and pinning is the one limit every framework obeys.
    """
    import time

    allowed = sorted(os.sched_getaffinity(0))

    def idle():
        out = {}
        with open("/proc/stat") as f:
            for line in f:
                name, *vals = line.split()
                if name.startswith("cpu") and name != "cpu":
                    out[int(name[3:])] = int(vals[3]) + int(vals[4])   # idle + iowait
        return out

    try:
        a = idle()
        time.sleep(window_s)
        b = idle()
    except OSError:
        return allowed[:n]
    return sorted(sorted(allowed, key=lambda c: a.get(c, 0) - b.get(c, 0))[:n])


def _cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return platform.processor() or "unknown"


def _opencl() -> list[str]:
    try:
        import pyopencl as cl
        return [f"{p.name}: {p.version}" for p in cl.get_platforms()]
    except Exception as e:                     # no pyopencl, no ICD, no platform
        return [f"none ({type(e).__name__}: {e})"]


def _version(dist: str) -> str | None:
    try:
        from importlib.metadata import version
        return version(dist)
    except Exception:
        return None


def machine() -> dict:
    """Facts about this machine and software, for the report (JSON-able)."""
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l for l in f if l.startswith("flags")), "")
    except OSError:
        pass
    mem = None
    try:
        import psutil
        mem = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        pass
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "avx512": "avx512f" in flags,
        "memory_gib": mem,
        "os": platform.platform(),
        "python": platform.python_version(),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "opencl": _opencl(),
        "versions": {d: _version(d) for d in ("numpy", "torch", "jax", "jaxlib", "pyopencl",
                                               "apache-tvm", "scikit-learn")},
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
    }
