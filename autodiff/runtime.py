"""``execute()``: take the traced program through the pipeline and run it on a device."""
from __future__ import annotations

import gc
import os
import sys
import threading
import time
import weakref
from dataclasses import dataclass, field

import numpy as np

from . import device as devices
from .graph import dtypes
from .graph.ir import Graph, Op, Variable
from .graph.printer import format_graph
from .device.host import Progress, deferred_interrupts, prefetch_option
from .errors import (CallbackError, ExecutionInterrupted, FeederError, IndexOutOfRange,
                     ReceiverError)
from .graph.trace import OWNERS, TRACER


@dataclass
class Report:
    """What ``execute()`` did.

    Attributes:
        device: backend name.
        times: seconds per phase (``optimize``, ``compile``, ``run``, ``total``).
        nodes: graph IR node counts, loop bodies counted once (``traced``, then one entry per
            pass that ran).
        stats: further figures from later stages (kernels, memory plan, ...).
    """
    device: str
    times: dict = field(default_factory=dict)
    nodes: dict = field(default_factory=dict)
    stats: dict = field(default_factory=dict)

    def __str__(self) -> str:
        t = ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in self.times.items())
        n = " -> ".join(f"{k} {v}" for k, v in self.nodes.items())
        extra = "".join(f"\n  {k}: {v}" for k, v in self.stats.items())
        return f"execute on {self.device}: {t}\n  nodes: {n}{extra}"


@dataclass
class Compiled:
    """Artifacts of one ``execute()``, kept for ``print_graph`` after the run."""
    graph: Graph
    optimized: Graph
    stages: dict = field(default_factory=dict)
    report: "Report | None" = None


def optimize(graph: Graph, report: Report, **options) -> Graph:
    """Run the graph passes of :mod:`autodiff.opt` (if present) and record node counts."""
    try:
        from . import opt
    except ImportError:
        return graph
    return opt.optimize(graph, report=report, **options)


#: one compilation at a time across threads (runs may overlap)
_COMPILE_LOCK = threading.Lock()

#: environment variable naming the device ``execute()`` uses when given none
DEVICE_ENV = "AUTODIFF_DEVICE"
#: the device ``execute()`` uses when given none and ``$AUTODIFF_DEVICE`` is unset
DEFAULT_DEVICE = "opencl"


#: the options each stage accepts, by stage: ``execute()`` checks every option it gets
#: against ``"execute"``, the graph passes (``"opt"``) and the chosen device before
#: anything runs, and raises ``TypeError`` for any other. A stage that takes a new option
#: lists it here (tests/reliability checks the entry points' keywords against it).
OPTIONS: dict[str, frozenset] = {
    "execute": frozenset({"prefetch"}),
    "opt": frozenset({"fast_math", "passes", "prefer_exp2"}),
    "numpy": frozenset({"ir", "fuse", "offsets", "by_member", "plan", "alignment", "debug"}),
    "opencl": frozenset({"opencl_device", "profile", "fuse", "chain_work", "reductions",
                         "vector", "tile", "prejit", "team", "frontend"}),
    "tvm": frozenset({"target", "tune", "export", "trials", "steps_per_call"}),
    "cuda": frozenset({"cuda_device", "fuse"}),
}


def check_options(device: str, options: dict) -> None:
    """Raise ``TypeError`` naming every option of ``options`` that neither ``execute()``,
    the graph passes nor ``device`` accepts, and the options that are known."""
    known = OPTIONS["execute"] | OPTIONS["opt"] | OPTIONS.get(device, frozenset())
    bad = sorted(set(options) - known)
    if not bad:
        return
    name = bad[0]
    others = [d for d, opts in OPTIONS.items() if name in opts and d != device]
    where = f"; {name!r} is an option of the {others[0]} device" if others else ""
    raise TypeError(f"execute() got unknown option(s) {', '.join(map(repr, bad))} for device "
                    f"{device!r}{where}; known options: {', '.join(sorted(known))}")


