"""The 3-D family against PyTorch: ``conv3d``/``conv_transpose3d`` and their modules,
``max_pool3d`` (indices, ceil_mode, dilation), ``avg_pool3d``, adaptive and LP pooling,
``InstanceNorm3d``, trilinear interpolation. Forward values, input and parameter gradients
(float32 against torch, and float64 finite differences where the 1-D/2-D tests use them),
with the tolerances of ``tests/nn/test_conv.py`` / ``test_pooling.py``; small shapes (a
3-D convolution's finite differences cost one torch call per input element)."""
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
from autodiff.graph.ir import Op  # noqa: E402
from autodiff.graph.trace import TRACER  # noqa: E402
from autodiff.nn import functional as F  # noqa: E402
from op_helper import check_op  # noqa: E402

torch.set_num_threads(1)


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


CONV3D = [  # x shape, weight shape, kwargs
    ((2, 2, 4, 5, 3), (3, 2, 2, 3, 2), dict()),
    ((1, 4, 5, 4, 6), (4, 2, 3, 2, 3), dict(stride=(2, 1, 2), padding=(1, 0, 1),
                                           dilation=(1, 2, 1), groups=2)),
    ((1, 3, 4, 4, 4), (3, 1, 3, 3, 3), dict(padding=1, groups=3)),             # depthwise
    ((1, 2, 5, 3, 4), (2, 2, 2, 2, 3), dict(padding="same", dilation=(2, 1, 1))),
    ((2, 4, 3, 3), (3, 2, 2, 1, 2), dict(padding="valid")),                     # unbatched
]


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("xs,ws,kw", CONV3D)
def test_conv3d(xs, ws, kw):
    check_op([xs, ws, (ws[0],)], lambda x, w, b: TF.conv3d(x, w, b, **kw),
             lambda x, w, b: F.conv3d(x, w, b, **kw))


@pytest.mark.parametrize("xs,ws,kw", [
    ((1, 4, 2, 3, 2), (4, 3, 3, 2, 2), dict(stride=(2, 1, 3), padding=(1, 0, 1),
                                           output_padding=(1, 0, 2), groups=2,
                                           dilation=(1, 2, 1))),
    ((2, 2, 3, 2, 2), (2, 2, 2, 3, 2), dict(stride=2)),
    ((3, 2, 2, 3), (3, 2, 2, 2, 2), dict(padding=1, dilation=2))])             # unbatched
def test_conv_transpose3d(xs, ws, kw):
    out_c = ws[1] * kw.get("groups", 1)
    check_op([xs, ws, (out_c,)], lambda x, w, b: TF.conv_transpose3d(x, w, b, **kw),
             lambda x, w, b: F.conv_transpose3d(x, w, b, **kw))


def test_conv3d_is_one_dot_over_three_windows():
    """PAD -> WINDOW (one per spatial dim) -> DOT, as for 1-D/2-D: no im2col node."""
    x = ad.Tensor(_rand((2, 3, 5, 5, 5), 0))
    w = ad.Tensor(_rand((4, 3, 3, 3, 3), 1))
    y = F.conv3d(x, w, padding=1)
    ops = [n.op for n in TRACER.root.graph.nodes]
    assert ops.count(Op.DOT) == 1 and ops.count(Op.WINDOW) == 3
    assert y.shape == (2, 4, 5, 5, 5)


