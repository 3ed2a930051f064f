"""The benchmark workloads W1-W6, in table order.

W1-W4 and W6 are :class:`~.spec.Workload` objects run with identical math by every system;
W5 (:mod:`.charlm`) runs ``examples/transformer.py`` on autodiff devices only.
"""
from __future__ import annotations

from . import charlm
from .cnn import WORKLOAD as CNN
from .digits import WORKLOAD as DIGITS
from .mlp255 import WORKLOAD as MLP255
from .spec import Data, Outcome, Workload
from .tiny_transformer import WORKLOAD as TINY_TRANSFORMER
from .transformer import WORKLOAD as TRANSFORMER

#: name -> Workload, W1..W4 and W6.
WORKLOADS = {w.name: w for w in (MLP255, TINY_TRANSFORMER, TRANSFORMER, DIGITS, CNN)}

#: every workload name in table order (``charlm`` is W5).
NAMES = list(WORKLOADS) + [charlm.NAME]

__all__ = ["WORKLOADS", "NAMES", "Workload", "Data", "Outcome", "charlm"]
