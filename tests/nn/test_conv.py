"""Convolutions against PyTorch: forward, input/weight/bias gradients (also float64 finite
differences), odd sizes, stride/padding/dilation/groups combinations, modules, errors."""
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

CONV2D = [  # x shape, weight shape, kwargs
    ((2, 3, 7, 6), (4, 3, 3, 3), dict()),
    ((1, 4, 9, 7), (6, 2, 3, 2), dict(stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2)),
    ((2, 3, 5, 8), (3, 1, 3, 3), dict(padding=1, groups=3)),                      # depthwise
    ((1, 2, 8, 5), (3, 2, 2, 3), dict(padding="same", dilation=2)),
    ((2, 2, 6, 6), (2, 2, 3, 3), dict(stride=3, padding="valid")),
    ((5, 4, 3), (2, 5, 1, 1), dict()),                                             # unbatched
]


@pytest.mark.parametrize("xs,ws,kw", CONV2D)
def test_conv2d(xs, ws, kw):
    check_op([xs, ws, (ws[0],)], lambda x, w, b: TF.conv2d(x, w, b, **kw),
             lambda x, w, b: F.conv2d(x, w, b, **kw))


@pytest.mark.parametrize("xs,ws,kw", [
    ((2, 3, 11), (4, 3, 3), dict(stride=2, padding=1)),
    ((1, 4, 10), (4, 1, 4), dict(groups=4, dilation=2, padding="same")),
    ((3, 9), (2, 3, 2), dict(stride=3))])
def test_conv1d(xs, ws, kw):
    check_op([xs, ws], lambda x, w: TF.conv1d(x, w, **kw), lambda x, w: F.conv1d(x, w, **kw))


@pytest.mark.parametrize("xs,ws,kw", [
    ((2, 4, 3, 4), (4, 3, 3, 2), dict(stride=(2, 3), padding=(1, 0), output_padding=(1, 2),
                                      groups=2, dilation=(1, 2))),
    ((1, 2, 4, 3), (2, 3, 3, 3), dict(stride=2, padding=1)),
    ((2, 3, 3), (2, 2, 2, 2), dict())])
def test_conv_transpose2d(xs, ws, kw):
    out_c = ws[1] * kw.get("groups", 1)
    check_op([xs, ws, (out_c,)], lambda x, w, b: TF.conv_transpose2d(x, w, b, **kw),
             lambda x, w, b: F.conv_transpose2d(x, w, b, **kw))


def test_conv_transpose1d():
    check_op([(2, 3, 5), (3, 2, 4)],
             lambda x, w: TF.conv_transpose1d(x, w, stride=3, padding=2, output_padding=1),
             lambda x, w: F.conv_transpose1d(x, w, stride=3, padding=2, output_padding=1))


def _module_pair(ours, theirs, x, seed=0):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in theirs.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
    ours.load_state_dict(theirs.state_dict())
    xt = torch.tensor(x, requires_grad=True)
    yt = theirs(xt)
    g = np.random.default_rng(seed).standard_normal(tuple(yt.shape)).astype(np.float32)
    yt.backward(torch.tensor(g))
    xa = ad.Tensor(x, requires_grad=True)
    y = ours(xa)
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
def test_conv2d_module_padding_modes(mode):
    x = np.random.default_rng(1).standard_normal((2, 3, 6, 7)).astype(np.float32)
    _module_pair(nn.Conv2d(3, 4, (3, 2), stride=(1, 2), padding=(2, 1), padding_mode=mode),
                 torch.nn.Conv2d(3, 4, (3, 2), stride=(1, 2), padding=(2, 1),
                                 padding_mode=mode), x)


def test_conv_modules_same_padding_and_transposed():
    x = np.random.default_rng(2).standard_normal((2, 4, 9)).astype(np.float32)
    _module_pair(nn.Conv1d(4, 6, 4, padding="same", dilation=2, groups=2, bias=False,
                           padding_mode="reflect"),
                 torch.nn.Conv1d(4, 6, 4, padding="same", dilation=2, groups=2, bias=False,
                                 padding_mode="reflect"), x)
    x2 = np.random.default_rng(3).standard_normal((1, 4, 3, 5)).astype(np.float32)
    _module_pair(nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
                 torch.nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1,
                                          groups=2), x2)


