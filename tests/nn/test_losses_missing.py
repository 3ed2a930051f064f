"""``multilabel_margin_loss`` / ``MultiLabelMarginLoss``,
``triplet_margin_with_distance_loss`` / ``TripletMarginWithDistanceLoss`` and ``ctc_loss`` /
``CTCLoss`` against torch:
values and input gradients (torch in float64, plus float64 finite differences), every
reduction, 1-D and 2-D inputs, the modules with their constructor arguments, the numpy and
OpenCL devices, and the errors torch raises (same exception types)."""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import autodiff as ad
import autodiff.nn.functional as F
from autodiff import nn
from autodiff.errors import IndexOutOfRange
from backends import device_params

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "graph"))
from op_helper import check_op, finite_difference_grads, rand_inputs, upstream  # noqa: E402

F64 = torch.float64
RED = ["mean", "sum", "none"]
pytestmark = pytest.mark.filterwarnings("ignore:size_average and reduce args")
RTOL, ATOL = 2e-4, 2e-5

# targets: padding after the first -1 (ignored, even when a valid class), a class listed
# twice (counted twice, as torch), a full row, a row with no target
TARGET = np.array([[3, 0, -1, 1, 2],
                   [1, 2, 3, 4, 0],
                   [-1, 0, 0, 0, 0],
                   [2, 2, -1, 4, 4]], np.int64)


# -- multilabel_margin_loss --------------------------------------------------------------
@pytest.mark.parametrize("reduction", RED)
def test_multilabel_margin_loss_matches_torch(reduction):
    x, = rand_inputs([(4, 5)], seed=11)
    check_op(None, lambda a, t: TF.multilabel_margin_loss(a, t, reduction=reduction),
             lambda a, t: F.multilabel_margin_loss(a, t, reduction=reduction),
             inputs=[x, TARGET], torch_dtype=F64)


@pytest.mark.parametrize("reduction", RED)
def test_multilabel_margin_loss_unbatched(reduction):
    x, = rand_inputs([(6,)], seed=12)
    t = np.array([4, 1, 5, -1, 2, 7], np.int64)       # 7 after the -1: never read as a class
    t[5] = 0
    out = check_op(None, lambda a, t: TF.multilabel_margin_loss(a, t, reduction=reduction),
                   lambda a, t: F.multilabel_margin_loss(a, t, reduction=reduction),
                   inputs=[x, t], torch_dtype=F64)
    assert out.shape == ()


