"""Scans and sorting along one dim: cumulative sums and products, sorting networks."""
from __future__ import annotations


class ScanMixin:
    pass
