"""The PyTorch-breadth ops on the OpenCL and TVM devices: every op at least once, forward
and backward, against PyTorch, float64 finite differences and the numpy reference device
(:func:`op_helper.check_op` with ``device=``). Ops are grouped, several per traced program
(results flattened and concatenated), so that each device compiles few programs."""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "graph"))

import autodiff as ad  # noqa: E402
import autodiff.nn.functional as F  # noqa: E402
from op_helper import check_op, rand_inputs  # noqa: E402


def _opencl_missing():
    from autodiff.device.opencl.device import OpenCLUnavailable, candidates
    try:
        candidates()
    except OpenCLUnavailable as e:
        return f"no OpenCL platform: {e}"
    return None


def _tvm_missing():
    try:
        import tvm  # noqa: F401
    except ImportError:
        return "the tvm device needs the [tvm] extra"
    return None


DEVICES = [pytest.param("opencl", marks=pytest.mark.skipif(bool(_opencl_missing()),
                                                           reason=str(_opencl_missing()))),
           pytest.param("tvm", marks=pytest.mark.skipif(bool(_tvm_missing()),
                                                        reason=str(_tvm_missing())))]
pytestmark = pytest.mark.parametrize("dev", DEVICES)


def both(fn):
    """``fn(lib, *xs)`` as a torch function and an autodiff function."""
    return (lambda *xs: fn(torch, *xs)), (lambda *xs: fn(ad, *xs))


def cat(lib, parts):
    """One flat float output from several parts (index and mask parts converted)."""
    if lib is torch:
        dt = torch.float64 if any(p.dtype == torch.float64 for p in parts) else torch.float32
        return torch.cat([p.to(dt).reshape(-1) for p in parts], 0)
    return ad.cat([p.float().reshape(-1) for p in parts], 0)


def check(dev, shapes, fn, **kw):
    t, a = both(fn)
    kw.setdefault("torch_dtype", torch.float64)
    return check_op(shapes, t, a, device=dev, **kw)


def test_unary_smooth(dev):
    check(dev, [(3, 5)], lambda lib, x: cat(lib, [
        x.tan(), x.asin(), x.acos(), x.atan(), x.sinh(), x.cosh(), x.asinh(), x.atanh(),
        (x + 2.0).acosh(), (x + 1.5).log10(), x.log1p(), x.expm1(), x.square(),
        (x.abs() + 0.5).rsqrt(), x.xlogy(x.abs() + 0.5), x.logaddexp(x * 2.0 - 0.3),
        x.logaddexp2(x * -1.5)]), low=-0.9, high=0.9, avoid=(0.0,), margin=0.05)


def test_unary_piecewise(dev):
    check(dev, [(4, 5)], lambda lib, x: cat(lib, [
        x.floor() * x, x.ceil() * x, x.round() * x, x.trunc() * x, x.frac(), x.sign() * x,
        x.sgn() * x, x.clamp(-1.0, 0.5), x.clamp_min(-0.5), x.clamp_max(0.5), x.clip(max=0.3),
        x.nan_to_num(), x.fmod(1.5), x.remainder(-1.5), x.reciprocal(), x.neg(),
        x.negative()]), low=-2.9, high=2.9,
        avoid=(-2, -1.5, -1, -0.5, 0, 0.3, 0.5, 1, 1.5, 2, 2.5, -2.5), margin=0.04)


def test_binary(dev):
    rng = np.random.default_rng(1)
    b = rng.choice([-1.7, -0.8, 0.9, 1.3], (3, 4)).astype(np.float32)
    q = np.floor(rng.uniform(-3, 3, (3, 4))) + rng.uniform(0.15, 0.85, (3, 4))
    a = (q * b).astype(np.float32)
    w, = rand_inputs([(4,)], seed=2)
    t, a_ = both(lambda lib, x, y, z: cat(lib, [
        x.atan2(y), x.hypot(y), x.copysign(y), x.maximum(y), x.minimum(y), x.fmax(y),
        x.fmin(y), x.lerp(y, 0.3), x.lerp(y, z), x.clamp(min=y), x.clamp(max=y), x.fmod(y),
        x.remainder(y), x.clamp(y.minimum(z) - 0.1, y.maximum(z) + 0.1)]))
    check_op(None, t, a_, inputs=[a, b, w], device=dev, torch_dtype=torch.float64)