def _module_pair(ours, theirs, x, seed=0, output_size=None):
    """Same weights (torch's state_dict), forward, input and parameter gradients."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    ours.load_state_dict(theirs.state_dict())
    kw = {} if output_size is None else {"output_size": output_size}
    xt = torch.tensor(x, requires_grad=True)
    yt = theirs(xt, **kw)
    g = _rand(tuple(yt.shape), seed + 1)
    yt.backward(torch.tensor(g))
    xa = ad.Tensor(x, requires_grad=True)
    y = ours(xa, **kw)
    y.backward(ad.Tensor(g))
    grads = {k: p.grad for k, p in ours.named_parameters()}
    gx = xa.grad
    ad.execute()
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gx.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    for k, p in theirs.named_parameters():
        np.testing.assert_allclose(grads[k].numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=k)


@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
def test_conv3d_module_padding_modes(mode):
    x = _rand((2, 2, 4, 5, 3), 1)
    _module_pair(nn.Conv3d(2, 4, (2, 3, 2), stride=(1, 2, 1), padding=(1, 1, 2),
                           padding_mode=mode),
                 torch.nn.Conv3d(2, 4, (2, 3, 2), stride=(1, 2, 1), padding=(1, 1, 2),
                                 padding_mode=mode), x)


def test_conv3d_module_same_padding_groups_no_bias():
    x = _rand((1, 4, 4, 3, 5), 2)
    _module_pair(nn.Conv3d(4, 6, 3, padding="same", groups=2, bias=False),
                 torch.nn.Conv3d(4, 6, 3, padding="same", groups=2, bias=False), x)


@pytest.mark.parametrize("size", [None, (5, 7, 6), (2, 2, 5, 7, 6)])
def test_conv_transpose3d_module_and_output_size(size):
    x = _rand((2, 4, 3, 4, 3), 3)
    _module_pair(nn.ConvTranspose3d(4, 2, 3, stride=2, padding=1, groups=2),
                 torch.nn.ConvTranspose3d(4, 2, 3, stride=2, padding=1, groups=2), x,
                 output_size=size)


def test_conv3d_modules_parameter_shapes_names_and_init():
    for ours, theirs in [(nn.Conv3d(4, 6, (3, 1, 2), groups=2),
                          torch.nn.Conv3d(4, 6, (3, 1, 2), groups=2)),
                         (nn.ConvTranspose3d(4, 6, 2, bias=False),
                          torch.nn.ConvTranspose3d(4, 6, 2, bias=False))]:
        assert [(n, p.shape) for n, p in ours.named_parameters()] == \
            [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
        assert list(ours.state_dict()) == list(theirs.state_dict())
        assert repr(ours) == repr(theirs)
        w = ours.weight.numpy()
        bound = 1 / np.sqrt(w.shape[1] * np.prod(w.shape[2:]))
        assert np.abs(w).max() <= bound + 1e-7 and np.abs(w).max() > 0.5 * bound


def test_conv3d_errors():
    x = ad.Tensor(_rand((1, 2, 4, 4, 4), 0))
    with pytest.raises(RuntimeError, match="input channels"):
        F.conv3d(x, ad.Tensor(_rand((3, 3, 2, 2, 2), 1)))
    with pytest.raises(RuntimeError, match="larger than the padded input"):
        F.conv3d(x, ad.Tensor(_rand((3, 2, 5, 2, 2), 1)))
    with pytest.raises(RuntimeError, match="weight must have 5 dims"):
        F.conv3d(x, ad.Tensor(_rand((3, 2, 2, 2), 1)))
    with pytest.raises(ValueError, match="strided"):
        F.conv3d(x, ad.Tensor(_rand((3, 2, 2, 2, 2), 1)), stride=2, padding="same")
    with pytest.raises(ValueError, match="output padding"):
        F.conv_transpose3d(x, ad.Tensor(_rand((2, 3, 2, 2, 2), 1)), stride=2,
                           output_padding=2)
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv3d(3, 4, 3, groups=2)


# -- pooling -----------------------------------------------------------------------------
@pytest.mark.parametrize("shape,kw", [
    ((2, 2, 5, 6, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((1, 2, 6, 5, 7), dict(kernel_size=(2, 3, 2), stride=(1, 2, 2), padding=(1, 0, 1),
                           dilation=(2, 1, 2))),
    ((2, 4, 5, 4), dict(kernel_size=2)),                                       # unbatched
    ((1, 1, 5, 5, 5), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True))])
def test_max_pool3d(shape, kw):
    check_op([shape], lambda x: TF.max_pool3d(x, **kw), lambda x: F.max_pool3d(x, **kw))


@pytest.mark.parametrize("fn,tfn,shape,kw", [
    (F.max_pool3d, TF.max_pool3d, (2, 2, 5, 6, 7), dict(kernel_size=3, stride=2, padding=1,
                                                       ceil_mode=True)),
    (F.max_pool3d, TF.max_pool3d, (2, 5, 6, 5), dict(kernel_size=2, dilation=2)),
    (F.adaptive_max_pool3d, TF.adaptive_max_pool3d, (2, 2, 5, 7, 4),
     dict(output_size=(2, 3, None)))])
def test_max_pool3d_indices(fn, tfn, shape, kw):
    x = _rand(shape, 0)
    y, idx = fn(ad.Tensor(x), return_indices=True, **kw)
    ad.execute()
    ty, tidx = tfn(torch.tensor(x), return_indices=True, **kw)
    np.testing.assert_array_equal(y.numpy(), ty.numpy())
    assert idx.dtype == "int32"
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())


@pytest.mark.parametrize("shape,kw", [
    ((2, 2, 5, 6, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
    ((2, 2, 5, 6, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True,
                           count_include_pad=False)),
    ((1, 2, 4, 6, 5), dict(kernel_size=(2, 3, 2), stride=(2, 1, 1), padding=(1, 1, 0),
                           divisor_override=5)),
    ((2, 4, 5, 4), dict(kernel_size=2))])
def test_avg_pool3d(shape, kw):
    check_op([shape], lambda x: TF.avg_pool3d(x, **kw), lambda x: F.avg_pool3d(x, **kw))


@pytest.mark.parametrize("shape,out", [((2, 2, 5, 7, 4), (2, 3, 4)), ((1, 2, 4, 6, 3), 1),
                                       ((2, 5, 4, 3), (None, 3, 2)),
                                       ((1, 1, 3, 5, 5), (5, 2, 3))])
def test_adaptive_pool3d(shape, out):
    check_op([shape], lambda x: TF.adaptive_avg_pool3d(x, out),
             lambda x: F.adaptive_avg_pool3d(x, out))
    check_op([shape], lambda x: TF.adaptive_max_pool3d(x, out),
             lambda x: F.adaptive_max_pool3d(x, out))


@pytest.mark.parametrize("args", [(2.0, 2), (1.5, (2, 3, 2), (1, 2, 2), True),
                                  (3.0, (3, 2, 2), 2)])
def test_lp_pool3d(args):
    x = np.random.default_rng(4).uniform(0.2, 2.0, (2, 2, 5, 6, 5)).astype(np.float32)
    check_op([x.shape], lambda t: TF.lp_pool3d(t, *args), lambda t: F.lp_pool3d(t, *args),
             inputs=[x])
    check_op([x.shape], lambda t: torch.nn.LPPool3d(*args)(t),
             lambda t: nn.LPPool3d(*args)(t), inputs=[x], fd=False)


@pytest.mark.parametrize("p", [float("inf"), -float("inf")])
def test_lp_pool_infinite_norm_is_a_max_pool(p):
    """``norm_type = +-inf`` takes PyTorch's max-pool branch (every rank)."""
    for fn, tfn, shape, k in [(F.lp_pool1d, TF.lp_pool1d, (2, 3, 8), 3),
                              (F.lp_pool2d, TF.lp_pool2d, (1, 2, 5, 6), (2, 3)),
                              (F.lp_pool3d, TF.lp_pool3d, (1, 2, 4, 5, 4), 2)]:
        check_op([shape], lambda t: tfn(t, p, k), lambda t: fn(t, p, k), fd=False)


