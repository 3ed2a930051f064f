"""Pooling, padding, interpolation and pixel shuffle against PyTorch (forward, gradients,
float64 finite differences), odd sizes and every documented argument combination."""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "graph"))

import autodiff as ad  # noqa: E402
from autodiff import nn  # noqa: E402
from autodiff.nn import functional as F  # noqa: E402
from op_helper import check_op  # noqa: E402


@pytest.mark.parametrize("shape,kw", [
    ((2, 3, 9, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((1, 2, 8, 9), dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 0), dilation=(2, 1))),
    ((2, 7, 6), dict(kernel_size=2)),
    ((1, 1, 5, 5), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True))])
def test_max_pool2d(shape, kw):
    check_op([shape], lambda x: TF.max_pool2d(x, **kw), lambda x: F.max_pool2d(x, **kw))


@pytest.mark.parametrize("shape,kw", [
    ((2, 3, 10), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True)),
    ((3, 9), dict(kernel_size=3, dilation=2, stride=1))])
def test_max_pool1d(shape, kw):
    check_op([shape], lambda x: TF.max_pool1d(x, **kw), lambda x: F.max_pool1d(x, **kw))


@pytest.mark.parametrize("fn,tfn,shape,kw", [
    (F.max_pool2d, TF.max_pool2d, (2, 3, 9, 7), dict(kernel_size=3, stride=2, padding=1,
                                                     ceil_mode=True)),
    (F.max_pool1d, TF.max_pool1d, (2, 3, 10), dict(kernel_size=3, stride=2, padding=1)),
    (F.adaptive_max_pool2d, TF.adaptive_max_pool2d, (2, 2, 7, 5), dict(output_size=(3, 4))),
    (F.adaptive_max_pool1d, TF.adaptive_max_pool1d, (2, 2, 7), dict(output_size=3))])
def test_max_pool_indices(fn, tfn, shape, kw):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    y, idx = fn(ad.Tensor(x), return_indices=True, **kw)
    ad.execute()
    ty, tidx = tfn(torch.tensor(x), return_indices=True, **kw)
    np.testing.assert_array_equal(y.numpy(), ty.numpy())
    assert idx.dtype == "int32"
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())


def test_max_pool_ties_pick_first_index():
    x = np.zeros((1, 1, 4, 4), np.float32)
    y, idx = F.max_pool2d(ad.Tensor(x), 2, return_indices=True)
    ad.execute()
    _, tidx = TF.max_pool2d(torch.tensor(x), 2, return_indices=True)
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())