def _module_compare(ours, theirs, x, target):
    xt = torch.tensor(x.astype(np.float64), requires_grad=True)
    ref = theirs(xt, torch.tensor(target))
    G = np.random.default_rng(3).uniform(0.5, 1.5, tuple(ref.shape))
    (ref * torch.tensor(G)).sum().backward()
    xa = ad.tensor(x, requires_grad=True)
    out = ours(xa, ad.tensor(target, dtype="int64"))
    (out * ad.tensor(G.astype(np.float32))).sum().backward()
    g = xa.grad
    ad.execute(device="numpy")
    assert out.numpy().dtype == np.float32 and out.numpy().shape == tuple(ref.shape)
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(g.numpy(), xt.grad.numpy(), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("args,kwargs", [((), {}), ((None, None, "sum"), {}),
                                         ((), {"reduction": "none"}),
                                         ((False,), {}), ((None, False), {}),
                                         ((True, True, "none"), {})],
                         ids=["default", "positional", "none", "size_average", "reduce",
                              "legacy_wins"])
def test_multilabel_margin_loss_module(args, kwargs):
    x, = rand_inputs([(4, 5)], seed=13)
    _module_compare(nn.MultiLabelMarginLoss(*args, **kwargs),
                    torch.nn.MultiLabelMarginLoss(*args, **kwargs), x, TARGET)


def test_multilabel_margin_loss_functional_legacy_flags():
    x, = rand_inputs([(4, 5)], seed=14)
    for kw in ({"size_average": False}, {"reduce": False}):
        ad.reset()
        check_op(None, lambda a, t: TF.multilabel_margin_loss(a, t, **kw),
                 lambda a, t: F.multilabel_margin_loss(a, t, **kw), inputs=[x, TARGET],
                 torch_dtype=F64, fd=False)
    assert nn.MultiLabelMarginLoss(size_average=False).reduction == "sum"
    assert list(nn.MultiLabelMarginLoss().state_dict()) == []
    with pytest.raises(TypeError):
        nn.MultiLabelMarginLoss(None, None, "mean", 1)


def test_multilabel_margin_loss_errors():
    x = ad.tensor(rand_inputs([(2, 3)], seed=15)[0])
    good = np.array([[0, -1, 2], [1, 2, -1]], np.int64)
    cases = [
        # ours: a DTypeError, a TypeError and (as torch's) a RuntimeError
        (lambda: F.multilabel_margin_loss(x, good.astype(np.float32)), RuntimeError),
        (lambda: F.multilabel_margin_loss(x, np.zeros((2, 4), np.int64)), RuntimeError),
        (lambda: F.multilabel_margin_loss(x, np.zeros(3, np.int64)), RuntimeError),
        (lambda: F.multilabel_margin_loss(ad.randn(2, 3, 4), np.zeros((2, 3, 4), np.int64)),
         RuntimeError),
        (lambda: F.multilabel_margin_loss(ad.randn(2, 0), np.zeros((2, 0), np.int64)),
         RuntimeError),
        (lambda: F.multilabel_margin_loss(x, np.array([[5, 0, 1], [0, 1, 2]])), RuntimeError),
        (lambda: F.multilabel_margin_loss(x, np.array([[0, -1, -5], [0, 1, 2]])),
         RuntimeError),
        (lambda: F.multilabel_margin_loss(x, good, reduction="bad"), ValueError),
    ]
    xt = torch.randn(2, 3)
    for i, (ours, exc) in enumerate(cases):
        with pytest.raises(exc):
            ours()
        # torch raises the same type for the same call
        with pytest.raises(exc):
            [lambda: TF.multilabel_margin_loss(xt, torch.tensor(good).float()),
             lambda: TF.multilabel_margin_loss(xt, torch.zeros(2, 4, dtype=torch.long)),
             lambda: TF.multilabel_margin_loss(xt, torch.zeros(3, dtype=torch.long)),
             lambda: TF.multilabel_margin_loss(torch.randn(2, 3, 4),
                                               torch.zeros(2, 3, 4, dtype=torch.long)),
             lambda: TF.multilabel_margin_loss(torch.randn(2, 0),
                                               torch.zeros(2, 0, dtype=torch.long)),
             lambda: TF.multilabel_margin_loss(xt, torch.tensor([[5, 0, 1], [0, 1, 2]])),
             lambda: TF.multilabel_margin_loss(xt, torch.tensor([[0, -1, -5], [0, 1, 2]])),
             lambda: TF.multilabel_margin_loss(xt, torch.tensor(good), reduction="bad")][i]()
    with pytest.raises(TypeError, match="multilabel_margin_loss: target must be int64"):
        F.multilabel_margin_loss(x, ad.tensor(good.astype(np.float32)))
    with pytest.raises(RuntimeError, match=r"multilabel_margin_loss: .*\[2, 4\].*\[2, 3\]"):
        F.multilabel_margin_loss(x, np.zeros((2, 4), np.int64))


def test_multilabel_margin_loss_traced_target_out_of_range_stops_the_run():
    x = ad.tensor(rand_inputs([(2, 3)], seed=16)[0])
    t = ad.tensor(np.array([[0, -1, 2], [1, 3, -1]], np.int64)) + 0     # traced: checked later
    out = F.multilabel_margin_loss(x, t)
    with pytest.raises(IndexOutOfRange, match="multilabel_margin_loss"):
        ad.execute(device="numpy")
    del out


# -- triplet_margin_with_distance_loss -----------------------------------------------------
def _cos_dist(lib):
    fn = TF.cosine_similarity if lib is torch else F.cosine_similarity
    return lambda a, b: 1.0 - fn(a, b)


def _l1(a, b):
    return (a - b).abs().sum(-1)


@pytest.mark.parametrize("reduction", RED)
@pytest.mark.parametrize("dist,margin,swap", [(None, 1.0, False), (None, 0.7, True),
                                              ("cos", 0.3, True), ("l1", 2.0, False)])
def test_triplet_margin_with_distance_loss_matches_torch(dist, margin, swap, reduction):
    def kw(lib):
        d = {"cos": _cos_dist(lib), "l1": _l1, None: None}[dist]
        return dict(distance_function=d, margin=margin, swap=swap, reduction=reduction)
    check_op([(5, 4)] * 3,
             lambda a, p, n: TF.triplet_margin_with_distance_loss(a, p, n, **kw(torch)),
             lambda a, p, n: F.triplet_margin_with_distance_loss(a, p, n, **kw(ad)),
             seed=21, torch_dtype=F64)


def test_triplet_margin_with_distance_loss_unbatched():
    out = check_op([(6,)] * 3, lambda a, p, n: TF.triplet_margin_with_distance_loss(
                       a, p, n, swap=True, reduction="none"),
                   lambda a, p, n: F.triplet_margin_with_distance_loss(
                       a, p, n, swap=True, reduction="none"), seed=22, torch_dtype=F64)
    assert out.shape == ()


def _triplet_module_compare(ours, theirs, seed):
    arrays = rand_inputs([(5, 4)] * 3, seed=seed)
    ts = [torch.tensor(a.astype(np.float64), requires_grad=True) for a in arrays]
    ref = theirs(*ts)
    G = np.random.default_rng(seed).uniform(0.5, 1.5, tuple(ref.shape))
    (ref * torch.tensor(G)).sum().backward()
    xs = [ad.tensor(a, requires_grad=True) for a in arrays]
    out = ours(*xs)
    (out * ad.tensor(G.astype(np.float32))).sum().backward()
    grads = [x.grad for x in xs]
    ad.execute(device="numpy")
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=RTOL, atol=ATOL)
    for g, t in zip(grads, ts):
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=RTOL, atol=ATOL)


