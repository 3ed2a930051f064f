"""Inputs a differential fuzz of the layers against PyTorch found handled differently:
negative padding (PyTorch refuses it; it cropped the input here) and ``F.embedding``'s
``padding_idx`` (refused as an unknown argument)."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import autodiff as ad
import autodiff.nn.functional as F
from autodiff import nn


@pytest.mark.parametrize("make", [lambda: nn.Conv2d(1, 1, 2, padding=-1),
                                  lambda: nn.Conv1d(1, 1, 2, padding=(-1,)),
                                  lambda: nn.MaxPool2d(2, padding=-1),
                                  lambda: nn.AvgPool2d(2, padding=(1, -1))])
def test_negative_padding_raises(make):
    with pytest.raises(RuntimeError, match="negative padding"):
        make()(ad.tensor(np.ones((1, 1, 6, 6), np.float32)))


@pytest.mark.parametrize("padding_idx", [2, -1])
def test_functional_embedding_padding_idx(padding_idx):
    """The padding row gets no gradient; values are the plain lookup (torch)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((5, 3)).astype(np.float32)
    idx = np.array([[0, 2, 4], [2, 1, 4]])
    g = rng.standard_normal((2, 3, 3)).astype(np.float32)
    ws = ad.tensor(w, requires_grad=True)
    y = F.embedding(ad.tensor(idx.astype(np.int32)), ws, padding_idx=padding_idx)
    y.backward(ad.tensor(g))
    wg = ws.grad
    ad.execute(device="numpy")
    wt = torch.tensor(w, requires_grad=True)
    yt = TF.embedding(torch.tensor(idx), wt, padding_idx=padding_idx)
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy())
    np.testing.assert_allclose(wg.numpy(), wt.grad.numpy(), rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError):
        F.embedding(ad.tensor(idx.astype(np.int32)), ws, padding_idx=5)
