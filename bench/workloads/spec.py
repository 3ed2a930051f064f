"""What a workload is: initial parameters, data, a loss in framework-neutral math, FLOPs."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np


@dataclass
class Data:
    """Inputs of a training run.

    Attributes:
        const: name -> float32 array, the same at every step.
        stream: name -> float32 array ``[steps, ...]``; step ``i`` reads row ``i``.
    """
    const: dict = field(default_factory=dict)
    stream: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Workload:
    """One training workload, run with identical math by every system.

    Attributes:
        key: short label (``"W1"``).
        name: command-line name (``"mlp255"``).
        title: one line for the table.
        steps: SGD steps of the full run.
        quick_steps: SGD steps under ``--quick``: the full length for the light
            workloads (W1, W2, W4: well under a second per system), whose fixed
            costs per run would otherwise weigh on the steady step.
        lr: SGD learning rate (plain SGD, no momentum).
        init: ``seed -> {name: float32 array}``, the initial parameters.
        data: ``steps -> Data``.
        loss: ``(F, params, inputs) -> scalar`` in the math of :mod:`.layers`; ``inputs``
            maps every name of ``Data.const`` and ``Data.stream`` to this step's value.
        flops: matmul FLOPs of one training step (forward and backward), counted by hand.
        evaluate: optional ``final params -> {metric: float}`` (numpy), e.g. accuracy.
        check_steps: steps of a separate short run whose final parameters are compared too
            (final parameters of the timed run always are),
            for workloads whose training amplifies float32 rounding so that no two
            frameworks end a full run close together (W2); None for none.
    """
    key: str
    name: str
    title: str
    steps: int
    quick_steps: int
    lr: float
    init: Callable[[int], dict]
    data: Callable[[int], Data]
    loss: Callable
    flops: int
    evaluate: Callable[[dict], dict] | None = None
    check_steps: int | None = None


def full(shape, value: float) -> np.ndarray:
    """A float32 array of ``shape`` filled with ``value``."""
    return np.full(shape, value, np.float32)


@dataclass
class Outcome:
    """What one system's training run measured (times in seconds from ``t0``, the moment
    the runner starts building: tracing, compiling and uploading are all after it).

    Attributes:
        first_step_s: ``t0`` -> first step's results on the host.
        total_s: ``t0`` -> final parameters on the host as numpy.
        stamps: completion time of every step (seconds from ``t0``), or None when the
            system runs the whole loop without a host round trip per step.
        loop_s: wall time of the loop alone, when ``stamps`` is None.
        params: final parameters, name -> float32 array.
        stats: further figures (compile times, kernels, memory plan, ...), JSON-able.
        notes: short remarks shown in the table.
        cpu: process CPU time (s, all threads) at each stamp, or None.
        cpu_loop_s: CPU time of the loop alone, when ``stamps`` is None.
    """
    first_step_s: float
    total_s: float
    stamps: list | None
    loop_s: float | None
    params: dict
    stats: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    cpu: list | None = None
    cpu_loop_s: float | None = None
