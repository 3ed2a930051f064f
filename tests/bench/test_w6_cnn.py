"""W6 (the CNN workload): its loss, written once, agrees between autodiff, PyTorch, JAX and
numpy, and a few SGD steps agree between autodiff and PyTorch (no timing asserted)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.workloads import WORKLOADS
from bench.workloads.frameworks import NUMPY, TENSOR
from bench.workloads.run_autodiff import run as run_autodiff
from bench.workloads.run_torch import run as run_torch

W = WORKLOADS["cnn"]


def _inputs():
    params = W.init(0)
    d = W.data(2)
    return params, {k: v[0] for k, v in d.stream.items()}


def test_loss_agrees_across_frameworks():
    import autodiff as ad
    params, D = _inputs()
    ref = float(W.loss(NUMPY, params, D))
    t = float(W.loss(TENSOR, {k: torch.tensor(v) for k, v in params.items()},
                     {k: torch.tensor(v) for k, v in D.items()}))
    ours = W.loss(TENSOR, {k: ad.Tensor(v) for k, v in params.items()},
                  {k: ad.Tensor(v) for k, v in D.items()})
    ad.execute(device="numpy")
    assert 1.5 < ref < 4.0                                  # near ln(10) at initialisation
    np.testing.assert_allclose(t, ref, rtol=1e-5)
    np.testing.assert_allclose(float(ours.numpy()), ref, rtol=1e-5)
    jax = pytest.importorskip("jax")
    from bench.workloads.frameworks import jax_ops
    j = float(W.loss(jax_ops(), {k: jax.numpy.asarray(v) for k, v in params.items()},
                     {k: jax.numpy.asarray(v) for k, v in D.items()}))
    np.testing.assert_allclose(j, ref, rtol=1e-4)


def test_a_few_sgd_steps_agree_with_torch():
    params, steps = W.init(0), 3
    data = W.data(steps)
    ours = run_autodiff(W, params, data, steps, "numpy").params
    theirs = run_torch(W, params, data, steps, "eager").params
    for k in theirs:
        np.testing.assert_allclose(ours[k], theirs[k], rtol=1e-4, atol=1e-5, err_msg=k)
    assert W.flops > 0 and W.key == "W6"
