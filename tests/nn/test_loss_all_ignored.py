"""A batch whose every target is ``ignore_index``: the mean loss is NaN (0/0, as PyTorch)
and the gradient 0 (it was NaN, which would have reached every parameter)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import autodiff as ad
import autodiff.nn.functional as F
from backends import device_params


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("targets", [[1, 1, 1], [1, 2, 0]])
def test_mean_loss_when_targets_are_ignored(device, loss, targets):
    rng = np.random.default_rng(3)
    x = rng.uniform(-2, 2, (3, 4)).astype(np.float32)
    y = np.array(targets)
    a = ad.tensor(x, requires_grad=True)
    inp = a if loss == "cross_entropy" else a.log_softmax(-1)
    out = getattr(F, loss)(inp, ad.tensor(y.astype(np.int32)), ignore_index=1)
    out.backward()
    g = a.grad
    ad.execute(device=device)
    t = torch.tensor(x, requires_grad=True)
    tin = t if loss == "cross_entropy" else t.log_softmax(-1)
    ref = getattr(TF, loss)(tin, torch.tensor(y), ignore_index=1)
    ref.backward()
    np.testing.assert_allclose(out.numpy(), ref.item(), rtol=1e-6)       # NaN == NaN
    np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)