SPECIAL = np.array([-np.inf, -3.5, -2.5, -1.0, -0.5, -0.0, 0.0, 0.5, 2.5, 30.0, np.inf,
                    np.nan], np.float32)


def test_special_values(dev):
    check(dev, None, lambda lib, x: cat(lib, [
        x.isnan(), x.isinf(), x.isfinite(), x.isposinf(), x.isneginf(), x.nan_to_num(),
        x.nan_to_num(1.0, 9.0, -9.0), x.floor(), x.ceil(), x.round(), x.trunc(), x.sign(),
        x.atan(), x.expm1(), x.tanh(), x.isclose(x * 1.0000001), x.sinh(), x.asinh()]),
        inputs=[SPECIAL], forward_only=True, torch_dtype=torch.float32)


def test_tanh_saturates_and_gelu_tanh_matches_torch(dev):
    x = np.array([-1e4, -500.0, -20.0, -9.5, -9.02, -3.0, 0.0, 3.0, 9.02, 9.5, 20.0, 500.0,
                  1e4], np.float32)
    out = check_op(None, torch.tanh, lambda t: t.tanh(), inputs=[x], forward_only=True,
                   device=dev)
    assert (out[:5] == -1.0).all() and (out[-5:] == 1.0).all()
    check_op(None, lambda t: TF.gelu(t, approximate="tanh"),
             lambda t: F.gelu(t, approximate="tanh"), inputs=[x], forward_only=True,
             device=dev, fwd_rtol=1e-6, fwd_atol=1e-6)


def test_movement(dev):
    check(dev, [(2, 3, 6)], lambda lib, x: cat(lib, [
        x[:, ::2], x[..., 1::3], x[1, None, ::2], x.flip(-1), x.flip(0, 2)[:, 1::2],
        x.roll(2, 1), x.roll((-1, 3), (0, -1)), x.roll(4), x.repeat(2, 1, 1, 2),
        x[0].tile((2,)), x.repeat_interleave(2, 1), x[0, 0].repeat_interleave(2),
        x.unflatten(2, (2, -1)), x.flatten(1, 2), x.movedim(0, -1), x.moveaxis((0, 1), (2, 0)),
        x.swapaxes(0, 2), x.swapdims(-1, 1), x.diagonal(0, 1, 2), x[0].diagonal(1),
        x.diagonal(-1, -1, 1), x[0].diag(), x[0, 0].diag(), x[0, 0, :3].diag(-1),
        x[0].diag_embed(), x[0].diag_embed(1, 0, 2), x.narrow(2, 1, 3), x.narrow(-1, -3, 2),
        x.squeeze(0), x[:1].squeeze((0, 2)), x.unsqueeze(-1), x[0].t(), x[0, 0].T,
        x[0, :, :3].tril(), x.triu(1), x.tril(-1), x[0, 0].expand_as(x),
        x.view_as(x.reshape(-1)), lib.fliplr(x[0]), lib.flipud(x[0])]))


def test_split_stack_meshgrid(dev):
    check(dev, [(4, 5)], lambda lib, x: cat(lib, [
        *x.split(2, 1), *x.split([1, 3, 1], -1), *x.chunk(3, 0), *x.unbind(1),
        lib.stack([x, x * 2.0], -1), lib.cat([x, x[:0], x * 2.0], 0),
        *lib.meshgrid(x[0], x[1, :2], indexing="ij"),
        *lib.meshgrid(x[0], x[1, :2], x[2, :3], indexing="xy")]))


def test_einsum(dev):
    check(dev, [(2, 3, 4), (4, 5), (3, 3), (2, 5, 4)], lambda lib, a, b, c, d: cat(lib, [
        lib.einsum("bij,jk->bik", a, b), lib.einsum("ii->i", c), lib.einsum("ij->ji", c),
        lib.einsum("bij,bkj->bik", a, d), lib.einsum("...j,jk", a, b),
        lib.einsum("ijk,kl,ij->l", a, b, c[:2]), lib.einsum("i,j->ij", b[0], b[1])]))


