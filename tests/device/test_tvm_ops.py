"""The op suite on the TVM device: every graph IR op, forward and backward, against PyTorch
and float64 finite differences (:func:`op_helper.check_op` with ``device="tvm"``).

A TVM build costs about a second, so ops are grouped: each test traces several ops into
one program (results stacked or concatenated) and compiles once.
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("tvm", reason="the tvm device needs the [tvm] extra")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "graph"))

import autodiff as ad  # noqa: E402
from op_helper import check_op, rand_inputs  # noqa: E402

DEV = "tvm"


def _flat_cat(lib, parts):
    return lib.cat([p.reshape(-1) for p in parts], 0)


def both(fn):
    """``fn(lib, *xs)`` as a torch function and an autodiff function."""
    return (lambda *xs: fn(torch, *xs)), (lambda *xs: fn(ad, *xs))


POSITIVE = ["exp", "log", "exp2", "log2", "sqrt", "rsqrt", "reciprocal", "square"]
ANY = ["exp", "sin", "cos", "tanh", "sigmoid", "relu", "abs", "erf", "neg"]


def test_unary_positive_inputs():
    t, a = both(lambda lib, x: lib.stack([getattr(x, f)() for f in POSITIVE]))
    check_op([(3, 5)], t, a, low=0.2, high=3.0, device=DEV)


def test_unary_any_sign():
    t, a = both(lambda lib, x: lib.stack([getattr(x, f)() for f in ANY]))
    check_op([(3, 5)], t, a, low=-3.0, high=3.0, device=DEV)


def test_sigmoid_saturates_and_sign():
    x = np.array([-100.0, -30.0, -0.5, 0.0, 0.5, 30.0, 100.0], np.float32)
    out = check_op(None, lambda t: t.sigmoid(), inputs=[x], fd=False, device=DEV)
    assert np.isfinite(out).all()
    ad.reset()
    check_op(None, lambda t: t.sign(), inputs=[x], forward_only=True, device=DEV)


@pytest.mark.parametrize("sa,sb", [((3, 4), (4,)), ((2, 1, 4), (1, 3, 1)), ((), (2, 3))])
def test_binary_broadcast(sa, sb):
    t, a = both(lambda lib, x, y: lib.stack([x + y, x - y, x * y, x / y, x.maximum(y),
                                             x.minimum(y), (2.5 - x) * y]))
    check_op([sa, sb], t, a, margin=0.3, device=DEV)


def test_pow():
    base, = rand_inputs([(3, 4)], low=0.5, high=2.0, seed=1)
    expo, = rand_inputs([(4,)], low=-2.0, high=2.0, seed=2)
    t, a = both(lambda lib, x, y: lib.stack([x ** y, x ** 2, x ** 3, x ** 0.5, x ** -1.5,
                                             2.0 ** x]))
    check_op(None, t, a, inputs=[base, expo], device=DEV)


def test_comparisons_and_where():
    rng = np.random.default_rng(3)
    x = rng.integers(-2, 3, (4, 5)).astype(np.float32)
    y = rng.integers(-2, 3, (5,)).astype(np.float32)
    t, a = both(lambda lib, x, y: lib.stack([
        (x < y).float() if lib is torch else x < y, (x <= y).float() if lib is torch else x <= y,
        (x > y).float() if lib is torch else x > y, (x >= y).float() if lib is torch else x >= y,
        (x == y).float() if lib is torch else x == y, (x != y).float() if lib is torch else x != y,
        lib.where(x > 0, x * 2.0, y + 0.0 * x)]))
    out = check_op(None, t, a, inputs=[x, y], forward_only=True, device=DEV)
    assert 0 < out[:6].sum() < out[:6].size


def test_where_gradients():
    c, x, y = rand_inputs([(3, 4), (4,), (3, 1)], seed=4)
    check_op(None, lambda m, a, b: torch.where(m > 0, a, b),
             lambda m, a, b: ad.where(m > 0, a, b), inputs=[c, x, y], device=DEV)


MATMULS = [((3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((2, 3, 4), (4, 5)), ((3, 4), (2, 4, 5)),
           ((2, 1, 3, 4), (3, 4, 2)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,))]


def test_matmul_shapes():
    shapes = [s for pair in MATMULS for s in pair]
    t, a = both(lambda lib, *xs: _flat_cat(lib, [xs[i] @ xs[i + 1]
                                                 for i in range(0, len(xs), 2)]))
    check_op(shapes, t, a, device=DEV)


def test_reductions_and_softmax():
    t, a = both(lambda lib, x: _flat_cat(lib, [
        x.sum(), x.sum(0), x.sum((0, 2)), x.mean(1, True), x.amax(-1), x.amax(),
        x.max(dim=1).values, x.var(1), x.softmax(-1), x.log_softmax(0)]))
    check_op([(2, 3, 4)], t, a, device=DEV)


def test_max_indices_and_argmax_int64():
    x, = rand_inputs([(3, 4, 5)], seed=5)
    res = ad.Tensor(x).max(1)
    am = ad.Tensor(x).argmax(2)
    ad.execute(device=DEV)
    np.testing.assert_array_equal(res.values.numpy(), x.max(1))
    assert res.indices.numpy().dtype == np.int64  # as torch (stored as int32)
    np.testing.assert_array_equal(res.indices.numpy(), x.argmax(1))
    np.testing.assert_array_equal(am.numpy(), x.argmax(2))


def test_movement():
    t, a = both(lambda lib, x: _flat_cat(lib, [
        x.reshape(4, 6), x.permute(2, 0, 1), x.transpose(0, 2), x[:, 1:3], x[1], x[-1, :, 2],
        x[..., None], x[:, None, 1:], x[1, ..., 0], x[:, -2:, :-1], x[:, 1:100],
        x[0].unsqueeze(0).expand(3, 3, 4), x[:, :1].squeeze(1)]))
    check_op([(2, 3, 4)], t, a, device=DEV)


def test_concat_and_stack():
    t, a = both(lambda lib, x, y, z: _flat_cat(lib, [
        lib.cat([x, y], 0), lib.cat([x, z, x], 1), lib.stack([x, x * 2.0], -1)]))
    check_op([(2, 3), (4, 3), (2, 1)], t, a, device=DEV)


def test_gather_and_scatter_add_gradient():
    table, = rand_inputs([(4, 3)], seed=7)
    idx = np.array([[0, 2], [2, 1], [3, 3]], np.int32)
    check_op(None, lambda t, i: t[i], inputs=[table, idx], device=DEV)


def test_composite_mlp_expression():
    check_op([(5, 3), (4, 3), (4,), (2, 4)],
             lambda x, w1, b1, w2: ((x @ w1.T + b1).tanh() @ w2.T).sigmoid().mean(),
             device=DEV)
