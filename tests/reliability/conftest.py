"""Fixtures of the reliability suite: every test runs once per device (numpy, opencl, tvm);
a device that cannot run here is skipped with the reason (never silently replaced)."""
from __future__ import annotations

import importlib

import pytest


def _tvm_missing() -> str | None:
    try:
        importlib.import_module("autodiff.device.tvm")
    except ImportError as e:
        return f"no TVM: {e}"
    return None


def _opencl_missing() -> str | None:
    from autodiff.device.opencl.device import OpenCLUnavailable, candidates
    try:
        candidates()
    except OpenCLUnavailable as e:
        return f"no OpenCL platform: {e}"
    return None


MISSING = {"numpy": lambda: None, "opencl": _opencl_missing, "tvm": _tvm_missing}


def device_params() -> list:
    """``numpy``, ``opencl``, ``tvm`` as pytest params, each skipped with the reason when
    it cannot run on this machine."""
    out = []
    for name, why in MISSING.items():
        reason = why()
        out.append(pytest.param(name, marks=pytest.mark.skip(reason=reason)) if reason
                   else name)
    return out


@pytest.fixture(params=device_params())
def device(request) -> str:
    """The device under test."""
    return request.param
