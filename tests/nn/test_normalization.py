"""Normalisation layers against PyTorch: forward and gradients in train and eval mode,
running statistics updated inside a compiled loop, state_dict keys and loading."""
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

torch.set_num_threads(1)


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("shape", [(4, 3), (3, 2, 5), (2, 3, 4, 5)])
def test_batch_norm_train_functional(shape):
    c = shape[1]
    check_op([shape, (c,), (c,)],
             lambda x, w, b: TF.batch_norm(x, None, None, w, b, training=True, eps=1e-3),
             lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True, eps=1e-3))


def test_batch_norm_eval_functional():
    rm, rv = _rand((3,), 1), np.abs(_rand((3,), 2)) + 0.5
    check_op([(2, 3, 4), (3,), (3,)],
             lambda x, w, b: TF.batch_norm(x, torch.tensor(rm, dtype=x.dtype),
                                            torch.tensor(rv, dtype=x.dtype), w, b),
             lambda x, w, b: F.batch_norm(x, ad.Tensor(rm), ad.Tensor(rv), w, b))


@pytest.mark.parametrize("ours,theirs,shape", [
    (lambda: nn.BatchNorm2d(3), lambda: torch.nn.BatchNorm2d(3), (4, 3, 5, 3)),
    (lambda: nn.BatchNorm1d(4, momentum=None), lambda: torch.nn.BatchNorm1d(4, momentum=None),
     (5, 4)),
    (lambda: nn.BatchNorm1d(2, momentum=0.3, eps=1e-3), lambda: torch.nn.BatchNorm1d(
        2, momentum=0.3, eps=1e-3), (3, 2, 7)),
    (lambda: nn.BatchNorm2d(3, affine=False), lambda: torch.nn.BatchNorm2d(3, affine=False),
     (2, 3, 4, 4))])
