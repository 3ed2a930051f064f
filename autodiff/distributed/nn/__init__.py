"""``torch.distributed.nn``'s counterpart: :mod:`.functional` (out-of-place collectives)."""
from . import functional

__all__ = ["functional"]
