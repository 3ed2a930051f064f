"""The rest of ``torch.nn.functional`` against PyTorch: channel and alpha dropout (random
masks drawn on the device: statistics and the eval-mode identity, not exact values), the
in-place activations (``relu_``...), ``sigmoid``/``tanh``, ``gumbel_softmax``,
``bilinear``, ``pdist``, ``embedding_bag``, the deprecated ``upsample_*`` helpers. Values
and gradients against torch (and float64 finite differences) with ``check_op``'s
tolerances."""
from __future__ import annotations

import math
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
from op_helper import check_op, rand_inputs  # noqa: E402

torch.set_num_threads(1)
ALPHA = 1.7580993408473766


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# -- channel dropout -------------------------------------------------------------------------
@pytest.mark.parametrize("fn,shape,lead", [
    (F.dropout1d, (40, 50, 7), 2), (F.dropout1d, (300, 7), 1),            # unbatched
    (F.dropout2d, (40, 50, 3, 4), 2), (F.dropout3d, (40, 50, 2, 3, 2), 2),
    (F.dropout3d, (300, 2, 3, 2), 1)])                                      # unbatched
def test_channel_dropout_zeroes_whole_channels(fn, shape, lead):
    p = 0.3
    x = np.random.default_rng(0).uniform(0.5, 1.5, shape).astype(np.float32)
    xa = ad.Tensor(x, requires_grad=True)
    y = fn(xa, p, seed=11)
    y.backward(ad.Tensor(np.ones(shape, np.float32)))
    g = xa.grad
    ad.execute()
    v, gv = y.numpy(), g.numpy()
    kept = (v != 0).reshape(*shape[:lead], -1)
    assert (kept.all(-1) | ~kept.any(-1)).all()                   # a channel is all or none
    frac = 1 - kept[..., 0].mean()
    assert abs(frac - p) < 0.03, frac
    np.testing.assert_allclose(v[v != 0], x[v != 0] / (1 - p), rtol=1e-6)
    np.testing.assert_allclose(gv, (v != 0) / (1 - p), rtol=1e-6)  # the scaled mask
    xt = ad.Tensor(x)
    assert fn(xt, p, training=False) is xt and fn(xt, 0.0) is xt


@pytest.mark.filterwarnings("ignore:.*Received a 3D input to dropout2d")
def test_functional_dropout_inplace():
    x = ad.Tensor(np.ones((50, 40, 3), np.float32), requires_grad=True)
    y = x * 1.0
    for fn in (F.dropout1d, F.dropout2d, F.alpha_dropout, F.feature_alpha_dropout):
        z = y * 1.0
        assert fn(z, 0.5, True, True, seed=2) is z
    with pytest.raises(RuntimeError, match="leaf"):
        F.dropout1d(x, 0.5, True, True)
    w = y * 1.0
    out = F.dropout1d(w, 0.5, True, False, seed=2)
    assert out is not w
    ad.execute()
    assert (out.numpy() == 0).any() and (w.numpy() == 1).all()


def test_channel_dropout_ranks_warnings_and_errors():
    x = ad.Tensor(np.ones((2, 3, 4, 5), np.float32))
    with pytest.raises(RuntimeError, match="dropout1d: Expected 2D or 3D input"):
        F.dropout1d(x)
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.dropout2d(x, 1.5)
    with pytest.warns(UserWarning, match="interpreted as shape .N, C, L."):
        y = F.dropout2d(ad.Tensor(np.ones((30, 40, 5), np.float32)), 0.5, seed=1)
    with pytest.warns(UserWarning, match="dropout3d: Received a 3-D input"):
        F.dropout3d(ad.Tensor(np.ones((3, 4, 5), np.float32)), 0.5)
    z = F.dropout2d(x, 1.0)
    ad.execute()
    v = y.numpy()                                   # PyTorch's (N, C, L) reading of 3-D
    assert ((v == 0).all(-1) | (v != 0).all(-1)).all() and 0.3 < (v == 0).mean() < 0.7
    assert not z.numpy().any()
    with pytest.raises(RuntimeError):                # the modules: torch's type too
        nn.Dropout1d()(x)


