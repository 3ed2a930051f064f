"""Run the benchmark: every workload on every system, each in its own subprocess.

    python -m bench [--quick] [--workloads W1,W2] [--systems numpy,jax] [--threads 1,all]
                    [--repeat 3] [--json PATH] [--md BENCHMARKS.md]

A child process (``--child``, internal) runs one (workload, system) pair, pinned to the
idlest ``--threads`` CPUs with thread-pool variables set, and writes its figures and final
parameters to a folder; the parent checks numerical agreement, prints the tables with
ratios against the best peer, and writes the raw JSON (and, with ``--md``, BENCHMARKS.md).
With several thread counts (``--threads 1,all``) every pair runs once per count, and the
machine's fp32 ceilings (:mod:`bench.peak`) are measured for each count first. With
``--repeat n`` every pair runs n times, in rounds (all pairs, then all again), and the
table shows each pair's median run: on a machine shared with other jobs one run's ratio
can move by 10-50%. Its peak RSS is the largest of the n runs' (a run that compiles on a
cold cache is the largest: with ``--quick``'s warm caches, the first one after a change).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):          # run as ``python bench/run.py``
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bench import peak, report, scaling  # noqa: E402
from bench.systems import idlest_cpus, machine, missing, systems, thread_env  # noqa: E402
from bench.workloads import NAMES, WORKLOADS, charlm  # noqa: E402

SEED = 0

#: (workload, system) pairs left out under --quick, with the reason shown in the table.
QUICK_SKIP = {(w, "torch.compile"): "skipped (--quick): torch.compile takes 15-40 s"
              for w in ("tiny_transformer", "transformer", "digits", "charlm", "cnn")}

#: Under --quick, a pair running longer than this is cut (seconds).
QUICK_BUDGET_S = 30


# -- child: one (workload, system) pair ---------------------------------------------------
def _runner(framework: str):
    if framework == "autodiff":
        from bench.workloads import run_autodiff as r
    elif framework == "torch":
        from bench.workloads import run_torch as r
    else:
        from bench.workloads import run_jax as r
    return r


def child(workload: str, system_name: str, steps: int | None, out: Path,
          cpus: list[int]) -> dict:
    """Run one pair in this process and write ``result.json`` (and ``params.npz``) to
    ``out``. Failures become a status string in the result, never an exception."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    system = next(s for s in systems() if s.name == system_name)
    result = {"workload": workload, "system": system.name, "peer": system.peer,
              "steps": steps, "cpus": cpus}
    try:
        t = time.perf_counter()
        __import__(system.framework)
        result["import_s"] = time.perf_counter() - t
        if system.options:         # e.g. tune=True: every execute() of this child gets them
            import functools

            import autodiff
            autodiff.execute = functools.partial(autodiff.execute, **dict(system.options))
        w = WORKLOADS.get(workload)
        if w is None:
            steps = result["steps"] = steps or charlm.config().steps   # the example's own
            outcome = charlm.run(system.mode, steps) if system.framework == "autodiff" \
                else charlm.run_peer(system.framework, system.mode, steps)
            flops, metrics = charlm.flops(), {}
        else:
            params, data = w.init(SEED), w.data(steps)
            outcome = _runner(system.framework).run(w, params, data, steps, system.mode)
            flops = w.flops
            metrics = w.evaluate(outcome.params) if w.evaluate else {}
        result["steps"] = len(outcome.stamps) if outcome.stamps else steps
        figs = report.step_figures(outcome.stamps, outcome.loop_s, result["steps"])
        figs["cpu_ms"] = report.cpu_per_step(outcome.cpu, outcome.cpu_loop_s, result["steps"])
        dev = outcome.stats.get("device_stats", {})
        steady = report.device_steady_ms(dev)
        if steady is not None:      # iterations run ahead of their stamps: the device's
            figs.update(stamp_ms=figs["step_ms"], step_ms=steady, mean_ms=steady)
            figs["cpu_ms"] = report.device_steady_cpu_ms(dev) or figs["cpu_ms"]
        result.update(figs, status="ok", first_step_s=outcome.first_step_s,
                      total_s=outcome.total_s, metrics=metrics, notes=outcome.notes,
                      stats=outcome.stats, val_loss=outcome.stats.get("val_loss"))
        result["gflops"] = (flops / figs["step_ms"] / 1e6
                            if flops and figs["step_ms"] else None)
        result.update(report.device_figures(outcome.stats.get("device_stats", {})))
        result["notes"] = list(result["notes"] or []) + _tvm_notes(outcome.stats)
        result["rss_mb"] = own_peak_rss_mb()
        result["rss_now_mb"] = rss_parts_mb()
        result["helper_rss_mb"] = helper_rss_mb()
        if outcome.params:
            np.savez(out / "params.npz", **outcome.params)
        if w is not None and w.check_steps:       # after the timed run: caches stay cold
            n = w.check_steps
            short = _runner(system.framework).run(w, params, w.data(n), n, system.mode)
            np.savez(out / "check.npz", **short.params)
    except ImportError as e:
        result["status"] = f"missing: {type(e).__name__}: {e}"
    except Exception as e:                               # reported in the table
        result["status"] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
    result.setdefault("rss_mb", own_peak_rss_mb())
    (out / "result.json").write_text(json.dumps(result))
    return result


