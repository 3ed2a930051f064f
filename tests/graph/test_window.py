"""The sliding-window view ``WINDOW`` (``Tensor.unfold`` with a dilation): forward and
gradient against PyTorch and float64 finite differences, on every device, and its errors."""
from __future__ import annotations

import numpy as np
import pytest

import autodiff as ad
from autodiff.graph import ops
from autodiff.graph.ir import Op
from autodiff.graph.tensor import _wrap
from backends import device_params
from op_helper import check_op


def _tvm_param():
    try:
        import tvm  # noqa: F401
    except ImportError as e:
        return pytest.param("tvm", marks=pytest.mark.skip(reason=f"no TVM: {e}"))
    return "tvm"


DEVICES = device_params() + [_tvm_param()]


@pytest.mark.parametrize("shape,dim,size,step", [
    ((7,), 0, 3, 1), ((2, 9), 1, 3, 2), ((3, 5, 4), 1, 2, 3), ((5, 3), -2, 5, 1),
    ((4, 6), 0, 1, 1), ((2, 3, 11), 2, 4, 4)])
def test_unfold_matches_torch(shape, dim, size, step):
    check_op([shape], lambda x: x.unfold(dim, size, step) * 1.5)


@pytest.mark.parametrize("shape,dim,size,step,dil", [
    ((9,), 0, 3, 1, 2), ((2, 13), 1, 3, 2, 3), ((3, 8, 2), 1, 2, 3, 4)])
def test_dilated_window(shape, dim, size, step, dil):
    span = dil * (size - 1) + 1
    check_op([shape], lambda x: x.unfold(dim, span, step)[..., ::dil] * 1.5,
             lambda x: _wrap(ops.window(x.node, dim, size, step, dil)) * 1.5)


@pytest.mark.parametrize("device", DEVICES)
def test_window_devices(device):
    """Overlapping and strided windows of windows (a 2-D im2col) on each device."""
    check_op([(2, 7, 6)], lambda x: (x.unfold(1, 3, 2).unfold(2, 2, 1) ** 2).sum(-1),
             device=device)


def test_window_procedural_path():
    """The lowered program (views as access expressions) agrees with the graph IR."""
    x = np.random.default_rng(0).standard_normal((3, 10)).astype(np.float32)
    outs = []
    for ir in ("graph", "procedural"):
        t = ad.Tensor(x, requires_grad=True)
        y = _wrap(ops.window(t.node, 1, 3, 2, 2))
        (y * y.sigmoid()).sum().backward()
        g = t.grad
        ad.execute(device="numpy", ir=ir)
        outs.append((y.numpy(), g.numpy()))
    np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=1e-6)
    np.testing.assert_allclose(outs[0][1], outs[1][1], rtol=1e-6)


def test_window_is_a_view_in_the_graph():
    t = ad.Tensor(np.zeros((4, 9), np.float32))
    y = t.unfold(1, 3, 3)
    assert y.node.op is Op.WINDOW and y.shape == (4, 3, 3)
    assert y.node.arg == (1, 3, 3, 1)


@pytest.mark.parametrize("args,msg", [((1, 10, 1), "maximum size"), ((1, 0, 1), ">= 1"),
                                      ((1, 2, 0), ">= 1"), ((3, 2, 1), "out of range")])
def test_unfold_errors(args, msg):
    t = ad.Tensor(np.zeros((4, 9), np.float32))
    with pytest.raises(ad.ShapeError, match=msg) as e:
        t.unfold(*args)
    assert "test_window.py" in str(e.value)         # the user's file:line