def default_device() -> str:
    """``$AUTODIFF_DEVICE`` if set, else :data:`DEFAULT_DEVICE` (``"opencl"``). There is no
    silent fallback: without an OpenCL platform, ``execute()`` raises and names the install
    command (or pass ``device="numpy"``)."""
    return os.environ.get(DEVICE_ENV) or DEFAULT_DEVICE


def execute(device: str | None = None, verbose: bool = False, optimize_graph: bool = True,
            prefetch: int | None = None, **options) -> Report:
    """Compile and run everything traced since the last ``execute()``, then start afresh.

    Variables (parameters, optimizer state) keep their final values; top-level traced
    tensors still referenced become readable with ``.numpy()``. All Receiver callbacks
    have returned when this returns.

    Order of host callbacks (the same on every device): Feeders among themselves, and
    Receivers among themselves, run in program order. ``prefetch=0``: every callback runs
    in program order (the Feeders of iteration ``k + 1`` run only after every Receiver of
    iterations ``<= k`` has returned), so a Feeder may depend on what a Receiver saw.
    ``prefetch=n``: in a loop whose body holds no nested loop, the Feeders run exactly
    ``n`` iterations ahead: those of iteration ``k + n`` have been called when the
    Receivers of iteration ``k`` run, those of ``k + n + 1`` only after they returned
    (see :mod:`autodiff.device.host`). A Feeder's array is copied before it is called
    again.

    When the run stops (a Feeder or Receiver raises, an index is out of range, Ctrl-C),
    variables hold the values after the completed iterations of the outermost loop: those
    before the failing one, or for an interrupt the last one whose callbacks all returned.
    The error says which, and how many Feeder calls were made beyond them (exact, and the
    same on every device for one ``prefetch``). While it runs, ``execute()`` owns the
    program's variables: reading them in one of its callbacks raises (hand them to a
    Receiver instead); another thread's access waits until it returns.

    Args:
        device: backend name (``"opencl"``, ``"numpy"`` the reference interpreter,
            ``"tvm"``); ``None``: :func:`default_device` (``$AUTODIFF_DEVICE``, else
            ``"opencl"``).
        verbose: print the report (phase times in seconds, node counts).
        optimize_graph: run the graph passes first.
        prefetch: iterations Feeders run ahead of Receivers (an int in ``[0, 1024]``);
            None: :data:`autodiff.device.host.DEFAULT_PREFETCH`.
        options: passed to the passes and the backend; each must be one the passes or
            ``device`` accepts (:data:`OPTIONS`).

    Returns:
        A :class:`Report`.

    Raises:
        FeederError, ReceiverError, CallbackError: a host callback failed.
        DistributedError: in a run of several processes holding collectives, this or
            another process failed (raised on every process; names the failing rank).
        IndexOutOfRange: (an ``IndexError``) a gather index or a ``cross_entropy`` target
            out of range; names the op, the user's line, the iteration and the value.
        ExecutionInterrupted: (a ``KeyboardInterrupt``) Ctrl-C or a callback's
            ``KeyboardInterrupt``; names the iteration the variables hold.
        ValueError: unknown device, bad ``prefetch``.
        TypeError: an option no stage accepts (before anything runs; names the option and
            the known ones).
        RuntimeError: a variable of the program is owned by the ``execute()`` running on
            this thread (called from one of its callbacks).
        OpenCLUnavailable: the opencl device without an OpenCL platform (the message names
            the install command); the traced program stays pending for another call.
        MemoryError: a value larger than the device's memory (before anything runs).
    """
    t_start = time.perf_counter()
    device = device or default_device()
    backend = devices.get(device)
    check_options(device, options)
    options["prefetch"] = prefetch_option(prefetch)
    if hasattr(backend, "require"):
        backend.require(**options)      # before the traced program is consumed
    exe, phase, prepared = None, "before", None
    try:
        tensors = TRACER.live_outputs()
        graph = TRACER.finish()
        graph.outputs = [t._node for t in tensors]
        report = Report(device)
        report.nodes["traced"] = graph.count()
        t0 = time.perf_counter()
        if hasattr(backend, "prepare"):     # background work for the program's compile
            prepared = backend.prepare(graph, **options)    # (OpenCL: the pre-JIT helper)
        with _frozen_heap():
            opt_graph = optimize(graph, report, verbose=verbose, **options) \
                if optimize_graph else graph
            t1 = time.perf_counter()
            with _COMPILE_LOCK:     # compilers keep global state (TVM's BlockBuilder stack)
                exe = backend.compile(opt_graph, report=report, **options,
                                      **({} if prepared is None else {"prepared": prepared}))
        t2 = time.perf_counter()
        TRACER.last = Compiled(graph, opt_graph, getattr(exe, "stages", {}), report)
        _run(exe, opt_graph)
        phase = "after"
        for t, node in zip(tensors, opt_graph.outputs):
            t._var = Variable(np.array(exe.vals[node.id], dtype=dtypes.host(node.dtype),
                                       copy=True), t.name)
            t._var.owner = weakref.ref(t)
            t._node, t._scope, t.requires_grad = None, None, False
    except KeyboardInterrupt as e:
        if isinstance(e, ExecutionInterrupted):
            raise
        raise _interrupted(exe, phase) from e
    finally:
        if prepared is not None:        # compile's, or never used (a pass failed)
            prepared.stop()
    t3 = time.perf_counter()
    report.times.update(optimize=t1 - t0, compile=t2 - t1, run=t3 - t2, total=t3 - t_start)
    if verbose:
        print(report, file=sys.stdout)
    return report


