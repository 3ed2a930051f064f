"""Recurrent layers whose time loop is a ``scan`` (sequences of at least
``rnn.SCAN_MIN_STEPS`` steps): the same values and gradients as PyTorch, and a graph that
does not grow with the sequence length."""
from __future__ import annotations

import pytest
import torch

import autodiff as ad
from autodiff import nn
from autodiff.graph.ir import Op
from autodiff.nn import rnn
from test_rnn import _rand, _run


@pytest.fixture
def scan_always(monkeypatch):
    monkeypatch.setattr(rnn, "SCAN_MIN_STEPS", 1)


@pytest.mark.parametrize("kind,kw", [
    ("LSTM", dict(num_layers=2, bidirectional=True)),
    ("LSTM", dict(batch_first=True, proj_size=3)),
    ("GRU", dict(num_layers=2, batch_first=True)),
    ("GRU", dict(bidirectional=True)),
    ("RNN", dict(nonlinearity="relu", num_layers=2)),
    ("RNN", dict(bidirectional=True))])
def test_scanned_layers_match_torch(scan_always, kind, kw):
    torch.manual_seed(0)
    theirs = getattr(torch.nn, kind)(4, 5, **kw)
    ours = getattr(nn, kind)(4, 5, **kw)
    x = _rand((3, 6, 4) if kw.get("batch_first") else (6, 3, 4), 1)
    _run(ours, theirs, x)


def test_long_sequences_are_one_rolled_loop():
    counts = []
    for steps in (rnn.SCAN_MIN_STEPS, 10 * rnn.SCAN_MIN_STEPS):
        ad.reset()
        lstm = nn.LSTM(4, 5, num_layers=2)
        out, _ = lstm(ad.tensor(_rand((steps, 2, 4), 0)))
        out.sum().backward()
        g = ad.graph.trace.TRACER.root.graph
        counts.append(g.count())
        assert sum(n.op is Op.SCAN for n in g.nodes) == 4      # 2 layers, forward + backward
    assert counts[0] == counts[1]
