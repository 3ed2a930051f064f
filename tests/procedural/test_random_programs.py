"""Random programs (the graph-pass test generator, tests/opt/opt_programs.py) run by the
graph-IR reference interpreter and by the procedural-IR executor: unfused, fused (each group
as one kernel) and fused op by op, on the raw and on the optimized graph. Receiver calls,
Feeder calls, outputs and final variables must agree (1e-5 relative).

Examples are derandomized so CI sees the same programs every run; set
``HYPOTHESIS_RANDOM=1`` to explore fresh ones locally.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "opt"))

from opt_programs import assert_same, build, execute_graph, specs  # noqa: E402

from autodiff.device.numpy.procedural import compile_procedural  # noqa: E402
from autodiff.opt import optimize  # noqa: E402

DERANDOMIZE = not os.environ.get("HYPOTHESIS_RANDOM")
#: programs drawn per run (200 in the suite, which must stay short; more for a search:
#: HYPOTHESIS_EXAMPLES=2000 HYPOTHESIS_RANDOM=1)
EXAMPLES = int(os.environ.get("HYPOTHESIS_EXAMPLES", 200))
RTOL, ATOL = 1e-5, 1e-6

MODES = {
    "unfused": dict(fuse=False),
    "fused": dict(fuse=True),
    "fused-by-member": dict(fuse=True, by_member=True),
}


@settings(max_examples=EXAMPLES, deadline=None, derandomize=DERANDOMIZE, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(specs())
def test_procedural_executor_matches_the_graph_interpreter(spec):
    prog = build(spec)
    ref = execute_graph(prog, prog.graph)
    graphs = {"raw": prog.graph, "opt": optimize(prog.graph)}
    for gname, g in graphs.items():
        for mname, kw in MODES.items():
            got = execute_graph(prog, g, interpreter=lambda g, kw=kw: compile_procedural(g, **kw))
            assert_same(ref, got, RTOL, ATOL, f"{gname} graph, {mname}")
