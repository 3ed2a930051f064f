"""Shared pieces of the control-flow tests: the execution paths every program runs on, and
small torch/autodiff model pairs.

A *path* is ``(device, options)`` for ``autodiff.execute``: the numpy reference interpreter
of the graph IR, the numpy executor of the lowered procedural IR (with its memory plan),
and the other devices where they can run here.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff.nn import Linear, Sequential, Tanh

RTOL, ATOL = 1e-5, 1e-5       # the acceptance bound: float32 against float32

#: (id, device, execute options)
PATHS = [("graph", "numpy", {"ir": "graph"}),
         ("procedural", "numpy", {"ir": "procedural", "debug": True})]


def path_params() -> list:
    return [pytest.param((dev, opts), id=name) for name, dev, opts in PATHS]


def run(path, **extra) -> ad.Report:
    """``execute()`` on ``path``."""
    device, opts = path
    return ad.execute(device=device, **opts, **extra)


def models(seed: int = 0, sizes=(3, 4, 2)):
    """An autodiff MLP (Linear-Tanh-Linear) and the same torch model, equal weights."""
    torch.manual_seed(seed)
    ref = torch.nn.Sequential(torch.nn.Linear(sizes[0], sizes[1]), torch.nn.Tanh(),
                              torch.nn.Linear(sizes[1], sizes[2]))
    net = Sequential(Linear(sizes[0], sizes[1]), Tanh(), Linear(sizes[1], sizes[2]))
    net.load_state_dict(ref.state_dict())
    return net, ref


def assert_params(net, ref, rtol=RTOL, atol=ATOL) -> None:
    theirs = {k: v.detach().numpy() for k, v in ref.state_dict().items()}
    ours = net.state_dict()
    for k in theirs:
        np.testing.assert_allclose(ours[k], theirs[k], rtol=rtol, atol=atol, err_msg=k)


def data(n: int, shape_x=(5, 3), shape_y=(5, 2), seed: int = 1):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n,) + shape_x).astype(np.float32),
            rng.standard_normal((n,) + shape_y).astype(np.float32))


class Feed:
    """A Feeder callback handing out ``items`` in order, counting its calls."""

    def __init__(self, items):
        self.items, self.calls = list(items), 0

    def __call__(self):
        v = self.items[self.calls]
        self.calls += 1
        return v