def test_reductions(dev):
    check(dev, [(3, 4, 5)], lambda lib, x: cat(lib, [
        x.sum(()), x.sum(axis=1), x.mean(dim=(0, -1), keepdim=True),
        (x * 0.3 + 1.0).prod(), (x * 0.3 + 1.0).prod(1), x.std(), x.std(1, keepdim=True),
        x.var(dim=2, correction=0), *x.var_mean(1), *x.std_mean((0, 1)), x.logsumexp(1),
        x.logsumexp((0, 2), keepdim=True), x.norm(), x.norm(2, dim=1), x.norm(1),
        x.norm(float("inf"), dim=-1), x.norm(-float("inf")), x.norm(3, dim=0),
        x.amax((0, 2)), x.amin(axis=1), x.max(1).values, x.min(0)[0]]))


def test_scans_and_sorting(dev):
    check(dev, [(3, 9)], lambda lib, x: cat(lib, [
        x.cumsum(1), x.cumsum(0), (x * 0.3 + 1.0).cumprod(1), x.logcumsumexp(1),
        x.cummax(1).values, x.cummin(0)[0], x.sort(1).values,
        x.sort(0, descending=True).values, x.msort(), x.topk(3).values,
        x.topk(2, dim=0, largest=False)[0]]))


def test_long_cumsum_two_stages(dev):
    check(dev, [(1, 700)], lambda lib, x: x.cumsum(1), fd=False, fwd_atol=1e-3)


def test_index_results(dev):
    check(dev, [(3, 7)], lambda lib, x: cat(lib, [
        x.argmax(), x.argmax(1), x.argmin(dim=0, keepdim=True), x.max(1).indices,
        x.argsort(1), x.argsort(0, descending=True), x.sort(1).indices, x.topk(3).indices,
        x.cummax(1).indices, x.cummin(0).indices, x.relu().count_nonzero(1),
        x.any(1), x.all(), (x > -1.0).all(0), (x > 5.0).any()]), forward_only=True)


def _set(lib, x, key, value):
    y = x * 1.0
    y[key] = value
    return y


def test_indexing(dev):
    x, = rand_inputs([(4, 5)], seed=3)
    idx = np.array([3, 0, 0, 2], np.int32)
    g = np.array([[0, 2, 2], [1, 0, 4], [3, 3, 1], [4, 0, 0]], np.int32)
    t, a = both(lambda lib, x, i, j: cat(lib, [
        x[[0, 2, 2]], x[:, [3, 0, 1]], x[[0, 1], [4, 2]], x[np.array([True, False, True,
                                                                        False])],
        x[i], x[:, i], x[i, 1:3], x[i, i], x[..., i[:2]],
        _set(lib, x, (slice(None), slice(1, 3)), x[:, :2] * 3.0),
        _set(lib, x, (slice(None), slice(None, None, 2)), 0.5), _set(lib, x, ([0, 2],), -1.0),
        _set(lib, x, i[:2], x[0] * 2.0),
        x.index_select(1, i), x.gather(1, j), x.take_along_dim(j, 1), x.take_along_dim(i),
        x.scatter(1, j[:, :2], x[:, :2] * 2.0 + 1.0), x.scatter(0, j[:1], 2.5),
        x.scatter_add(1, j, x[:, :3].exp()), x.index_add(0, i[:3], x[:3] * 3.0),
        x.scatter_reduce(1, j, x[:, 1:4], "sum"), x.scatter_reduce(1, j, x[:, 1:4], "mean"),
        x.scatter_reduce(1, j, x[:, 1:4] * 2.0, "amax"),
        x.scatter_reduce(1, j, x[:, 1:4], "amin", include_self=False),
        x.masked_fill(x > 0.5, -1.5)]))
    check_op(None, t, a, inputs=[x, idx, g], device=dev, torch_dtype=torch.float64)


