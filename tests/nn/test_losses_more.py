"""torch.nn's remaining losses, distances and activations: each module against torch's own
(same constructor arguments) on random inputs, the value and every input gradient (torch in
float64), for every reduction; weighted losses keep their weights as buffers, as torch's
``state_dict`` does."""
import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import nn
from autodiff.nn import functional as F

RTOL, ATOL = 2e-4, 2e-5
rng = np.random.default_rng(0)
N, C = 6, 5
X1 = rng.standard_normal((N, C)).astype(np.float32)
X2 = rng.standard_normal((N, C)).astype(np.float32)
LABELS = rng.integers(0, C, N)
SIGNS = np.where(rng.random(N) > 0.5, 1.0, -1.0).astype(np.float32)
MULTI = (rng.random((N, C)) > 0.5).astype(np.float32)
PM1 = MULTI * 2 - 1
W = rng.uniform(0.5, 2.0, C).astype(np.float32)
VAR = rng.uniform(0.2, 2.0, (N, C)).astype(np.float32)
COUNTS = rng.poisson(2.0, (N, C)).astype(np.float32)


def _compare(name, kwargs, make_inputs, n_float):
    """``make_inputs(lib, floats) -> args`` where ``floats`` are the differentiable inputs
    (``n_float`` of X1, X2, X1 flipped)."""
    base = [X1, X2, X1[::-1].copy()][:n_float]
    ts = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in base]
    tkw = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in kwargs.items()}
    ref = getattr(torch.nn, name)(**tkw).double()(*make_inputs(torch, ts))
    G = rng.uniform(0.5, 1.5, tuple(ref.shape))
    (ref * torch.tensor(G)).sum().backward()
    xs = [ad.tensor(a, requires_grad=True) for a in base]
    out = getattr(nn, name)(**kwargs)(*make_inputs(ad, xs))
    (out * ad.tensor(G.astype(np.float32))).sum().backward()
    grads = [x.grad for x in xs]
    ad.execute(device="numpy")
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=RTOL, atol=ATOL)
    for g, t in zip(grads, ts):
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=RTOL, atol=ATOL)


def _const(lib, a):
    return torch.tensor(a.astype(np.float64)) if lib is torch else ad.tensor(a)


def _labels(lib):
    return torch.tensor(LABELS) if lib is torch else LABELS


LOSSES = [
    ("L1Loss", {}, lambda L, x: (x[0], x[1]), 2),
    ("SmoothL1Loss", {"beta": 0.5}, lambda L, x: (x[0], x[1]), 2),
    ("HuberLoss", {"delta": 0.7}, lambda L, x: (x[0], x[1]), 2),
    ("KLDivLoss", {"log_target": True}, lambda L, x: (x[0].log_softmax(-1),
                                                       x[1].log_softmax(-1)), 2),
    ("NLLLoss", {"weight": W}, lambda L, x: (x[0].log_softmax(-1), _labels(L)), 1),
    ("CrossEntropyLoss", {"weight": W, "label_smoothing": 0.2, "ignore_index": 1},
     lambda L, x: (x[0], _labels(L)), 1),
    ("BCELoss", {"weight": W}, lambda L, x: (x[0].sigmoid(), _const(L, MULTI)), 1),
    ("BCEWithLogitsLoss", {"pos_weight": W}, lambda L, x: (x[0], _const(L, MULTI)), 1),
    ("SoftMarginLoss", {}, lambda L, x: (x[0], _const(L, PM1)), 1),
    ("HingeEmbeddingLoss", {"margin": 1.5}, lambda L, x: (x[0], _const(L, PM1)), 1),
    ("MultiLabelSoftMarginLoss", {"weight": W}, lambda L, x: (x[0], _const(L, MULTI)), 1),
    ("CosineEmbeddingLoss", {"margin": 0.2}, lambda L, x: (x[0], x[1], _const(L, SIGNS)), 2),
    ("MarginRankingLoss", {"margin": 0.3},
     lambda L, x: (x[0][:, 0], x[1][:, 0], _const(L, SIGNS)), 2),
    ("MultiMarginLoss", {"p": 2, "margin": 0.8, "weight": W},
     lambda L, x: (x[0], _labels(L)), 1),
    ("TripletMarginLoss", {"margin": 0.5, "swap": True}, lambda L, x: (x[0], x[1], x[2]), 3),
    ("PoissonNLLLoss", {"full": True}, lambda L, x: (x[0], _const(L, COUNTS)), 1),
    ("GaussianNLLLoss", {"full": True}, lambda L, x: (x[0], x[1], _const(L, VAR)), 2),
]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name,kwargs,inputs,n", LOSSES, ids=[c[0] for c in LOSSES])
def test_loss_modules_match_torch(name, kwargs, inputs, n, reduction):
    if name == "KLDivLoss" and reduction == "mean":
        reduction = "batchmean"
    _compare(name, dict(kwargs, reduction=reduction), inputs, n)


@pytest.mark.parametrize("name,kwargs,inputs,n", [
    ("CosineSimilarity", {"dim": 1, "eps": 1e-6}, lambda L, x: (x[0], x[1]), 2),
    ("PairwiseDistance", {"p": 1.5, "keepdim": True}, lambda L, x: (x[0], x[1]), 2),
    ("Threshold", {"threshold": 0.3, "value": -2.0}, lambda L, x: (x[0],), 1),
    ("Tanhshrink", {}, lambda L, x: (x[0],), 1),
    ("Softshrink", {"lambd": 0.4}, lambda L, x: (x[0],), 1),
    ("Hardshrink", {"lambd": 0.4}, lambda L, x: (x[0],), 1),
    ("LocalResponseNorm", {"size": 3}, lambda L, x: (x[0].reshape(1, N, C),), 1),
    ("LocalResponseNorm", {"size": 4, "alpha": 0.1, "k": 2.0},
     lambda L, x: (x[0].reshape(2, 3, C, 1),), 1),
], ids=lambda v: v if isinstance(v, str) else None)
def test_distance_and_activation_modules_match_torch(name, kwargs, inputs, n):
    _compare(name, kwargs, inputs, n)


