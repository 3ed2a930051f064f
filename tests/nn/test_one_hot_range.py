"""``one_hot`` refuses a class value outside ``[0, num_classes)`` (it returned a row of
zeros, silently; PyTorch raises)."""
import numpy as np
import pytest

import autodiff as ad
import autodiff.nn.functional as F
from autodiff.errors import IndexOutOfRange
from backends import device_params


def test_data_values_checked_when_traced():
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        F.one_hot(ad.tensor(np.array([0, 5], np.int32)), 3)
    with pytest.raises(RuntimeError, match="non-negative"):
        F.one_hot(ad.tensor(np.array([0, -1], np.int32)), 3)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("bad", [5, -1])
def test_traced_values_checked_at_run_time(device, bad):
    t = ad.tensor(np.array([0, bad, 1], np.int32)) * 1
    o = F.one_hot(t, 3)                     # noqa: F841 (kept: an unused one is pruned)
    with pytest.raises(IndexOutOfRange, match=r"one_hot: index -?\d+ is out of range \[0, 3\)"):
        ad.execute(device=device)
    ad.reset()
    ok = F.one_hot(ad.tensor(np.array([2, 0, 1], np.int32)) * 1, 3)
    ad.execute(device=device)
    np.testing.assert_array_equal(ok.numpy(), np.eye(3, dtype=np.int32)[[2, 0, 1]])