def test_triplet_margin_with_distance_loss_module():
    _triplet_module_compare(nn.TripletMarginWithDistanceLoss(),
                            torch.nn.TripletMarginWithDistanceLoss(), 23)
    ad.reset()
    _triplet_module_compare(
        nn.TripletMarginWithDistanceLoss(distance_function=nn.PairwiseDistance(1.5),
                                         margin=0.5, swap=True, reduction="none"),
        torch.nn.TripletMarginWithDistanceLoss(
            distance_function=torch.nn.PairwiseDistance(1.5), margin=0.5, swap=True,
            reduction="none"), 24)
    ad.reset()
    _triplet_module_compare(
        nn.TripletMarginWithDistanceLoss(distance_function=_cos_dist(ad), reduction="sum"),
        torch.nn.TripletMarginWithDistanceLoss(distance_function=_cos_dist(torch),
                                               reduction="sum"), 25)


def test_triplet_margin_with_distance_loss_module_api():
    ours, theirs = nn.TripletMarginWithDistanceLoss(), torch.nn.TripletMarginWithDistanceLoss()
    assert repr(ours) == repr(theirs)
    assert isinstance(ours.distance_function, nn.PairwiseDistance)
    assert (ours.margin, ours.swap, ours.reduction) == (1.0, False, "mean")
    assert list(ours.state_dict()) == list(theirs.state_dict()) == []
    with pytest.raises(TypeError):                 # keyword-only, as torch's
        nn.TripletMarginWithDistanceLoss(None)
    with pytest.raises(TypeError):
        torch.nn.TripletMarginWithDistanceLoss(None)
    with pytest.raises(TypeError):
        nn.TripletMarginWithDistanceLoss(p=2.0)
    for m in (0.0, -1.0):
        with pytest.raises(ValueError, match="greater than 0"):
            nn.TripletMarginWithDistanceLoss(margin=m)
        with pytest.raises(ValueError, match="greater than 0"):
            torch.nn.TripletMarginWithDistanceLoss(margin=m)


