"""The examples on the TVM device: linear.py against PyTorch (1000 steps, as the numpy
device is checked in tests/examples/test_linear.py) and a short transformer.py run."""
from __future__ import annotations

import math
import pathlib

import numpy as np
import pytest
from example_loader import load_example

pytest.importorskip("tvm", reason="the tvm device needs the [tvm] extra")
torch = pytest.importorskip("torch")

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load(name):
    return load_example(name)


@pytest.mark.slow
def test_linear_example_matches_torch_after_1000_steps():
    ex = _load("linear")
    torch.manual_seed(1)
    ref = torch.nn.Sequential(torch.nn.Linear(255, 255), torch.nn.Sigmoid(),
                              torch.nn.Linear(255, 255))
    init = {k: v.detach().numpy().copy() for k, v in ref.state_dict().items()}
    net = ex.build()
    net.load_state_dict(init)
    losses, report = ex.train(net, steps=1000, device="tvm")
    opt = torch.optim.SGD(ref.parameters(), lr=0.01)
    x = torch.full((2, 255), 0.2)
    want = []
    for _ in range(1000):
        opt.zero_grad()
        loss = ref(x).sum()
        loss.backward()
        opt.step()
        want.append(loss.item())
    assert report.device == "tvm" and report.stats["tvm"]["kernels"] > 0
    theirs = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    for k, v in net.state_dict().items():
        err = float(np.abs(v - theirs[k]).max() / np.abs(theirs[k]).max())
        assert err <= 1e-4, f"{k}: max relative error {err:.2e}"
    np.testing.assert_allclose(losses, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.slow
def test_transformer_example_runs_and_learns():
    ex = _load("transformer")
    out = ex.main(["--device", "tvm", "--steps", "20", "--layers", "1", "--d-model", "16",
                   "--heads", "2", "--seq", "8", "--batch", "4", "--eval-batches", "1",
                   "--sample-len", "4", "--plot", "", "--no-progress", "--dropout", "0.1"])
    losses = out["losses"]
    assert len(losses) == 20 and all(math.isfinite(v) for v in losses)
    assert abs(losses[0] - math.log(out["vocab"])) < 0.6
    assert np.mean(losses[-5:]) < np.mean(losses[:5])
    assert out["sample"].startswith("The ") and len(out["sample"]) == 8
