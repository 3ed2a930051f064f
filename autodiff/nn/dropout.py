"""``Dropout`` with a device-side counter-based generator (``Op.RAND``, Philox-4x32-10)."""
from __future__ import annotations

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
        inplace: accepted for PyTorch compatibility (values are never modified in place).
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
        return F.dropout(x, self.p, True, seed=seed, stream=stream)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


def _channel_dropout(x: Tensor, p: float, seed: int, stream: int, batched_ndim: int,
                     name: str) -> Tensor:
    """Zero whole channels: one draw per ``[N, C]`` (or ``[C]`` unbatched), broadcast over
    the trailing (spatial) dims."""
    if x.ndim not in (batched_ndim - 1, batched_ndim):
        raise ValueError(f"{name}: expected {batched_ndim - 1}-D or {batched_ndim}-D input, "
                         f"got {x.ndim}-D input of shape {list(x.shape)}")
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
        return _channel_dropout(x, self.p, seed, stream, self.batched_ndim,
                                type(self).__name__)


class Dropout1d(_DropoutNd):
    """``torch.nn.Dropout1d``: zero whole channels of ``[N, C, L]`` (or ``[C, L]``) with
    probability ``p``, scale the rest by ``1 / (1 - p)``; identity in ``eval()``."""
    batched_ndim = 3


class Dropout2d(_DropoutNd):
    """``torch.nn.Dropout2d``: zero whole channels of ``[N, C, H, W]`` (or ``[C, H, W]``)."""
    batched_ndim = 4


class Dropout3d(_DropoutNd):
    """``torch.nn.Dropout3d``: zero whole channels of ``[N, C, D, H, W]``."""
    batched_ndim = 5
