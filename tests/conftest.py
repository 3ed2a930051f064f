import os
import pathlib

import pytest

import autodiff
from backends import device_params, opencl_missing  # noqa: F401  (shared with test modules)

# execute() without a device runs on $AUTODIFF_DEVICE, else opencl (the user default). The
# suite's tests that do not name a device mean the numpy reference interpreter; running
# the suite with AUTODIFF_DEVICE=opencl exercises the opencl device there instead.
os.environ.setdefault("AUTODIFF_DEVICE", "numpy")

#: test modules whose every test runs once per device (``op_device`` parametrized): the op
#: suite, through ``op_helper.check_op``'s default device
PER_DEVICE_MODULES = {pathlib.Path(__file__).parent / "graph" / "test_ops.py"}


@pytest.fixture(autouse=True)
def _fresh_program():
    """Every test starts and ends with an empty traced program."""
    autodiff.reset()
    yield
    autodiff.reset()


def pytest_collection_modifyitems(config, items):
    """Cases marked ``early`` first (stable order otherwise): pytest-xdist hands tests out
    in collection order, so a long case collected late would run alone while the other
    workers have finished (the foundation suite's child run, ~100 s)."""
    items.sort(key=lambda item: item.get_closest_marker("early") is None)


def pytest_generate_tests(metafunc):
    if pathlib.Path(str(metafunc.definition.fspath)) in PER_DEVICE_MODULES:
        metafunc.parametrize("op_device", device_params(), indirect=True)


@pytest.fixture(autouse=True)
def op_device(request):
    """The device ``check_op`` runs on in a per-device module (else unused: None)."""
    device = getattr(request, "param", None)
    if device is None:
        yield None
        return
    import op_helper
    saved, op_helper.DEVICE = op_helper.DEVICE, device
    try:
        yield device
    finally:
        op_helper.DEVICE = saved
