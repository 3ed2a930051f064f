"""Where an OpenCL training step's time goes: every launch of the loop body, replayed alone.

    python -m bench.profile [--workload W5] [--steps 3] [--repeat 20] [--top 30]

The workload runs a few steps on the OpenCL device (so the arena holds real values), then
each launch of its training loop's body is enqueued ``--repeat`` times on its own and timed
by the process CPU time it costs (PoCL runs kernels in worker threads of this process).
CPU time, unlike the wall-clock times of OpenCL profiling events, barely moves when other
jobs share the cores: on a loaded machine it is the figure to compare. Run it with
``POCL_MAX_PTHREAD_COUNT=1`` for one-thread kernel work.

Output: one line per kernel (kind, launches per step, CPU us per launch, share of the
step, GFLOP/s for matmuls) after a summary per kernel kind; with ``--launches N`` the N
slowest launches, each with its global size.
"""
from __future__ import annotations

import argparse
import collections
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def capture(workload: str, steps: int):
    """Run ``workload`` for ``steps`` steps on OpenCL (profiling on); returns the
    Executable of its training program (the one with the most launches)."""
    from autodiff.device import opencl
    from autodiff.device.opencl.chain import CHAIN_WORK
    seen, real = [], opencl.compile

    def spy(graph, report=None, **options):
        options["profile"] = True
        # kernels as launched with two or more cores (on one core every kernel would join
        # one chain launch, and there would be nothing to attribute)
        options.setdefault("chain_work", CHAIN_WORK)
        seen.append(real(graph, report=report, **options))
        return seen[-1]
    opencl.compile = spy
    try:
        from bench.workloads import WORKLOADS, charlm
        if workload in ("W5", charlm.NAME):
            charlm.run("opencl", steps)
        else:
            from bench.workloads import run_autodiff
            w = next(w for w in WORKLOADS.values() if workload in (w.key, w.name))
            run_autodiff.run(w, w.init(0), w.data(steps), steps, "opencl")
    finally:
        opencl.compile = real
    return max(seen, key=lambda e: len(list(loop_launches(e.steps))))


def loop_launches(steps, inside=False):
    """The ``Launch`` steps inside loops of host steps ``steps`` (a training loop's body),
    in order, nested loops included."""
    from autodiff.device.opencl.runtime import Launch, Loop
    for s in steps:
        if type(s) is Loop:
            yield from loop_launches(s.body, True)
        elif type(s) is Launch and inside:
            yield s


def replay(exe, repeat: int) -> list[tuple]:
    """``(launch, CPU seconds per launch)`` for every launch of the loop body, in order."""
    import pyopencl as cl
    q = exe.queue
    out = []
    for la in loop_launches(exe.steps):
        cl.enqueue_nd_range_kernel(q, la.kernel, la.global_size, la.local_size)
        q.finish()
        c = time.process_time()
        for _ in range(repeat):
            cl.enqueue_nd_range_kernel(q, la.kernel, la.global_size, la.local_size)
        q.finish()
        out.append((la, (time.process_time() - c) / repeat))
    return out


def kind(name: str) -> str:
    m = re.match(r"k\d+_(.*)", name)
    return m.group(1) if m else "chain"


def report(exe, timed, top: int, launches: int = 0) -> str:
    total = sum(t for _, t in timed)
    by_kind, count = collections.Counter(), collections.Counter()
    for la, t in timed:
        by_kind[kind(la.name)] += t
        count[kind(la.name)] += 1
    lines = [f"{len(timed)} launches per step, {total * 1e3:.2f} ms of CPU per step "
             f"(sum of the launches replayed alone); source: {exe.stats.get('source_path')}",
             "", "by kind:"]
    for k, t in by_kind.most_common():
        lines.append(f"  {k:16s} {count[k]:4d} launches {t * 1e3:8.2f} ms {100 * t / total:5.1f}%")
    lines += ["", "by kernel (launches sharing a body summed):"]
    per = collections.defaultdict(lambda: [0, 0.0, 0])
    for la, t in timed:         # launches of one body may differ in size: flops per launch
        per[la.name][0] += 1
        per[la.name][1] += t
        per[la.name][2] += la.flops
    for name, (n, t, f) in sorted(per.items(), key=lambda kv: -kv[1][1])[:top]:
        g = f" {f / t / 1e9:6.1f} GFLOP/s" if f else ""
        lines.append(f"  {name:24s} x{n:<3d} {t / n * 1e6:9.1f} us {100 * t / total:5.1f}%{g}")
    if launches:
        lines += ["", "slowest launches (global size):"]
        for la, t in sorted(timed, key=lambda x: -x[1])[:launches]:
            g = f" {la.flops / t / 1e9:6.1f} GFLOP/s" if la.flops else ""
            lines.append(f"  {la.name:24s} {str(tuple(la.global_size)):18s} "
                         f"{t * 1e6:9.1f} us{g}")
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.splitlines()[0])
    p.add_argument("--workload", default="W5", help="W1-W5 or a workload name")
    p.add_argument("--steps", type=int, default=3, help="steps run before the replay")
    p.add_argument("--repeat", type=int, default=20, help="launches timed per kernel")
    p.add_argument("--top", type=int, default=30, help="kernels listed")
    p.add_argument("--kind", help="list only kernels whose kind contains this")
    p.add_argument("--launches", type=int, default=0, help="slowest launches listed")
    args = p.parse_args(argv)
    exe = capture(args.workload, args.steps)
    timed = replay(exe, args.repeat)
    if args.kind:
        total = sum(t for _, t in timed)
        timed = [(la, t) for la, t in timed if args.kind in kind(la.name)]
        print(f"(kinds containing {args.kind!r}: {sum(t for _, t in timed) * 1e3:.2f} of "
              f"{total * 1e3:.2f} ms)")
    print(report(exe, timed, args.top, args.launches))


if __name__ == "__main__":
    main()
