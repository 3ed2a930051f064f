"""The kernel table's cases (``python -m bench.kernels``) compute what their titles say --
each Receiver value against PyTorch in float64 on the same inputs -- and the C reference
builds and runs every case (no timing is asserted)."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from backends import opencl_missing
from bench import kernels
from bench.peak import native

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def _reference(name: str, t: list):
    """PyTorch's value of case ``name`` on float64 tensors ``t``."""
    x = t[0]
    target = torch.from_numpy(kernels.targets(*x.shape)).long()
    ce = lambda: TF.cross_entropy(x, target)  # noqa: E731
    return {
        "matmul": lambda: (x @ t[1].T).sum(),
        "scale_shift": lambda: (x * 2 + 1).sum(),
        "sum_last": lambda: x.sum(-1).sum(),
        "amax_last": lambda: x.amax(-1).sum(),
        "sum_first": lambda: x.sum(0).sum(),
        "layer_norm": lambda: TF.layer_norm(x, (128,), t[1], t[2]).sum(),
        "layer_norm_fb": lambda: (TF.layer_norm(x, (128,), t[1], t[2]) * t[3]).sum(),
        "softmax": lambda: TF.softmax(x, -1).sum(),
        "softmax_fb": lambda: (TF.softmax(x, -1) * t[1]).sum(),
        "cross_entropy": ce,
        "cross_entropy_fb": ce,
        "gelu": lambda: TF.gelu(x).sum(),
    }[name]()


@pytest.mark.parametrize("name", sorted(kernels.CASES))
def test_case_computes_its_title(name):
    """The first iteration's value (the training cases' loss before their first update)
    on the numpy device."""
    import autodiff as ad
    case = kernels.CASES[name]
    got: list = []
    kernels.trace(case, 2, lambda v: got.append(float(np.asarray(v))))
    ad.execute(device="numpy")
    want = _reference(name, [torch.from_numpy(a).double() for a in kernels.inputs(case)])
    np.testing.assert_allclose(got[0], want.item(), rtol=1e-4, atol=1e-3)
    assert len(got) == 2


@pytest.mark.skipif(opencl_missing() is not None, reason=str(opencl_missing()))
def test_opencl_time_per_iteration_is_measured():
    assert kernels.autodiff_seconds(kernels.CASES["softmax_fb"], 80) > 0


def test_every_case_runs_in_c():
    exe = native(kernels.SOURCE, "-fopenmp-simd", "-lm")
    if exe is None:
        pytest.skip("no C compiler (cc or gcc) to build bench/kernels.c")
    for name in kernels.CASES:
        out = subprocess.run([str(exe), name, "0.002"], capture_output=True, text=True,
                             check=True).stdout
        assert float(out) > 0, name
    bad = subprocess.run([str(exe), "no_such_case", "0.01"], capture_output=True, text=True)
    assert bad.returncode == 2 and "no case no_such_case" in bad.stderr