def test_triplet_margin_with_distance_loss_errors():
    a, p, n = (ad.tensor(v) for v in rand_inputs([(3, 4)] * 3, seed=26))
    at, pt, nt = (torch.randn(3, 4) for _ in range(3))
    for kw, exc in [({"margin": 0.0}, ValueError), ({"reduction": "avg"}, ValueError)]:
        with pytest.raises(exc):
            F.triplet_margin_with_distance_loss(a, p, n, **kw)
        with pytest.raises(exc):
            TF.triplet_margin_with_distance_loss(at, pt, nt, **kw)
    with pytest.raises(RuntimeError, match="anchor 2D, positive 2D, and negative 1D"):
        F.triplet_margin_with_distance_loss(a, p, n[0])
    with pytest.raises(RuntimeError, match="anchor 2D, positive 2D, and negative 1D"):
        TF.triplet_margin_with_distance_loss(at, pt, nt[0])
    with pytest.raises(TypeError):                 # keyword-only after the three inputs
        F.triplet_margin_with_distance_loss(a, p, n, None)


# -- devices ---------------------------------------------------------------------------------
@pytest.mark.parametrize("device", device_params())
def test_losses_on_devices(device):
    x, = rand_inputs([(4, 5)], seed=31)
    check_op(None, lambda a, t: TF.multilabel_margin_loss(a, t, reduction="none"),
             lambda a, t: F.multilabel_margin_loss(a, t, reduction="none"),
             inputs=[x, TARGET], torch_dtype=F64, fd=False, device=device)
    ad.reset()
    check_op([(5, 4)] * 3,
             lambda a, p, n: TF.triplet_margin_with_distance_loss(
                 a, p, n, distance_function=_cos_dist(torch), swap=True),
             lambda a, p, n: F.triplet_margin_with_distance_loss(
                 a, p, n, distance_function=_cos_dist(ad), swap=True),
             seed=32, torch_dtype=F64, fd=False, device=device)


# -- ctc_loss ----------------------------------------------------------------------------------
CT, CN, CC = 7, 3, 5
CTC_TARGETS = np.array([[1, 2, 2, 4], [3, 1, 0, 0], [4, 4, 4, 0]], np.int64)  # repeats
CTC_IL, CTC_TL = [7, 5, 7], [3, 2, 3]


def _ctc(lib, reduction="mean", zero_infinity=False, blank=0, targets=CTC_TARGETS,
         il=CTC_IL, tl=CTC_TL):
    f = TF if lib is torch else F

    def fn(z, t):
        return f.ctc_loss(z.log_softmax(-1), t, il, tl, blank=blank, reduction=reduction,
                          zero_infinity=zero_infinity)
    return fn


@pytest.mark.parametrize("reduction", RED)
def test_ctc_loss_matches_torch(reduction):
    z, = rand_inputs([(CT, CN, CC)], seed=41)
    check_op(None, _ctc(torch, reduction), _ctc(ad, reduction), inputs=[z, CTC_TARGETS],
             torch_dtype=F64)


