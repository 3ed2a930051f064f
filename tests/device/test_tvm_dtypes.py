"""Dtypes on the TVM device (storage dtypes int32 for int64, bool, float16, bfloat16),
every op and cast against PyTorch (one program per table)."""
from __future__ import annotations

import pytest

pytest.importorskip("tvm", reason="the tvm device needs the [tvm] extra")

from dtype_device_cases import (check_division_by_zero, check_feeders,  # noqa: E402
                                check_gradients, check_tables)

DEV = "tvm"


def test_every_dtype_table():
    check_tables(DEV)


def test_integer_division_by_zero_gives_zero_without_trapping():
    check_division_by_zero(DEV)


def test_feeders_and_receivers_of_every_dtype():
    check_feeders(DEV)


def test_gradients_through_casts():
    check_gradients(DEV)