def test_pool3d_modules_match_torch():
    x = _rand((2, 3, 6, 6, 5), 5)
    mods = [(nn.MaxPool3d(2), torch.nn.MaxPool3d(2)),
            (nn.MaxPool3d(3, stride=2, padding=1, dilation=1, ceil_mode=True),
             torch.nn.MaxPool3d(3, stride=2, padding=1, dilation=1, ceil_mode=True)),
            (nn.AvgPool3d(3, stride=2, padding=1), torch.nn.AvgPool3d(3, stride=2, padding=1)),
            (nn.AvgPool3d((2, 2, 3), count_include_pad=False, divisor_override=3),
             torch.nn.AvgPool3d((2, 2, 3), count_include_pad=False, divisor_override=3)),
            (nn.AdaptiveAvgPool3d((3, 5, 2)), torch.nn.AdaptiveAvgPool3d((3, 5, 2))),
            (nn.AdaptiveMaxPool3d(2), torch.nn.AdaptiveMaxPool3d(2))]
    outs = [m(ad.Tensor(x)) for m, _ in mods]
    y, idx = nn.MaxPool3d(2, return_indices=True)(ad.Tensor(x))
    ya, idxa = nn.AdaptiveMaxPool3d((2, 3, 2), return_indices=True)(ad.Tensor(x))
    ad.execute()
    for o, (m, t) in zip(outs, mods):
        np.testing.assert_allclose(o.numpy(), t(torch.tensor(x)).numpy(), rtol=1e-5,
                                   atol=1e-6)
        assert repr(m) == repr(t)
    _, tidx = torch.nn.MaxPool3d(2, return_indices=True)(torch.tensor(x))
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
    _, tidxa = torch.nn.AdaptiveMaxPool3d((2, 3, 2), return_indices=True)(torch.tensor(x))
    np.testing.assert_array_equal(idxa.numpy(), tidxa.numpy())


