"""Misuse of control flow fails at trace time, naming the user's lines."""
from __future__ import annotations

import re

import numpy as np
import pytest

import autodiff as ad
from autodiff.errors import ShapeError, TracedValueError

HERE = "test_control_errors.py"


def _lines(msg: str) -> list[int]:
    return [int(m) for m in re.findall(HERE + r":(\d+)", msg)]


def test_branches_returning_different_shapes_name_both_lines():
    x = ad.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(ShapeError) as e:
        ad.ir_if(x.sum() > 0,
                 lambda: x * 2,                      # the then-value's line
                 lambda: x.sum(0))                   # the else-value's line
    msg = str(e.value)
    assert "ir_if" in msg and "[2, 3]" in msg and "[3]" in msg
    lines = _lines(msg)
    assert len(set(lines)) >= 2 and "then-branch" in msg and "else-branch" in msg


def test_branches_returning_different_dtypes_or_structures():
    x = ad.tensor(np.ones(3, np.float32))
    with pytest.raises(TypeError, match=r"different structures: \(Tensor, Tensor\) and Tensor"):
        ad.ir_if(x.sum() > 0, lambda: (x, x), lambda: x)
    assert ad.ir_if(x.sum() > 0, lambda: x) is None      # no else_fn: the value is ignored
    with pytest.raises(TypeError, match=r"int32 .*float32|float32 .*int32"):
        ad.ir_if(x.sum() > 0, lambda: 1, lambda: 1.0)
    with pytest.raises(ShapeError, match="single value"):
        ad.ir_if(x > 0, lambda: None)


def test_python_if_on_a_traced_tensor_raises_with_the_line():
    x = ad.tensor(np.ones(3, np.float32))

    def body():
        if x.sum() > 0:                              # a Python if on a device value
            pass

    with pytest.raises(TracedValueError) as e:
        ad.ir_for(2, body)
    assert _lines(str(e.value)) and "bool()" in str(e.value)


def test_scan_carry_changing_shape_names_both_lines():
    xs = ad.tensor(np.ones((4, 3), np.float32))
    with pytest.raises(ShapeError) as e:
        ad.scan(lambda c, x: (c.sum(), x),           # the carry becomes a scalar here
                ad.zeros(3), xs)
    msg = str(e.value)
    assert "carry 0 changes from [3] float32" in msg and "to [] float32" in msg
    assert len(_lines(msg)) >= 2


def test_scan_misuse():
    xs = ad.tensor(np.ones((4, 3), np.float32))
    with pytest.raises(TypeError, match="must return a pair"):
        ad.scan(lambda c, x: c + x, ad.zeros(3), xs)
    with pytest.raises(TypeError, match=r"carry of structure \(Tensor, Tensor\)"):
        ad.scan(lambda c, x: ((c, c), x), ad.zeros(3), xs)
    with pytest.raises(TypeError, match=r"must be pure.*receiver at .*" + HERE):
        ad.scan(lambda c, x: (c, ad.Receiver(print, [x])), ad.zeros(3), xs)
    with pytest.raises(ShapeError, match="disagree on the number of steps"):
        ad.scan(lambda c, x: (c, x), ad.zeros(3), (xs, ad.zeros(5, 3)))
    with pytest.raises(ShapeError, match="give length"):
        ad.scan(lambda c, x: (c, c), ad.zeros(3))


def test_while_misuse():
    k = ad.zeros(())
    with pytest.raises(TypeError, match="cond_fn must return a tensor"):
        ad.ir_while(lambda: True, lambda: None)
    with pytest.raises(TypeError, match=r"condition must not have effects.*assign at"):
        ad.ir_while(lambda: k.add_(1.0) < 3, lambda: None)
    with pytest.raises(TypeError, match="max_iterations"):
        ad.ir_while(lambda: k < 3, lambda: None, max_iterations=-1)


def test_values_of_a_branch_do_not_escape_it():
    x = ad.tensor(np.ones(3, np.float32))
    kept = []
    ad.ir_if(x.sum() > 0, lambda: kept.append(x * 2))
    with pytest.raises(RuntimeError, match="does not outlive"):
        kept[0] + 1
