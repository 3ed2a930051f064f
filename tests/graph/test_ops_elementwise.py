"""Elementwise ops against PyTorch (float64 reference) and float64 finite differences,
forward and backward, on shapes with 1s, odd sizes, 0-d and zero-size tensors."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import autodiff as ad
from op_helper import check_op, rand_inputs

F64 = torch.float64
SHAPES = [(3, 5), (1,), (), (2, 1, 3), (0, 3)]
PM = (-3.0, 3.0)

# name, fn (same spelling on both libraries), (low, high), points to keep away from
UNARY = [
    ("tan", lambda x: x.tan(), (-1.3, 1.3), ()),
    ("asin", lambda x: x.asin(), (-0.95, 0.95), ()),
    ("acos", lambda x: x.acos(), (-0.95, 0.95), ()),
    ("atan", lambda x: x.atan(), (-4.0, 4.0), ()),
    ("arctan", lambda x: x.arctan(), (-4.0, 4.0), ()),
    ("sinh", lambda x: x.sinh(), PM, ()),
    ("cosh", lambda x: x.cosh(), PM, ()),
    ("asinh", lambda x: x.asinh(), (-5.0, 5.0), ()),
    ("acosh", lambda x: x.acosh(), (1.1, 5.0), ()),
    ("atanh", lambda x: x.atanh(), (-0.9, 0.9), ()),
    ("log10", lambda x: x.log10(), (0.2, 5.0), ()),
    ("log1p", lambda x: x.log1p(), (-0.9, 3.0), ()),
    ("expm1", lambda x: x.expm1(), PM, ()),
    ("floor", lambda x: x.floor() * x, PM, (-2, -1, 0, 1, 2)),
    ("ceil", lambda x: x.ceil() * x, PM, (-2, -1, 0, 1, 2)),
    ("round", lambda x: x.round() * x, PM, (-2.5, -1.5, -0.5, 0.5, 1.5, 2.5)),
    ("round_decimals", lambda x: x.round(decimals=1) * x, (0.11, 0.14), ()),
    ("trunc", lambda x: x.trunc() * x, PM, (-2, -1, 0, 1, 2)),
    ("frac", lambda x: x.frac(), PM, (-2, -1, 0, 1, 2)),
    ("sign", lambda x: x.sign() * x, PM, (0,)),
    ("sgn", lambda x: x.sgn() * x, PM, (0,)),
    ("reciprocal", lambda x: x.reciprocal(), PM, (0,)),
    ("square", lambda x: x.square(), PM, ()),
    ("rsqrt", lambda x: x.rsqrt(), (0.2, 4.0), ()),
    ("neg", lambda x: x.neg(), PM, ()),
    ("negative", lambda x: x.negative(), PM, ()),
    ("clamp", lambda x: x.clamp(-1.0, 0.5), PM, (-1.0, 0.5)),
    ("clamp_min", lambda x: x.clamp_min(-0.5), PM, (-0.5,)),
    ("clamp_max", lambda x: x.clamp_max(0.5), PM, (0.5,)),
    ("clip", lambda x: x.clip(max=0.3), PM, (0.3,)),
    ("nan_to_num", lambda x: x.nan_to_num(), PM, ()),
    ("fmod_scalar", lambda x: x.fmod(1.5), PM, (-1.5, 0, 1.5)),
    ("remainder_scalar", lambda x: x.remainder(-1.5), PM, (-1.5, 0, 1.5)),
    ("xlogy", lambda x: x.xlogy(x.abs() + 0.5), PM, (0,)),
]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name,fn,rng,avoid", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, fn, rng, avoid, shape):
    check_op([shape], fn, low=rng[0], high=rng[1], avoid=avoid or (rng[0] - 9,),
             margin=0.05, torch_dtype=F64)


@pytest.mark.parametrize("name", ["tan", "asin", "atan", "sinh", "cosh", "asinh", "atanh",
                                  "log10", "log1p", "expm1", "frac", "square"])
def test_module_functions(name):
    """``autodiff.<name>(x)`` is ``torch.<name>(x)``."""
    check_op([(4,)], getattr(torch, name), getattr(ad, name), low=0.1, high=0.9,
             torch_dtype=F64)


BINARY = [
    ("atan2", lambda y, x: y.atan2(x), PM, (0,)),
    ("arctan2", lambda y, x: torch.arctan2(y, x) if isinstance(y, torch.Tensor)
     else ad.arctan2(y, x), PM, (0,)),
    ("logaddexp", lambda a, b: a.logaddexp(b), PM, ()),
    ("logaddexp2", lambda a, b: a.logaddexp2(b), PM, ()),
    ("hypot", lambda a, b: a.hypot(b), PM, (0,)),
    ("copysign", lambda a, b: a.copysign(b), PM, (0,)),
    ("maximum", lambda a, b: a.maximum(b), PM, ()),
    ("minimum", lambda a, b: a.minimum(b), PM, ()),
    ("fmax", lambda a, b: a.fmax(b), PM, ()),
    ("fmin", lambda a, b: a.fmin(b), PM, ()),
    ("lerp_scalar", lambda a, b: a.lerp(b, 0.3), PM, ()),
    ("lerp_high", lambda a, b: a.lerp(b, 0.8), PM, ()),
    ("clamp_tensor_min", lambda a, b: a.clamp(min=b), PM, ()),
    ("clamp_tensor_max", lambda a, b: a.clamp(max=b), PM, ()),
    ("xlogy_tensor", lambda a, b: a.xlogy(b.abs() + 0.1), PM, (0,)),
]
PAIRS = [((3, 4), (4,)), ((), (2, 3)), ((1,), (1,)), ((2, 1, 3), (1, 4, 1)), ((0, 3), (3,))]


@pytest.mark.parametrize("sa,sb", PAIRS, ids=str)
@pytest.mark.parametrize("name,fn,rng,avoid", BINARY, ids=[b[0] for b in BINARY])
def test_binary(name, fn, rng, avoid, sa, sb):
    a, b = rand_inputs([sa, sb], seed=3, low=rng[0], high=rng[1], avoid=avoid or (-99,),
                       margin=0.2)
    if name in ("maximum", "minimum", "fmax", "fmin", "clamp_tensor_min", "clamp_tensor_max"):
        b = b + 0.01       # no ties: the finite difference of max is one-sided there
    check_op(None, fn, inputs=[a, b], torch_dtype=F64)


@pytest.mark.parametrize("name,fn", [
    ("fmod", lambda a, b: a.fmod(b)),
    ("remainder", lambda a, b: a.remainder(b)),
])
def test_fmod_remainder_tensor(name, fn):
    rng = np.random.default_rng(4)
    b = rng.choice([-1.7, -0.8, 0.9, 1.3], (3, 4)).astype(np.float32)
    q = rng.uniform(-3, 3, (3, 4))
    q = np.floor(q) + rng.uniform(0.15, 0.85, (3, 4))       # a / b away from integers
    a = (q * b).astype(np.float32)
    check_op(None, fn, inputs=[a, b], torch_dtype=F64)


def test_lerp_tensor_weight():
    a, b, w = rand_inputs([(3, 4), (3, 4), (4,)], seed=5)
    check_op(None, lambda x, y, z: x.lerp(y, z), inputs=[a, b, w], torch_dtype=F64)


def test_clamp_tensor_bounds_both():
    x, lo, hi = rand_inputs([(3, 4), (4,), (3, 1)], seed=6)
    lo, hi = np.minimum(lo, hi) - 0.05, np.maximum(lo, hi) + 0.05
    check_op(None, lambda a, l, h: a.clamp(l, h), inputs=[x, lo, hi], torch_dtype=F64)


def test_clamp_gradient_at_bound_passes_like_torch():
    x = np.array([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0], np.float32)
    check_op(None, lambda t: t.clamp(-0.5, 1.0), inputs=[x], fd=False)
    check_op(None, lambda t: t.clamp(min=0.5), inputs=[x], fd=False)
    check_op(None, lambda t: t.clip(max=0.0), inputs=[x], fd=False)


def test_pow_zero_gradients_like_torch():
    """``x ** 0`` has gradient 0 (also at 0), ``0 ** y`` a gradient 0 for ``y >= 0``."""
    x = np.array([0.0, 0.0, 1.5, -2.0], np.float32)
    check_op(None, lambda t: t ** 0.0, inputs=[x], fd=False)
    y = np.array([0.0, 1.0, 2.5, 0.0], np.float32)
    base = np.array([0.0, 0.0, 0.0, 2.0], np.float32)
    out = check_op(None, lambda b, e: b ** e, inputs=[base, y], fd=False)
    assert np.isfinite(out).all()
    check_op(None, lambda e: 0.0 ** e, inputs=[y], fd=False)


SPECIAL = np.array([-np.inf, -3.5, -1.0, -0.0, 0.0, 0.5, 2.5, np.inf, np.nan], np.float32)


@pytest.mark.parametrize("name,fn", [
    ("isnan", lambda x: x.isnan()), ("isinf", lambda x: x.isinf()),
    ("isfinite", lambda x: x.isfinite()), ("isposinf", lambda x: x.isposinf()),
    ("isneginf", lambda x: x.isneginf()),
    ("nan_to_num", lambda x: x.nan_to_num()),
    ("nan_to_num_args", lambda x: x.nan_to_num(nan=1.0, posinf=9.0, neginf=-9.0)),
    ("floor", lambda x: x.floor()), ("ceil", lambda x: x.ceil()),
    ("round", lambda x: x.round()), ("trunc", lambda x: x.trunc()),
    ("sign", lambda x: x.sign()), ("atan", lambda x: x.atan()),
    ("expm1", lambda x: x.expm1()), ("sinh", lambda x: x.sinh()),
    ("cosh", lambda x: x.cosh()), ("asinh", lambda x: x.asinh()),
    ("tanh", lambda x: x.tanh()),
])
def test_special_values(name, fn):
    """NaN, infinities and signed zeros give PyTorch's results (forward only)."""
    check_op(None, fn, inputs=[SPECIAL], forward_only=True)


