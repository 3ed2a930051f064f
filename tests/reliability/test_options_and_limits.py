"""Item 11: a misspelled ``execute()`` option raises ``TypeError`` naming it and the known
ones (checked before anything runs); a program with no device work runs on every device
(also twice in a row); a shape too large for memory gives a ``MemoryError`` naming the
bytes before anything is allocated, with variables untouched."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import autodiff as ad
from autodiff import runtime


def _calls(seen):
    return ad.Feeder(lambda: (seen.append(1), np.ones(2, np.float32))[1], [2], name="x")


def test_misspelled_option_raises_before_anything_runs(device):
    seen = []
    w = ad.Tensor(np.ones(2, np.float32))

    def body():
        with ad.no_grad():
            w.add_(_calls(seen))
    ad.ir_for(3, body)
    with pytest.raises(TypeError) as info:
        ad.execute(device=device, fast_maths=True)
    msg = str(info.value)
    assert "'fast_maths'" in msg and "fast_math" in msg and device in msg, msg
    assert seen == []                             # nothing ran
    ad.execute(device=device)                     # the program is still pending
    assert seen == [1, 1, 1]
    np.testing.assert_array_equal(w.numpy(), np.full(2, 4.0, np.float32))


def test_option_of_another_device_is_named_as_such(device):
    other = "steps_per_call" if device != "tvm" else "chain_work"
    ad.Tensor(np.ones(2, np.float32)) * 2.0
    with pytest.raises(TypeError, match=f"'{other}' is an option of the "
                                        f"{'tvm' if device != 'tvm' else 'opencl'} device"):
        ad.execute(device=device, **{other: 2})


def test_registry_lists_every_named_option_of_each_stage():
    """The registry execute() checks against holds every keyword each stage's entry point
    names (so a new option cannot be forgotten there)."""
    from autodiff import opt
    from autodiff.device import get
    from autodiff.device.numpy.procedural import compile_procedural
    entry = {"opt": [opt.optimize], "numpy": [get("numpy").compile, compile_procedural],
             "opencl": [get("opencl").compile], "tvm": [get("tvm").compile]}
    internal = {"graph", "report", "options", "verbose",
                "prepared"}     # what execute() hands the compile from the device's prepare()
    for stage, fns in entry.items():
        for fn in fns:
            named = set(inspect.signature(fn).parameters) - internal
            assert named <= runtime.OPTIONS[stage], (stage, named - runtime.OPTIONS[stage])


def test_program_without_device_work_runs_twice(device):
    """Only host callbacks (a Feeder whose value nothing uses, a Receiver of a variable):
    no kernel at all."""
    seen, got = [], []
    w = ad.Tensor(np.arange(3, dtype=np.float32))

    def body():
        _calls(seen)
        ad.Receiver(lambda v: got.append(v), [w])
    ad.ir_for(2, body)
    ad.execute(device=device)
    ad.execute(device=device)                     # an empty program in a row
    assert len(seen) == 2 and len(got) == 2
    np.testing.assert_array_equal(got[1], np.arange(3, dtype=np.float32))


HUGE = 200_000          # [HUGE, HUGE] float32: 149 GiB


def test_huge_shape_gives_memory_error_before_allocating(device):
    w = ad.Tensor(np.ones((1, 1), np.float32))
    with ad.no_grad():
        w.add_(1.0)
    big = w.expand(HUGE, HUGE) * 2.0                  # 160 GB to materialise
    with pytest.raises(MemoryError) as info:
        ad.execute(device=device)
    assert "GiB" in str(info.value) or "bytes" in str(info.value), str(info.value)
    np.testing.assert_array_equal(w.numpy(), np.ones((1, 1), np.float32))
    del big


def test_huge_reduction_gives_memory_error_on_tvm_or_runs(device):
    """A fused reduction of a huge broadcast needs no huge buffer: TVM must not die with
    ``std::bad_alloc`` (it either runs or raises MemoryError naming the bytes)."""
    if device == "opencl":
        pytest.skip("a 4e10-element reduction runs for minutes on PoCL (no buffer needed)")
    x = ad.Tensor(np.ones((1, 1), np.float32))
    y = (x.expand(HUGE, HUGE) * 2.0).sum()
    with pytest.raises(MemoryError, match="GiB|bytes"):
        ad.execute(device=device)
    del y
