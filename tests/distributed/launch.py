"""Run a program of ``tests/distributed/programs`` on N processes with ``mpiexec``.

Each run has a wall-clock limit: on expiry the whole process group (mpiexec and every
rank) is killed and the test fails, so a collective that hangs never hangs CI.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROGRAMS = pathlib.Path(__file__).resolve().parent / "programs"


def mpiexec_path() -> str | None:
    """``mpiexec`` of this Python's environment (the mpich wheel's), else on PATH."""
    here = pathlib.Path(sys.executable).parent / "mpiexec"
    return str(here) if here.exists() else shutil.which("mpiexec")


def missing() -> str | None:
    """Why distributed runs cannot happen here, or None."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py is not installed (pip install -e '.[distributed]')"
    if mpiexec_path() is None:
        return "no mpiexec (pip install mpich, or a system MPI)"
    return None


needs_mpi = pytest.mark.skipif(missing() is not None, reason=str(missing()))

#: the devices that run collectives, each distributed test runs on
DEVICES = ("numpy", "opencl", "tvm")


def devices(ranks=(2,)) -> list:
    """``pytest.param((ranks, device))`` for every process count and device, skipped with
    the reason where the device cannot run here; ids like ``2ranks-opencl``."""
    from autodiff.device import unavailable
    out = []
    for dev in DEVICES:
        why = unavailable(dev)
        for n in ranks:
            out.append(pytest.param((n, dev), id=f"{n}ranks-{dev}", marks=pytest.mark.skipif(
                why is not None, reason=str(why))))
    return out


def run(program: str, n: int, *args, timeout: float = 180, device: str | None = None,
        expect_rc: int | None = 0) -> subprocess.CompletedProcess:
    """``mpiexec -n n python programs/<program>.py *args`` (``program`` ending in ``.py``:
    that file of the repository) from the repository root, one
    thread per process; fails the test on a non-zero exit (unless ``expect_rc`` is None or
    another code) or after ``timeout`` seconds (killing every process)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1",
               AUTODIFF_DEVICE=device or os.environ.get("AUTODIFF_DEVICE", "numpy"))
    script = ROOT / program if program.endswith(".py") else PROGRAMS / f"{program}.py"
    cmd = [mpiexec_path(), "-n", str(n), sys.executable, str(script), *map(str, args)]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"mpiexec -n {n} {program} hung for {timeout} s; output:\n{out}")
    result = subprocess.CompletedProcess(cmd, proc.returncode, out, "")
    if expect_rc is not None and proc.returncode != expect_rc:
        pytest.fail(f"mpiexec -n {n} {program} exited {proc.returncode}; output:\n{out}")
    return result


def load(folder, name: str, rank: int) -> dict:
    """The arrays a program saved as ``<name>.<rank>.npz`` in ``folder``."""
    with np.load(pathlib.Path(folder) / f"{name}.{rank}.npz", allow_pickle=False) as f:
        return {k: f[k] for k in f.files}