# -- alpha dropout ---------------------------------------------------------------------------
@pytest.mark.parametrize("p", [0.1, 0.5])
def test_alpha_dropout_keeps_zero_mean_unit_variance(p):
    n = 400_000
    x = _rand((n,), 1)
    xa = ad.Tensor(x, requires_grad=True)
    y = F.alpha_dropout(xa, p, training=True, seed=5)
    y.backward(ad.Tensor(np.ones(n, np.float32)))
    g = xa.grad
    ad.execute()
    v, gv = y.numpy(), g.numpy()
    a = 1 / math.sqrt((ALPHA ** 2 * p + 1) * (1 - p))
    dropped = np.isclose(v, ALPHA * a * (p - 1), rtol=0, atol=1e-6) & (gv == 0)
    assert abs(dropped.mean() - p) < 0.005, dropped.mean()
    np.testing.assert_allclose(v[~dropped], a * x[~dropped] + ALPHA * a * p, rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(gv[~dropped], a, rtol=1e-6)
    assert abs(v.mean()) < 0.01 and abs(v.var() - 1) < 0.01
    # torch's own alpha dropout has the same statistics
    t = TF.alpha_dropout(torch.tensor(x), p, training=True).numpy()
    assert abs(t.mean() - v.mean()) < 0.01 and abs(t.var() - v.var()) < 0.01


def test_feature_alpha_dropout_and_modules():
    x = _rand((60, 50, 4), 2)
    y = F.feature_alpha_dropout(ad.Tensor(x), 0.4, training=True, seed=3)
    m, fm = nn.AlphaDropout(0.2, seed=1), nn.FeatureAlphaDropout(0.3, seed=2)
    ym, yfm = m(ad.Tensor(x)), fm(ad.Tensor(x))
    ad.execute()
    for out, p in ((y.numpy(), 0.4), (yfm.numpy(), 0.3)):
        a = 1 / math.sqrt((ALPHA ** 2 * p + 1) * (1 - p))
        dropped = np.isclose(out, ALPHA * a * (p - 1), rtol=0, atol=1e-6)
        assert (dropped.all(-1) | ~dropped.any(-1)).all()        # whole channels
        assert abs(dropped[..., 0].mean() - p) < 0.04
    assert abs(np.isclose(ym.numpy(), ALPHA * (0.2 - 1) / math.sqrt(
        (ALPHA ** 2 * 0.2 + 1) * 0.8), atol=1e-6).mean() - 0.2) < 0.02
    xt = ad.Tensor(x)
    m.eval(), fm.eval()
    assert m(xt) is xt and fm(xt) is xt                           # eval: the identity
    assert F.alpha_dropout(xt, 0.5) is xt                         # torch's training=False
    assert F.feature_alpha_dropout(xt, 0.5) is xt
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        F.feature_alpha_dropout(ad.Tensor(np.ones(4, np.float32)), 0.5, training=True)
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.AlphaDropout(-0.1)
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.alpha_dropout(xt, 2.0, True)
    assert repr(nn.AlphaDropout(0.2)) == repr(torch.nn.AlphaDropout(0.2))


def test_alpha_dropout_masks_are_new_every_iteration():
    drop, seen = nn.AlphaDropout(0.5, seed=4), []

    def body():
        ad.Receiver(lambda v: seen.append(v), [drop(ad.ones(1000))])

    ad.ir_for(range(2), body)
    ad.execute()
    assert (seen[0] != seen[1]).mean() > 0.3


# -- in-place activations and aliases --------------------------------------------------------
INPLACE = [("relu_", ()), ("elu_", (0.7,)), ("celu_", (1.3,)), ("selu_", ()),
           ("leaky_relu_", (0.2,)), ("hardtanh_", (-0.5, 0.8)), ("threshold_", (0.3, -2.0)),
           ("rrelu_", (0.1, 0.3, False))]


@pytest.mark.parametrize("name,args", INPLACE)
def test_inplace_activation_matches_torch(name, args):
    """``y = x * 1.5; F.<name>(y, ...); (y * w).sum()``: the in-place result, returned
    object and the gradient reaching ``x``, against the same program in torch."""
    def program(lib, fn, x):
        y = x * 1.5
        out = fn(y, *args)
        assert out is y
        return y

    check_op([(3, 7)], lambda x: program(torch, getattr(TF, name), x),
             lambda x: program(ad, getattr(F, name), x),
             avoid=(0.0, 0.2, -0.5 / 1.5, 0.8 / 1.5))


def test_inplace_on_variables_views_and_leaves():
    data = _rand((2, 5), 3)
    v = ad.Tensor(data.copy())
    F.relu_(v[0])                                   # a view writes back into its base
    F.leaky_relu_(v, 0.5)
    w = ad.Tensor(data.copy(), requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        F.elu_(w)
    ad.execute()
    t = torch.tensor(data.copy())
    TF.relu_(t[0])
    TF.leaky_relu_(t, 0.5)
    np.testing.assert_allclose(v.numpy(), t.numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError):
        TF.elu_(torch.tensor(data, requires_grad=True))


def test_rrelu_inplace_training_draws_slopes():
    x = ad.Tensor(-np.ones(2000, np.float32))
    y = x * 1.0
    F.rrelu_(y, 0.1, 0.3, True)
    ad.execute()
    slopes = -y.numpy()
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and slopes.std() > 0.03


def test_sigmoid_tanh_and_channel_shuffle_aliases():
    check_op([(3, 4)], TF.sigmoid, F.sigmoid)
    check_op([(3, 4)], TF.tanh, F.tanh)
    check_op([(2, 6, 3)], lambda x: TF.native_channel_shuffle(x, 3),     # torch: no grad
             lambda x: F.native_channel_shuffle(x, 3), forward_only=True)


@pytest.mark.filterwarnings("ignore:.*is deprecated")
def test_upsample_helpers():
    check_op([(1, 2, 3, 4)], lambda x: TF.upsample_nearest(x, scale_factor=2),
             lambda x: F.upsample_nearest(x, scale_factor=2))
    check_op([(1, 2, 3, 4)], lambda x: TF.upsample_bilinear(x, size=(5, 7)),
             lambda x: F.upsample_bilinear(x, size=(5, 7)))


# -- gumbel softmax --------------------------------------------------------------------------
def test_gumbel_softmax_samples_the_categorical():
    """Gumbel-max: the argmax of ``logits + g`` is distributed as ``softmax(logits)``; the
    soft sample is a distribution; the hard one is one-hot, with the soft gradient."""
    logits = np.log(np.array([0.1, 0.2, 0.3, 0.4], np.float32))
    n = 100_000
    la = ad.Tensor(np.tile(logits, (n, 1)), requires_grad=True)
    hard = F.gumbel_softmax(la, tau=0.5, hard=True, seed=7)
    soft = F.gumbel_softmax(la, tau=0.5, seed=7)                 # the same draws
    w = ad.Tensor(_rand((n, 4), 1))
    (hard * w).sum().backward()
    g_hard = la.grad
    la2 = ad.Tensor(np.tile(logits, (n, 1)), requires_grad=True)
    (F.gumbel_softmax(la2, tau=0.5, seed=7) * w).sum().backward()
    g_soft = la2.grad
    ad.execute()
    h, s = hard.numpy(), soft.numpy()
    assert set(np.unique(h)) == {0.0, 1.0} and (h.sum(1) == 1).all()
    np.testing.assert_allclose(s.sum(1), 1, rtol=1e-5)
    np.testing.assert_array_equal(h.argmax(1), s.argmax(1))
    np.testing.assert_allclose(h.mean(0), [0.1, 0.2, 0.3, 0.4], atol=0.006)
    np.testing.assert_allclose(g_hard.numpy(), g_soft.numpy(), rtol=1e-5, atol=1e-6)
    # torch's soft samples have the same mean
    t = TF.gumbel_softmax(torch.tensor(np.tile(logits, (n, 1))), tau=0.5).numpy()
    np.testing.assert_allclose(s.mean(0), t.mean(0), atol=0.006)


def test_gumbel_softmax_dim_and_eps_warning():
    x = ad.Tensor(_rand((3, 5, 2), 2))
    y = F.gumbel_softmax(x, hard=True, dim=1)
    with pytest.warns(UserWarning, match="eps"):
        F.gumbel_softmax(x, eps=1e-3)
    ad.execute()
    assert (y.numpy().sum(1) == 1).all()


# -- bilinear, pdist, embedding_bag ----------------------------------------------------------
@pytest.mark.parametrize("s1,s2,w,bias", [((4, 3), (4, 5), (2, 3, 5), True),
                                          ((2, 3, 3), (2, 3, 4), (5, 3, 4), False),
                                          ((3,), (2,), (4, 3, 2), True)])
def test_bilinear(s1, s2, w, bias):
    shapes = [s1, s2, w] + ([(w[0],)] if bias else [])
    check_op(shapes, TF.bilinear, F.bilinear)
    m, t = nn.Bilinear(*w[1:], w[0], bias=bias), torch.nn.Bilinear(*w[1:], w[0], bias=bias)
    m.load_state_dict(t.state_dict())
    a, b = _rand(s1, 1), _rand(s2, 2)
    y = m(ad.Tensor(a), ad.Tensor(b))
    ad.execute()
    np.testing.assert_allclose(y.numpy(), t(torch.tensor(a), torch.tensor(b)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_bilinear_errors():
    with pytest.raises(RuntimeError, match="bilinear"):
        F.bilinear(ad.Tensor(_rand((2, 3), 0)), ad.Tensor(_rand((2, 4), 0)),
                   ad.Tensor(_rand((5, 3, 3), 0)))
    with pytest.raises(RuntimeError, match="bilinear"):
        F.bilinear(ad.Tensor(_rand((2, 3), 0)), ad.Tensor(_rand((3, 3), 0)),
                   ad.Tensor(_rand((5, 3, 3), 0)))


@pytest.mark.parametrize("p", [2, 1, 3, 0.5, math.inf])
def test_pdist(p):
    check_op([(5, 3)], lambda x: TF.pdist(x, p), lambda x: F.pdist(x, p))


def test_pdist_zero_norm_single_row_and_errors():
    check_op([(4, 3)], lambda x: TF.pdist(x, 0), lambda x: F.pdist(x, 0), forward_only=True)
    y = F.pdist(ad.Tensor(_rand((1, 3), 0)))
    assert y.shape == (0,)
    with pytest.raises(RuntimeError, match="2D"):
        F.pdist(ad.Tensor(_rand((2, 3, 4), 0)))
    with pytest.raises(RuntimeError, match="non-negative"):
        F.pdist(ad.Tensor(_rand((3, 4), 0)), -1)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_functional(mode):
    idx2 = np.array([[1, 2, 4], [2, 2, 2], [6, 0, 1]])
    flat, offs = np.array([1, 2, 4, 5, 2, 6, 0]), np.array([0, 3, 3, 5])
    w = rand_inputs([(7, 3)], 2)[0]
    check_op([(7, 3)], lambda t, i: TF.embedding_bag(i, t, mode=mode),
             lambda t, i: F.embedding_bag(i, t, mode=mode), inputs=[w, idx2])
    check_op([(7, 3)], lambda t, i: TF.embedding_bag(i, t, torch.tensor(offs), mode=mode,
                                                       padding_idx=2),
             lambda t, i: F.embedding_bag(i, t, offs, mode=mode, padding_idx=2),
             inputs=[w, flat])
    if mode == "sum":
        psw = np.random.default_rng(3).uniform(0.5, 2, idx2.shape).astype(np.float32)
        check_op([(7, 3)], lambda t, i, s: TF.embedding_bag(i, t, per_sample_weights=s,
                                                           mode="sum"),
                 lambda t, i, s: F.embedding_bag(i, t, per_sample_weights=s, mode="sum"),
                 inputs=[w, idx2, psw])
        check_op([(7, 3)], lambda t, i: TF.embedding_bag(i, t, torch.tensor(np.r_[offs, 7]),
                                                           mode="sum", include_last_offset=True),
                 lambda t, i: F.embedding_bag(i, t, np.r_[offs, 7], mode="sum",
                                              include_last_offset=True),
                 inputs=[w, flat])


def test_embedding_bag_functional_errors():
    w = ad.Tensor(_rand((7, 3), 0))
    idx = ad.Tensor(np.array([[1, 2], [3, 4]]))
    with pytest.raises(ValueError, match="mode has to be one of"):
        F.embedding_bag(idx, w, mode="min")
    with pytest.raises(ValueError, match="offsets has to be None"):
        F.embedding_bag(idx, w, [0, 1])
    with pytest.raises(ValueError, match="2D Tensor"):
        F.embedding_bag(idx, ad.Tensor(_rand((7,), 0)))
    with pytest.raises(NotImplementedError, match="only supported for mode='sum'"):
        F.embedding_bag(idx, w, per_sample_weights=ad.Tensor(np.ones((2, 2), np.float32)))
    with pytest.raises(ValueError, match="same shape as the input"):
        F.embedding_bag(idx, w, mode="sum",
                        per_sample_weights=ad.Tensor(np.ones((2, 3), np.float32)))
