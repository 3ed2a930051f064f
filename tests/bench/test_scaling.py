"""The scaling table (bench/scaling.py): speedup and efficiency on synthetic rows, and one
real 2-process run of W3 per system (a few steps, autodiff on OpenCL where available; no
timing asserted)."""
from __future__ import annotations

import pytest

from bench import scaling


def test_table_of_synthetic_rows():
    rows = [{"workload": "transformer", "system": "autodiff", "ranks": n, "status": "ok",
             "steps_per_s": s} for n, s in ((1, 10.0), (2, 16.0))]
    rows.append({"workload": "transformer", "system": "torch-ddp-gloo", "ranks": 2,
                 "status": "timed out after 600 s"})
    results = {"meta": {"device": "opencl", "loadavg": (1.0, 1.0, 1.0)}, "rows": rows}
    for r in rows:                        # what run() fills in
        if r["status"] == "ok":
            r["speedup"] = r["steps_per_s"] / 10.0
            r["efficiency"] = r["speedup"] / r["ranks"]
    md = scaling.table(results)
    assert "| W3 transformer | autodiff | 2 | 16.00 | 1.60x | 80% |" in md
    assert "timed out after 600 s" in md
    assert "W3 transformer" in scaling.table(results, markdown=False)
    assert "not run: no mpi" in scaling.table({"meta": {"skipped": "no mpi"}, "rows": []})


@pytest.mark.slow
@pytest.mark.skipif(scaling.missing() is not None, reason=str(scaling.missing()))
@pytest.mark.parametrize("system", scaling.SYSTEMS)
def test_a_real_two_process_run(system):
    from autodiff.device import unavailable
    device = "opencl" if unavailable("opencl") is None else "numpy"
    row = scaling.run_one("transformer", system, 2, 3, device, 300, [])
    assert row["status"] == "ok", row
    assert row["steps_per_s"] > 0 and row["timed_steps"] >= 1
    if system == "autodiff":                # 2 buckets (1 MiB first), timed per step
        assert row["allreduce_ms"] > 0
