"""Loss modules with PyTorch's names, constructor arguments (positional order included),
defaults and ``state_dict`` (class weights are buffers, as in ``torch.nn._WeightedLoss``).
Each calls the function of :mod:`autodiff.nn.functional` of the same name."""
from __future__ import annotations

from ..graph.tensor import Tensor
from . import functional as F
from .functional import legacy_reduction, mse_loss, reduce_loss  # noqa: F401 (nn.mse_loss)
from .module import Module, bind_arguments

_LEGACY = ("size_average", "reduce")
_BUFFERS = ("weight", "pos_weight")


class _Loss(Module):
    """A loss module: ``args`` are ``torch.nn``'s constructor arguments in order, with
    defaults; ``forward(*inputs)`` calls ``F.<fn>(*inputs, **arguments)``."""
    fn = ""
    args: tuple = ()

    def __init__(self, *args, **kwargs):
        super().__init__()
        values = bind_arguments(type(self).__name__, self.args, args, kwargs)
        if any(values.get(k) is not None for k in _LEGACY):
            values["reduction"] = legacy_reduction(values.get("size_average"),
                                                   values.get("reduce"))
        for k, v in values.items():
            if k in _LEGACY:
                continue
            if k in _BUFFERS:
                self.register_buffer(k, None if v is None else F._tensor(v, "float32"))
            else:
                object.__setattr__(self, k, v)

    def forward(self, *inputs) -> Tensor:
        kw = {k: getattr(self, k) for k, _ in self.args if k not in _LEGACY}
        return getattr(F, self.fn)(*inputs, **kw)

    def extra_repr(self) -> str:
        return ""


def _loss(name: str, fn: str, args) -> type:
    return type(name, (_Loss,), {"fn": fn, "args": tuple(args), "__doc__": (
        f"``torch.nn.{name}``: :func:`autodiff.nn.functional.{fn}` with "
        f"{', '.join(f'{k}={v!r}' for k, v in args)}.")})


_R = ("reduction", "mean")
_SR = [("size_average", None), ("reduce", None), _R]
MSELoss = _loss("MSELoss", "mse_loss", _SR)
L1Loss = _loss("L1Loss", "l1_loss", _SR)
NLLLoss = _loss("NLLLoss", "nll_loss", [("weight", None), ("size_average", None),
                                        ("ignore_index", -100), ("reduce", None), _R])
CrossEntropyLoss = _loss("CrossEntropyLoss", "cross_entropy", [
    ("weight", None), ("size_average", None), ("ignore_index", -100), ("reduce", None), _R,
    ("label_smoothing", 0.0)])
KLDivLoss = _loss("KLDivLoss", "kl_div", _SR + [("log_target", False)])
BCELoss = _loss("BCELoss", "binary_cross_entropy", [("weight", None)] + _SR)
BCEWithLogitsLoss = _loss("BCEWithLogitsLoss", "binary_cross_entropy_with_logits",
                          [("weight", None)] + _SR + [("pos_weight", None)])
HuberLoss = _loss("HuberLoss", "huber_loss", [_R, ("delta", 1.0)])
SmoothL1Loss = _loss("SmoothL1Loss", "smooth_l1_loss", _SR + [("beta", 1.0)])
SoftMarginLoss = _loss("SoftMarginLoss", "soft_margin_loss", _SR)
HingeEmbeddingLoss = _loss("HingeEmbeddingLoss", "hinge_embedding_loss",
                           [("margin", 1.0)] + _SR)
MultiLabelSoftMarginLoss = _loss("MultiLabelSoftMarginLoss", "multilabel_soft_margin_loss",
                                 [("weight", None)] + _SR)
CosineEmbeddingLoss = _loss("CosineEmbeddingLoss", "cosine_embedding_loss",
                            [("margin", 0.0)] + _SR)
MarginRankingLoss = _loss("MarginRankingLoss", "margin_ranking_loss", [("margin", 0.0)] + _SR)
MultiMarginLoss = _loss("MultiMarginLoss", "multi_margin_loss",
                        [("p", 1), ("margin", 1.0), ("weight", None)] + _SR)
TripletMarginLoss = _loss("TripletMarginLoss", "triplet_margin_loss", [
    ("margin", 1.0), ("p", 2.0), ("eps", 1e-6), ("swap", False)] + _SR)
PoissonNLLLoss = _loss("PoissonNLLLoss", "poisson_nll_loss", [
    ("log_input", True), ("full", False), ("size_average", None), ("eps", 1e-8),
    ("reduce", None), _R])
GaussianNLLLoss = _loss("GaussianNLLLoss", "gaussian_nll_loss",
                        [("full", False), ("eps", 1e-6), _R])
MultiLabelMarginLoss = _loss("MultiLabelMarginLoss", "multilabel_margin_loss", _SR)
CTCLoss = _loss("CTCLoss", "ctc_loss", [("blank", 0), _R, ("zero_infinity", False)])


class TripletMarginWithDistanceLoss(_Loss):
    """``torch.nn.TripletMarginWithDistanceLoss``:
    :func:`autodiff.nn.functional.triplet_margin_with_distance_loss` with keyword-only
    ``distance_function=None`` (a :class:`PairwiseDistance` submodule, as PyTorch),
    ``margin=1.0``, ``swap=False``, ``reduction='mean'``.

    Raises:
        ValueError: ``margin <= 0`` (PyTorch's message).
        TypeError: a positional or unknown argument.
    """
    fn = "triplet_margin_with_distance_loss"
    args = (("distance_function", None), ("margin", 1.0), ("swap", False), _R)

    def __init__(self, *, distance_function=None, margin: float = 1.0, swap: bool = False,
                 reduction: str = "mean"):
        Module.__init__(self)
        if margin <= 0:
            raise ValueError("TripletMarginWithDistanceLoss: expected margin to be greater "
                             f"than 0, got {margin} instead")
        # a Module distance registers as a child (its state_dict and repr), as in PyTorch
        self.distance_function = (distance_function if distance_function is not None
                                  else PairwiseDistance())
        self.margin, self.swap, self.reduction = margin, swap, reduction

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


CosineSimilarity = _loss("CosineSimilarity", "cosine_similarity", [("dim", 1), ("eps", 1e-8)])
PairwiseDistance = _loss("PairwiseDistance", "pairwise_distance",
                         [("p", 2.0), ("eps", 1e-6), ("keepdim", False)])

__all__ = ["mse_loss", "MSELoss", "L1Loss", "NLLLoss", "CrossEntropyLoss", "KLDivLoss",
           "BCELoss", "BCEWithLogitsLoss", "HuberLoss", "SmoothL1Loss", "SoftMarginLoss",
           "HingeEmbeddingLoss", "MultiLabelSoftMarginLoss", "CosineEmbeddingLoss",
           "MarginRankingLoss", "MultiMarginLoss", "TripletMarginLoss", "PoissonNLLLoss",
           "GaussianNLLLoss", "CosineSimilarity", "PairwiseDistance",
           "MultiLabelMarginLoss", "TripletMarginWithDistanceLoss", "CTCLoss"]
