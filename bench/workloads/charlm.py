"""W5 char-LM: the default configuration of ``examples/transformer.py`` on autodiff devices.

The example's ``main(argv)`` runs unchanged in the benchmark's child process (with
``--no-progress --plot '' --sample-len 0``: no progress bar, no plot, no greedy sample;
nothing about the model or its training changes). Timing
hooks are put around it without touching its code: while its ``train()`` runs,
``autodiff.ir_for`` is wrapped so that every iteration of the innermost loop ends with a
timestamping Receiver, and ``autodiff.execute`` is wrapped to keep the Report. Validation
programs run too and count in the total wall time only. There is no PyTorch or
JAX version of this workload.
"""
from __future__ import annotations

import contextlib
import io
import time
from pathlib import Path

from .spec import Outcome

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "transformer.py"
KEY, NAME = "W5", "charlm"
TITLE = "examples/transformer.py, default configuration"
QUICK_STEPS = 10


def unavailable() -> str | None:
    """Why W5 cannot run here, or None."""
    return None if EXAMPLE.exists() else "examples/transformer.py does not exist"


def run(device: str, steps: int | None) -> Outcome:
    """Run the example's ``main`` on ``device`` (``--steps steps`` when not None).

    Raises:
        FileNotFoundError: the example does not exist.
        RuntimeError: its ``train()`` traced no loop (nothing to time).
    """
    import importlib.util

    import autodiff
    import autodiff.graph as graph

    if not EXAMPLE.exists():
        raise FileNotFoundError(EXAMPLE)
    spec = importlib.util.spec_from_file_location("charlm_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    stamps: list[float] = []
    reports: list = []
    training = [False]
    opened = [0]                      # loops traced inside the body being traced
    orig_for, orig_exec, orig_train = autodiff.ir_for, autodiff.execute, mod.train

    def ir_for(rng, body):
        if not training[0]:
            return orig_for(rng, body)

        def timed_body():
            outer, opened[0] = opened[0], 0
            body()
            if opened[0] == 0:        # innermost loop: stamp each of its iterations
                autodiff.Receiver(lambda: stamps.append(time.perf_counter() - t0), [],
                                  name="clock")
            opened[0] = outer + 1
        return orig_for(rng, timed_body)

    def execute(*a, **k):
        report = orig_exec(*a, **k)
        if training[0]:
            reports.append(report)
        return report

    def train(*a, **k):
        training[0] = True
        try:
            return orig_train(*a, **k)
        finally:
            training[0] = False

    argv = ["--device", device, "--no-progress", "--plot", "", "--sample-len", "0"]
    argv += ["--steps", str(steps)] if steps else []
    out = io.StringIO()
    autodiff.ir_for = graph.ir_for = ir_for
    autodiff.execute, mod.train = execute, train
    try:
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(out):
            mod.main(argv)
        total = time.perf_counter() - t0
    finally:
        autodiff.ir_for, graph.ir_for, autodiff.execute = orig_for, orig_for, orig_exec
    if not stamps:
        raise RuntimeError("examples/transformer.py: train() traced no ir_for loop")
    from .run_autodiff import jsonable
    stats = {"argv": argv, "output_tail": out.getvalue().splitlines()[-8:]}
    if reports:
        r = reports[-1]
        stats.update(times=dict(r.times), nodes=dict(r.nodes), device_stats=jsonable(r.stats))
    return Outcome(stamps[0], total, stamps, None, {}, stats,
                   notes=["first step and total include the example's data preparation "
                          "and validation"])
