"""``autodiff.nn.functional`` activations and losses against ``torch.nn.functional``
(float64 reference) and float64 finite differences, forward and backward."""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import autodiff as ad
import autodiff.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "graph"))
from op_helper import check_op, rand_inputs  # noqa: E402

F64 = torch.float64
PM = (-4.0, 4.0)

# name, kwargs, (low, high), kinks to keep away from
ACTIVATIONS = [
    ("leaky_relu", {}, PM, (0,)),
    ("leaky_relu", {"negative_slope": 0.2}, PM, (0,)),
    ("elu", {}, PM, (0,)),
    ("elu", {"alpha": 0.5}, PM, (0,)),
    ("celu", {"alpha": 2.0}, PM, (0,)),
    ("selu", {}, PM, (0,)),
    ("silu", {}, PM, ()),
    ("mish", {}, PM, ()),
    ("softplus", {}, PM, ()),
    ("softplus", {"beta": 2.0, "threshold": 3.0}, PM, (1.5,)),
    ("softsign", {}, PM, ()),
    ("hardtanh", {}, PM, (-1, 1)),
    ("hardtanh", {"min_val": -2.0, "max_val": 0.5}, PM, (-2, 0.5)),
    ("relu6", {}, (-3.0, 8.0), (0, 6)),
    ("hardsigmoid", {}, PM, (-3, 3)),
    ("hardswish", {}, PM, (-3, 3)),
    ("logsigmoid", {}, PM, ()),
]


@pytest.mark.parametrize("shape", [(3, 5), ()], ids=str)
@pytest.mark.parametrize("name,kw,rng,avoid", ACTIVATIONS,
                         ids=[f"{a[0]}{i}" for i, a in enumerate(ACTIVATIONS)])
def test_activation(name, kw, rng, avoid, shape):
    check_op([shape], lambda x: getattr(TF, name)(x, **kw),
             lambda x: getattr(F, name)(x, **kw), low=rng[0], high=rng[1],
             avoid=avoid or (-99,), torch_dtype=F64)


def test_activations_extreme_inputs_stay_finite():
    x = np.array([-1e4, -100.0, -30.0, 0.0, 30.0, 100.0, 1e4], np.float32)
    for name in ("elu", "selu", "celu", "softplus", "logsigmoid", "mish", "silu"):
        ad.reset()
        out = check_op(None, lambda t: getattr(TF, name)(t), lambda t: getattr(F, name)(t),
                       inputs=[x], fd=False)
        assert np.isfinite(out).all(), name


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmin_glu(dim):
    check_op([(4, 6)], lambda x: TF.softmin(x, dim), lambda x: F.softmin(x, dim),
             torch_dtype=F64)
    check_op([(4, 6)], lambda x: TF.glu(x, dim), lambda x: F.glu(x, dim), torch_dtype=F64)


def test_glu_odd_dim_raises():
    with pytest.raises(RuntimeError):
        F.glu(ad.randn(3, 5))


@pytest.mark.parametrize("p,dim", [(2.0, 1), (1.0, 0), (3.0, -1)])
def test_normalize(p, dim):
    check_op([(3, 4)], lambda x: TF.normalize(x, p, dim), lambda x: F.normalize(x, p, dim),
             torch_dtype=F64)


def test_normalize_tiny_vector_uses_eps():
    x = np.array([[1e-14, 0.0, 2e-14], [1.0, 2.0, 3.0]], np.float32)
    check_op(None, TF.normalize, F.normalize, inputs=[x], fd=False)


@pytest.mark.parametrize("sa,sb,dim", [((3, 4), (3, 4), 1), ((2, 3, 4), (3, 4), -1),
                                       ((5,), (5,), 0)])
def test_cosine_similarity(sa, sb, dim):
    check_op([sa, sb], lambda a, b: TF.cosine_similarity(a, b, dim),
             lambda a, b: F.cosine_similarity(a, b, dim), torch_dtype=F64)


def test_cosine_similarity_small_norms_like_torch():
    a = np.array([[1e-5, 0.0], [1e-9, 0.0]], np.float32)
    b = np.array([[1e-5, 0.0], [3.0, 0.0]], np.float32)
    check_op(None, TF.cosine_similarity, F.cosine_similarity, inputs=[a, b], fd=False)


# -- losses ---------------------------------------------------------------------------------
RED = ["mean", "sum", "none"]


@pytest.mark.parametrize("reduction", RED)
def test_regression_losses(reduction):
    x, t = rand_inputs([(3, 4), (3, 4)], seed=1)
    t = t + 0.05                                                # no |x - t| = 0 kinks
    for name, kw in [("l1_loss", {}), ("smooth_l1_loss", {}), ("smooth_l1_loss", {"beta": 0.5}),
                     ("smooth_l1_loss", {"beta": 0.0}), ("huber_loss", {}),
                     ("huber_loss", {"delta": 0.3}), ("mse_loss", {})]:
        ad.reset()
        check_op(None, lambda a, b: getattr(TF, name)(a, b, reduction=reduction, **kw),
                 lambda a, b: getattr(F, name)(a, b, reduction=reduction, **kw),
                 inputs=[x, t], torch_dtype=F64)


@pytest.mark.parametrize("reduction", RED)
def test_binary_cross_entropy(reduction):
    p, = rand_inputs([(3, 4)], seed=2, low=0.05, high=0.95)
    t, w = rand_inputs([(3, 4), (4,)], seed=3, low=0.0, high=1.0, avoid=())
    check_op(None, lambda a, b: TF.binary_cross_entropy(a, b, reduction=reduction),
             lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction), inputs=[p, t],
             torch_dtype=F64)
    check_op(None, lambda a, b: TF.binary_cross_entropy(a, b, torch.tensor(w, dtype=F64),
                                                       reduction=reduction),
             lambda a, b: F.binary_cross_entropy(a, b, ad.Tensor(w), reduction=reduction),
             inputs=[p, t], torch_dtype=F64)