def test_ctc_loss_concatenated_targets_blank_and_unbatched():
    z, = rand_inputs([(CT, CN, CC)], seed=42)
    cat = np.array([1, 2, 2, 3, 1, 4, 4, 4], np.int64)
    check_op(None, _ctc(torch, "none", targets=None), _ctc(ad, "none", targets=None),
             inputs=[z, cat], torch_dtype=F64, fd=False)
    ad.reset()
    padded = np.array([[1, 2, 2, 0], [3, 1, 4, 4], [0, 0, 0, 0]], np.int64)  # blank 4
    check_op(None, _ctc(torch, "sum", blank=4, targets=None, tl=[3, 2, 3]),
             _ctc(ad, "sum", blank=4, targets=None, tl=[3, 2, 3]), inputs=[z, padded],
             torch_dtype=F64, fd=False)
    ad.reset()
    out = check_op(None, lambda z, t: TF.ctc_loss(z.log_softmax(-1), t, torch.tensor(6),
                                                  torch.tensor(3), reduction="none"),
                   lambda z, t: F.ctc_loss(z.log_softmax(-1), t, 6, 3, reduction="none"),
                   inputs=[z[:, 0], CTC_TARGETS[0, :3]], torch_dtype=F64, fd=False)
    assert out.shape == ()


def test_ctc_loss_impossible_alignment_and_zero_infinity():
    """Sample 1 has 2 frames for targets needing 3 (a repeat needs a blank between): inf,
    or 0 with ``zero_infinity`` (and no NaN in the gradient); an empty target and an input
    length of 0 as torch."""
    z, = rand_inputs([(CT, CN, CC)], seed=43)
    t = np.array([[1, 2, 2, 4], [3, 3, 0, 0], [4, 4, 4, 0]], np.int64)
    il, tl = [7, 2, 0], [3, 2, 0]
    out = check_op(None, _ctc(torch, "none", targets=None, il=il, tl=tl),
                   _ctc(ad, "none", targets=None, il=il, tl=tl), inputs=[z, t],
                   forward_only=True)
    assert out[1] == np.inf and out[2] == 0.0
    for red in RED:
        ad.reset()
        check_op(None, _ctc(torch, red, True, targets=None, il=il, tl=tl),
                 _ctc(ad, red, True, targets=None, il=il, tl=tl), inputs=[z, t],
                 torch_dtype=F64)


