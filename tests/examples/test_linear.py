"""End to end: examples/linear.py (1000 SGD steps traced once) against PyTorch."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
import torch
from example_loader import load_example

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "linear.py"


def _load_example():
    return load_example("linear")


def _torch_reference(state, steps: int, lr: float):
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(255, 255), torch.nn.Sigmoid(),
                              torch.nn.Linear(255, 255))
    ref.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
    opt = torch.optim.SGD(ref.parameters(), lr=lr)
    x = torch.full((2, 255), 0.2)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = ref(x).sum()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return ref, losses


def _max_rel_err(a: np.ndarray, b: np.ndarray) -> float:
    """max|a - b| / max|b| over one tensor."""
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.slow
def test_linear_example_matches_torch_after_1000_steps():
    ex = _load_example()
    torch.manual_seed(1)
    init = {k: v.numpy().copy() for k, v in torch.nn.Sequential(
        torch.nn.Linear(255, 255), torch.nn.Sigmoid(), torch.nn.Linear(255, 255)
    ).state_dict().items()}
    net = ex.build()
    net.load_state_dict(init)
    losses, report = ex.train(net, steps=1000, device="numpy")
    ref, want = _torch_reference(init, 1000, 0.01)

    assert len(losses) == 1000
    assert report.device == "numpy" and report.times["run"] > 0
    theirs = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    ours = net.state_dict()
    assert list(ours) == list(theirs)
    for k in theirs:
        assert not np.array_equal(ours[k], init[k]), f"{k} did not train"
        err = _max_rel_err(ours[k], theirs[k])
        assert err <= 1e-4, f"{k}: max relative error {err:.2e}"
    # The loss curve too (it is the sum of the output, unbounded below, so compare
    # relative to the loss's own size).
    np.testing.assert_allclose(losses, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
