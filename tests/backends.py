"""Which devices the tests can run on here: importable by any test module (``from backends
import device_params``), unlike ``conftest``, whose name is taken by several folders."""
import pytest


def opencl_missing() -> str | None:
    """Why the opencl device cannot run here (naming the install command), or None."""
    from autodiff.device.opencl.device import OpenCLUnavailable, candidates
    try:
        candidates()
    except OpenCLUnavailable as e:
        return f"no OpenCL platform: {e}"
    return None


def device_params() -> list:
    """``numpy``, then ``opencl`` (skipped with the install command when no OpenCL
    platform exists), as pytest params."""
    why = opencl_missing()
    opencl = pytest.param("opencl", marks=pytest.mark.skip(reason=why)) if why else "opencl"
    return ["numpy", opencl]
