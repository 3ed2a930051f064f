"""End to end: examples/digits.py reaches >= 95% held-out accuracy on load_digits."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
from example_loader import load_example

pytest.importorskip("sklearn")
EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "digits.py"


def _load_example():
    return load_example("digits")


def test_split_is_80_20_and_disjoint():
    ex = _load_example()
    x_tr, y_tr, x_te, y_te = ex.load(0)
    assert len(x_te) == round(0.2 * (len(x_tr) + len(x_te)))
    assert x_tr.dtype == np.float32 and y_tr.dtype == np.int32 and x_tr.max() <= 1.0
    rows = {r.tobytes() for r in x_tr}
    assert sum(r.tobytes() in rows for r in x_te) < 0.05 * len(x_te)   # (a few duplicates)


@pytest.mark.slow
def test_reaches_95_percent():
    ex = _load_example()
    out = ex.main(["--epochs", "8"])
    assert out["accuracy"] >= 0.95
    assert np.mean(out["losses"][-10:]) < 0.3 < out["losses"][0]
