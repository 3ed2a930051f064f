"""bench.peak: the machine's fp32 ceilings the reports put every GFLOP/s figure next to."""
import subprocess

import numpy as np
import pytest

from bench import peak
from bench.systems import thread_env


def test_ceilings_are_measured_or_none():
    got = peak.measure(1, [], thread_env(1), tries=1)
    assert set(got) == {"fma_gflops", "sgemm_gflops"}
    assert all(v is None or v > 0 for v in got.values())


def test_fma_probe_keeps_its_values_normal():
    """peak.c's chains must never pass through the subnormals (a microcode assist per FMA:
    the probe read 68 instead of 162 GFLOP/s with one lane decaying towards zero)."""
    exe = peak._binary()
    if exe is None:
        pytest.skip("no C compiler: the FMA ceiling is not measured (reported as -)")
    out = subprocess.run([str(exe), "1", "0.5"], capture_output=True, text=True,
                         check=True).stdout.split()
    gflops, least = float(out[0]), float(out[1])
    assert gflops > 0
    assert least >= np.finfo(np.float32).tiny, least