class _frozen_heap:
    """Within: the objects that existed on entry (the traced program, the user's) are out
    of the cyclic garbage collector's sight (``gc.freeze``; back on exit), so that the
    graph passes' and the compile's collections scan only what they create. The main
    job's training program (2000 graph nodes, warm compile caches, five runs each): graph
    passes and compile 1.35-1.51 -> 1.27-1.36 s, peak RSS +1 MB (the collector off
    instead: 1.20-1.37 s, but +8 MB of cyclic garbage kept until the run). Nothing is
    done where objects are frozen already (the user's own ``gc.freeze``, or another
    thread's compile): their freeze is not undone."""

    def __enter__(self):
        self.on = gc.get_freeze_count() == 0
        if self.on:
            gc.freeze()

    def __exit__(self, *exc):
        if self.on:
            gc.unfreeze()
        return False


def _run(exe, graph: Graph) -> None:
    """``exe.run`` on the variables of ``graph``, owned for the run; the assigned ones are
    written back (all or none, also when the run stops); a stop is described in the
    error (:class:`~autodiff.device.host.Progress`), an interrupt raised as
    :class:`~autodiff.errors.ExecutionInterrupted` naming what the variables hold."""
    variables, assigned = _variables(graph), _assigned(graph)
    token = object()
    state = ["before"]                     # -> "running" -> "written"
    try:
        try:
            OWNERS.acquire(variables, token)     # waits for another thread's run of them
            # devices hold every value in its storage dtype (int64 as int32)
            store = {v: dtypes.to_storage(v.value, v.dtype) for v in variables}
            state[0] = "running"
            try:
                _run_program(graph, exe, store)
            except (FeederError, ReceiverError, CallbackError, IndexOutOfRange) as e:
                _progress(exe).describe(e)
                raise
            finally:
                with deferred_interrupts():      # all variables written back, or none
                    for var in assigned:
                        var.value = np.array(store[var], dtype=var.value.dtype, copy=True)
                    state[0] = "written"
        finally:
            try:
                with deferred_interrupts():
                    OWNERS.release(token)
            finally:            # again (idempotent): an interrupt before the line above
                OWNERS.release(token)
    except KeyboardInterrupt as e:
        if isinstance(e, ExecutionInterrupted):
            raise
        raise _interrupted(exe, state[0]) from e


