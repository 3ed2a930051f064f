"""The examples' ``--data-parallel`` mode: ``mpiexec -n 2`` prints the same losses as one
process with the global batch (rank 0 prints; the numpy device, the tests' default)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from launch import ROOT, needs_mpi, run

pytestmark = [needs_mpi, pytest.mark.slow]

TRANSFORMER = ["--layers", "1", "--d-model", "16", "--heads", "2", "--batch", "4", "--seq",
               "8", "--steps", "5", "--eval-every", "0", "--plot", "", "--no-progress",
               "--sample-len", "5", "--eval-batches", "1"]
CASES = {"linear": ("examples/linear.py", ["--batch", "4", "--steps", "20"],
                    r"loss first (\S+), last (\S+)"),
         "transformer": ("examples/transformer.py", TRANSFORMER,
                         r"train loss: first (\S+), mean of last 20 (\S+)")}


@pytest.mark.parametrize("name", CASES)
def test_two_processes_print_the_one_process_losses(name):
    script, args, pattern = CASES[name]
    one = subprocess.run([sys.executable, script, *args, "--device", "numpy"], cwd=ROOT,
                         capture_output=True, text=True, timeout=180, check=True,
                         env=dict(os.environ, PYTHONPATH=str(ROOT))).stdout
    two = run(script, 2, *args, "--data-parallel", timeout=180).stdout
    assert "2 processes" in two, two
    first, last = (float(v) for v in re.search(pattern, one).groups())
    got = [float(v) for v in re.search(pattern, two).groups()]
    assert len(re.findall(pattern, two)) == 1, two                 # printed by rank 0 only
    assert got[0] == pytest.approx(first, rel=1e-4) and got[1] == pytest.approx(last, rel=1e-4)
