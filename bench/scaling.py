"""Scaling table: data-parallel training on 1 and 2 processes, one core each.

    python -m bench.scaling [--quick] [--device numpy] [--ranks 1,2] [--json PATH]

(``python -m bench`` runs it too, after its main tables.) Strong scaling: the global batch
of each workload is fixed and split over the processes, so N processes train the model one
process trains, and the figures are

* steps/s: steady training steps per second (rank 0's host timestamps of its per-step
  Receiver, or of PyTorch's loop, first step excluded: compile and warm-up not counted; on
  OpenCL, whose Receivers run up to ``prefetch`` iterations late, the device's own steady
  ms per iteration, ``report.stats["opencl"]["steady_iteration_ms"]``);
* all-reduce ms: autodiff's host time per step in its all-reduces (waiting for the other
  processes included), first two steps excluded;
* speedup over the same system on 1 process, and parallel efficiency = speedup / N.

Workloads: the main job (W5: ``examples/transformer.py``'s model at its defaults, global
batch 16 windows of 64 characters, AdamW, mean cross-entropy) and W3 (post-LN encoder
4x(d128, h4, ff512), global batch 8x64 tokens, MSE, SGD). Systems: autodiff
(``DistributedDataParallel`` under ``mpiexec``, ``--device``, default opencl: the
all-reduce of each bucket overlaps the backward of the next; numpy and tvm run collectives
too) and PyTorch's
``DistributedDataParallel`` with the gloo backend (eager), each process pinned to its own
core with every thread pool at one thread.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __package__ in (None, ""):
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

WORKLOADS = ("charlm", "transformer")
KEYS = {"charlm": "W5", "transformer": "W3"}
STEPS = {"charlm": (100, 30), "transformer": (40, 12)}     # (full, --quick)
SYSTEMS = ("autodiff", "torch-ddp-gloo")


# -- the child: one process of one run ---------------------------------------------------------
def _rank_world(system: str) -> tuple[int, int]:
    if system == "autodiff":
        import autodiff.distributed as dist
        return dist.get_rank(), dist.get_world_size()
    from mpi4py import MPI
    return MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()


def _charlm_data(steps: int):
    from bench.workloads import charlm
    s = charlm.setup(steps)
    return s, charlm.config().batch


def _transformer_data():
    from bench.workloads import transformer as w3
    d = w3.data(1)
    return w3, d.const["x"], d.const["target"]


#: seconds of each all-reduce autodiff's program ran (failure agreement included)
ALL_REDUCE_S: list = []
#: the device's steady ms per iteration, where it reports one
STEADY_MS: list = []


def _time_all_reduces() -> None:
    """Time every all-reduce function traced from now on (:data:`ALL_REDUCE_S`)."""
    from autodiff.distributed import collectives
    make = collectives._all_reduce_fn

    def timed(op):
        fn = make(op)

        def run(x):
            t = time.perf_counter()
            out = fn(x)
            ALL_REDUCE_S.append(time.perf_counter() - t)
            return out
        return run
    collectives._all_reduce_fn = timed


def child_autodiff(workload: str, steps: int, device: str) -> list[float]:
    """Train on this process's shard; returns the host timestamps of each step."""
    import autodiff as ad
    import autodiff.distributed as dist
    from autodiff import nn
    from autodiff.optim import SGD, AdamW
    from bench.workloads.frameworks import TENSOR

    rank, world = dist.get_rank(), dist.get_world_size()
    _time_all_reduces()
    stamps: list[float] = []
    if workload == "charlm":
        from bench.workloads import charlm
        s, batch = _charlm_data(steps)
        part = dist.DistributedSampler(batch, shuffle=False).shard(batch)
        mod = charlm.example()
        c = charlm.config()
        model = mod.CharTransformer(s.vocab, c.d_model, c.heads, c.layers, c.seq, 0.0)
        model.load_state_dict(s.params)
        net = dist.DistributedDataParallel(model)
        opt = AdamW(net.parameters(), lr=charlm.config().lr, weight_decay=charlm.WD)
        w = dist.DistributedSampler(batch, shuffle=False).loss_weight(batch)
        windows = iter(s.train[:, part])
        cur = {}

        def tokens():
            cur["w"] = next(windows)
            return np.ascontiguousarray(cur["w"][:, :-1])

        rows = part.stop - part.start

        def step():
            x = ad.Feeder(tokens, [rows, charlm.config().seq], "int32", name="tokens")
            y = ad.Feeder(lambda: np.ascontiguousarray(cur["w"][:, 1:]),
                          [rows, charlm.config().seq],
                          "int32", name="targets")
            opt.zero_grad()
            logits = net(x)
            loss = nn.functional.cross_entropy(logits.reshape(-1, s.vocab),
                                               y.reshape(-1)) * w
            loss.backward()
            opt.step()
            ad.Receiver(lambda v: stamps.append(time.perf_counter()), [loss], name="clock")
    else:
        w3, x_all, t_all = _transformer_data()
        part = dist.DistributedSampler(w3.BATCH, shuffle=False).shard(w3.BATCH)

        class Encoder(nn.Module):
            def __init__(self, params):
                super().__init__()
                self.names = list(params)
                self.p = nn.ParameterDict({k.replace(".", "_"): nn.Parameter(v)
                                           for k, v in params.items()})

            def forward(self, x, target):
                return w3.loss(TENSOR, {k: self.p[k.replace(".", "_")] for k in self.names},
                               {"x": x, "target": target})

        net = dist.DistributedDataParallel(Encoder(w3.WORKLOAD.init(0)))
        opt = SGD(net.parameters(), lr=w3.WORKLOAD.lr)
        x, t = ad.tensor(x_all[part]), ad.tensor(t_all[part])

        def step():
            opt.zero_grad()
            loss = net(x, t) * world          # a sum over the batch: gradients averaged
            loss.backward()
            opt.step()
            ad.Receiver(lambda v: stamps.append(time.perf_counter()), [loss], name="clock")
    ad.ir_for(steps, step)
    report = ad.execute(device=device)
    steady = report.stats.get(device, {}).get("steady_iteration_ms")
    if steady:      # OpenCL runs Receivers lazily (up to `prefetch` iterations late): its
        STEADY_MS.append(steady)    # own clock of the iterations after the first is exact
    return stamps