def _progress(exe) -> Progress:
    return getattr(exe, "progress", None) or Progress()


def _interrupted(exe, state: str) -> ExecutionInterrupted:
    """The :class:`ExecutionInterrupted` for an interrupt during ``execute()``: ``state``
    ``"written"`` (the run's variables were written back: where it stopped), else the
    variables are unchanged (``"before"`` the run or ``"running"`` without a write-back;
    ``"after"``: the run had completed)."""
    progress = _progress(exe)
    if state == "after":
        err = ExecutionInterrupted("execute() interrupted after the program ran: variables "
                                   "hold its final values")
    elif state != "written":
        err = ExecutionInterrupted("execute() interrupted before the program's values were "
                                   "written: variables are unchanged")
    elif progress.stop is not None:
        err = ExecutionInterrupted("execute() interrupted")
        progress.describe(err)
        return err
    elif progress.left is not None:
        site, n = progress.left
        err = ExecutionInterrupted(f"execute() interrupted after the loop at {site} ran all "
                                   f"its {n} iterations: variables hold their values after "
                                   "it")
        err.completed = n
        return err
    else:
        err = ExecutionInterrupted("execute() interrupted outside any loop: variables hold "
                                   "the values of the top-level statements that ran")
    return err


def _run_program(graph: Graph, exe, store: dict) -> None:
    """``exe.run(store)``; in a distributed run (several processes) a program holding
    collectives runs under :func:`autodiff.distributed.agreement.run`, so that a failure
    on one process stops every process (:class:`~autodiff.errors.DistributedError`)."""
    from .distributed import agreement
    agreement.run(graph, exe, store)


def _variables(graph: Graph) -> list[Variable]:
    """The variables ``graph`` reads or writes."""
    seen: dict[int, Variable] = {}
    for n in graph.walk():
        if n.op in (Op.LOAD, Op.ASSIGN):
            seen.setdefault(n.arg.id, n.arg)
    return list(seen.values())


def _assigned(graph: Graph) -> list[Variable]:
    """The variables ``graph`` writes (the only ones written back after a run)."""
    return list({n.arg.id: n.arg for n in graph.walk() if n.op is Op.ASSIGN}.values())


def print_graph(stage: str = "graph", sites: bool = False, file=None) -> None:
    """Print the program being traced (or, if none, the last executed one).

    Args:
        stage: ``"graph"`` (as traced), ``"opt"`` (after the graph passes), or a later
            stage a backend recorded (``"procedural"``, ``"fused"``, ...).
        sites: end each line with the user's ``file:line``.
    """
    print(format_stage(stage, sites), file=file or sys.stdout)


def format_stage(stage: str = "graph", sites: bool = False) -> str:
    pending = TRACER.root.graph
    if pending.nodes:
        graph = Graph(list(pending.nodes), [t._node for t in TRACER.live_outputs()])
        if stage == "graph":
            return format_graph(graph, sites)
        if stage == "opt":
            report = Report("-")
            opt_graph = optimize(graph, report)
            return _node_counts(report) + format_graph(opt_graph, sites, "graph(opt)")
        raise ValueError(f"stage {stage!r} exists after execute(); pending program has "
                         "'graph' and 'opt'")
    last = TRACER.last
    if last is None:
        return "graph {\n}"
    if stage == "graph":
        return format_graph(last.graph, sites)
    if stage == "opt":
        return _node_counts(last.report) + format_graph(last.optimized, sites, "graph(opt)")
    if stage in last.stages:
        return str(last.stages[stage])
    raise ValueError(f"unknown stage {stage!r}; have graph, opt, {', '.join(last.stages)}")


def _node_counts(report: "Report | None") -> str:
    """``# nodes: traced 55 -> simplify 54 -> ...`` and a newline, or "" without counts."""
    if report is None or not report.nodes:
        return ""
    return "# nodes: " + " -> ".join(f"{k} {v}" for k, v in report.nodes.items()) + "\n"