def helper_rss_mb() -> float | None:
    """Peak RSS (MB, ``VmHWM``) of the largest of the OpenCL device's idle compile helpers
    (:mod:`autodiff.device.opencl.prejit`; read, then ended, so none outlives the
    measurement), or None without one: memory outside the process's own peak
    (``rss_mb``) that the run also used; PyTorch and JAX start no helper. Not
    ``RUSAGE_CHILDREN``: a child's ``ru_maxrss`` counts its parent's pages from before its
    ``exec``, so every subprocess of a large process (PoCL's linker too) reads as large."""
    prejit = sys.modules.get("autodiff.device.opencl.prejit")
    if prejit is None:
        return None
    peaks = [x for x in map(vm_hwm_mb, prejit.idle_pids()) if x is not None]
    prejit.end_idle()
    return max(peaks) if peaks else None


def own_peak_rss_mb() -> float:
    """This process's peak resident set, MB: ``VmHWM``, the high-water mark of its own
    address space since its ``exec``. Not ``getrusage(RUSAGE_SELF).ru_maxrss``: Linux
    carries the address space it had before ``exec`` into that figure, and a pair's
    subprocess starts as a (v)fork of the bench's parent, so ``ru_maxrss`` read at least
    the parent's resident set at that moment -- which grows over the rounds as the parent
    keeps every run's final parameters (a W1 run whose own peak is 148 MB read 148, 167,
    212 MB in the three rounds of a quick bench). ``ru_maxrss`` only where there is no
    procfs."""
    own = vm_hwm_mb(os.getpid())
    return own if own is not None else \
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_parts_mb(pid: int | str = "self") -> dict:
    """Process ``pid`` 's resident set now, MB, by kind (``/proc/<pid>/status``:
    ``anon`` heap and anonymous mappings, ``file`` mapped files such as shared libraries,
    ``shmem``); ``{}`` without procfs. Kept in the JSON beside the peak (``rss_mb``), to
    tell which kind a larger peak comes from."""
    got = _status_mb(pid, ("RssAnon", "RssFile", "RssShmem"))
    return {k[3:].lower(): v for k, v in got.items()}


def vm_hwm_mb(pid: int) -> float | None:
    """Process ``pid`` 's peak resident set (``VmHWM`` of ``/proc/<pid>/status``), MB; None
    where it cannot be read (no such process, no procfs)."""
    return _status_mb(pid, ("VmHWM",)).get("VmHWM")