def child_torch(workload: str, steps: int) -> list[float]:
    import torch
    import torch.distributed as tdist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    from bench.workloads.frameworks import TENSOR

    rank, world = _rank_world("torch")
    torch.set_num_threads(1)
    tdist.init_process_group("gloo", rank=rank, world_size=world)
    stamps: list[float] = []
    if workload == "charlm":
        from bench.workloads import charlm, charlm_torch
        s, batch = _charlm_data(steps)
        q, r = divmod(batch, world)
        lo = rank * q + min(rank, r)
        part = slice(lo, lo + q + (rank < r))
        net = charlm_torch.model(s.vocab)
        net.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in s.params.items()})
        ddp = DDP(net)
        opt = torch.optim.AdamW(ddp.parameters(), lr=charlm.config().lr,
                                weight_decay=charlm.WD)
        windows = torch.from_numpy(s.train[:, part].astype(np.int64))
        w = world * (part.stop - part.start) / batch
        for i in range(steps):
            opt.zero_grad(set_to_none=True)
            logits = ddp(windows[i, :, :-1])
            loss = F.cross_entropy(logits.reshape(-1, s.vocab),
                                   windows[i, :, 1:].reshape(-1)) * w
            loss.backward()
            opt.step()
            stamps.append(time.perf_counter())
    else:
        w3, x_all, t_all = _transformer_data()
        q, r = divmod(w3.BATCH, world)
        lo = rank * q + min(rank, r)
        part = slice(lo, lo + q + (rank < r))

        class Encoder(torch.nn.Module):
            def __init__(self, params):
                super().__init__()
                self.names = list(params)
                self.p = torch.nn.ParameterDict({k.replace(".", "_"): torch.nn.Parameter(
                    torch.from_numpy(v.copy())) for k, v in params.items()})

            def forward(self, x, target):
                return w3.loss(TENSOR, {k: self.p[k.replace(".", "_")] for k in self.names},
                               {"x": x, "target": target})

        ddp = DDP(Encoder(w3.WORKLOAD.init(0)))
        opt = torch.optim.SGD(ddp.parameters(), lr=w3.WORKLOAD.lr)
        x, t = torch.from_numpy(x_all[part].copy()), torch.from_numpy(t_all[part].copy())
        for i in range(steps):
            opt.zero_grad(set_to_none=True)
            (ddp(x, t) * world).backward()
            opt.step()
            stamps.append(time.perf_counter())
    tdist.destroy_process_group()
    return stamps