@pytest.mark.parametrize("shape,kw", [
    ((2, 3, 9, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((2, 3, 9, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                        count_include_pad=False)),
    ((1, 2, 6, 5), dict(kernel_size=(2, 3), stride=(2, 1), padding=(1, 1),
                        divisor_override=5)),
    ((2, 5, 4), dict(kernel_size=2))])
def test_avg_pool2d(shape, kw):
    check_op([shape], lambda x: TF.avg_pool2d(x, **kw), lambda x: F.avg_pool2d(x, **kw))


@pytest.mark.parametrize("kw", [dict(kernel_size=4, stride=3, padding=2, ceil_mode=True),
                                dict(kernel_size=3, padding=1, count_include_pad=False)])
def test_avg_pool1d(kw):
    check_op([(2, 3, 10)], lambda x: TF.avg_pool1d(x, **kw), lambda x: F.avg_pool1d(x, **kw))


@pytest.mark.parametrize("shape,out", [((2, 3, 9, 7), (4, 3)), ((1, 2, 6, 8), 1),
                                       ((2, 5, 4), (None, 3)), ((1, 2, 5, 5), (5, 2))])
def test_adaptive_pool2d(shape, out):
    check_op([shape], lambda x: TF.adaptive_avg_pool2d(x, out),
             lambda x: F.adaptive_avg_pool2d(x, out))
    check_op([shape], lambda x: TF.adaptive_max_pool2d(x, out),
             lambda x: F.adaptive_max_pool2d(x, out))


def test_adaptive_pool1d():
    check_op([(2, 3, 11)], lambda x: TF.adaptive_avg_pool1d(x, 4),
             lambda x: F.adaptive_avg_pool1d(x, 4))
    check_op([(2, 3, 11)], lambda x: TF.adaptive_max_pool1d(x, 4),
             lambda x: F.adaptive_max_pool1d(x, 4))


@pytest.mark.parametrize("shape,kw", [
    ((2, 2, 4, 5), dict(size=(7, 3), mode="bilinear")),
    ((1, 2, 4, 5), dict(scale_factor=1.7, mode="bilinear", align_corners=True)),
    ((1, 2, 4, 5), dict(scale_factor=(2, 0.6), mode="bilinear",
                        recompute_scale_factor=True)),
    ((2, 2, 3, 4), dict(scale_factor=2)),
    ((1, 2, 3, 4), dict(size=(5, 11))),
    ((1, 2, 5, 4), dict(scale_factor=1.5)),
    ((2, 3, 6), dict(size=9, mode="linear")),
    ((2, 3, 6), dict(scale_factor=0.5, mode="linear", align_corners=False))])
def test_interpolate(shape, kw):
    check_op([shape], lambda x: TF.interpolate(x, **kw), lambda x: F.interpolate(x, **kw))


def test_upsample_modules():
    x = np.random.default_rng(3).standard_normal((1, 2, 3, 4)).astype(np.float32)
    outs = [nn.Upsample(scale_factor=2, mode="bilinear")(ad.Tensor(x)),
            nn.UpsamplingBilinear2d(size=(5, 7))(ad.Tensor(x)),
            nn.UpsamplingNearest2d(scale_factor=3)(ad.Tensor(x))]
    ad.execute()
    refs = [torch.nn.Upsample(scale_factor=2, mode="bilinear")(torch.tensor(x)),
            torch.nn.UpsamplingBilinear2d(size=(5, 7))(torch.tensor(x)),
            torch.nn.UpsamplingNearest2d(scale_factor=3)(torch.tensor(x))]
    for o, r in zip(outs, refs):
        np.testing.assert_allclose(o.numpy(), r.numpy(), rtol=1e-5, atol=1e-6)


def test_pixel_shuffle():
    check_op([(2, 8, 3, 5)], lambda x: TF.pixel_shuffle(x, 2), lambda x: F.pixel_shuffle(x, 2))
    check_op([(2, 3, 4, 6)], lambda x: TF.pixel_unshuffle(x, 2),
             lambda x: F.pixel_unshuffle(x, 2))


@pytest.mark.parametrize("shape,mode,pad", [
    ((2, 3, 5, 4), "constant", (1, 2, 0, 3)), ((2, 3, 5, 4), "constant", (-1, 2, 1, -2)),
    ((2, 3, 5, 4), "reflect", (2, 1, 1, 3)), ((2, 3, 5, 4), "replicate", (3, 0, 2, 1)),
    ((2, 3, 5, 4), "circular", (2, 3, 1, 0)), ((2, 3, 5), "reflect", (1, 2))])
def test_pad(shape, mode, pad):
    check_op([shape], lambda x: TF.pad(x, pad, mode), lambda x: F.pad(x, pad, mode))


def test_pad_value_and_modules():
    check_op([(2, 3, 4)], lambda x: TF.pad(x, (1, 2), value=-1.5),
             lambda x: F.pad(x, (1, 2), value=-1.5))
    x = np.random.default_rng(4).standard_normal((2, 3, 4)).astype(np.float32)
    pairs = [(nn.ReflectionPad2d((1, 2, 0, 2)), torch.nn.ReflectionPad2d((1, 2, 0, 2))),
             (nn.ReplicationPad1d(2), torch.nn.ReplicationPad1d(2)),
             (nn.ZeroPad2d(1), torch.nn.ZeroPad2d(1)),
             (nn.ConstantPad2d((1, 0, 2, 1), 3.5), torch.nn.ConstantPad2d((1, 0, 2, 1), 3.5)),
             (nn.CircularPad2d(1), torch.nn.CircularPad2d(1))]
    outs = [m(ad.Tensor(x)) for m, _ in pairs]
    ad.execute()
    for o, (_, t) in zip(outs, pairs):
        np.testing.assert_array_equal(o.numpy(), t(torch.tensor(x)).numpy())


def test_pool_modules_match_functional_defaults():
    x = np.random.default_rng(5).standard_normal((2, 3, 8, 8)).astype(np.float32)
    mods = [(nn.MaxPool2d(2), torch.nn.MaxPool2d(2)),
            (nn.AvgPool2d(3, stride=2, padding=1), torch.nn.AvgPool2d(3, stride=2, padding=1)),
            (nn.AdaptiveAvgPool2d((3, 5)), torch.nn.AdaptiveAvgPool2d((3, 5))),
            (nn.AdaptiveMaxPool2d(2), torch.nn.AdaptiveMaxPool2d(2)),
            (nn.PixelShuffle(1), torch.nn.PixelShuffle(1))]
    outs = [m(ad.Tensor(x)) for m, _ in mods]
    ad.execute()
    for o, (_, t) in zip(outs, mods):
        np.testing.assert_allclose(o.numpy(), t(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)


def test_errors():
    x = ad.Tensor(np.zeros((1, 2, 5, 5), np.float32))
    with pytest.raises(ValueError, match="pad should be at most half"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(ad.ShapeError, match="reflect padding"):
        F.pad(x, (5, 0), "reflect")
    with pytest.raises(ValueError, match="mode"):
        F.pad(x, (1, 1), "mirror")
    with pytest.raises(ValueError, match="only one of size or scale_factor"):
        F.interpolate(x, size=3, scale_factor=2)
    with pytest.raises(ValueError, match="align_corners"):
        F.interpolate(x, size=3, align_corners=True)
    with pytest.raises(ad.ShapeError, match="divisible"):
        F.pixel_shuffle(x, 2)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_interpolate_keeps_a_16_bit_dtype(mode):
    """Torch keeps float16 (the weights apply in float32); a 16-bit input met a float32
    weight matrix and raised (products of two dtypes are refused, as torch's)."""
    x = np.random.default_rng(3).standard_normal((1, 2, 3, 5)).astype(np.float16)
    y = F.interpolate(ad.tensor(x), scale_factor=2, mode=mode)
    ad.execute()
    ref = TF.interpolate(torch.tensor(x), scale_factor=2, mode=mode)
    assert y.dtype == ad.float16
    np.testing.assert_allclose(y.numpy().astype(np.float32), ref.float().numpy(), atol=2e-3)


@pytest.mark.parametrize("name,args,shape", [
    ("LPPool1d", (2.0, 3), (2, 3, 10)),
    ("LPPool1d", (1.5, 2, 3, True), (2, 3, 10)),
    ("LPPool2d", (3.0, 2), (1, 2, 5, 6)),
    ("LPPool2d", (2.0, (2, 3), (1, 2)), (1, 2, 5, 6)),
    ("ChannelShuffle", (3,), (2, 6, 4)),
])
def test_lp_pool_and_channel_shuffle_match_torch(name, args, shape):
    x = np.random.default_rng(4).uniform(0.2, 2.0, shape).astype(np.float32)
    check_op([shape], lambda t: getattr(torch.nn, name)(*args)(t),
             lambda t: getattr(nn, name)(*args)(t), inputs=[x], fd=name != "ChannelShuffle")