def _status_mb(pid: int | str, fields: tuple) -> dict:
    """``{field: MB}`` of the kB ``fields`` of ``/proc/<pid>/status`` found there; ``{}``
    where the file cannot be read (no such process, no procfs)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name in fields:
                    out[name] = int(rest.split()[0]) / 1024
    except (OSError, ValueError, IndexError):
        return {}
    return out


def _tvm_notes(stats: dict) -> list[str]:
    """The TVM device's compile and tuning seconds, reported apart, and its loop
    iterations per device call (``[]`` for other systems)."""
    tvm = (stats.get("device_stats") or {}).get("tvm")
    if not isinstance(tvm, dict):
        return []
    compile_s = sum(tvm.get(k, 0.0) for k in ("translate_s", "fuse_s", "schedule_s",
                                              "build_s", "load_s"))
    out = [f"compile {compile_s:.1f} s"]
    if "tune_s" in tvm:
        out.append(f"tuning {tvm['tune_s']:.1f} s ({tvm.get('tune_trials', 0)} trials, "
                   f"{tvm.get('tuned_kernels', 0)} kernels tuned)")
    elif tvm.get("cache_hit"):
        out[0] = "compiled module reused"
    if tvm.get("steps_per_call", 1) > 1:
        out.append(f"{tvm['steps_per_call']} steps per call")
    return out


# -- parent ---------------------------------------------------------------------------------
def run_pair(workload: str, system, steps, threads: int, timeout: float,
             warm_caches: bool = False) -> tuple[dict, dict]:
    """Run one pair in a fresh subprocess; returns the result row and the final parameters
    ``{"end": {name: array}, "check": {...}}`` (of the timed run and of the short run).

    Inductor's and PoCL's on-disk compile caches point into a fresh folder (cold compiles,
    as a first run on a new machine) unless ``warm_caches``."""
    row = {"workload": workload, "system": system.name, "peer": system.peer}
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        cpus = idlest_cpus(threads)
        cmd = [sys.executable, "-m", "bench.run", "--child", "--workloads", workload,
               "--systems", system.name, "--out", tmp, "--cpus", ",".join(map(str, cpus))]
        if steps is not None:
            cmd += ["--steps", str(steps)]
        env = dict(os.environ, **thread_env(threads))
        if not warm_caches:
            for var in ("TORCHINDUCTOR_CACHE_DIR", "POCL_CACHE_DIR"):
                env[var] = os.path.join(tmp, var.lower())
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep)
        try:
            p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            return dict(row, status=f"cut: ran over {timeout:.0f} s"), {}
        res = Path(tmp) / "result.json"
        if not res.exists():
            tail = (p.stderr.strip().splitlines() or ["no output"])[-1][:160]
            return dict(row, status=f"crashed (rc {p.returncode}): {tail}"), {}
        row = json.loads(res.read_text())
        params = {}
        for kind, fname in (("end", "params.npz"), ("check", "check.npz")):
            if (Path(tmp) / fname).exists():
                with np.load(Path(tmp) / fname) as f:
                    params[kind] = {k: f[k] for k in f.files}
    return row, params


#: MB by which the runs' peak RSS must differ for a row's notes to give their range (a run
#: that built its OpenCL program from source, on a cold PoCL cache, carries PoCL's kernel
#: library: ~130 MB more than one that found the program in the cache)
RSS_SPREAD_MB = 10.0


def median_run(done: list[tuple[dict, dict]]) -> tuple[dict, dict]:
    """Of one pair's runs ``[(row, params)]`` (``--repeat``), the run with the median
    ``step_ms`` among those that finished (the lower middle one of an even count), with
    ``repeat_ms`` and ``repeat_cpus``, every finished run's ``step_ms`` and the CPUs it was
    pinned to, in run order, and a note giving their range; the last run when none
    finished. A single run is returned as it is.

    A peak is a peak: ``rss_mb`` and ``helper_rss_mb`` are the largest of the finished
    runs' (each run's in ``repeat_rss_mb`` / ``repeat_helper_rss_mb``), not the median
    run's, so that a run which compiled on a cold cache is never hidden by a faster warm
    one; a note gives the range when the runs differ by more than
    :data:`RSS_SPREAD_MB`."""
    ok = [(r, p) for r, p in done if r.get("status") == "ok" and r.get("step_ms")]
    if len(done) == 1 or not ok:
        return done[-1]
    row, p = sorted(ok, key=lambda rp: rp[0]["step_ms"])[(len(ok) - 1) // 2]
    times = [r["step_ms"] for r, _ in ok]
    row = dict(row, repeat_ms=times, repeat_cpus=[r.get("cpus") for r, _ in ok])
    notes = [f"median of {len(ok)} runs ({report._ms(min(times))}-{report._ms(max(times))} ms)"]
    for key in ("rss_mb", "helper_rss_mb"):         # a peak is the largest of the runs
        vals = [r[key] for r, _ in ok if r.get(key) is not None]
        if vals:
            row[key] = max(vals)
            row["repeat_" + key] = [r.get(key) for r, _ in ok]
    if any(r.get("rss_now_mb") for r, _ in ok):
        row["repeat_rss_now_mb"] = [r.get("rss_now_mb") for r, _ in ok]
    rss = row.get("repeat_rss_mb") or []
    if rss and None not in rss and max(rss) - min(rss) > RSS_SPREAD_MB:
        notes.append(f"peak RSS {min(rss):.0f}-{max(rss):.0f} MB over the runs")
    row["notes"] = list(row.get("notes", [])) + notes
    return row, p


def check_agreement(rows: list[dict], params: dict) -> None:
    """Compare final parameters against the reference row (the numpy autodiff device if it
    finished, else the first finished row).

    Sets ``max_rel_diff`` (end of the timed run), ``check_rel_diff`` (end of the
    ``Workload.check_steps`` run, if any) and ``peer_spread`` (the largest end difference
    between two peers: what float32 rounding alone does to this workload).
    """
    done = [r for r in rows if r["status"] == "ok" and params.get(r["system"], {}).get("end")]
    if not done:
        return
    ref = next((r for r in done if r["system"] == "autodiff:numpy"), done[0])
    ref_p = params[ref["system"]]
    for r in done:
        p = params[r["system"]]
        r["max_rel_diff"] = report.max_rel_diff(p["end"], ref_p["end"])
        if "check" in p and "check" in ref_p:
            r["check_rel_diff"] = report.max_rel_diff(p["check"], ref_p["check"])
    peers = [params[r["system"]]["end"] for r in done if r["peer"]]
    spread = max((report.max_rel_diff(a, b) for a in peers for b in peers if a is not b),
                 default=None)
    for r in done:
        r["peer_spread"] = spread
    ref.setdefault("notes", []).append("reference for rel diff")


def thread_counts(spec: str) -> list[int]:
    """``"1,all"`` -> ``[1, number of CPUs this process may use]`` (duplicates dropped).

    Raises:
        ValueError: a count that is neither a positive int nor ``all``.
    """
    out: list[int] = []
    for part in str(spec).split(","):
        part = part.strip().lower()
        n = len(os.sched_getaffinity(0)) if part == "all" else int(part)
        if n < 1:
            raise ValueError(f"--threads: {part!r} is not a positive thread count")
        if n not in out:
            out.append(n)
    return out


def plan(args) -> list[tuple[str, object, int | None, int]]:
    """``(workload name, System, steps, threads)`` for every selected pair and thread
    count, in table order; steps None means the workload's own default (W5)."""
    names = _select(args.workloads, NAMES, lambda n: [n, _key(n)])
    out = []
    for threads in thread_counts(args.threads):
        for name in names:
            steps = args.steps
            if steps is None and name in WORKLOADS:
                w = WORKLOADS[name]
                steps = w.quick_steps if args.quick else w.steps
            elif steps is None and args.quick:
                steps = charlm.QUICK_STEPS
            for s in _select(args.systems, systems(), lambda s: [s.name]):
                out.append((name, s, steps, threads))
    return out


