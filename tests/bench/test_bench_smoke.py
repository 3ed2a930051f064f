"""The benchmark harness cannot rot: its figures, agreement rule and tables on synthetic
rows, the shared model math against PyTorch, and one real run of W1 for a few steps on
every installed system (no timing is asserted anywhere)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from bench import report
from bench.run import check_agreement, main
from bench.systems import missing, systems
from bench.workloads import WORKLOADS
from bench.workloads.frameworks import NUMPY, TENSOR


def test_step_figures_drop_warmup_and_take_percentiles():
    stamps = np.cumsum([1.0, 500.0] + [1.0] * 200 + [2.0] * 200) * 1e-3  # s; 500 ms warm-up
    f = report.step_figures(list(stamps), None, len(stamps))
    assert f["warmup"] == 40 and f["window"] == 16           # 360 intervals / 20, whole 8s
    assert f["p10_ms"] == pytest.approx(1.0) and f["p90_ms"] == pytest.approx(2.0)
    assert 1.0 <= f["median_ms"] <= 2.0
    # the headline is the mean of the 361 timed intervals: 161 of 1 ms, 200 of 2 ms
    assert f["step_ms"] == f["mean_ms"] == pytest.approx((161 + 400) / 361)
    late = np.floor(np.arange(1, 801) / 8) * 8e-3       # 1 ms steps seen in bursts of 8
    g = report.step_figures(list(late), None, 800)
    assert g["window"] % 8 == 0                          # whole bursts: every window exact
    assert g["median_ms"] == g["p10_ms"] == g["p90_ms"] == pytest.approx(1.0, rel=1e-9)
    assert g["step_ms"] == pytest.approx(1.0, rel=0.02)
    # bursts of 15 against windows of 8: the windows' median is off, the mean is not
    b15 = np.floor(np.arange(1, 401) / 15) * 15e-3
    b = report.step_figures(list(b15), None, 400)
    assert b["step_ms"] == pytest.approx(1.0, rel=0.05)
    assert abs(b["median_ms"] - 1.0) > 0.05
    h = report.step_figures(None, 0.5, 100)                           # whole-loop systems
    assert h["step_ms"] == h["median_ms"] == pytest.approx(5.0) and h["p10_ms"] is None


def test_a_devices_steady_step_replaces_stamps_that_lag_the_device():
    """Stamps taken when the host reaches each Receiver, 8 steps after the device ran it
    until the final drain stamps the last 8 on time: their mean undercounts; the device's
    ``steady_iteration_ms`` is what the table shows."""
    true = np.arange(1, 101) * 1e-3                        # 1 ms steps on the device
    lagged = np.minimum(true + 8e-3, true[-1])             # late by 8, the tail drained
    f = report.step_figures(list(lagged), None, 100)
    assert f["step_ms"] < 0.95                             # the bias
    stats = {"opencl": {"launches": 3, "steady_iteration_ms": 1.02, "steady_cpu_ms": 1.9}}
    assert report.device_steady_ms(stats) == 1.02
    assert report.device_steady_cpu_ms(stats) == 1.9
    assert report.device_steady_ms({"numpy": {"kernels": 4}}) is None
    assert report.device_steady_ms({}) is None


def test_max_rel_diff_is_relative_with_an_absolute_floor():
    ref = {"w": np.array([2.0, -4.0], np.float32), "b": np.array([1e-9, 0], np.float32)}
    a = {"w": np.array([2.0, -4.004], np.float32), "b": np.array([2e-9, 0], np.float32)}
    assert report.max_rel_diff(a, ref) == pytest.approx(1e-3, rel=1e-3)
    assert report.max_rel_diff(ref, ref) == 0.0
    with pytest.raises(KeyError):
        report.max_rel_diff({"w": ref["w"]}, ref)


def test_disagreement_rule():
    calm = {"max_rel_diff": 5e-3, "check_rel_diff": 1e-6, "peer_spread": 1e-5}
    chaotic = dict(calm, peer_spread=0.3)
    assert report.disagrees(calm, "max_rel_diff")
    assert not report.disagrees(chaotic, "max_rel_diff")
    assert report.disagrees(dict(chaotic, check_rel_diff=2e-3), "check_rel_diff")
    assert not report.disagrees(calm, "check_rel_diff")


def test_agreement_against_the_numpy_device_with_peer_spread():
    one = {"w": np.ones(3, np.float32)}
    off = {"w": np.full(3, 1.5, np.float32)}
    rows = [{"system": "jax-jit", "peer": True, "status": "ok"},
            {"system": "autodiff:numpy", "peer": False, "status": "ok"},
            {"system": "torch-eager", "peer": True, "status": "ok"},
            {"system": "autodiff:x", "peer": False, "status": "error: boom"}]
    params = {"jax-jit": {"end": off, "check": one}, "autodiff:numpy": {"end": one, "check": one},
              "torch-eager": {"end": one, "check": off}, "autodiff:x": {}}
    check_agreement(rows, params)
    jax, ref, torch, bad = rows
    assert ref["max_rel_diff"] == 0.0 and "reference for rel diff" in ref["notes"]
    assert jax["max_rel_diff"] == pytest.approx(0.5) and jax["check_rel_diff"] == 0.0
    assert torch["check_rel_diff"] == pytest.approx(0.5)
    assert jax["peer_spread"] == pytest.approx(0.5)         # |1.5 - 1| / 1, either way round
    assert "max_rel_diff" not in bad
    assert report.disagrees(torch, "check_rel_diff")
    assert not report.disagrees(jax, "max_rel_diff")        # peers disagree among themselves


def test_device_figures_found_by_name():
    stats = {"memory": {"arena_bytes": 4096, "lower_bound_bytes": 2048, "naive_bytes": 8192,
                        "saved_pct": 50.0}, "kernels_per_iteration": 12,
             "opencl": {"launches": 3}}
    f = report.device_figures(stats)
    assert f == {"kernels_per_iter": 12, "launches_per_iter": 3, "arena_bytes": 4096,
                 "lower_bound_bytes": 2048, "saved_pct": 50.0}
    assert report.device_figures({})["arena_bytes"] is None


def test_tables_show_ratios_against_the_best_agreeing_peer_and_statuses():
    ok = {"peer": True, "status": "ok", "p10_ms": 3.0, "p90_ms": 5.0, "peer_spread": 1e-6}
    rows = [
        dict(ok, system="autodiff:numpy", peer=False, first_step_s=0.5, step_ms=1.0,
             total_s=1.0, rss_mb=100, gflops=2.0, max_rel_diff=0.0),
        dict(ok, system="jax-jit", first_step_s=1.0, step_ms=4.0, total_s=2.0, rss_mb=200,
             gflops=0.5, max_rel_diff=1e-5),
        dict(ok, system="fast-but-wrong", first_step_s=0.1, step_ms=0.1, total_s=0.1,
             rss_mb=10, gflops=20.0, max_rel_diff=2e-2),
        {"system": "torch-eager", "peer": True, "status": "torch not installed"},
    ]
    text = report.text_table(rows)
    assert "1 (0.25x)" in text and "2.00 (4.00x)" in text      # step ms, GFLOP/s vs jax-jit
    assert "torch not installed" in text and "2.0e-02 DISAGREES" in text
    md = report.markdown_table(rows)
    assert md.count("\n") == len(rows) + 1 and "0.25x" in md
    line = report.summary(rows)
    assert "4.00x faster than the best peer jax-jit" in line and "fast-but-wrong" in line


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_shared_math_matches_between_numpy_and_torch(name):
    import torch
    w = WORKLOADS[name]
    params, data = w.init(0), w.data(2)
    inputs = dict(data.const, **{k: v[0] for k, v in data.stream.items()})
    ref = w.loss(NUMPY, params, inputs)
    got = w.loss(TENSOR, {k: torch.from_numpy(v) for k, v in params.items()},
                 {k: torch.from_numpy(v) for k, v in inputs.items()})
    np.testing.assert_allclose(got.item(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_w1_runs_on_every_installed_system(tmp_path):
    """Every system but the meta_schedule-tuned TVM variant (tuning takes minutes on a cold
    cache: full bench runs only; the device's tuning path has its own opt-in test)."""
    out, md = tmp_path / "r.json", tmp_path / "B.md"
    chosen = [s for s in systems() if not s.name.endswith("-tuned")]
    main(["--workloads", "W1", "--steps", "3", "--caches", "warm", "--json", str(out),
          "--md", str(md), "--systems", ",".join(s.name for s in chosen)])
    results = json.loads(out.read_text())
    rows = {r["system"]: r for r in results["workloads"][0]["rows"]}
    assert set(rows) == {s.name for s in chosen}
    for s in chosen:
        r = rows[s.name]
        if missing(s) or r["status"].startswith("missing"):
            assert r["status"] != "ok"
            continue
        assert r["status"] == "ok", (s.name, r["status"])
        assert r["steps"] == 3 and r["step_ms"] > 0 and r["rss_mb"] > 0
        assert r["max_rel_diff"] < report.AGREE_TOL, s.name
        steady = report.device_steady_ms(r["stats"].get("device_stats", {}))
        if steady is not None:          # OpenCL: the device's figure, not the stamps'
            assert r["step_ms"] == steady and r["stamp_ms"] > 0
            assert r["cpu_ms"] == report.device_steady_cpu_ms(r["stats"]["device_stats"])
    text = md.read_text()
    assert "## Machine" in text and "W1 mlp255" in text and "python -m bench" in text


def test_repeated_pairs_run_in_rounds_and_keep_the_median_run(monkeypatch, tmp_path):
    """``--repeat 3``: every pair runs three times, all pairs once per round; the table
    keeps each pair's median run (its row and its parameters), listing every run's time,
    and the largest of the runs' peak RSS."""
    from bench import run as R
    order, times = [], {"autodiff:numpy": [3.0, 1.0, 2.0], "torch-eager": [5.0, 4.0, 6.0]}
    rss = {"autodiff:numpy": [280.0, 150.0, 148.0], "torch-eager": [330.0, 331.0, 333.0]}

    def fake_pair(name, system, steps, threads, timeout, warm):
        order.append(system.name)
        k = sum(s == system.name for s in order) - 1
        ms = times[system.name][k]
        p = {"end": {"w": np.full(2, ms, np.float32)}}
        return {"workload": name, "system": system.name, "peer": system.peer, "cpus": [k % 2],
                "status": "ok", "step_ms": ms, "total_s": 1.0, "steps": 3,
                "rss_mb": rss[system.name][k]}, p
    monkeypatch.setattr(R, "run_pair", fake_pair)
    monkeypatch.setattr(R.peak, "measure", lambda n, cpus, env: {})
    out = tmp_path / "r.json"
    R.main(["--workloads", "W1", "--systems", "autodiff:numpy,torch-eager", "--steps", "3",
            "--repeat", "3", "--json", str(out), "--no-scaling"])
    assert order == ["autodiff:numpy", "torch-eager"] * 3
    rows = {r["system"]: r for r in json.loads(out.read_text())["workloads"][0]["rows"]}
    assert rows["autodiff:numpy"]["step_ms"] == 2.0 and rows["torch-eager"]["step_ms"] == 5.0
    assert rows["autodiff:numpy"]["repeat_ms"] == [3.0, 1.0, 2.0]
    assert rows["autodiff:numpy"]["repeat_cpus"] == [[0], [1], [0]]
    assert "median of 3 runs (1-3 ms)" in rows["autodiff:numpy"]["notes"]
    # a peak is the largest of the runs (the first, which compiled cold), with the range
    assert rows["autodiff:numpy"]["rss_mb"] == 280.0
    assert rows["autodiff:numpy"]["repeat_rss_mb"] == [280.0, 150.0, 148.0]
    assert "peak RSS 148-280 MB over the runs" in rows["autodiff:numpy"]["notes"]
    assert rows["torch-eager"]["rss_mb"] == 333.0
    assert not any("peak RSS" in n for n in rows["torch-eager"]["notes"])
    # the kept run's parameters are the ones compared: 2.0 against 5.0
    np.testing.assert_allclose(rows["torch-eager"]["max_rel_diff"], 1.5, rtol=1e-6)
    with pytest.raises(SystemExit):
        R.main(["--repeat", "0", "--workloads", "W1"])


def test_a_pair_subprocess_peak_is_its_own_not_its_parents():
    """A subprocess of a process holding 300 MB: ``getrusage``'s ``ru_maxrss`` counts the
    parent's pages from before ``exec`` (the bench read its growing parent into small
    runs' peaks); ``own_peak_rss_mb`` reads the child's own, well under that."""
    import subprocess
    import sys
    held = np.ones(300 << 20, np.uint8)         # the parent's 300 MB, touched
    code = ("import resource\nfrom bench.run import own_peak_rss_mb\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "
            "own_peak_rss_mb())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[2]).stdout.split()
    inherited, own = float(out[0]), float(out[1])
    assert inherited >= 300                     # the pitfall this guards against
    assert 5 < own < 200
    del held


def test_rss_parts_add_up_to_this_process_resident_set():
    """``rss_parts_mb`` splits the resident set by kind: the parts are positive where a
    Python process has them (a heap, mapped libraries) and add up to ``VmRSS``."""
    from bench.run import rss_parts_mb
    a = np.ones(16 << 20, np.uint8)            # 16 MB of heap touched
    parts = rss_parts_mb()
    with open("/proc/self/status") as f:
        rss = next(int(x.split()[1]) for x in f if x.startswith("VmRSS:")) / 1024
    assert parts["anon"] >= 16 and parts["file"] > 0
    np.testing.assert_allclose(sum(parts.values()), rss, atol=1.0)
    assert rss_parts_mb(2 ** 31) == {}          # no such process
    del a


def test_vm_hwm_reads_a_running_process_peak():
    """``vm_hwm_mb`` (how the helpers' RSS is read): a child that touched 300 MB reads at
    least that and well under 1 GB, though this process may be larger; a process that
    has ended reads None."""
    import subprocess
    import sys

    from bench.run import vm_hwm_mb
    touch = ("import sys; b = bytearray(300 << 20); b[::4096] = bytes(len(b[::4096])); "
             "print('ok', flush=True); sys.stdin.read()")
    p = subprocess.Popen([sys.executable, "-c", touch], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ok"
        assert 300 <= vm_hwm_mb(p.pid) < 1000
    finally:
        p.stdin.close()
        p.wait()
    assert vm_hwm_mb(p.pid) is None
