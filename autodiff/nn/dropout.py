"""``Dropout`` with a device-side counter-based generator (``Op.RAND``, Philox-4x32-10), the
channel-wise ``Dropout1d/2d/3d``, SELU's ``AlphaDropout`` and ``FeatureAlphaDropout``, and
the functional forms ``dropout1d/2d/3d``, ``alpha_dropout``, ``feature_alpha_dropout``.

Every mask is an ``Op.RAND`` draw: new in every loop iteration, the same on every device for
the same seed. A functional form takes the seed from the global generator
(:func:`autodiff.manual_seed`) when it is traced, or from ``seed=`` (autodiff's own
keyword, as :func:`autodiff.nn.functional.dropout`); a module keeps a
:class:`RandomStream`. The functional forms' ``inplace=True`` updates the input tensor
(PyTorch's in-place semantics: a traced tensor names the result from then on); the
modules' ``inplace`` flag is accepted and ignored, as :class:`Dropout`'s.
"""
from __future__ import annotations

import math
import warnings

from ..graph import ops
from ..graph.tensor import Tensor, _wrap, default_rng, where
from ..graph.trace import TRACER
from . import functional as F
from .module import Module


class RandomStream:
    """Where one module's dropout masks come from: a seed plus a per-program call count.

    Each call of :meth:`next` while tracing a program returns ``(seed, k)`` with ``k`` = 0,
    1, 2, ... (the count restarts for every new program), so tracing the same program twice
    gives identical ``RAND`` nodes and identical masks, and two calls of one module within a
    program (or a loop iteration) get independent masks.

    Args:
        seed: the Philox key word 0; ``None`` draws one from the global generator
            (:func:`autodiff.manual_seed`).
    """

    def __init__(self, seed: int | None = None):
        self.reseed(seed)

    def reseed(self, seed: int | None = None) -> None:
        """Take a new seed (``None``: draw one) and restart the call count."""
        self.seed = int(default_rng().integers(0, 2 ** 32)) if seed is None else int(seed)
        self._generation, self._count = -1, 0

    def next(self) -> tuple[int, int]:
        """``(seed, stream)`` for the next mask traced in the current program."""
        if self._generation != TRACER.generation:
            self._generation, self._count = TRACER.generation, 0
        self._count += 1
        return self.seed, self._count - 1


class Dropout(Module):
    """Zero each element with probability ``p`` in training mode, scaling the rest by
    ``1 / (1 - p)``; the identity in ``eval()`` mode (``torch.nn.Dropout``).

    Masks are drawn on the device (``Op.RAND``), new in every loop iteration, and are the
    same on every device for the same seed.

    Args:
        p: drop probability in ``[0, 1]``.
        inplace: the input tensor takes the result (PyTorch's in-place form; a leaf that
            requires grad raises ``RuntimeError``).
        seed: Philox seed; ``None`` draws one from the global generator at construction.

    Raises:
        ValueError: ``p`` outside ``[0, 1]``.
    """

    def __init__(self, p: float = 0.5, inplace: bool = False, seed: int | None = None):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = float(p), inplace
        self.rng = RandomStream(seed)

    def reseed(self, seed: int | None = None) -> None:
        """Draw a new seed (used when a module is cloned, e.g. by ``TransformerEncoder``)."""
        self.rng.reseed(seed)

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        seed, stream = self.rng.next()
        return _result(x, F.dropout(x, self.p, True, seed=seed, stream=stream), self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class DropoutRankError(ValueError, RuntimeError):
    """An input of a rank a channel dropout does not take: a ``RuntimeError`` as PyTorch
    raises, and a ``ValueError``."""


def _channel_dropout(x: Tensor, p: float, seed: int, stream: int, batched_ndim: int,
                     name: str) -> Tensor:
    """Zero whole channels: one draw per ``[N, C]`` (or ``[C]`` unbatched), broadcast over
    the trailing (spatial) dims."""
    if x.ndim not in (batched_ndim - 1, batched_ndim):
        raise DropoutRankError(f"{name}: expected {batched_ndim - 1}-D or {batched_ndim}-D "
                               f"input, got {x.ndim}-D input of shape {list(x.shape)}")
    lead = 2 if x.ndim == batched_ndim else 1
    if p == 1.0:
        return x * 0.0
    u = _wrap(ops.rand(x.shape[:lead] + (1,) * (x.ndim - lead), seed, stream))
    return x * where(u >= p, 1.0 / (1.0 - p), 0.0)


class _DropoutNd(Dropout):
    batched_ndim = 3

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        seed, stream = self.rng.next()
        return _result(x, _channel_dropout(x, self.p, seed, stream, self._batched(x),
                                           type(self).__name__), self.inplace)

    def _batched(self, x: Tensor) -> int:
        """The rank of a batched input (``x`` may be one less: unbatched)."""
        return self.batched_ndim


class Dropout1d(_DropoutNd):
    """``torch.nn.Dropout1d``: zero whole channels of ``[N, C, L]`` (or ``[C, L]``) with
    probability ``p``, scale the rest by ``1 / (1 - p)``; identity in ``eval()``."""
    batched_ndim = 3


class Dropout2d(_DropoutNd):
    """``torch.nn.Dropout2d``: zero whole channels of ``[N, C, H, W]``. As PyTorch's, a 3-D
    input is taken as ``[N, C, L]`` (channel-wise 1-D dropout, with PyTorch's
    ``UserWarning``), not as an unbatched ``[C, H, W]``."""
    batched_ndim = 4

    def _batched(self, x: Tensor) -> int:
        if x.ndim == 3:
            warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that "
                          "channel-wise 1D dropout behavior is desired - input is interpreted "
                          "as shape (N, C, L), where C is the channel dim. To maintain the 1D "
                          "channel-wise dropout behavior, please switch to using dropout1d "
                          "instead.", stacklevel=4)
            return 3
        return 4