@pytest.mark.parametrize("ours,theirs", [
    (lambda: nn.Conv2d(6, 4, (3, 5), groups=2), lambda: torch.nn.Conv2d(6, 4, (3, 5), groups=2)),
    (lambda: nn.ConvTranspose2d(6, 4, 3, groups=2),
     lambda: torch.nn.ConvTranspose2d(6, 4, 3, groups=2)),
    (lambda: nn.Conv1d(3, 8, 5, bias=False), lambda: torch.nn.Conv1d(3, 8, 5, bias=False))])
def test_parameter_shapes_names_and_init_bounds(ours, theirs):
    a, t = ours(), theirs()
    assert [(n, p.shape) for n, p in a.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in t.named_parameters()]
    for (n, p), (_, q) in zip(a.named_parameters(), t.named_parameters()):
        bound = float(q.detach().abs().max())          # torch's draw is within its bound
        fan_in = q.shape[1] * int(np.prod(q.shape[2:])) if q.ndim > 1 else None
        v = p.numpy()
        if fan_in:
            assert np.abs(v).max() <= 1 / np.sqrt(fan_in) + 1e-7
        assert np.abs(v).max() > 0.5 * bound            # spread like torch's, not constant


def test_conv_is_one_dot_over_a_window_view():
    """The forward is PAD -> WINDOW -> DOT: no unfolded input materialised as a node of its
    own (the window feeds the DOT through views only)."""
    x = ad.Tensor(np.zeros((2, 3, 8, 8), np.float32))
    w = ad.Tensor(np.zeros((4, 3, 3, 3), np.float32))
    y = F.conv2d(x, w, padding=1)
    ops = [n.op for n in TRACER.root.graph.nodes]
    assert ops.count(Op.DOT) == 1 and ops.count(Op.WINDOW) == 2
    compute = [o for o in ops if o not in (Op.LOAD, Op.WINDOW, Op.PAD, Op.RESHAPE,
                                          Op.PERMUTE, Op.EXPAND, Op.DOT)]
    assert compute == [], compute
    assert y.shape == (2, 4, 8, 8)


def test_conv_errors():
    x = ad.Tensor(np.zeros((2, 3, 5, 5), np.float32))
    with pytest.raises(ad.ShapeError, match="input channels"):
        F.conv2d(x, ad.Tensor(np.zeros((4, 2, 3, 3), np.float32)))
    with pytest.raises(ad.ShapeError, match="larger than the padded input"):
        F.conv2d(x, ad.Tensor(np.zeros((4, 3, 7, 3), np.float32)))
    with pytest.raises(ValueError, match="strided"):
        F.conv2d(x, ad.Tensor(np.zeros((4, 3, 3, 3), np.float32)), stride=2, padding="same")
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding_mode"):
        nn.Conv2d(3, 4, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match="output padding"):
        F.conv_transpose2d(x, ad.Tensor(np.zeros((3, 2, 3, 3), np.float32)), stride=2,
                           output_padding=2)


@pytest.mark.parametrize("cls,shape,size", [
    ("ConvTranspose2d", (2, 3, 5, 4), (10, 8)),
    ("ConvTranspose2d", (2, 3, 5, 4), (2, 4, 9, 8)),
    ("ConvTranspose1d", (3, 7), (14,)),
])
def test_conv_transpose_output_size_picks_output_padding(cls, shape, size):
    """``forward(x, output_size=...)`` as PyTorch's: the output_padding reaching the size."""
    torch.manual_seed(0)
    theirs = getattr(torch.nn, cls)(3, 4, 3, stride=2, padding=1)
    ours = getattr(nn, cls)(3, 4, 3, stride=2, padding=1)
    ours.load_state_dict(theirs.state_dict())
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    y = ours(ad.tensor(x), output_size=size)
    ad.execute()
    ref = theirs(torch.tensor(x), output_size=size).detach().numpy()
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="valid sizes range from"):
        ours(ad.tensor(x), output_size=[s + 5 for s in size[-len(shape) + 2:]])
