"""Figures from raw measurements, numerical agreement, and the tables (terminal, Markdown).

Every ratio is ``value / best peer value`` in the same column and workload, where the peers
are PyTorch and JAX: for times and memory below 1 is better, for GFLOP/s above 1 is.
"""
from __future__ import annotations

import numpy as np

#: Max relative parameter difference above which a result is flagged as disagreeing.
AGREE_TOL = 1e-3


def step_figures(stamps, loop_s, steps: int) -> dict:
    """Steady per-step time in ms: the mean after warm-up (``step_ms``, also ``mean_ms``),
    and the median, p10 and p90 of windows of consecutive steps.

    Args:
        stamps: completion time of each step (s), or None when only ``loop_s`` is known.
        loop_s: wall time of the whole loop (s), used when ``stamps`` is None.
        steps: number of steps.

    The first ``max(1, n // 10)`` of the ``n`` step intervals are warm-up and are dropped.
    ``step_ms`` is the mean of the other ``m``: the throughput, as a whole-loop system's
    ``loop_s / steps`` is. The ``m`` are also cut into windows of ``k = max(m // 20, min(8,
    m // 2), 1)`` consecutive steps (rounded down to a multiple of 8 from 8 on), whose mean
    step times give ``median_ms``/``p10_ms``/``p90_ms``: the spread. A device that delivers
    Receiver callbacks late, in bursts that do not divide the window (a host thread sharing
    one core with the device's worker), makes the windows alternate between one and two
    bursts: their median is then biased either way (W4 pinned to one core: median 0.367
    ms, mean 0.294), which is why the headline is the mean.
    """
    none = {"step_ms": None, "median_ms": None, "p10_ms": None, "p90_ms": None,
            "mean_ms": None, "warmup": 0, "window": 0}
    if stamps is None:
        per = 1e3 * loop_s / steps
        return dict(none, step_ms=per, median_ms=per, mean_ms=per)
    t = np.asarray(stamps, dtype=np.float64) * 1e3
    n = t.size - 1
    if n < 1:
        return none
    warm = max(1, n // 10) if n > 1 else 0
    t = t[warm:]
    m = t.size - 1
    k = max(1, m // 20, min(8, m // 2))   # a window spans a burst of late Receivers
    if k >= 8:
        k -= k % 8                          # ... whole bursts of a ring of 8
    windows = np.diff(t[::k]) / k
    mean = float((t[-1] - t[0]) / m)
    return {"step_ms": mean, "median_ms": float(np.median(windows)),
            "p10_ms": float(np.percentile(windows, 10)),
            "p90_ms": float(np.percentile(windows, 90)), "mean_ms": mean,
            "warmup": warm, "window": k}


def device_steady_ms(device_stats: dict) -> float | None:
    """The device's own steady time per step in ms (``steady_iteration_ms``: the wall time
    from the synced end of the first iteration to the end of the last, before the
    parameters are read back, over the remaining steps; OpenCL and CUDA report it), or
    None.

    Why not the Receiver stamps: a device that runs iterations ahead of the host stamps
    each step when the host gets to its Receiver, up to a ring or two of iterations after
    the device finished it, while the last steps are stamped on time by the run's final
    drain. The mean from a late stamp to an on-time one then undercounts the steps the
    device ran in between: W4 on OpenCL, one thread, 66 steps 0.257 ms by the stamps
    against 0.287 ms for a 1760-step run (1-2% apart from 440 steps on). The device's
    figure is whole-loop throughput, as ``loop_s / steps`` is for JAX's fori_loop (W4,
    one thread: 0.2875 ms over 440 steps, 0.287 over 1760; its first blocks after the
    synced first iteration still weigh on a 66-step run: 0.307)."""
    return _device_figure(device_stats, "steady_iteration_ms")


def device_steady_cpu_ms(device_stats: dict) -> float | None:
    """The process CPU time (all threads) per step in ms over the same span as
    :func:`device_steady_ms` (``steady_cpu_ms``), or None."""
    return _device_figure(device_stats, "steady_cpu_ms")


def _device_figure(device_stats: dict, name: str) -> float | None:
    for k, v in _flatten(device_stats or {}):
        if k.endswith(name) and isinstance(v, (int, float)) and v > 0:
            return float(v)
    return None


def cpu_per_step(cpu, cpu_loop_s, steps: int) -> float | None:
    """Mean process CPU time per step in ms (all threads), warm-up dropped as in
    :func:`step_figures`: on a shared machine it moves far less with the load than wall
    time does. ``cpu``: CPU seconds at each step's stamp; ``cpu_loop_s``: of a whole loop."""
    if cpu:
        n = len(cpu) - 1
        warm = max(1, n // 10) if n > 1 else 0
        return 1e3 * (cpu[-1] - cpu[warm]) / (n - warm) if n - warm > 0 else None
    return 1e3 * cpu_loop_s / steps if cpu_loop_s is not None and steps else None


def _flatten(d, prefix=""):
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            yield from _flatten(v, key + ".")
        else:
            yield key, v


def device_figures(device_stats: dict) -> dict:
    """Kernels and launches per iteration and the memory plan's figures from
    ``Report.stats``.

    Keys are found by name (``...kernels_per_iteration``/``...kernels``,
    ``...arena_bytes``, ``...lower_bound_bytes``, ``...saved_pct``) so that any device's
    report works; a figure the device does not report is None.
    """
    flat = {k.lower(): v for k, v in _flatten(device_stats or {})
            if isinstance(v, (int, float)) and not isinstance(v, bool)}

    def find(*suffixes):
        for s in suffixes:
            for k, v in flat.items():
                if k.endswith(s):
                    return v
        return None

    return {"kernels_per_iter": find("kernels_per_iteration", "kernels_per_iter",
                                     "kernels_per_step", "kernels"),
            "launches_per_iter": find("launches"),
            "arena_bytes": find("arena_bytes"),
            "lower_bound_bytes": find("lower_bound_bytes"),
            "saved_pct": find("saved_pct")}


def max_rel_diff(a: dict, ref: dict, floor: float = 1e-2) -> float:
    """Max over parameters of ``max|a - ref| / max(max|ref|, floor)``.

    The floor keeps parameters that stay at rounding-noise level (layer-norm biases
    between two layer norms get gradients that are zero up to rounding) from turning noise
    into huge relative differences: below ``floor`` the difference is absolute.

    Raises:
        KeyError: ``a`` lacks a parameter of ``ref``.
    """
    worst = 0.0
    for k, r in ref.items():
        d = float(np.max(np.abs(a[k].astype(np.float64) - r), initial=0.0))
        worst = max(worst, d / max(float(np.max(np.abs(r), initial=0.0)), floor))
    return worst


# -- tables --------------------------------------------------------------------------------
def _ms(v):
    return "-" if v is None else (f"{v:.3g}" if v < 100 else f"{v:.0f}")


def _s(v):
    return "-" if v is None else f"{v:.3g}"


def _bytes(v):
    return "-" if v is None else f"{v / 1024:.0f} KiB"


#: (header, key, formatter, ratio direction or None)
COLUMNS = [
    ("first step (s)", "first_step_s", _s, "low"),
    ("step ms (mean)", "step_ms", _ms, "low"),
    ("p10-p90 ms", None, None, None),
    ("CPU ms/step", "cpu_ms", _ms, "low"),
    ("total (s)", "total_s", _s, "low"),
    ("peak RSS (MB)", "rss_mb", lambda v: "-" if v is None else f"{v:.0f}", "low"),
    ("helper RSS (MB)", "helper_rss_mb", lambda v: "-" if v is None else f"{v:.0f}", None),
    ("GFLOP/s", "gflops", lambda v: "-" if v is None else f"{v:.2f}", "high"),
    ("% of FMA peak", "peak_pct", lambda v: "-" if v is None else f"{v:.0f}%", None),
    ("kern/it", "kernels_per_iter", lambda v: "-" if v is None else f"{v:g}", None),
    ("launch/it", "launches_per_iter", lambda v: "-" if v is None else f"{v:g}", None),
    ("arena", "arena_bytes", _bytes, None),
    ("lower bd", "lower_bound_bytes", _bytes, None),
    ("saved", "saved_pct", lambda v: "-" if v is None else f"{v:.0f}%", None),
    ("rel diff end", "max_rel_diff", lambda v: "-" if v is None else f"{v:.1e}", None),
    ("rel diff short", "check_rel_diff", lambda v: "-" if v is None else f"{v:.1e}", None),
    ("val loss", "val_loss", lambda v: "-" if v is None else f"{v:.4f}", None),
]


def disagrees(r: dict, key: str) -> bool:
    """Whether row ``r``'s parameter difference ``key`` is flagged.

    The short-run (``Workload.check_steps``) difference is flagged above :data:`AGREE_TOL`. The
    end-of-run difference is flagged above it only where the peers end within it of each
    other: where PyTorch and JAX themselves end further apart, float32 rounding has been
    amplified by the training dynamics and the end state cannot tell right from wrong.
    """
    v = r.get(key)
    if v is None or v <= AGREE_TOL:
        return False
    if key == "check_rel_diff":
        return True
    spread = r.get("peer_spread")
    return key == "max_rel_diff" and (spread is None or spread <= AGREE_TOL)


def wrong(r: dict) -> bool:
    """Whether either parameter difference of row ``r`` is flagged: such a row is never the
    best peer nor the best autodiff system, however fast."""
    return disagrees(r, "max_rel_diff") or disagrees(r, "check_rel_diff")


def _best_peers(rows: list[dict]) -> dict:
    best = {}
    for _, key, _, direction in COLUMNS:
        if direction is None:
            continue
        vals = [r[key] for r in rows if r["peer"] and r["status"] == "ok" and not wrong(r)
                and r.get(key) is not None and r[key] > 0]
        if vals:
            best[key] = min(vals) if direction == "low" else max(vals)
    return best


#: Columns left out of a table when no row of it has a value (device-only figures).
OPTIONAL = {"cpu_ms", "helper_rss_mb", "gflops", "peak_pct", "kernels_per_iter", "launches_per_iter", "arena_bytes",
            "lower_bound_bytes", "saved_pct", "max_rel_diff", "check_rel_diff", "val_loss"}


def _columns(rows: list[dict]) -> list[tuple]:
    return [c for c in COLUMNS
            if c[1] not in OPTIONAL or any(r.get(c[1]) is not None for r in rows)]


def _headers(cols) -> list[str]:
    return ["system"] + [c[0] for c in cols] + ["notes"]


def _cells(r: dict, best: dict, cols: list[tuple]) -> list[str]:
    if r["status"] != "ok":
        return [r["system"], r["status"]] + [""] * len(cols)
    out = [r["system"]]
    for _, key, fmt, direction in cols:
        if key is None:
            lo, hi = r.get("p10_ms"), r.get("p90_ms")
            out.append("-" if lo is None else f"{_ms(lo)}-{_ms(hi)}")
            continue
        v = r.get(key)
        cell = fmt(v)
        if direction and v is not None and key in best:
            cell += f" ({v / best[key]:.2f}x)"
        if v is not None and disagrees(r, key):
            cell += " DISAGREES"
        out.append(cell)
    notes = list(r.get("notes", []))
    if r.get("metrics"):
        notes = [", ".join(f"{k} {v:.3f}" for k, v in r["metrics"].items())] + notes
    out.append("; ".join(notes))
    return out


def summary(rows: list[dict]) -> str:
    """One line: the fastest autodiff system against the fastest peer (steady step), rows
    with disagreeing parameters left out and named."""
    def fastest(peer):
        ok = [r for r in rows if r["peer"] == peer and r["status"] == "ok" and r.get("step_ms")
              and not wrong(r)]
        return min(ok, key=lambda r: r["step_ms"]) if ok else None

    a, p = fastest(False), fastest(True)
    spread = next((r["peer_spread"] for r in rows if r.get("peer_spread") is not None), None)
    short = any(r.get("check_rel_diff") is not None for r in rows)
    chaos = ("" if spread is None or spread <= AGREE_TOL else
             f" The peers end {spread:.1e} apart (rounding amplified by the dynamics), so "
             + ("only the short run's difference is checked." if short else
                "the end state cannot be checked."))
    flagged = [r["system"] for r in rows if wrong(r)]
    bad = f" DISAGREEING: {', '.join(flagged)}." if flagged else ""
    if a is None or p is None:
        return "no autodiff/peer pair to compare." + chaos + bad
    ratio = a["step_ms"] / p["step_ms"]
    verdict = (f"{1 / ratio:.2f}x faster than" if ratio < 1 else f"{ratio:.2f}x slower than")
    return (f"best autodiff {a['system']} {_ms(a['step_ms'])} ms/step is {verdict} the best "
            f"peer {p['system']} {_ms(p['step_ms'])} ms/step; total wall "
            f"{_s(a['total_s'])} s vs {_s(p['total_s'])} s." + chaos + bad)


def text_table(rows: list[dict]) -> str:
    """The rows of one workload as an aligned plain-text table (rows that did not run
    show their status instead of figures)."""
    best, cols = _best_peers(rows), _columns(rows)
    headers = _headers(cols)
    cells = [_cells(r, best, cols) for r in rows]
    aligned = [headers] + [c for c, r in zip(cells, rows) if r["status"] == "ok"]
    widths = [max(len(row[i]) for row in aligned) for i in range(len(headers))]
    lines = []
    for row, r in [(headers, None)] + list(zip(cells, rows)):
        if r is not None and r["status"] != "ok":
            lines.append(f"{row[0]:<{widths[0]}}  {row[1]}")
            continue
        lines.append("  ".join(c.ljust(w) if i in (0, len(row) - 1) else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths))).rstrip())
    return "\n".join(lines)


def markdown_table(rows: list[dict]) -> str:
    """The rows of one workload as a Markdown table."""
    best, cols = _best_peers(rows), _columns(rows)
    headers = _headers(cols)
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for r in rows:
        out.append("| " + " | ".join(c.replace("|", "/") for c in _cells(r, best, cols))
                   + " |")
    return "\n".join(out)


# -- whole reports ---------------------------------------------------------------------------
def _heading(w: dict) -> str:
    steps = f"{w['steps']} steps" if w.get("steps") else "default steps"
    flops = f", {w['flops_per_step'] / 1e6:.2f} MFLOP/step" if w.get("flops_per_step") else ""
    return f"{w['key']} {w['name']}: {w['title']} ({steps}{flops})"


def thread_counts(meta: dict) -> list[int]:
    """The run's thread counts (older results hold one int)."""
    t = meta.get("threads", 1)
    return list(t) if isinstance(t, (list, tuple)) else [int(t)]


def _threads_of(w: dict, meta: dict) -> int:
    return w.get("threads", thread_counts(meta)[0])


def _threads_title(n: int) -> str:
    return "One thread per system" if n == 1 else f"All cores: {n} threads per system"


def peak_line(meta: dict, n: int) -> str:
    """The measured fp32 ceilings of ``n`` threads, as one sentence."""
    p = (meta.get("peak") or {}).get(str(n)) or {}
    f = lambda v: "-" if v is None else f"{v:.0f}"
    return (f"Measured fp32 ceilings on {n} thread{'s' if n > 1 else ''} (pinned, same load, "
            f"best of 3): FMA {f(p.get('fma_gflops'))} GFLOP/s (`bench/peak.c`, -O3 "
            f"-march=native), SGEMM {f(p.get('sgemm_gflops'))} GFLOP/s (numpy/OpenBLAS "
            f"1024^3); *% of FMA peak* is GFLOP/s over the former.")


def text_report(results: dict) -> str:
    """Every workload's table with its summary line, for the terminal."""
    meta = results["meta"]
    m = meta["machine"]
    out = [f"{m['cpu']}, {m['cores']} cores, load {m['loadavg']}; threads "
           f"{','.join(map(str, thread_counts(meta)))} per system (pinned); "
           f"{'QUICK' if meta['quick'] else 'full'} run, {meta.get('wall_s', 0):.0f} s",
           "ratios: value / best peer (PyTorch, JAX) in the column; times and RSS lower is "
           "better, GFLOP/s higher"]
    for n in thread_counts(meta):
        out += ["", f"== {_threads_title(n)} ==", peak_line(meta, n)]
        for w in results["workloads"]:
            if _threads_of(w, meta) == n:
                out += ["", _heading(w), text_table(w["rows"]), summary(w["rows"])]
    return "\n".join(out)


TARGETS = """Per-step times the issue quotes for the peers on this kind of machine (2 cores):
W1 numpy 0.07 ms, JAX fori_loop 0.08 ms, PyTorch eager 0.31 ms; W2 JAX fori_loop 0.21 ms,
JAX jit 0.35 ms, PyTorch eager 3.5 ms, torch.compile 1.7 ms (after 24 s of compile);
W3 PyTorch eager 22 ms, torch.compile 29 ms, JAX 35 ms. The original project on PoCL:
W1 1.25 ms per step, W2 68 s in all. The aim is to beat the best peer on every workload."""

METHOD = """- Every (workload, system) pair runs in its own subprocess (clean peak RSS: its own
  `VmHWM`; with `--repeat`, the largest of the runs' peaks; no cross-talk), pinned with
  `sched_setaffinity` to the idlest CPU(s), with
  `OPENBLAS_NUM_THREADS`, `OMP_NUM_THREADS`, `MKL_NUM_THREADS`, `POCL_MAX_PTHREAD_COUNT` set
  to the thread count (JAX's XLA CPU runtime ignores its thread flags; pinning binds it).
- Same initial parameters (numpy generator, seed 0) and data in every system; the model
  math is written once (`bench/workloads/layers.py`) against a tiny per-framework namespace.
- *first step*: from the start of building (tracing, compiling, uploading parameters) to the
  first step's results on the host. *step ms (mean)*: after dropping the first 10 % of
  steps as warm-up, the mean step time of the rest (the throughput, as `jax-fori`'s loop
  time / steps); *p10-p90*: of the mean step times of 20 windows of consecutive steps (the
  JSON also keeps their median, `median_ms`: a device that hands Receiver values back late
  in bursts that do not divide a window biases the windows' median, not the mean). autodiff runs the whole loop in one `execute()` and
  timestamps each iteration with a Receiver; `jax-jit` blocks on each step's results;
  `jax-fori` compiles the whole loop into one `fori_loop`, so its step time is loop time /
  steps (from a second run of the compiled loop, without the first call's one-time costs)
  and it has no p10-p90. *total*: start of building to final parameters in numpy. Imports
  are not counted (recorded as `import_s` in the JSON). A full run starts every pair with
  empty Inductor and PoCL disk caches (cold compiles); `--quick` keeps them.
- PyTorch: the loss function (forward) is what `torch.compile` compiles (default mode,
  Inductor; AOTAutograd compiles its backward); backward through autograd and
  `torch.optim.SGD(foreach=True)` in both torch systems. JAX: `value_and_grad` and the SGD
  update inside the jitted step. autodiff: `autodiff.optim.SGD`, one `ir_for` loop.
- W5 runs `examples/transformer.py` unchanged on autodiff (with `--no-progress --plot ''
  --sample-len 0`); its training loop is timestamped by wrapping `autodiff.ir_for` and
  `autodiff.Receiver` while the example's `train()` runs (times count from `train()`).
  Its PyTorch (`torch.nn.TransformerEncoderLayer`, `torch.optim.AdamW`) and JAX (the same
  math in `jax.numpy`, AdamW written out as PyTorch computes it) versions start from the
  example model's own initial weights and train on the same windows
  (`bench/workloads/charlm*.py`); *val loss* is the example's validation loss after
  training, computed by each system on the same validation windows.
- The machine's cores are shared with other jobs: absolute times move with the load
  average; compare ratios within one run. *CPU ms/step* (process CPU time of all threads
  per step after warm-up, at the same stamps) moves far less with the load: on a loaded
  machine it is the better measure of the work a system does per step.
- *GFLOP/s*: matmul FLOPs counted by hand (2mkn forward, 2mkn per operand gradient needed)
  over the mean step time; *% of FMA peak* compares it with the FMA ceiling measured at
  the start of the run on the same number of pinned threads (`bench/peak.py`: the
  physical limit; OpenBLAS's SGEMM, in the section's first line, reaches less of it). *kern/it*, *launch/it*, *arena*, *lower bd*, *saved*: from
  autodiff's `Report.stats` (kernels per iteration, device launches per iteration (OpenCL
  runs consecutive small kernels as one launch chain), memory plan arena vs the peak-live
  lower bound,
  percent saved against no reuse); `-` where a device does not report them.
- *rel diff*: max over parameters of max|p - p_ref| / max(max|p_ref|, 0.01), against
  autodiff's numpy device, at the end of the timed run (*end*) and, for W2 and W4, after
  a separate 5-step run from the same start (*short*). Above 1e-3 the row says DISAGREES;
  the end figure only counts where PyTorch and JAX themselves end within 1e-3 of each
  other (in W2 float32 rounding is amplified: the peers end ~0.3 apart after 500 steps)."""


def markdown_report(results: dict) -> str:
    """BENCHMARKS.md: the tables (one section per thread count), the machine, its measured
    ceilings, the date and the exact command."""
    meta = results["meta"]
    m = meta["machine"]
    counts = thread_counts(meta)
    versions = ", ".join(f"{k} {v}" for k, v in m["versions"].items() if v)
    envs = meta["env"] if all(str(n) in meta["env"] for n in counts) else \
        {str(counts[0]): meta["env"]}
    out = ["# Benchmarks", "",
           f"{'Quick' if meta['quick'] else 'Full'} run of `{meta['command']}` on "
           f"{m['date']} ({meta.get('wall_s', 0) / 60:.1f} minutes, compile caches "
           f"{meta.get('caches', 'cold')}). Regenerate with `python -m bench --threads 1,all "
           "--md BENCHMARKS.md` (full run) or `python -m bench --quick --threads 1,all --md "
           "BENCHMARKS.md` (fewer steps, torch.compile on W2-W5 skipped, pairs cut at 30 s); "
           "`python -m bench --help` lists the options.", "",
           "Ratios are value / best peer (PyTorch, JAX) in the same column: for times and "
           "RSS below 1.00x beats the best peer, for GFLOP/s above 1.00x does.", "",
           "## Machine", "",
           f"- CPU: {m['cpu']}, {m['cores']} cores (AVX-512: {m['avx512']}), "
           f"{m['memory_gib']} GiB",
           f"- OpenCL: {'; '.join(m['opencl'])}",
           f"- OS: {m['os']}, Python {m['python']}; {versions}",
           f"- Load average at start: {m['loadavg']} (the cores are shared with other jobs)"]
    for n in counts:
        env = " ".join(f"{k}={v}" for k, v in envs.get(str(n), {}).items())
        out.append(f"- {n} thread{'s' if n > 1 else ''} per system: environment `{env}`")
    out.append("")
    for n in counts:
        out += [f"## {_threads_title(n)}", "", peak_line(meta, n), ""]
        for w in results["workloads"]:
            if _threads_of(w, meta) == n:
                out += [f"### {_heading(w)}", "", summary(w["rows"]), "",
                        markdown_table(w["rows"]), ""]
    out += ["## Method", "", METHOD, "", "## Targets", "", TARGETS, ""]
    return "\n".join(out)
