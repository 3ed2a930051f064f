"""The examples on the OpenCL device: ``examples/linear.py --device opencl`` (1000 SGD steps
traced once) agrees with the numpy reference device within 1e-4 relative."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from autodiff.device.opencl import device
from example_loader import load_example

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "linear.py"
RTOL = 1e-4           # after 1000 SGD steps (float32 sums rounded in another order)


def _load_example():
    return load_example("linear")


@pytest.mark.slow
def test_linear_example_1000_steps_matches_numpy_device():
    ex = _load_example()
    runs = {}
    for dev in ("numpy", "opencl"):
        net = ex.build()
        losses, report = ex.train(net, steps=1000, device=dev)
        runs[dev] = losses, net.state_dict(), report
    (l_ref, s_ref, _), (l_cl, s_cl, report) = runs["numpy"], runs["opencl"]
    assert report.device == "opencl" and len(l_cl) == 1000
    for k, ref in s_ref.items():
        scale = np.abs(ref).max()
        np.testing.assert_allclose(s_cl[k], ref, rtol=RTOL, atol=RTOL * scale, err_msg=k)
    l_ref = np.asarray(l_ref)
    np.testing.assert_allclose(l_cl, l_ref, rtol=RTOL, atol=RTOL * np.abs(l_ref).max())


def test_linear_example_command_line_on_opencl():
    out = subprocess.run([sys.executable, str(EXAMPLE), "--device", "opencl", "--steps", "3"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "device opencl: 3 steps" in out.stdout and "loss first" in out.stdout