def test_binary_cross_entropy_log_clamp():
    p = np.array([0.0, 1.0, 0.5], np.float32)
    t = np.array([1.0, 0.0, 1.0], np.float32)
    check_op(None, TF.binary_cross_entropy, F.binary_cross_entropy, inputs=[p, t],
             forward_only=True)


@pytest.mark.parametrize("reduction", RED)
def test_binary_cross_entropy_with_logits(reduction):
    x, = rand_inputs([(3, 4)], seed=4, low=-6.0, high=6.0)
    t, w, pw = rand_inputs([(3, 4), (3, 1), (4,)], seed=5, low=0.1, high=1.0, avoid=())
    check_op(None, lambda a, b: TF.binary_cross_entropy_with_logits(a, b, reduction=reduction),
             lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=reduction),
             inputs=[x, t], torch_dtype=F64)
    pw = pw * 3.0
    check_op(None, lambda a, b: TF.binary_cross_entropy_with_logits(
        a, b, torch.tensor(w, dtype=F64), reduction=reduction,
        pos_weight=torch.tensor(pw, dtype=F64)),
        lambda a, b: F.binary_cross_entropy_with_logits(a, b, ad.Tensor(w), reduction=reduction,
                                                        pos_weight=ad.Tensor(pw)),
        inputs=[x, t], torch_dtype=F64)


@pytest.mark.parametrize("reduction", RED + ["batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    x, = rand_inputs([(3, 4)], seed=6, low=-3.0, high=-0.1)
    t, = rand_inputs([(3, 4)], seed=7, low=0.05, high=1.0)
    if log_target:
        t = np.log(t)
    t[0, 0] = 0.0 if not log_target else t[0, 0]                 # xlogy(0, 0) = 0
    check_op(None, lambda a, b: TF.kl_div(a, b, reduction=reduction, log_target=log_target),
             lambda a, b: F.kl_div(a, b, reduction=reduction, log_target=log_target),
             inputs=[x, t], torch_dtype=F64)


TARGETS = np.array([2, 0, 4, 1, 4], np.int32)


@pytest.mark.parametrize("reduction", RED)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore", [-100, 4])
def test_nll_loss(reduction, weighted, ignore):
    x, w = rand_inputs([(5, 6), (6,)], seed=8, low=0.2, high=2.0)
    tw, aw = (torch.tensor(w, dtype=F64), ad.Tensor(w)) if weighted else (None, None)
    check_op(None, lambda a, t: TF.nll_loss(a, t, tw, ignore_index=ignore, reduction=reduction),
             lambda a, t: F.nll_loss(a, t, aw, ignore_index=ignore, reduction=reduction),
             inputs=[x, TARGETS], torch_dtype=F64)


@pytest.mark.parametrize("reduction", RED)
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_weights_and_label_smoothing(reduction, smoothing, weighted):
    x, w = rand_inputs([(5, 6), (6,)], seed=9, low=0.2, high=2.0)
    for ignore in (-100, 4):
        ad.reset()
        tw, aw = (torch.tensor(w, dtype=F64), ad.Tensor(w)) if weighted else (None, None)
        check_op(None, lambda a, t: TF.cross_entropy(
            a, t, tw, ignore_index=ignore, reduction=reduction, label_smoothing=smoothing),
            lambda a, t: F.cross_entropy(a, t, aw, ignore_index=ignore, reduction=reduction,
                                         label_smoothing=smoothing),
            inputs=[x, TARGETS], torch_dtype=F64)


def test_cross_entropy_spatial_and_probability_targets_with_weights():
    x, w = rand_inputs([(2, 3, 4), (3,)], seed=10, low=0.2, high=2.0)
    tw, aw = torch.tensor(w, dtype=F64), ad.Tensor(w)
    t = np.array([[0, 2, 1, 1], [2, 2, 0, 1]], np.int32)
    check_op(None, lambda a, b: TF.cross_entropy(a, b, tw, label_smoothing=0.1),
             lambda a, b: F.cross_entropy(a, b, aw, label_smoothing=0.1), inputs=[x, t],
             torch_dtype=F64)
    p, = rand_inputs([(2, 3, 4)], seed=11, low=0.0, high=1.0, avoid=())
    p = p / p.sum(1, keepdims=True)
    check_op(None, lambda a, b: TF.cross_entropy(a, b, tw, label_smoothing=0.3),
             lambda a, b: F.cross_entropy(a, b, aw, label_smoothing=0.3), inputs=[x, p],
             torch_dtype=F64)


def test_cross_entropy_unbatched_and_nll_spatial():
    x, = rand_inputs([(5,)], seed=12)
    check_op(None, lambda a, t: TF.cross_entropy(a, t), lambda a, t: F.cross_entropy(a, t),
             inputs=[x, np.array(3, np.int32)], torch_dtype=F64)
    y, = rand_inputs([(2, 3, 4)], seed=13)
    t = np.array([[0, 2, 1, 1], [2, 2, 0, 1]], np.int32)
    check_op(None, lambda a, b: TF.nll_loss(a, b, reduction="none"),
             lambda a, b: F.nll_loss(a, b, reduction="none"), inputs=[y, t], torch_dtype=F64)


def test_gelu_tanh_matches_torch_for_large_inputs():
    x = np.array([-1e4, -500.0, -20.0, -3.0, 0.0, 3.0, 20.0, 500.0, 1e4], np.float32)
    check_op(None, lambda t: TF.gelu(t, approximate="tanh"),
             lambda t: F.gelu(t, approximate="tanh"), inputs=[x], forward_only=True)
