"""End to end: a short run of examples/transformer.py (tiny dims, 30 steps) must learn."""
from __future__ import annotations

import math
import pathlib

import numpy as np
import pytest
from backends import opencl_missing
from example_loader import load_example

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "transformer.py"


def _load_example():
    return load_example("transformer")


def test_corpus_and_vocabulary():
    ex = _load_example()
    text = ex.load_text()
    vocab = ex.Vocab(text)
    assert 400_000 < len(text) < 600_000 and 90 <= len(vocab) <= 120
    ids = vocab.encode(text[:1000])
    assert ids.dtype == np.int32 and vocab.decode(ids) == text[:1000]


def test_window_sampler_pairs_tokens_and_targets_in_any_order():
    ex = _load_example()
    ids = np.arange(1000, dtype=np.int32)
    s = ex.WindowSampler(ids, batch=4, seq=8, seed=0)
    y0, y1 = s.targets(), s.targets()            # targets first: still the same windows
    x0, x1 = s.tokens(), s.tokens()
    for x, y in ((x0, y0), (x1, y1)):
        assert x.shape == y.shape == (4, 8) and x.dtype == np.int32
        np.testing.assert_array_equal(y, x + 1)
    assert not np.array_equal(x0, x1)


@pytest.mark.slow
def test_short_run_learns(tmp_path, capsys):
    ex = _load_example()
    plot = tmp_path / "loss.png"
    out = ex.main(["--steps", "30", "--layers", "1", "--d-model", "32", "--heads", "2",
                   "--seq", "16", "--batch", "8", "--eval-batches", "2", "--sample-len", "8",
                   "--plot", str(plot), "--no-progress", "--dropout", "0.1"])
    losses = out["losses"]
    assert len(losses) == 30 and all(math.isfinite(v) for v in losses)
    assert abs(losses[0] - math.log(out["vocab"])) < 0.6        # starts near ln(vocab)
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.5     # and falls
    assert out["val_after"] < out["val_before"] - 0.3
    assert out["sample"].startswith("The ") and len(out["sample"]) == 4 + 8
    assert plot.stat().st_size > 1000
    printed = capsys.readouterr().out
    for word in ("compile", "tokens/s", "validation loss", "greedy sample"):
        assert word in printed


@pytest.mark.slow
@pytest.mark.parametrize("device", ["numpy", pytest.param("opencl", marks=pytest.mark.skipif(
    opencl_missing() is not None, reason=str(opencl_missing())))])
def test_validation_inside_the_training_loop(device):
    """One ir_if evaluates the validation loss every N steps on the device; the last one
    equals the separate evaluation after training."""
    ex = _load_example()
    out = ex.main(["--device", device, "--steps", "12", "--layers", "1", "--d-model", "16",
                   "--heads", "2", "--seq", "8", "--batch", "4", "--eval-batches", "2",
                   "--sample-len", "0", "--plot", "", "--no-progress", "--eval-every", "4"])
    steps = [s for s, _ in out["val_during"]]
    assert steps == [4, 8, 12]
    np.testing.assert_allclose(out["val_during"][-1][1], out["val_after"], rtol=1e-5)
