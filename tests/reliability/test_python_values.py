"""Item 10: a traced tensor used as a Python value (``if t > x:``, ``int(t)``,
``float(t)``, ``range(t)``) raises a clear error at trace time, naming the conversion, the
user's line and what to use instead; a variable's host value converts like torch's."""
from __future__ import annotations

import os

import numpy as np
import pytest

import autodiff as ad
from autodiff.errors import TracedValueError

HERE = os.path.basename(__file__)


def _line(fn) -> str:
    return f"{HERE}:{fn.__code__.co_firstlineno + 1}"


CONVERSIONS = [("bool", bool), ("int", int), ("float", float),
               ("index", lambda t: [0, 1, 2][t])]


@pytest.mark.parametrize("name,convert", CONVERSIONS, ids=[c[0] for c in CONVERSIONS])
@pytest.mark.parametrize("shape", [(), (3,)])
def test_traced_tensor_as_python_value_raises(device, name, convert, shape):
    w = ad.Tensor(np.full(shape, 2.0, np.float32))
    t = w * 3.0                                   # a traced value: no value while tracing

    def use():
        convert(t > 1.0)
    with pytest.raises(TracedValueError) as info:
        use()
    msg = str(info.value)
    assert isinstance(info.value, TypeError)
    assert "while tracing" in msg and "Receiver" in msg, msg
    assert _line(use) in msg, msg                 # the user's line
    assert "where(" in msg if name == "bool" else ".int()" in msg or ".float()" in msg, msg
    # the program is intact: it still runs on the device and gives the value
    ad.execute(device=device)
    np.testing.assert_array_equal(t.numpy(), np.full(shape, 6.0, np.float32))


def test_no_truthiness_fallback_to_len(device):
    """``if t > x:`` on a [n] tensor used to be always true (``len()``)."""
    x = ad.Feeder(lambda: np.zeros(4, np.float32), [4])
    with pytest.raises(TracedValueError, match="bool"):
        if x > 1.0:
            pass
    y = x + 1.0
    ad.execute(device=device)
    np.testing.assert_array_equal(y.numpy(), np.ones(4, np.float32))


def test_inside_loop_body_even_a_variable_raises(device):
    """Inside ``ir_for`` a variable's value changes per iteration: no host value."""
    w = ad.Tensor(np.float32(1.5))
    seen = []

    def body():
        with pytest.raises(TracedValueError, match="float"):
            float(w)
        with ad.no_grad():
            w.add_(1.0)
        ad.Receiver(lambda v: seen.append(float(v)), [w])
    ad.ir_for(3, body)
    with pytest.raises(TracedValueError, match="assigned"):
        float(w)                               # updated by the pending program: stale
    ad.execute(device=device)
    assert seen == [2.5, 3.5, 4.5]
    assert float(w) == 4.5 and int(w) == 4 and bool(w)


def test_variables_convert_like_torch(device):
    f = ad.Tensor(np.float32(2.5))
    i = ad.Tensor(np.int32(2))
    assert float(f) == 2.5 and int(f) == 2 and bool(f) and [0, 1, 2][i] == 2
    assert not bool(ad.Tensor(np.zeros(1, np.float32)))
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        bool(ad.Tensor(np.ones(2, np.float32)))
    with pytest.raises(ValueError, match="only one element tensors"):
        float(ad.Tensor(np.ones(2, np.float32)))
    with pytest.raises(TypeError, match="only integer tensors of a single element"):
        [0, 1][f]
    # after execute(), a top-level result is a variable: it converts
    y = f * 2.0
    ad.execute(device=device)
    assert float(y) == 5.0
