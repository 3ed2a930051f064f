"""Random programs (the graph-pass generator, tests/opt/opt_programs.py) on the OpenCL device
against the graph-IR numpy reference interpreter: Receiver calls, Feeder calls, outputs and
final variables must agree within 1e-5 relative. The programs mix loops (nested too),
Feeders, Receivers, backward, in-place updates, views, matmuls, reductions, softmax, and
special values (inf, nan, -0, subnormals, 3e38).

Each example compiles one OpenCL program, the graph optimized as ``execute()`` would: a
cold PoCL build plus a JIT of every kernel costs 0.3-1 s, so :data:`EXAMPLES` = 80 keeps
this test under a minute on a cold kernel cache and an idle machine (measured: 60 examples
40 s cold, ~25 s warm), and the op suite on opencl plus this plus the examples under ~3
minutes cold in all. The 500 of the pass and procedural-IR suites would take 5-8 minutes
cold for little more coverage of the renderer: its kernel kinds and special values all
appear within the first few dozen programs (the first 60 found relu(nan) == 0). Examples
are derandomized so CI sees the same programs every run; set ``HYPOTHESIS_RANDOM=1`` to
explore fresh ones locally.

The default compile runs these small programs as launch chains (every kernel body in one
work-item, :mod:`autodiff.device.opencl.chain`); :data:`PARALLEL_EXAMPLES` more run with
``chain_work=0``, every kernel on its own NDRange, as large kernels always do.
"""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "opt"))

from opt_programs import assert_same, build, execute_graph, specs  # noqa: E402

from autodiff.device import opencl  # noqa: E402
from autodiff.device.opencl import device  # noqa: E402
from autodiff.opt import optimize  # noqa: E402

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)

DERANDOMIZE = not os.environ.get("HYPOTHESIS_RANDOM")
RTOL, ATOL = 1e-5, 1e-6
EXAMPLES = 80
PARALLEL_EXAMPLES = 30


@settings(max_examples=EXAMPLES, deadline=None, derandomize=DERANDOMIZE, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(specs())
def test_opencl_matches_the_graph_interpreter(spec):
    prog = build(spec)
    ref = execute_graph(prog, prog.graph)
    g = optimize(prog.graph)
    got = execute_graph(prog, g, interpreter=opencl.compile)
    assert_same(ref, got, RTOL, ATOL, "opencl")


@settings(max_examples=PARALLEL_EXAMPLES, deadline=None, derandomize=DERANDOMIZE,
          database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(specs())
def test_opencl_ndrange_launches_match_the_graph_interpreter(spec):
    prog = build(spec)
    ref = execute_graph(prog, prog.graph)
    g = optimize(prog.graph)
    got = execute_graph(prog, g, interpreter=functools.partial(opencl.compile, chain_work=0))
    assert_same(ref, got, RTOL, ATOL, "opencl (no chains)")
