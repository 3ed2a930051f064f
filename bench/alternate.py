"""A/B of two compiler settings on one workload: both training programs built in one
process, their whole steps replayed in alternation.

    python -m bench.alternate --workload W3 --set autodiff.device.cstyle.kernels.MICRO_UNROLL={}
    python -m bench.alternate --workload W4 --set autodiff.device.cstyle.codegen.PANEL_MIN_ROWS=0 \\
        --set autodiff.device.cstyle.codegen.STRIDED_A_MAX_K=0 --rounds 100

On a machine whose cores change speed from one second to the next (shared vCPUs), two
benchmark runs of two builds compare the machine's moments more than the builds. Here
program A is the workload as the code stands, program B the same workload compiled with
each ``--set module.attribute=value`` in place (a Python literal, restored afterwards);
both come from :func:`bench.profile.capture` (OpenCL, a few steps run so the arena holds
real values). Each round replays every launch of A's training step, in order, ``--best``
times and keeps the fastest, then B's; ``--rounds`` rounds. Run it with
``POCL_MAX_PTHREAD_COUNT=1`` (and ``taskset -c 0``) for one-thread work.

Output: per program its launches per step, the median and the best round (ms per step,
wall clock of the replayed launches), and the rounds it was faster in.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.profile import capture, loop_launches  # noqa: E402


def parse_set(spec: str) -> tuple[object, str, object]:
    """``"pkg.module.NAME=literal"`` -> ``(module, "NAME", value)``.

    Raises:
        ValueError: no ``=``, a value that is not a Python literal, or a module without
            that attribute.
    """
    target, sep, literal = spec.partition("=")
    if not sep:
        raise ValueError(f"--set {spec!r}: expected module.attribute=value")
    path, _, name = target.strip().rpartition(".")
    module = importlib.import_module(path)
    if not hasattr(module, name):
        raise ValueError(f"--set {spec!r}: {path} has no attribute {name!r}")
    try:
        value = ast.literal_eval(literal.strip())
    except (ValueError, SyntaxError) as e:
        raise ValueError(f"--set {spec!r}: the value is not a Python literal ({e})") from None
    return module, name, value


def build(workload: str, sets: list[str], steps: int = 3):
    """The workload's training Executable with ``sets`` (:func:`parse_set` specs) in place
    while it compiles (each attribute restored afterwards, also on an error).

    Raises:
        ValueError: a bad setting (:func:`parse_set`).
    """
    saved = []
    try:
        for spec in sets:
            module, name, value = parse_set(spec)
            saved.append((module, name, getattr(module, name)))
            setattr(module, name, value)
        return capture(workload, steps)
    finally:
        for module, name, value in reversed(saved):
            setattr(module, name, value)


def stepper(exe):
    """A function replaying every launch of ``exe``'s loop body once and waiting for them
    (it keeps ``exe``, whose arena its kernels use, alive); and the launch count."""
    import pyopencl as cl
    q, launches = exe.queue, list(loop_launches(exe.steps))

    def run():
        for la in launches:
            cl.enqueue_nd_range_kernel(q, la.kernel, la.global_size, la.local_size)
        q.finish()
    run.exe = exe                 # the Executable owns the arena the kernels point into
    return run, len(launches)


def alternate(runs: dict, rounds: int, best: int) -> dict:
    """``{name: (seconds per round list, rounds won)}``: each round times every run ``best``
    times (keeping the fastest), in the order given."""
    for run, _ in runs.values():
        run()                                   # the first replay pages the arena in
    times = {k: [] for k in runs}
    won = dict.fromkeys(runs, 0)
    for _ in range(rounds):
        this = {}
        for k, (run, _) in runs.items():
            ts = []
            for _ in range(best):
                t = time.perf_counter()
                run()
                ts.append(time.perf_counter() - t)
            this[k] = min(ts)
            times[k].append(this[k])
        won[min(this, key=this.get)] += 1
    return {k: (times[k], won[k]) for k in runs}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.alternate",
                                description=__doc__.splitlines()[0])
    p.add_argument("--workload", default="W5", help="W1-W5 or a workload name")
    p.add_argument("--set", action="append", default=[], dest="sets",
                   metavar="MODULE.ATTR=VALUE", help="program B's setting (repeatable)")
    p.add_argument("--rounds", type=int, default=60, help="alternation rounds")
    p.add_argument("--best", type=int, default=2, help="replays per program per round")
    p.add_argument("--steps", type=int, default=3, help="steps run before the replay")
    args = p.parse_args(argv)
    if not args.sets:
        p.error("give program B's settings with --set MODULE.ATTR=VALUE")
    for spec in args.sets:                      # bad input fails before anything compiles
        parse_set(spec)
    runs = {"A (as is)": stepper(build(args.workload, [], args.steps)),
            "B (" + ", ".join(args.sets) + ")": stepper(build(args.workload, args.sets,
                                                              args.steps))}
    res = alternate(runs, args.rounds, args.best)
    for k, (ts, won) in res.items():
        print(f"{k}: {runs[k][1]} launches per step; median {statistics.median(ts) * 1e3:.3f} "
              f"ms, best {min(ts) * 1e3:.3f} ms; faster in {won} of {args.rounds} rounds")


if __name__ == "__main__":
    main()
