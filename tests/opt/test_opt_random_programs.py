"""Random graph programs run on the numpy device before and after every pass, each pass
alone and all of them in a row: Receiver calls, Feeder calls, outputs and final variables
must agree (1e-5 relative). Programs come from :mod:`opt_programs`.

Examples are derandomized so CI sees the same 500 programs every run; set
``HYPOTHESIS_RANDOM=1`` to explore fresh ones locally.
"""
from __future__ import annotations

import os

import numpy as np
from hypothesis import HealthCheck, assume, given, settings

from autodiff.device.numpy.interpreter import Interpreter
from autodiff.opt import PASSES, optimize
from opt_helpers import check_wellformed, effects, snapshot
from opt_programs import assert_same, build, execute_graph, specs

DERANDOMIZE = not os.environ.get("HYPOTHESIS_RANDOM")
#: programs drawn per run (200 in the suite, which must stay short; more for a search:
#: HYPOTHESIS_EXAMPLES=2000 HYPOTHESIS_RANDOM=1)
EXAMPLES = int(os.environ.get("HYPOTHESIS_EXAMPLES", 200))
RTOL, ATOL = 1e-5, 1e-6


def _check(prog, ref, graph, what, rtol=RTOL, atol=ATOL):
    check_wellformed(graph)
    assert effects(graph) == effects(prog.graph), f"{what}: effects changed or moved"
    assert_same(ref, execute_graph(prog, graph), rtol, atol, what)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=DERANDOMIZE, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(specs())
def test_every_pass_preserves_what_the_user_observes(spec):
    prog = build(spec)
    g = prog.graph
    before = snapshot(g)
    ref = execute_graph(prog, g)
    for name in PASSES:                                  # each pass alone
        _check(prog, ref, optimize(g, passes=[name]), name)
    out = g
    for name in PASSES:                                  # all of them, in a row
        out = optimize(out, passes=[name])
        _check(prog, ref, out, f"... -> {name}")
    assert snapshot(g) == before, "a pass modified its input graph"
    again = build(spec)                                  # the spec traces the same program
    assert again.graph.count() == g.count()


class _FiniteWatch(Interpreter):
    """The reference run, noting whether any value on the way was NaN or infinite."""

    def run(self, store):
        self.finite = True
        watch = self

        class Vals(dict):
            def __setitem__(self, k, v):
                if watch.finite and v.dtype.kind == "f" and not np.isfinite(v).all():
                    watch.finite = False
                super().__setitem__(k, v)
        self.vals = Vals()
        self.iters = []
        self._run(self.steps, store)


@settings(max_examples=150, deadline=None, derandomize=DERANDOMIZE, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                 HealthCheck.filter_too_much])
@given(specs())
def test_fast_math_keeps_values_of_finite_programs(spec):
    """fast_math may change NaN/inf/-0 results and rounding: checked on programs whose every
    intermediate value is finite, at 1e-4 relative."""
    prog = build(spec)
    watch = []
    ref = execute_graph(prog, prog.graph, interpreter=lambda g: watch.append(_FiniteWatch(g))
                        or watch[-1])
    assume(watch[0].finite)
    _check(prog, ref, optimize(prog.graph, fast_math=True), "fast_math", rtol=1e-4, atol=1e-5)
