"""Dtypes on the OpenCL and TVM devices, every op and cast against PyTorch (one program per
table). Storage: OpenCL keeps bool/int/int64/float16/bfloat16 in its float arena; TVM
stores int64 as int32 and uses bool, float16 and bfloat16 buffers."""
from __future__ import annotations

import importlib.util

import pytest
from backends import opencl_missing
from dtype_device_cases import (TABLES, check_division_by_zero, check_feeders,
                                check_int_min_constant,
                                check_gradients, check_tables)


def _devices() -> list:
    why = {"opencl": opencl_missing(),
           "tvm": None if importlib.util.find_spec("tvm") else
           "the tvm device needs the [tvm] extra"}
    return [pytest.param(d, marks=pytest.mark.skip(reason=r)) if r else d
            for d, r in why.items()]


@pytest.fixture(params=_devices())
def dev(request):
    return request.param


@pytest.mark.parametrize("table", list(TABLES))   # one program each: xdist spreads them
def test_every_dtype_table(dev, table):
    check_tables(dev, table)


def test_integer_division_by_zero_gives_zero_without_trapping(dev):
    check_division_by_zero(dev)


def test_int32_minimum_constant(dev):
    check_int_min_constant(dev)


def test_feeders_and_receivers_of_every_dtype(dev):
    check_feeders(dev)


def test_gradients_through_casts(dev):
    check_gradients(dev)
