"""Backends. Each is a module with ``compile(graph, **options) -> executable`` where the
executable has ``run(store)`` (``store``: Variable -> numpy array, updated in place) and
``vals`` (node id -> numpy array, for the program's outputs)."""
from __future__ import annotations

import importlib

DEVICES = {"numpy": "autodiff.device.numpy", "opencl": "autodiff.device.opencl",
           "tvm": "autodiff.device.tvm", "cuda": "autodiff.device.cuda"}


def get(name: str):
    """The backend module called ``name``.

    Raises:
        ValueError: unknown device name.
    """
    if name not in DEVICES:
        raise ValueError(f"unknown device {name!r}; available: {sorted(DEVICES)}")
    return importlib.import_module(DEVICES[name])
