"""Fixtures shared by the device tests."""
import pytest


@pytest.fixture
def opencl_executables(monkeypatch):
    """The executables ``autodiff.device.opencl.compile`` returns during the test, in
    order (their host steps, staging pool and stats are then open to inspection)."""
    from autodiff.device import opencl
    seen, real = [], opencl.compile

    def spy(graph, report=None, **options):
        seen.append(real(graph, report=report, **options))
        return seen[-1]
    monkeypatch.setattr(opencl, "compile", spy)
    return seen
