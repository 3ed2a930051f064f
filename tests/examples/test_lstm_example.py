"""End to end: a short run of examples/lstm.py (tiny dims) learns, its time loop a scan."""
from __future__ import annotations

import math

import numpy as np
import pytest
from example_loader import load_example


@pytest.mark.slow
def test_short_run_learns_with_a_rolled_time_loop(tmp_path, capsys):
    ex = load_example("lstm")
    plot = tmp_path / "loss.png"
    out = ex.main(["--device", "numpy", "--steps", "30", "--hidden", "32", "--embed", "16",
                   "--seq", "16", "--batch", "8", "--eval-batches", "2", "--sample-len", "8",
                   "--plot", str(plot), "--no-progress"])
    losses = out["losses"]
    assert out["scans"] == 2                       # forward and backward time loops
    assert len(losses) == 30 and all(math.isfinite(v) for v in losses)
    assert abs(losses[0] - math.log(out["vocab"])) < 0.6
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5
    assert out["val_after"] < out["val_before"] - 0.3
    assert out["sample"].startswith("The ") and len(out["sample"]) == 4 + 8
    assert plot.stat().st_size > 1000
    assert "2 scans" in capsys.readouterr().out
