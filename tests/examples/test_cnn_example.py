"""examples/cnn.py: the data split, one short epoch on the numpy device, and (slow) the
default run reaching >= 98% held-out accuracy on OpenCL."""
from __future__ import annotations

import math

import numpy as np
import pytest
from example_loader import load_example

pytest.importorskip("sklearn")


def test_split_and_model_shapes():
    ex = load_example("cnn")
    x_tr, y_tr, x_te, y_te = ex.load(0)
    assert x_tr.shape[1:] == (1, 8, 8) and x_tr.dtype == np.float32 and y_tr.dtype == np.int32
    assert len(x_te) == round(0.2 * (len(x_tr) + len(x_te)))
    model = ex.build(4, 0)
    names = [n for n, _ in model.named_parameters()]
    assert names[:3] == ["0.0.weight", "0.1.weight", "0.1.bias"] and names[-1] == "3.bias"
    assert "0.1.running_mean" in model.state_dict()


def test_one_epoch_learns_on_numpy(tmp_path):
    ex = load_example("cnn")
    plot = tmp_path / "cnn.png"
    out = ex.main(["--device", "numpy", "--epochs", "1", "--channels", "4", "--batch", "128",
                   "--no-progress", "--plot", str(plot)])
    losses = out["losses"]
    assert len(losses) == 11 and all(math.isfinite(v) for v in losses)
    assert np.mean(losses[-3:]) < losses[0] - 0.3
    assert all(n > 0 for n in out["norms"]) and plot.stat().st_size > 1000
    assert out["accuracy"] > 0.2                                  # chance: 0.1


@pytest.mark.slow
def test_default_run_reaches_98_percent():
    from backends import opencl_missing
    why = opencl_missing()
    if why:
        pytest.skip(why)
    ex = load_example("cnn")
    out = ex.main(["--device", "opencl", "--no-progress", "--plot", ""])
    assert out["accuracy"] >= 0.98