def _key(name: str) -> str:
    return WORKLOADS[name].key if name in WORKLOADS else charlm.KEY


def _select(spec, items, labels):
    """``items`` named in ``spec`` (comma-separated): a whole name selects that item only
    (``autodiff:tvm``, not ``autodiff:tvm-tuned``), any other word every name containing it."""
    if not spec:
        return list(items)
    wanted = [w.strip().lower() for w in spec.split(",") if w.strip()]
    exact = {lab.lower() for i in items for lab in labels(i)} & set(wanted)
    return [i for i in items if any(
        w == lab.lower() or (w not in exact and w in lab.lower())
        for w in wanted for lab in labels(i))]


def run_all(args, argv: list[str]) -> dict:
    """Run the planned pairs (``argv``: the command line, recorded); returns the JSON-able
    results."""
    counts = thread_counts(args.threads)
    meta = {"command": " ".join(["python -m bench"] + [shlex.quote(a) for a in argv]),
            "quick": args.quick, "threads": counts, "caches": args.caches,
            "env": {str(n): thread_env(n) for n in counts}, "machine": machine(),
            "seed": SEED, "peak": {}}
    for n in counts:
        meta["peak"][str(n)] = peak.measure(n, idlest_cpus(n), thread_env(n))
        print(f"fp32 ceilings on {n} thread(s): {meta['peak'][str(n)]}", file=sys.stderr)
    pairs = plan(args)
    runs: dict[tuple, list] = {}            # (name, threads, system) -> [(row, params)]
    t_start = time.perf_counter()
    # rounds interleaved (every pair once, then again): a slow spell of a shared machine
    # then falls on every system's runs alike, not on all of one system's
    rounds = [pair for _ in range(args.repeat) for pair in pairs]
    for i, (name, system, steps, threads) in enumerate(rounds, 1):
        skip = missing(system)
        if name == charlm.NAME:
            skip = skip or charlm.unavailable()
        if args.quick and (name, system.name) in QUICK_SKIP:
            skip = QUICK_SKIP[(name, system.name)]
        if args.quick and system.full_only:
            skip = "skipped (--quick): full run only (tuning takes minutes)"
        t = time.perf_counter()
        if skip:
            row, p = {"workload": name, "system": system.name, "peer": system.peer,
                      "status": skip}, {}
        else:
            row, p = run_pair(name, system, steps, threads,
                              max(args.timeout, system.timeout_s or 0), args.caches == "warm")
        row["threads"] = threads
        ceiling = meta["peak"][str(threads)].get("fma_gflops")
        if row.get("gflops") and ceiling:
            row["peak_pct"] = 100.0 * row["gflops"] / ceiling
        runs.setdefault((name, threads, system.name), []).append((row, p))
        msg = row["status"] if row["status"] != "ok" else \
            f"{report._ms(row.get('step_ms'))} ms/step, total {row['total_s']:.2f} s"
        print(f"[{i}/{len(rounds)}] {_key(name)} {system.name} ({threads} thread"
              f"{'s' if threads > 1 else ''}): {msg} ({time.perf_counter() - t:.1f} s)",
              file=sys.stderr, flush=True)
    by_workload: dict[tuple, list] = {}
    params: dict = {}
    for (name, threads, sname), done in runs.items():
        row, params[(name, threads, sname)] = median_run(done)
        by_workload.setdefault((name, threads), []).append(row)
    workloads = []
    for (name, threads), rows in by_workload.items():
        w = WORKLOADS.get(name)
        check_agreement(rows, {r["system"]: params[(name, threads, r["system"])]
                               for r in rows})
        workloads.append({"key": _key(name), "name": name, "threads": threads,
                          "title": w.title if w else charlm.TITLE,
                          "steps": next((r["steps"] for r in rows if r.get("steps")), None),
                          "flops_per_step": w.flops if w else charlm.flops(), "rows": rows})
    meta["wall_s"] = time.perf_counter() - t_start
    return {"meta": meta, "workloads": workloads}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help=f"fewer steps, torch.compile on W2-W5 skipped, warm caches, "
                        f"pairs cut at {QUICK_BUDGET_S} s")
    p.add_argument("--workloads", help="comma-separated names or keys (W1, mlp255, ...)")
    p.add_argument("--systems", help="comma-separated name parts (numpy, torch, jax-fori)")
    p.add_argument("--steps", type=int, help="steps for every workload (overrides defaults)")
    p.add_argument("--threads", default="1",
                   help="CPU threads per system (pinned): a count, 'all', or several "
                        "separated by commas (1,all: one table per count)")
    p.add_argument("--timeout", type=float,
                   help=f"seconds per pair (default 600, {QUICK_BUDGET_S} with --quick)")
    p.add_argument("--caches", choices=["cold", "warm"],
                   help="Inductor's and PoCL's disk compile caches: fresh per pair (cold, "
                        "default of a full run) or kept (warm, default of --quick)")
    p.add_argument("--repeat", type=int, default=1,
                   help="runs of every pair, in interleaved rounds; the table shows each "
                        "pair's median run (default 1)")
    p.add_argument("--json", help="raw results (default bench/results[-quick].json)")
    p.add_argument("--md", help="also write the Markdown report here (BENCHMARKS.md)")
    p.add_argument("--from-json", metavar="PATH",
                   help="run nothing: print (and with --md write) the report of saved results")
    p.add_argument("--no-scaling", action="store_true",
                   help="skip the scaling table (bench/scaling.py; also skipped with "
                        "--workloads)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--cpus", default="", help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else list(argv)
    args = p.parse_args(argv)
    if args.repeat < 1:
        p.error(f"--repeat must be at least 1, not {args.repeat}")
    args.caches = args.caches or ("warm" if args.quick else "cold")
    args.timeout = args.timeout or (QUICK_BUDGET_S if args.quick else 600)
    if args.child:
        child(args.workloads, args.systems, args.steps, Path(args.out),
              [int(c) for c in args.cpus.split(",") if c])
        return
    if args.from_json:
        results = json.loads(Path(args.from_json).read_text())
        print(report.text_report(results))
        print(scaling.table(results.get("scaling"), markdown=False))
    else:
        results = run_all(args, argv)
        if not (args.no_scaling or args.workloads):
            results["scaling"] = scaling.run(args.quick)
        print(report.text_report(results))
        print(scaling.table(results.get("scaling"), markdown=False))
        path = Path(args.json) if args.json else ROOT / "bench" / (
            "results-quick.json" if args.quick else "results.json")
        path.write_text(json.dumps(results, indent=1, default=str))
        print(f"raw results: {path}")
    if args.md:
        Path(args.md).write_text(report.markdown_report(results) + "\n" +
                                 scaling.table(results.get("scaling")))
        print(f"report: {args.md}")


if __name__ == "__main__":
    main()