def test_rrelu_random_slopes_in_training_only():
    x = -np.abs(rng.standard_normal(20000)).astype(np.float32) - 0.1
    m = nn.RReLU(0.1, 0.3)
    y_train = m(ad.tensor(x))
    m.eval()
    y_eval = m(ad.tensor(x))
    ad.execute(device="numpy")
    slope = y_train.numpy() / x
    assert 0.1 <= slope.min() and slope.max() <= 0.3
    assert abs(slope.mean() - 0.2) < 0.005 and slope.std() > 0.05
    np.testing.assert_allclose(y_eval.numpy(), x * 0.2, rtol=1e-6)


def test_weights_are_buffers_and_legacy_flags():
    ours = nn.CrossEntropyLoss(torch.tensor(W))
    theirs = torch.nn.CrossEntropyLoss(torch.tensor(W))
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
    assert list(nn.BCEWithLogitsLoss(pos_weight=W).state_dict()) == \
        list(torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(W)).state_dict())
    assert nn.L1Loss(size_average=False).reduction == "sum"
    assert nn.MSELoss(reduce=False).reduction == "none"
    with pytest.raises(TypeError, match="unexpected keyword"):
        nn.L1Loss(delta=1.0)
    with pytest.raises(TypeError, match="missing required argument.*'value'"):
        nn.Threshold(0.5)                      # torch's has no defaults
    with pytest.raises(TypeError, match="'size'"):
        nn.LocalResponseNorm()


_X = np.array([[1.0, -2.0, 0.5], [0.3, 0.2, -0.7]], np.float32)
_Y = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 1.0]], np.float32)
_P = np.array([[0.2, 0.7, 0.4], [0.9, 0.1, 0.5]], np.float32)
LEGACY = {                  # name -> (inputs as arrays, int arrays are class indices)
    "l1_loss": (_X, _Y), "smooth_l1_loss": (_X, _Y), "soft_margin_loss": (_X, _Y * 2 - 1),
    "binary_cross_entropy": (_P, _Y), "binary_cross_entropy_with_logits": (_X, _Y),
    "kl_div": (_X, _P), "multilabel_soft_margin_loss": (_X, _Y),
    "hinge_embedding_loss": (_X, _Y * 2 - 1),
    "nll_loss": (_X, np.array([2, 0], np.int64)),
    "cross_entropy": (_X, np.array([1, 2], np.int64)),
}


@pytest.mark.parametrize("flags", [{"reduce": False}, {"size_average": False},
                                   {"size_average": True, "reduce": True}])
@pytest.mark.parametrize("name", sorted(LEGACY))
def test_functional_losses_read_the_deprecated_flags_like_torch(name, flags):
    """``F.l1_loss(x, y, reduce=False)`` gave the mean: the functional losses ignored
    ``size_average``/``reduce``; now they mean what PyTorch's do (with its warning)."""
    import warnings
    arrays = LEGACY[name]
    ours = getattr(F, name)(*[ad.tensor(a) for a in arrays], **flags)
    ad.execute(device="numpy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = getattr(torch.nn.functional, name)(*[torch.tensor(a) for a in arrays], **flags)
    np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        getattr(F, name)(*[ad.tensor(a) for a in arrays], **flags)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", ["l1_loss", "mse_loss", "huber_loss"])
def test_elementwise_losses_take_torchs_weight(name, reduction):
    """torch 2.13's ``weight=`` of ``l1_loss``/``mse_loss`` (mean over the summed weights)
    and ``huber_loss`` (mean over the elements), values and input gradients."""
    w = np.array([[0.5, 2.0, 1.0], [0.1, 3.0, 0.7]], np.float32)
    x = ad.Tensor(_X, requires_grad=True)
    out = getattr(F, name)(x, ad.tensor(_Y), reduction=reduction, weight=ad.tensor(w))
    (out.sum() if reduction == "none" else out).backward()
    g = x.grad * 1.0
    ad.execute(device="numpy")
    tx = torch.tensor(_X, requires_grad=True)
    ref = getattr(torch.nn.functional, name)(tx, torch.tensor(_Y), reduction=reduction,
                                             weight=torch.tensor(w))
    (ref.sum() if reduction == "none" else ref).backward()
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="same size"):
        getattr(F, name)(x, ad.tensor(_Y), weight=ad.tensor(w[0]))


def test_functional_first_arguments_are_named_as_torchs():
    """Keyword calls as in PyTorch: ``F.dropout(input=...)``, ``F.layer_norm(input=...)``,
    ``F.embedding(input=...)``; an option of ``embedding`` this compiler lacks refuses."""
    x = ad.tensor(_X)
    assert tuple(F.dropout(input=x, p=0.5, training=False).shape) == (2, 3)
    assert tuple(F.layer_norm(input=x, normalized_shape=(3,)).shape) == (2, 3)
    w = ad.tensor(np.eye(4, 3, dtype=np.float32))
    assert tuple(F.embedding(input=ad.tensor(np.array([0, 3])), weight=w).shape) == (2, 3)
    with pytest.raises(NotImplementedError, match="max_norm"):
        F.embedding(ad.tensor(np.array([0, 3])), w, max_norm=1.0)