def child(args) -> None:
    cpus = [int(c) for c in os.environ.get("BENCH_SCALING_CPUS", "").split(",") if c]
    rank, world = _rank_world(args.system)
    if cpus:
        os.sched_setaffinity(0, {cpus[rank % len(cpus)]})
    if args.system == "autodiff":
        stamps = child_autodiff(args.workload, args.steps, args.device)
    else:
        stamps = child_torch(args.workload, args.steps)
    if rank == 0:
        d = np.diff(stamps[1:]) if len(stamps) > 2 else np.diff(stamps)
        res = {"steps_per_s": float(1e3 / STEADY_MS[0] if STEADY_MS else 1.0 / np.mean(d)),
               "timed_steps": int(len(d))}
        if ALL_REDUCE_S and args.steps > 2:   # ms per step, first two steps excluded
            per = len(ALL_REDUCE_S) // args.steps
            res["allreduce_ms"] = 1e3 * sum(ALL_REDUCE_S[2 * per:]) / (args.steps - 2)
        Path(args.out).write_text(json.dumps(res))


# -- the parent: every run, the table ---------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def missing() -> str | None:
    """Why the scaling table cannot be made here, or None."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py is not installed (pip install -e '.[distributed]')"
    if _mpiexec() is None:
        return "no mpiexec"
    return None


def _mpiexec() -> str | None:
    here = Path(sys.executable).parent / "mpiexec"
    return str(here) if here.exists() else shutil.which("mpiexec")


def run_one(workload: str, system: str, ranks: int, steps: int, device: str,
            timeout: float, cpus: list[int]) -> dict:
    """One (workload, system, process count) run; a row dict with ``steps_per_s`` or a
    ``status`` saying why not."""
    from bench.systems import thread_env
    row = {"workload": workload, "system": system, "ranks": ranks, "steps": steps}
    env = dict(os.environ, **thread_env(1), PYTHONPATH=str(ROOT), MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(_free_port()), BENCH_SCALING_CPUS=",".join(map(str, cpus)))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [_mpiexec(), "-n", str(ranks), sys.executable, "-m", "bench.scaling", "--child",
               "--system", system, "--workload", workload, "--steps", str(steps),
               "--device", device, "--out", str(out)]
        t = time.perf_counter()
        try:
            proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=timeout, start_new_session=True)
        except subprocess.TimeoutExpired:
            row["status"] = f"timed out after {timeout:.0f} s"
            return row
        row["wall_s"] = time.perf_counter() - t
        if proc.returncode or not out.exists():
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
            row["status"] = f"failed (exit {proc.returncode}): " + " | ".join(tail)
            return row
        row.update(json.loads(out.read_text()), status="ok")
    return row


def run(quick: bool = False, device: str = "opencl", ranks=(1, 2), timeout: float = 600,
        workloads=WORKLOADS, systems=SYSTEMS, log=sys.stderr, repeat: int = 1) -> dict:
    """Every (workload, system, process count) run, ``repeat`` rounds of them one after
    the other, keeping each one's fastest round (on a machine shared with other work, the
    round least disturbed); returns ``{"rows": [...], "meta": {...}}`` with speedup and
    efficiency filled in and, per row, the 1-minute load average when it ended."""
    why = missing()
    if why:
        return {"meta": {"skipped": why}, "rows": []}
    from bench.systems import idlest_cpus
    cpus = idlest_cpus(max(ranks))
    best: dict = {}
    loads = [os.getloadavg()]
    for _ in range(max(1, repeat)):
        for w in workloads:
            steps = STEPS[w][1 if quick else 0]
            for s in systems:
                for n in ranks:
                    row = run_one(w, s, n, steps, device, timeout, cpus)
                    row["load1"] = os.getloadavg()[0]
                    loads.append(os.getloadavg())
                    msg = (f"{row['steps_per_s']:.2f} steps/s" if row["status"] == "ok"
                           else row["status"])
                    print(f"scaling: {KEYS[w]} {s} on {n} process{'es' if n > 1 else ''}: "
                          f"{msg} (load {row['load1']:.1f})", file=log, flush=True)
                    old = best.get((w, s, n))
                    if old is None or (row["status"] == "ok" and (
                            old["status"] != "ok" or row["steps_per_s"] > old["steps_per_s"])):
                        best[(w, s, n)] = row
    rows = list(best.values())
    for r in rows:
        base = next((b for b in rows if b["workload"] == r["workload"] and
                     b["system"] == r["system"] and b["ranks"] == 1 and
                     b["status"] == "ok"), None)
        if r["status"] == "ok" and base:
            r["speedup"] = r["steps_per_s"] / base["steps_per_s"]
            r["efficiency"] = r["speedup"] / r["ranks"]
    return {"meta": {"device": device, "quick": quick, "cpus": cpus, "repeat": repeat,
                     "loadavg": os.getloadavg(),
                     "load1_range": (min(x[0] for x in loads), max(x[0] for x in loads))},
            "rows": rows}


def table(results: dict | None, markdown: bool = True) -> str:
    """The scaling section (Markdown or plain text) of ``results`` (:func:`run`)."""
    if not results:
        return ""
    meta = results.get("meta", {})
    head = "## Scaling: data-parallel on 1 and 2 processes, one core each"
    if not results.get("rows"):
        return f"{head}\n\nnot run: {meta.get('skipped', 'no rows')}\n"
    lines = [head, "",
             f"Strong scaling (global batch fixed, split over the processes; autodiff on "
             f"`{meta.get('device')}`, PyTorch DDP on gloo), each process pinned to its own "
             f"core, one thread. Steady steps/s of rank 0, first step excluded; efficiency = "
             f"speedup / processes; all-reduce ms: autodiff's host time per step in its "
             f"collectives (MPI, waiting for the other process included). "
             + (f"Best of {meta['repeat']} rounds per row. " if meta.get("repeat", 1) > 1
                else "")
             + f"Load average at the end: "
             f"{', '.join(f'{v:.1f}' for v in meta.get('loadavg', ()))}"
             + (" (1-minute load {:.1f}-{:.1f} during the runs)".format(
                 *meta["load1_range"]) if "load1_range" in meta else "") + ".", ""]
    cols = ["workload", "system", "processes", "steps/s", "speedup", "efficiency",
            "all-reduce ms", "load"]
    body = []
    for r in results["rows"]:
        ok = r["status"] == "ok"
        body.append([f"{KEYS.get(r['workload'], '')} {r['workload']}", r["system"],
                     str(r["ranks"]),
                     f"{r['steps_per_s']:.2f}" if ok else r["status"],
                     f"{r['speedup']:.2f}x" if "speedup" in r else "",
                     f"{100 * r['efficiency']:.0f}%" if "efficiency" in r else "",
                     f"{r['allreduce_ms']:.1f}" if "allreduce_ms" in r else "",
                     f"{r['load1']:.1f}" if "load1" in r else ""])
    if markdown:
        lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(b) + " |" for b in body]
    else:
        widths = [max(len(c), *(len(b[i]) for b in body)) for i, c in enumerate(cols)]
        lines += ["  ".join(c.ljust(wd) for c, wd in zip(cols, widths))]
        lines += ["  ".join(x.ljust(wd) for x, wd in zip(b, widths)) for b in body]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.scaling",
                                description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer steps")
    p.add_argument("--device", default="opencl",
                   help="autodiff's device (default opencl; numpy and tvm run collectives too)")
    p.add_argument("--ranks", default="1,2", help="process counts (default 1,2)")
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--timeout", type=float, default=600, help="seconds per run")
    p.add_argument("--repeat", type=int, default=1,
                   help="rounds of every run, the fastest kept (default 1)")
    p.add_argument("--json", help="write the raw results here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--system", help=argparse.SUPPRESS)
    p.add_argument("--workload", help=argparse.SUPPRESS)
    p.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args)
        return
    results = run(args.quick, args.device, [int(n) for n in args.ranks.split(",")],
                  args.timeout, args.workloads.split(","), args.systems.split(","),
                  repeat=args.repeat)
    print(table(results, markdown=False))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
