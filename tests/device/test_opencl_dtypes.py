"""Dtypes on the OpenCL device: bool/int/int64/float16/bfloat16 storage in the float
arena, every op and cast against PyTorch (one program per table)."""
from __future__ import annotations

import pytest

from autodiff.device.opencl import device

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)

from dtype_device_cases import (check_division_by_zero, check_feeders,  # noqa: E402
                                check_gradients, check_tables)

DEV = "opencl"


def test_every_dtype_table():
    check_tables(DEV)


def test_integer_division_by_zero_gives_zero_without_trapping():
    check_division_by_zero(DEV)


def test_feeders_and_receivers_of_every_dtype():
    check_feeders(DEV)


def test_gradients_through_casts():
    check_gradients(DEV)