class Dropout3d(_DropoutNd):
    """``torch.nn.Dropout3d``: zero whole channels of ``[N, C, D, H, W]``."""
    batched_ndim = 5


# -- functional channel and alpha dropout ----------------------------------------------------
#: SELU's negative saturation ``-scale * alpha`` is ``-ALPHA`` (Klambauer et al., 2017)
_ALPHA = 1.7580993408473766


def _check_p(p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _seed(seed: int | None) -> int:
    return int(default_rng().integers(0, 2 ** 32)) if seed is None else int(seed)


def _noise_shape(x: Tensor, feature: bool) -> tuple:
    """One draw per element, or (``feature``) per ``[dim 0, dim 1]`` pair, broadcast over the
    other dims (PyTorch's ``make_feature_noise``)."""
    if not feature:
        return tuple(x.shape)
    if x.ndim < 2:
        raise RuntimeError("Feature dropout requires at least 2 dimensions in the input")
    return tuple(x.shape[:2]) + (1,) * (x.ndim - 2)


def _result(input: Tensor, out: Tensor, inplace: bool) -> Tensor:
    """``out``, or with ``inplace`` ``input`` updated to it (PyTorch's in-place forms: a
    leaf that requires grad raises ``RuntimeError``)."""
    return input._set_promoted(out) if inplace else out


def _feature_dropout(x: Tensor, p: float, seed, stream: int) -> Tensor:
    shape = _noise_shape(x, True)
    if p == 1.0:
        return x * 0.0
    u = _wrap(ops.rand(shape, _seed(seed), stream))
    return x * where(u >= p, 1.0 / (1.0 - p), 0.0)


def _alpha(x: Tensor, p: float, seed, stream: int, feature: bool) -> Tensor:
    """PyTorch's ``_dropout_impl`` with ``alpha_dropout``: kept values ``a x + ALPHA a p``,
    dropped ones ``ALPHA a (p - 1)`` (SELU's saturation, shifted and scaled), ``a = 1 /
    sqrt((ALPHA^2 p + 1)(1 - p))``, so unit-variance zero-mean inputs stay so."""
    shape = _noise_shape(x, feature)
    if p == 1.0:
        return x * 0.0
    a = 1.0 / math.sqrt((_ALPHA * _ALPHA * p + 1.0) * (1.0 - p))
    keep = _wrap(ops.rand(shape, _seed(seed), stream)) >= p
    return x * where(keep, a, 0.0) + where(keep, _ALPHA * a * p, _ALPHA * a * (p - 1.0))


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, *,
              seed: int | None = None, stream: int = 0) -> Tensor:
    """Zero whole channels of ``[N, C, L]`` (or unbatched ``[C, L]``) with probability
    ``p``, scaling the rest by ``1 / (1 - p)``, as ``torch.nn.functional.dropout1d``
    (one draw per ``(n, c)``, new every loop iteration). ``training=False``: the input.

    Raises:
        ValueError: ``p`` outside ``[0, 1]``. RuntimeError: not 2-D or 3-D (PyTorch's).
    """
    _check_p(p)
    if input.ndim not in (2, 3):
        raise DropoutRankError(
            f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note "
            "that dropout1d exists to provide channel-wise dropout on inputs with 1 spatial "
            "dimension, a channel dimension, and an optional batch dimension (i.e. 2D or 3D "
            "inputs).")
    if not training or p == 0.0:
        return input
    if input.ndim == 2:
        out = _feature_dropout(input.unsqueeze(0), p, seed, stream).squeeze(0)
    else:
        out = _feature_dropout(input, p, seed, stream)
    return _result(input, out, inplace)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, *,
              seed: int | None = None, stream: int = 0) -> Tensor:
    """Zero whole channels of ``[N, C, H, W]`` with probability ``p``, scaling the rest by
    ``1 / (1 - p)``, as ``torch.nn.functional.dropout2d``: one draw per ``(dim 0, dim
    1)`` pair. As PyTorch's, a 3-D input is taken as ``[N, C, L]`` (channel-wise 1-D
    dropout) with a ``UserWarning``, and another rank warns too.

    Raises:
        ValueError: ``p`` outside ``[0, 1]``. RuntimeError: fewer than 2 dims.
    """
    _check_p(p)
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is "
                      "deprecated and will result in an error in a future release. To retain "
                      "the behavior and silence this warning, please use dropout instead.",
                      stacklevel=2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that "
                      "channel-wise 1D dropout behavior is desired - input is interpreted as "
                      "shape (N, C, L), where C is the channel dim. To maintain the 1D "
                      "channel-wise dropout behavior, please switch to using dropout1d "
                      "instead.", stacklevel=2)
    if not training or p == 0.0:
        return input
    return _result(input, _feature_dropout(input, p, seed, stream), inplace)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False, *,
              seed: int | None = None, stream: int = 0) -> Tensor:
    """Zero whole channels of ``[N, C, D, H, W]`` (or unbatched ``[C, D, H, W]``) with
    probability ``p``, scaling the rest by ``1 / (1 - p)``, as
    ``torch.nn.functional.dropout3d``; another rank warns (PyTorch's ``UserWarning``) and
    is taken as unbatched.

    Raises:
        ValueError: ``p`` outside ``[0, 1]``. RuntimeError: fewer than 1 dim.
    """
    _check_p(p)
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is "
                      "deprecated and will result in an error in a future release. To retain "
                      "the behavior and silence this warning, please use dropout instead.",
                      stacklevel=2)
    if not training or p == 0.0:
        return input
    if input.ndim != 5:
        out = _feature_dropout(input.unsqueeze(0), p, seed, stream).squeeze(0)
    else:
        out = _feature_dropout(input, p, seed, stream)
    return _result(input, out, inplace)


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                  inplace: bool = False, *, seed: int | None = None,
                  stream: int = 0) -> Tensor:
    """Alpha dropout (Klambauer et al., 2017), as ``torch.nn.functional.alpha_dropout``
    (note PyTorch's default ``training=False``: the identity).

    Each element is dropped with probability ``p`` (a new device draw every loop
    iteration): kept ones become ``a x + ALPHA a p``, dropped ones ``ALPHA a (p - 1)``
    (SELU's saturation ``-ALPHA``, shifted and scaled), ``a = 1 / sqrt((ALPHA^2 p + 1)(1 -
    p))``, ``ALPHA = 1.7580993408473766``: inputs of zero mean and unit variance keep them
    (PyTorch's formula). The gradient is ``a`` where kept, 0 where dropped. ``p = 1``:
    zeros. Any shape, float32; ``seed``/``stream`` as :func:`autodiff.nn.functional.dropout`.

    Raises:
        ValueError: ``p`` outside ``[0, 1]``.
    """
    _check_p(p)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    return _result(input, _alpha(input, p, seed, stream, False), inplace)


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False,
                          inplace: bool = False, *, seed: int | None = None,
                          stream: int = 0) -> Tensor:
    """:func:`alpha_dropout` of whole channels: one draw per ``(dim 0, dim 1)`` pair
    (``[N, C, *]``), as ``torch.nn.functional.feature_alpha_dropout`` (default
    ``training=False``).

    Raises:
        ValueError: ``p`` outside ``[0, 1]``. RuntimeError: fewer than 2 dims (in
            training).
    """
    _check_p(p)
    if not training or p == 0.0 or input.numel() == 0:
        return input
    return _result(input, _alpha(input, p, seed, stream, True), inplace)


class AlphaDropout(Dropout):
    """``torch.nn.AlphaDropout(p=0.5, inplace=False)``: :func:`alpha_dropout` in
    ``train()`` mode (a new mask every call and loop iteration), the identity in
    ``eval()``. For SELU networks: keeps zero mean and unit variance. Any shape.

    Raises:
        ValueError: ``p`` outside ``[0, 1]``.
    """

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        seed, stream = self.rng.next()
        return alpha_dropout(x, self.p, True, seed=seed, stream=stream)


class FeatureAlphaDropout(Dropout):
    """``torch.nn.FeatureAlphaDropout(p=0.5, inplace=False)``:
    :func:`feature_alpha_dropout` (whole channels of ``[N, C, *]``) in ``train()`` mode,
    the identity in ``eval()``.

    Raises:
        ValueError: ``p`` outside ``[0, 1]``. RuntimeError: an input of fewer than 2 dims.
    """

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        seed, stream = self.rng.next()
        return feature_alpha_dropout(x, self.p, True, seed=seed, stream=stream)