def test_ctc_loss_gradient_at_log_probs_is_exact():
    """Ours is d loss / d log_probs (float64 finite differences); torch's backward instead
    returns exp(log_probs) - posterior, the logits' gradient through a log_softmax (they
    agree through a log_softmax, tested above)."""
    z, = rand_inputs([(CT, CN, CC)], seed=44)
    lp = torch.tensor(z.astype(np.float64)).log_softmax(-1).float().numpy()
    x = ad.tensor(lp, requires_grad=True)
    out = F.ctc_loss(x, CTC_TARGETS, CTC_IL, CTC_TL, reduction="none")
    G = upstream((CN,), 0)
    out.backward(ad.tensor(G))
    g = x.grad
    ad.execute(device="numpy")
    fd, _ = finite_difference_grads(
        lambda a, t: TF.ctc_loss(a, t, CTC_IL, CTC_TL, reduction="none"), [lp, CTC_TARGETS],
        weight=G)
    np.testing.assert_allclose(g.numpy(), fd, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("args,kwargs", [((), {}), ((2, "sum", True), {}),
                                         ((), {"reduction": "none", "blank": 3})],
                         ids=["default", "positional", "keywords"])
def test_ctc_loss_module(args, kwargs):
    z, = rand_inputs([(CT, CN, CC)], seed=45)
    t = np.array([[1, 4, 4, 0], [3, 1, 0, 0], [4, 0, 4, 1]], np.int64)
    ours, theirs = nn.CTCLoss(*args, **kwargs), torch.nn.CTCLoss(*args, **kwargs)
    assert (ours.blank, ours.reduction, ours.zero_infinity) == \
        (theirs.blank, theirs.reduction, theirs.zero_infinity)
    check_op(None, lambda z, t: theirs(z.log_softmax(-1), t, CTC_IL, CTC_TL),
             lambda z, t: ours(z.log_softmax(-1), t, CTC_IL, CTC_TL), inputs=[z, t],
             torch_dtype=F64, fd=False)
    with pytest.raises(TypeError):
        nn.CTCLoss(0, "mean", False, 1)


def test_ctc_loss_errors():
    lp = ad.tensor(rand_inputs([(CT, CN, CC)], seed=46)[0]).log_softmax(-1)
    lpt = torch.randn(CT, CN, CC).log_softmax(-1)
    tt = torch.tensor(CTC_TARGETS)
    pairs = [
        ((CTC_TARGETS, [8, 5, 7], CTC_TL), (tt, [8, 5, 7], CTC_TL), RuntimeError),
        ((CTC_TARGETS, CTC_IL, [5, 2, 3]), (tt, CTC_IL, [5, 2, 3]), RuntimeError),
        ((CTC_TARGETS, [7, 5], CTC_TL), (tt, [7, 5], CTC_TL), RuntimeError),
        ((CTC_TARGETS[:, :3].reshape(-1), CTC_IL, CTC_TL),
         (tt[:, :3].reshape(-1), CTC_IL, CTC_TL), RuntimeError),
    ]
    for ours, theirs, exc in pairs:
        with pytest.raises(exc):
            F.ctc_loss(lp, *ours)
        with pytest.raises(exc):
            TF.ctc_loss(lpt, *theirs)
    with pytest.raises(ValueError):
        F.ctc_loss(lp, CTC_TARGETS, CTC_IL, CTC_TL, reduction="bad")
    with pytest.raises(RuntimeError, match="ctc_loss: .*\\[105\\].*must be \\[T, N, C\\]"):
        F.ctc_loss(lp.reshape(CT * CN * CC), CTC_TARGETS, CTC_IL, CTC_TL)
    with pytest.raises(RuntimeError, match=r"ctc_loss: target values must be in \[0, 5\)"):
        F.ctc_loss(lp, CTC_TARGETS + 2, CTC_IL, CTC_TL)
    # lengths computed by the program: no value while tracing
    traced = ad.tensor(np.array(CTC_IL, np.int64)) + 0
    with pytest.raises(TypeError, match="ctc_loss\\(\\) of input_lengths: a traced tensor.*"
                                        "Fixed-shape alternative: pad"):
        F.ctc_loss(lp, CTC_TARGETS, traced, CTC_TL)
    with pytest.raises(TypeError, match="ctc_loss\\(\\) of target_lengths: a traced tensor"):
        F.ctc_loss(lp, CTC_TARGETS, CTC_IL, ad.tensor(np.array(CTC_TL)) * 1)
    # lengths as host tensors are fine
    out = F.ctc_loss(lp, CTC_TARGETS, ad.tensor(np.array(CTC_IL)),
                     ad.tensor(np.array(CTC_TL)), reduction="sum")
    ad.execute(device="numpy")
    assert np.isfinite(out.numpy())


def test_ctc_loss_traced_targets_checked_at_run_time():
    z, = rand_inputs([(CT, CN, CC)], seed=47)
    t = ad.tensor(CTC_TARGETS) * 1                        # traced, values in range
    out = F.ctc_loss(ad.tensor(z).log_softmax(-1), t, CTC_IL, CTC_TL, reduction="none")
    ad.execute(device="numpy")
    ref = TF.ctc_loss(torch.tensor(z.astype(np.float64)).log_softmax(-1),
                      torch.tensor(CTC_TARGETS), CTC_IL, CTC_TL, reduction="none")
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=RTOL, atol=ATOL)
    ad.reset()
    bad = ad.tensor(CTC_TARGETS) + 3                       # 7 >= C
    out = F.ctc_loss(ad.tensor(z).log_softmax(-1), bad, CTC_IL, CTC_TL)
    with pytest.raises(IndexOutOfRange, match="ctc_loss"):
        ad.execute(device="numpy")


@pytest.mark.parametrize("device", device_params())
def test_ctc_loss_on_devices(device):
    z, = rand_inputs([(CT, CN, CC)], seed=48)
    check_op(None, _ctc(torch, "mean", True), _ctc(ad, "mean", True),
             inputs=[z, CTC_TARGETS], torch_dtype=F64, fd=False, device=device)