def test_pool3d_errors():
    x = ad.Tensor(_rand((1, 2, 4, 4, 4), 0))
    for fn in (F.max_pool3d, F.avg_pool3d):
        with pytest.raises(RuntimeError, match="pad should be at most half"):
            fn(x, 2, padding=2)
        with pytest.raises(RuntimeError, match="too small"):
            fn(x, 5)
        with pytest.raises(RuntimeError, match="4-D .unbatched. or 5-D"):
            fn(ad.Tensor(_rand((2, 4, 4), 0)), 2)
    with pytest.raises(RuntimeError, match="output_size"):
        F.adaptive_avg_pool3d(x, (2, 2))
    with pytest.raises(RuntimeError, match="4-D .unbatched. or 5-D"):
        F.adaptive_max_pool3d(ad.Tensor(_rand((4, 4), 0)), 2)


# -- normalisation and resampling --------------------------------------------------------
def test_instance_norm3d_functional():
    check_op([(2, 3, 3, 4, 2), (3,), (3,)],
             lambda x, w, b: TF.instance_norm(x, weight=w, bias=b),
             lambda x, w, b: F.instance_norm(x, weight=w, bias=b))


def test_instance_norm3d_wants_4d_or_5d_input():
    """Its values against torch: ``test_normalization.test_norm_modules_train_then_eval``."""
    m = nn.InstanceNorm3d(3, affine=True)
    with pytest.raises(ValueError, match="4D or 5D"):
        m(ad.Tensor(_rand((2, 3, 4), 0)))


@pytest.mark.parametrize("kw", [dict(size=(3, 5, 4)),
                                dict(scale_factor=(1.5, 0.5, 2), align_corners=True),
                                dict(scale_factor=2, recompute_scale_factor=True)])
def test_interpolate_trilinear(kw):
    check_op([(1, 2, 3, 4, 3)], lambda x: TF.interpolate(x, mode="trilinear", **kw),
             lambda x: F.interpolate(x, mode="trilinear", **kw))
    with pytest.raises(ValueError, match="5-D"):
        F.interpolate(ad.Tensor(_rand((1, 2, 3, 4), 0)), size=3, mode="trilinear")


def test_conv3d_block_trains_like_torch():
    """Conv3d -> InstanceNorm3d -> ReLU -> MaxPool3d -> AdaptiveAvgPool3d -> Linear, three
    SGD steps from torch's weights: the same losses and final weights."""
    def build(lib):
        return lib.Sequential(lib.Conv3d(2, 4, 3, padding=1), lib.InstanceNorm3d(4, affine=True),
                              lib.ReLU(), lib.MaxPool3d(2), lib.AdaptiveAvgPool3d(1),
                              lib.Flatten(), lib.Linear(4, 3))
    torch.manual_seed(0)
    theirs, ours = build(torch.nn), build(nn)
    ours.load_state_dict(theirs.state_dict())
    x = _rand((2, 2, 4, 6, 4), 8)
    target = _rand((2, 3), 9)
    topt = torch.optim.SGD(theirs.parameters(), lr=0.1)
    want = []
    for _ in range(3):
        topt.zero_grad()
        loss = TF.mse_loss(theirs(torch.tensor(x)), torch.tensor(target))
        loss.backward()
        topt.step()
        want.append(loss.item())
    from autodiff.optim import SGD
    opt = SGD(ours.parameters(), lr=0.1)
    got = []

    def step():
        opt.zero_grad()
        loss = F.mse_loss(ours(ad.Tensor(x)), ad.Tensor(target))
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: got.append(float(v)), [loss])

    ad.ir_for(range(3), step)
    ad.execute()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    for k, v in theirs.state_dict().items():
        np.testing.assert_allclose(ours.state_dict()[k], v.numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=k)
