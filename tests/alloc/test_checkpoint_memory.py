"""Activation checkpointing on W2 (the 6-layer tiny transformer, every layer wrapped in
``checkpoint``): the planned arena is at most half the plain model's, and both plans stay
within 2% of their liveness lower bound (the step time is measured by
``python -m bench.checkpoint``, not here)."""
from __future__ import annotations

import numpy as np
import pytest

import autodiff as ad
from autodiff.alloc import plan_memory, verify
from autodiff.graph.trace import TRACER
from bench.checkpoint import trace_w2

ALIGN = 64        # the OpenCL device's alignment


def _plan_and_params(checkpointed: bool):
    P = trace_w2(3, checkpointed)
    ad.execute(device="numpy", ir="procedural")
    prog = TRACER.last.stages["fused"]
    plan = plan_memory(prog, ALIGN, members=False)     # one step per kernel, as OpenCL
    verify(plan)
    return plan, {k: p.numpy() for k, p in P.items()}


@pytest.fixture(scope="module")
def plans():
    return _plan_and_params(False), _plan_and_params(True)


def test_checkpointed_arena_is_at_most_half(plans):
    (plain, _), (ckpt, _) = plans
    assert ckpt.arena_bytes <= 0.5 * plain.arena_bytes, (plain.summary(), ckpt.summary())


def test_both_plans_meet_the_liveness_bound_within_two_percent(plans):
    for plan, _ in plans:
        assert plan.arena_bytes <= 1.02 * plan.lower_bound_bytes, plan.summary()


def test_checkpointing_does_not_change_training(plans):
    (_, a), (_, b) = plans
    for k in a:
        np.testing.assert_allclose(b[k], a[k], rtol=1e-6, atol=1e-7, err_msg=k)