def test_batch_norm_running_stats_in_loop(ours, theirs, shape):
    """Train mode inside ir_for: the running statistics and the batch count are updated on
    the device every iteration; then eval mode uses them."""
    steps = 4
    xs = [_rand(shape, s) * (1 + s) + s for s in range(steps)]
    m, t = ours(), theirs()
    assert list(m.state_dict()) == list(t.state_dict())
    it, outs = iter(xs), []

    def body():
        y = m(ad.Feeder(lambda: next(it), shape))
        ad.Receiver(lambda v: outs.append(v), [y])
    ad.ir_for(steps, body)
    ad.execute()
    t.train()
    for x, o in zip(xs, outs):
        np.testing.assert_allclose(o, t(torch.tensor(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
    sd, tsd = m.state_dict(), t.state_dict()
    for k in tsd:
        np.testing.assert_allclose(sd[k], tsd[k].numpy(), rtol=1e-5, atol=1e-6, err_msg=k)
    assert sd["num_batches_tracked"] == steps
    m.eval()
    t.eval()
    y = m(ad.Tensor(xs[0]))
    ad.execute()
    np.testing.assert_allclose(y.numpy(), t(torch.tensor(xs[0])).detach().numpy(), rtol=1e-4,
                               atol=1e-5)


def test_batch_norm_gradients_and_torch_state_dict():
    t = torch.nn.BatchNorm2d(3)
    with torch.no_grad():
        t.weight.copy_(torch.randn(3))
        t.bias.copy_(torch.randn(3))
        t.running_mean.copy_(torch.randn(3))
        t.num_batches_tracked.fill_(7)
    m = nn.BatchNorm2d(3)
    m.load_state_dict(t.state_dict())
    assert m.num_batches_tracked.dtype == "int64" and m.num_batches_tracked.item() == 7
    assert m.state_dict()["num_batches_tracked"].dtype == t.num_batches_tracked.numpy().dtype
    x = _rand((2, 3, 4, 3), 3)
    xa = ad.Tensor(x, requires_grad=True)
    g = _rand((2, 3, 4, 3), 4)
    m(xa).backward(ad.Tensor(g))
    gx, gw, gb = xa.grad, m.weight.grad, m.bias.grad
    ad.execute()
    xt = torch.tensor(x, requires_grad=True)
    t(xt).backward(torch.tensor(g))
    np.testing.assert_allclose(gx.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gw.numpy(), t.weight.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gb.numpy(), t.bias.grad.numpy(), rtol=1e-4, atol=1e-5)
    assert m.num_batches_tracked.item() == 8
    back = torch.nn.BatchNorm2d(3)
    back.load_state_dict({k: torch.as_tensor(v) for k, v in m.state_dict().items()})
    np.testing.assert_allclose(back.running_var.numpy(), t.running_var.numpy(), rtol=1e-5)


def test_batch_norm_without_running_stats():
    m, t = nn.BatchNorm1d(3, track_running_stats=False), \
        torch.nn.BatchNorm1d(3, track_running_stats=False)
    assert list(m.state_dict()) == list(t.state_dict()) == ["weight", "bias"]
    x = _rand((4, 3), 5)
    m.eval()
    t.eval()
    y = m(ad.Tensor(x))
    ad.execute()
    np.testing.assert_allclose(y.numpy(), t(torch.tensor(x)).detach().numpy(), rtol=1e-4,
                               atol=1e-5)


def test_batch_norm_errors():
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.BatchNorm2d(3)(ad.Tensor(np.zeros((2, 3), np.float32)))
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        nn.BatchNorm1d(3)(ad.Tensor(np.zeros((1, 3), np.float32)))
    with pytest.raises(ValueError, match="channels"):
        nn.BatchNorm1d(3)(ad.Tensor(np.zeros((4, 2), np.float32)))


@pytest.mark.parametrize("shape,groups", [((2, 6, 3, 2), 3), ((3, 4, 5), 1), ((2, 4, 3), 4)])
def test_group_norm(shape, groups):
    c = shape[1]
    check_op([shape, (c,), (c,)], lambda x, w, b: TF.group_norm(x, groups, w, b, 1e-4),
             lambda x, w, b: F.group_norm(x, groups, w, b, 1e-4))


def test_instance_norm_functional():
    check_op([(2, 3, 4, 5), (3,), (3,)],
             lambda x, w, b: TF.instance_norm(x, weight=w, bias=b),
             lambda x, w, b: F.instance_norm(x, weight=w, bias=b))


@pytest.mark.parametrize("ours,theirs,shape", [
    (lambda: nn.InstanceNorm2d(3, affine=True), lambda: torch.nn.InstanceNorm2d(3, affine=True),
     (2, 3, 4, 5)),
    (lambda: nn.InstanceNorm2d(3, track_running_stats=True),
     lambda: torch.nn.InstanceNorm2d(3, track_running_stats=True), (2, 3, 4, 5)),
    (lambda: nn.InstanceNorm1d(2, affine=True), lambda: torch.nn.InstanceNorm1d(2, affine=True),
     (2, 7)),
    (lambda: nn.InstanceNorm3d(3, affine=True), lambda: torch.nn.InstanceNorm3d(3, affine=True),
     (2, 3, 3, 4, 2)),
    (lambda: nn.InstanceNorm3d(3, track_running_stats=True),
     lambda: torch.nn.InstanceNorm3d(3, track_running_stats=True), (2, 3, 2, 3, 4)),
    (lambda: nn.InstanceNorm3d(3, affine=True), lambda: torch.nn.InstanceNorm3d(3, affine=True),
     (3, 2, 4, 3)),                                                      # unbatched
    (lambda: nn.GroupNorm(2, 4), lambda: torch.nn.GroupNorm(2, 4), (3, 4, 2, 3)),
    (lambda: nn.RMSNorm((3, 4)), lambda: torch.nn.RMSNorm((3, 4)), (2, 3, 4)),
    (lambda: nn.RMSNorm(5, eps=1e-3, elementwise_affine=False),
     lambda: torch.nn.RMSNorm(5, eps=1e-3, elementwise_affine=False), (4, 5))])
def test_norm_modules_train_then_eval(ours, theirs, shape):
    m, t = ours(), theirs()
    with torch.no_grad():
        for p in t.parameters():
            p.copy_(torch.randn(p.shape))
    m.load_state_dict(t.state_dict())
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in t.named_parameters()]
    x = _rand(shape, 6) * 2 + 1
    xa = ad.Tensor(x, requires_grad=True)
    y = m(xa)
    g = _rand(shape, 7)
    y.backward(ad.Tensor(g))
    gx = xa.grad
    pg = {k: p.grad for k, p in m.named_parameters()}
    ad.execute()
    xt = torch.tensor(x, requires_grad=True)
    yt = t(xt)
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gx.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-4)
    for k, p in t.named_parameters():
        np.testing.assert_allclose(pg[k].numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-4)
    for k, v in t.state_dict().items():
        np.testing.assert_allclose(m.state_dict()[k], v.numpy(), rtol=1e-5, atol=1e-6)
    m.eval()
    t.eval()
    y = m(ad.Tensor(x))
    ad.execute()
    np.testing.assert_allclose(y.numpy(), t(torch.tensor(x)).detach().numpy(), rtol=1e-4,
                               atol=1e-5)


def test_rms_norm_functional():
    check_op([(3, 4, 5), (4, 5)], lambda x, w: TF.rms_norm(x, (4, 5), w),
             lambda x, w: F.rms_norm(x, (4, 5), w))