def test_functional(dev):
    x, y = rand_inputs([(4, 6), (4, 6)], seed=4, low=-4.0, high=4.0,
                       avoid=(0, -1, 1, -3, 3, 6, -2, 0.5, 1.5), margin=0.05)
    p, = rand_inputs([(4, 6)], seed=5, low=0.05, high=0.95)
    tgt = np.array([2, 0, 5, 1], np.int32)
    w = np.linspace(0.5, 2.0, 6).astype(np.float32)

    def fn(lib, x, y, p, t):
        f = TF if lib is torch else F
        wt = torch.tensor(w, dtype=torch.float64) if lib is torch else ad.Tensor(w)
        return cat(lib, [
            f.leaky_relu(x, 0.2), f.elu(x), f.celu(x, 2.0), f.selu(x), f.silu(x), f.mish(x),
            f.softplus(x), f.softplus(x, 2.0, 3.0), f.softsign(x), f.hardtanh(x),
            f.hardtanh(x, -2.0, 0.5), f.relu6(x * 2.0), f.hardsigmoid(x), f.hardswish(x),
            f.logsigmoid(x), f.softmin(x, 1), f.glu(x, 1), f.normalize(x, 2.0, 1),
            f.cosine_similarity(x, y, 1), f.nll_loss(x.log_softmax(1), t, wt),
            f.cross_entropy(x, t, wt, label_smoothing=0.2),
            f.cross_entropy(x, t, reduction="none"),
            f.binary_cross_entropy(p, (y > 0).double() if lib is torch else (y > 0).float()),
            f.binary_cross_entropy_with_logits(x, p, pos_weight=wt),
            f.l1_loss(x, y), f.smooth_l1_loss(x, y, beta=0.5), f.huber_loss(x, y, delta=0.3),
            f.kl_div(x.log_softmax(1), p, reduction="batchmean"),
            f.kl_div(x.log_softmax(1), p.log(), log_target=True)])
    t_, a_ = both(fn)
    check_op(None, t_, a_, inputs=[x, y, p, tgt], device=dev, torch_dtype=torch.float64)


def test_creation(dev):
    tri = ad.ones(3, 4).tril(1)
    outs = [ad.arange(5), ad.arange(-1.5, 2.0, 0.5), ad.linspace(-2.0, 3.0, 7), ad.eye(3, 4),
            ad.full((2, 3), 1.5), tri, F.one_hot(ad.Tensor(np.array([0, 3, 2], np.int32)), 4),
            ad.zeros_like(tri) + ad.ones_like(tri) * ad.full_like(tri, 2.0)]
    refs = [torch.arange(5), torch.arange(-1.5, 2.0, 0.5), torch.linspace(-2.0, 3.0, 7),
            torch.eye(3, 4), torch.full((2, 3), 1.5), torch.ones(3, 4).tril(1),
            TF.one_hot(torch.tensor([0, 3, 2]), 4), torch.full((3, 4), 2.0)]
    noise = ad.randn_like(ad.zeros(4000)), ad.rand_like(ad.zeros(4000))
    ad.execute(device=dev)
    for o, r in zip(outs, refs):
        np.testing.assert_allclose(o.numpy(), r.numpy(), rtol=1e-6, atol=1e-6)
    z, u = (n.numpy() for n in noise)
    assert abs(z.mean()) < 0.1 and abs(z.std() - 1.0) < 0.1
    assert 0.0 <= u.min() and u.max() < 1.0


def test_zero_size_tensors(dev):
    """Ops on tensors with a zero-size dim run (and give PyTorch's empty results)."""
    check(dev, [(0, 3), (3,)], lambda lib, x, y: cat(lib, [
        x, x.exp(), x + y, x[:, ::2], x.flip(0), x.cumsum(0), x.sort(0).values,
        x.sum(0), x.sum(1), (x @ y.unsqueeze(1)), x.T @ x, x.prod(0), x.logsumexp(1),
        x.repeat(2, 1), lib.cat([x, x], 0), x[:, [0, 2]], x.reshape(3, 0),
        x.gather(1, x.long() if lib is torch else x.int()), y[:0].cumprod(0),
        x.softmax(1), x.tril(), y[:0].diag(), x.any(0), x.all(0)]))