def test_round_half_to_even_and_large_values():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 1e7 + 1, 2.0 ** 24, -3e9, 0.49999997],
                 np.float32)
    for f in ("round", "floor", "ceil", "trunc", "frac"):
        ad.reset()
        check_op(None, lambda t: getattr(t, f)(), inputs=[x], forward_only=True,
                 fwd_rtol=0, fwd_atol=0)


def test_isclose():
    a = np.array([1.0, 1.0 + 1e-6, 1.0, np.inf, np.nan, 0.0], np.float32)
    b = np.array([1.0, 1.0, 1.1, np.inf, np.nan, 1e-9], np.float32)
    check_op(None, lambda x, y: x.isclose(y), inputs=[a, b], forward_only=True)
    check_op(None, lambda x, y: x.isclose(y, equal_nan=True, rtol=0.2), inputs=[a, b],
             forward_only=True)


def test_large_arguments_stay_finite_like_torch():
    x = np.array([-89.0, -50.0, -20.0, 20.0, 50.0, 88.5, 89.0, 1e20, -1e20], np.float32)
    for f in ("sinh", "cosh", "asinh"):
        ad.reset()
        check_op(None, lambda t: getattr(t, f)(), inputs=[x], forward_only=True)
    y = np.array([1.0, 1.5, 1e12, 1e30], np.float32)
    check_op(None, lambda t: t.acosh(), inputs=[y], forward_only=True)


def test_small_arguments_keep_relative_precision():
    x = np.array([1e-7, -3e-6, 2e-5, 1e-3], np.float32)
    for f in ("log1p", "expm1", "sinh", "asinh", "atanh", "tan", "asin", "atan"):
        ad.reset()
        check_op(None, lambda t: getattr(t, f)(), inputs=[x], fwd_rtol=2e-6, fwd_atol=0,
                 torch_dtype=F64, fd=False)


def test_atan2_quadrants_and_axes():
    y = np.array([1.0, 1.0, -1.0, -1.0, 0.0, 0.0, 2.0, -2.0], np.float32)
    x = np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 0.0, 0.0], np.float32)
    out = check_op(None, lambda a, b: a.atan2(b), inputs=[y, x], forward_only=True)
    assert out[5] == np.float32(math.pi)
