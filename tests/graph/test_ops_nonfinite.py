"""NaN and infinities through reductions and scans, as PyTorch gives them (found by a
differential fuzz against torch: each case used to come out silently different)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from backends import device_params

NAN, INF = np.nan, np.inf


def _same(got, want):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))   # NaN == NaN here


@pytest.mark.parametrize("device", device_params())
def test_argmax_argmin_and_max_min_of_a_nan(device):
    """A NaN is the extreme: its index (the first NaN's), and NaN as the value (argmax of
    ``[1, nan, 2, 5]`` was 4, past the end)."""
    x = np.float32([[1.0, NAN, 2.0, 5.0], [3.0, 1.0, 2.0, 0.0], [NAN, 2.0, NAN, 1.0]])
    a, t = ad.tensor(x), torch.tensor(x)
    got = [a.argmax(), a.argmin(), a.argmax(1), a.argmin(1), a.argmax(0, keepdim=True),
           *a.max(1), *a.min(1)]
    ad.execute(device=device)
    want = [t.argmax(), t.argmin(), t.argmax(1), t.argmin(1), t.argmax(0, keepdim=True),
            *t.max(1), *t.min(1)]
    for g, w in zip(got, want):
        _same(g.numpy(), w.numpy())


@pytest.mark.parametrize("device", device_params())
def test_cummax_cummin_from_a_nan_on(device):
    """From a NaN on the running extreme is NaN at the last NaN's index (PyTorch)."""
    rows = [[1.0, NAN, 2.0, NAN, 5.0, 0.5, 7.0], [NAN, NAN, 1.0, 2.0, 0.0, 3.0, 1.0],
            [1.0, 1.0, NAN, 4.0, 4.0, -1.0, 2.0]]
    x = np.float32(rows)
    a, t = ad.tensor(x), torch.tensor(x)
    got = [*a.cummax(1), *a.cummin(1)]
    ad.execute(device=device)
    for g, w in zip(got, [*t.cummax(1), *t.cummin(1)]):
        _same(g.numpy(), w.numpy())


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("n", [6, 700])            # one doubling scan, and past 512
def test_cumsum_keeps_what_precedes_an_inf_or_nan(device, n):
    """``cumsum([1, inf, 2])`` is ``[1, inf, inf]`` (it was ``[nan, inf, inf]``: a product
    with a triangular ones matrix multiplied the inf by zeros)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (3, n)).astype(np.float32)
    x[0, 1], x[1, n // 2], x[1, n - 2], x[2, 2] = INF, -INF, INF, NAN
    a = ad.tensor(x)
    c = a.cumsum(1)
    ad.execute(device=device)
    want = torch.tensor(x, dtype=torch.float64).cumsum(1).numpy()
    np.testing.assert_array_equal(np.isnan(c.numpy()), np.isnan(want))
    np.testing.assert_allclose(c.numpy(), want, rtol=1e-5, atol=1e-4)
