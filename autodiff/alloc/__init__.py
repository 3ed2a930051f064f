"""Memory planning: liveness, offline offset assignment into one arena, verification, plots.

Pipeline stage ``alloc`` (graph -> opt -> procedural -> fusion -> alloc -> device).

* :mod:`.liverange`: ``LiveRange``, ``Allocation``, ``Plan``.
* :mod:`.liveness`: live ranges of a procedural program (``For`` blocks included).
* :mod:`.inplace`: a result reusing its dying operand's slot.
* :mod:`.greedy_by_size`, :mod:`.best_fit`, :mod:`.target_fit`: the packers.
* :mod:`.lower_bound`: peak live bytes; :mod:`.verify`: the safety proof; :mod:`.plot`.
* :mod:`.planner`: ``pack`` (live ranges -> plan) and ``plan_memory`` (program -> plan).
"""
from __future__ import annotations

from .best_fit import best_fit
from .greedy_by_size import greedy_by_size
from .liverange import Allocation, LiveRange, Plan, align_up
from .liveness import Liveness, liveness
from .lower_bound import live_bytes, lower_bound
from .planner import STRATEGIES, pack, plan_memory
from .plot import plot
from .target_fit import target_fit
from .verify import PlanError, verify

__all__ = ["plan_memory", "pack", "plot", "verify", "PlanError", "LiveRange", "Allocation",
           "Plan", "Liveness", "liveness", "lower_bound", "live_bytes", "align_up",
           "STRATEGIES", "greedy_by_size", "best_fit", "target_fit"]
