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


def unavailable(name: str) -> str | None:
    """Why device ``name`` cannot run on this machine (its ``require()`` error message), or
    None when it can. For tests and tools that loop over every device.

    Raises:
        ValueError: unknown device name.
    """
    try:
        backend = get(name)
        if hasattr(backend, "require"):
            backend.require()
    except ImportError as e:
        return str(e)
    except (RuntimeError, OSError) as e:
        return f"{type(e).__name__}: {e}"
    return None
