"""Run the benchmark: every workload on every system, each in its own subprocess.

    python -m bench [--quick] [--workloads W1,W2] [--systems numpy,jax] [--threads 1]
                    [--json PATH] [--md BENCHMARKS.md]

A child process (``--child``, internal) runs one (workload, system) pair, pinned to the
idlest ``--threads`` CPUs with thread-pool variables set, and writes its figures and final
parameters to a folder; the parent checks numerical agreement, prints the tables with
ratios against the best peer, and writes the raw JSON (and, with ``--md``, BENCHMARKS.md).
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

from bench import report  # noqa: E402
from bench.systems import idlest_cpus, machine, missing, systems, thread_env  # noqa: E402
from bench.workloads import NAMES, WORKLOADS, charlm  # noqa: E402

SEED = 0

#: (workload, system) pairs left out under --quick, with the reason shown in the table.
QUICK_SKIP = {(w, "torch.compile"): "skipped (--quick): torch.compile takes 15-40 s"
              for w in ("tiny_transformer", "transformer", "digits", "cnn")}

#: Under --quick: W5 is left out, and a pair running longer than this is cut (seconds).
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
            outcome, flops, metrics = charlm.run(system.mode, steps), None, {}
        else:
            params, data = w.init(SEED), w.data(steps)
            outcome = _runner(system.framework).run(w, params, data, steps, system.mode)
            flops = w.flops
            metrics = w.evaluate(outcome.params) if w.evaluate else {}
        result["steps"] = len(outcome.stamps) if outcome.stamps else steps
        figs = report.step_figures(outcome.stamps, outcome.loop_s, result["steps"])
        result.update(figs, status="ok", first_step_s=outcome.first_step_s,
                      total_s=outcome.total_s, metrics=metrics, notes=outcome.notes,
                      stats=outcome.stats)
        result["gflops"] = (flops / figs["step_ms"] / 1e6
                            if flops and figs["step_ms"] else None)
        result.update(report.device_figures(outcome.stats.get("device_stats", {})))
        result["notes"] = list(result["notes"] or []) + _tvm_notes(outcome.stats)
        result["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
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
    result.setdefault("rss_mb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    (out / "result.json").write_text(json.dumps(result))
    return result


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


def plan(args) -> list[tuple[str, object, int | None]]:
    """``(workload name, System, steps)`` for every selected pair, in table order; steps
    None means the workload's own default (W5)."""
    names = _select(args.workloads, NAMES, lambda n: [n, _key(n)])
    out = []
    for name in names:
        steps = args.steps
        if steps is None and name in WORKLOADS:
            w = WORKLOADS[name]
            steps = w.quick_steps if args.quick else w.steps
        elif steps is None and args.quick:
            steps = charlm.QUICK_STEPS
        for s in _select(args.systems, systems(), lambda s: [s.name]):
            out.append((name, s, steps))
    return out


def _key(name: str) -> str:
    return WORKLOADS[name].key if name in WORKLOADS else charlm.KEY


def _select(spec, items, labels):
    if not spec:
        return list(items)
    wanted = [w.strip().lower() for w in spec.split(",") if w.strip()]
    return [i for i in items if any(w in lab.lower() for w in wanted for lab in labels(i))]


def run_all(args, argv: list[str]) -> dict:
    """Run the planned pairs (``argv``: the command line, recorded); returns the JSON-able
    results."""
    meta = {"command": " ".join(["python -m bench"] + [shlex.quote(a) for a in argv]),
            "quick": args.quick, "threads": args.threads, "caches": args.caches,
            "env": thread_env(args.threads), "machine": machine(), "seed": SEED}
    pairs = plan(args)
    by_workload: dict[str, list] = {}
    params: dict[str, dict] = {}
    t_start = time.perf_counter()
    for i, (name, system, steps) in enumerate(pairs, 1):
        skip = missing(system)
        if name == charlm.NAME:
            skip = skip or charlm.unavailable() or (
                "no PyTorch/JAX version of W5" if system.peer else None)
        if args.quick and (name, system.name) in QUICK_SKIP:
            skip = QUICK_SKIP[(name, system.name)]
        if args.quick and system.full_only:
            skip = "skipped (--quick): full run only (tuning takes minutes)"
        if args.quick and name == charlm.NAME and not skip:
            skip = "skipped (--quick): full run only"
        t = time.perf_counter()
        if skip:
            row, p = {"workload": name, "system": system.name, "peer": system.peer,
                      "status": skip}, {}
        else:
            row, p = run_pair(name, system, steps, args.threads,
                              max(args.timeout, system.timeout_s or 0), args.caches == "warm")
        params[(name, system.name)] = p
        by_workload.setdefault(name, []).append(row)
        msg = row["status"] if row["status"] != "ok" else \
            f"{report._ms(row.get('step_ms'))} ms/step, total {row['total_s']:.2f} s"
        print(f"[{i}/{len(pairs)}] {_key(name)} {system.name}: {msg} "
              f"({time.perf_counter() - t:.1f} s)", file=sys.stderr, flush=True)
    workloads = []
    for name, rows in by_workload.items():
        w = WORKLOADS.get(name)
        if w is not None:
            check_agreement(rows, {r["system"]: params[(name, r["system"])] for r in rows})
        workloads.append({"key": _key(name), "name": name,
                          "title": w.title if w else charlm.TITLE,
                          "steps": next((r["steps"] for r in rows if r.get("steps")), None),
                          "flops_per_step": w.flops if w else None, "rows": rows})
    meta["wall_s"] = time.perf_counter() - t_start
    return {"meta": meta, "workloads": workloads}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true",
                   help=f"fewer steps, W5 and torch.compile on W2-W4 skipped, warm caches, "
                        f"pairs cut at {QUICK_BUDGET_S} s (about 3 minutes)")
    p.add_argument("--workloads", help="comma-separated names or keys (W1, mlp255, ...)")
    p.add_argument("--systems", help="comma-separated name parts (numpy, torch, jax-fori)")
    p.add_argument("--steps", type=int, help="steps for every workload (overrides defaults)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads per system (pinned)")
    p.add_argument("--timeout", type=float,
                   help=f"seconds per pair (default 600, {QUICK_BUDGET_S} with --quick)")
    p.add_argument("--caches", choices=["cold", "warm"],
                   help="Inductor's and PoCL's disk compile caches: fresh per pair (cold, "
                        "default of a full run) or kept (warm, default of --quick)")
    p.add_argument("--json", help="raw results (default bench/results[-quick].json)")
    p.add_argument("--md", help="also write the Markdown report here (BENCHMARKS.md)")
    p.add_argument("--from-json", metavar="PATH",
                   help="run nothing: print (and with --md write) the report of saved results")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--cpus", default="", help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else list(argv)
    args = p.parse_args(argv)
    args.caches = args.caches or ("warm" if args.quick else "cold")
    args.timeout = args.timeout or (QUICK_BUDGET_S if args.quick else 600)
    if args.child:
        child(args.workloads, args.systems, args.steps, Path(args.out),
              [int(c) for c in args.cpus.split(",") if c])
        return
    if args.from_json:
        results = json.loads(Path(args.from_json).read_text())
        print(report.text_report(results))
    else:
        results = run_all(args, argv)
        print(report.text_report(results))
        path = Path(args.json) if args.json else ROOT / "bench" / (
            "results-quick.json" if args.quick else "results.json")
        path.write_text(json.dumps(results, indent=1, default=str))
        print(f"raw results: {path}")
    if args.md:
        Path(args.md).write_text(report.markdown_report(results))
        print(f"report: {args.md}")


if __name__ == "__main__":
    main()
