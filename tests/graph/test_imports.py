"""What importing the package loads: heavy optional modules stay out of a process that
does not use them (their resident memory counts in every run's peak)."""
import math
import subprocess
import sys

import numpy as np


def _modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\n"
                          "print(' '.join(sorted(m.split('.')[0] for m in sys.modules)))"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_importing_autodiff_and_its_devices_loads_no_scipy():
    mods = _modules_after("import autodiff, autodiff.nn, autodiff.optim\n"
                          "import autodiff.graph.reference, autodiff.device.numpy\n"
                          "import autodiff.device.opencl")
    assert "autodiff" in mods
    assert "scipy" not in mods


def test_erf_reference_kernel_still_computes_erf():
    from autodiff.graph import reference
    from autodiff.graph.ir import Op
    x = np.linspace(-3, 3, 13, dtype=np.float32)
    got = reference.KERNELS[Op.ERF](None)(x)
    np.testing.assert_allclose(got, [math.erf(v) for v in x], rtol=1e-6, atol=1e-7)
