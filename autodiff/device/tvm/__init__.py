"""The TVM device: graph IR -> Relax -> fused, scheduled kernels -> Relax VM, host loop.

``compile(graph, target=None, tune=False, export=None)`` runs

1. translate (:mod:`.translate`): one Relax function per segment (a loop body's compute
   between host callbacks; code outside loops gets its own), one PrimFunc per node, and
   for a loop whose body is one segment a function running ``K`` iterations per call
   (:mod:`.batch`, option ``steps_per_call``);
2. fuse: ``AnnotateTIROpPattern``, ``FuseOps``, ``FuseTIR``, ``DeadCodeElimination``
   (``tvm.compile`` alone fuses nothing on CPU);
3. schedule: with ``tune=True`` meta_schedule for the matmul-like kernels (:mod:`.tune`,
   records kept in a database under the user's cache dir), then the default CPU schedule
   (:mod:`.schedule`) for those left; GPU targets get dlight's default rules;
4. build with ``tvm.compile`` and return an :class:`~.runtime.Executable` whose ``run``
   drives the loops from the host (:mod:`.runtime`).

Executables are cached in memory by the module's structural hash and the target, so an
identical program compiles once per process. Needs the ``[tvm]`` extra
(``pip install 'autodiff[tvm]'``).
"""
from __future__ import annotations

import os
import time

from ...graph.ir import Graph

try:
    import tvm
    import tvm_ffi
    from tvm import relax
except ImportError as _e:            # pragma: no cover - exercised without the extra
    raise ImportError("the tvm device needs Apache TVM: pip install 'autodiff[tvm]' "
                      "(apache-tvm==0.27.0.post1 with apache-tvm-ffi==0.1.14.post1)") from _e

from ...opt.lower_control import lower_control
from .plan import loops
from .runtime import Executable
from .schedule import schedule_module
from .translate import translate
from .unfold import unfold_products

__all__ = ["compile", "build", "make_target", "fuse", "Listing", "unfold_products"]

_CACHE: dict = {}


class Listing:
    """A Relax module shown as TVMScript by ``str()`` (the ``"tvm"`` stage of print_graph)."""

    def __init__(self, mod):
        self.mod = mod

    def __str__(self) -> str:
        return self.mod.script()


def make_target(target=None) -> "tvm.target.Target":
    """A TVM target from ``None``/``"llvm"``/``"cpu"`` (this CPU, all cores), ``"cuda"``,
    a target dict, or a ``tvm.target.Target``.

    ``"mcpu"`` is this machine's CPU name (``"native"`` would silently mean generic).

    Raises
    ------
    ValueError
        A target string other than ``llvm``/``cpu``/``cuda``/``opencl``.
    """
    if isinstance(target, tvm.target.Target):
        return target
    if isinstance(target, dict):
        return tvm.target.Target(target)
    if target in (None, "llvm", "cpu"):
        return tvm.target.Target({"kind": "llvm",
                                  "mcpu": tvm.target.codegen.llvm_get_system_cpu(),
                                  "num-cores": os.cpu_count() or 1})
    if target in ("cuda", "opencl"):
        spec = {"kind": target}
        if target == "cuda":
            dev = tvm.cuda(0)
            spec["arch"] = f"sm_{dev.compute_version.replace('.', '')}" if dev.exist else "sm_80"
        return tvm.target.Target(spec, host=make_target("llvm"))
    raise ValueError(f"tvm device: unknown target {target!r}; use 'llvm', 'cuda', 'opencl', "
                     "a target dict or a tvm.target.Target")


def _count_kernels(mod) -> int:
    return sum(1 for _, f in mod.functions_items() if isinstance(f, tvm.tirx.PrimFunc))


def fuse(mod):
    """``mod`` with its per-node PrimFuncs fused (injective and reduction chains, matmul
    epilogues) by Relax ``FuseOps`` + ``FuseTIR``, then the private one-step copies inlined
    into the ``K``-step functions (:mod:`.batch`; fusing before unrolling keeps the fusion
    passes' time independent of ``K``)."""
    seq = tvm.ir.transform.Sequential([
        relax.transform.AnnotateTIROpPattern(), relax.transform.FuseOps(),
        relax.transform.FuseTIR(), relax.transform.InlinePrivateFunctions(),
        relax.transform.DeadCodeElimination()])
    return seq(mod)


def _gpu_schedule(mod, target):
    from tvm.s_tir import dlight as dl
    with target:
        return dl.ApplyDefaultSchedule(dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(),
                                       dl.gpu.GeneralReduction(), dl.gpu.Fallback())(mod)


def build(graph: Graph, target=None, tune: bool = False, trials: int = 64,
          steps_per_call: int | None = None, prefetch: int | None = None):
    """Translate, fuse, schedule and build ``graph`` for ``target`` (no device needed).

    ``steps_per_call``: loop iterations per device call (see :func:`compile`), at most
    ``prefetch + 1``.

    Returns
    -------
    steps : list
        The host plan (:mod:`.plan`).
    ex : tvm.runtime.Executable
        The built Relax executable (for CUDA its imported module holds the source).
    listing : Listing
        The scheduled Relax module, printed as TVMScript.
    stats : dict
        Kernel counts (``kernels_unfused``, ``kernels``, ``scheduled_kernels``,
        ``tuned_kernels``), seconds per phase (``translate_s``, ``fuse_s``, ``tune_s``,
        ``schedule_s``, ``build_s``) and ``steps_per_call`` (the largest ``K`` of the
        program's loops, 1 without batched loops).
    """
    tgt = make_target(target)
    stats: dict = {"target": str(tgt.kind.name)}
    t = time.perf_counter()
    steps, mod = translate(lower_control(graph), steps_per_call, prefetch)
    stats["translate_s"] = time.perf_counter() - t
    stats["steps_per_call"] = max((lp.steps_per_call for lp in loops(steps)), default=1)
    stats["kernels_unfused"] = _count_kernels(mod)
    t = time.perf_counter()
    mod = fuse(mod)
    stats["fuse_s"] = time.perf_counter() - t
    stats["kernels"] = _count_kernels(mod)
    key = (tvm_ffi.structural_hash(mod), str(tgt), bool(tune))
    cpu = tgt.kind.name == "llvm"
    if key in _CACHE:
        ex, listing, cached = _CACHE[key]
        stats.update(cached, cache_hit=True)
        return steps, ex, listing, stats
    if tune and cpu:
        from .tune import tune_module
        t = time.perf_counter()
        mod, stats["tuned_kernels"], stats["tune_trials"] = tune_module(mod, tgt, trials)
        stats["tune_s"] = time.perf_counter() - t
    t = time.perf_counter()
    if cpu:
        mod, stats["scheduled_kernels"] = schedule_module(mod)
    else:
        mod = _gpu_schedule(mod, tgt)
    stats["schedule_s"] = time.perf_counter() - t
    t = time.perf_counter()
    ex = tvm.compile(mod, target=tgt)
    stats["build_s"] = time.perf_counter() - t
    listing = Listing(mod)
    _CACHE[key] = (ex, listing, {k: v for k, v in stats.items()
                                 if k.endswith("kernels") or k.startswith("tune")})
    return steps, ex, listing, stats


def compile(graph: Graph, target=None, tune: bool = False, export: str | None = None,
            report=None, trials: int = 64, steps_per_call: int | None = None,
            **options) -> Executable:
    """Compile the (optimized) graph IR for ``target``.

    Parameters
    ----------
    graph : Graph
        The program, raw or after :mod:`autodiff.opt`.
    target : None, str, dict or tvm.target.Target
        See :func:`make_target`; default this CPU.
    tune : bool
        Tune the matmul-like kernels with meta_schedule (CPU targets; ``trials`` trials per
        run, records reused from the tuning database, so a model shape is tuned once).
    export : str, optional
        Save the compiled library (``.so``) to this path.
    report : autodiff.Report, optional
        ``report.stats["tvm"]`` gets :func:`build`'s stats plus ``load_s`` (code
        generation and linking, done when the VM loads the executable).
    trials : int
        meta_schedule trials per tuning run.
    steps_per_call : int or None
        Iterations of a loop per device call, for loops whose body is one segment (no
        nested loop, no Feeder after a Receiver): the Feeders of the ``K`` iterations are
        called first, then one call runs them, then their Receivers (:mod:`.batch`). An
        ``int`` in ``[1, 128]`` is used as given (``1``: Feeders and Receivers of
        different iterations never reorder); at most ``prefetch + 1`` (``execute()``'s
        order contract); None (default) picks 16 for a body of at most
        about 2e7 FLOPs (a step of well under a millisecond, where the 25-130 us of host
        overhead per call matter) and 1 for larger bodies, lowered so the unrolled
        function stays under 8192 graph IR nodes (its build time grows with ``K``).
    options
        ``prefetch`` (``execute()``'s, see :mod:`autodiff.device.host`); other stages'
        options are ignored.

    Returns
    -------
    Executable
        ``run(store)``, ``vals``, ``stages={"tvm": Listing}``.

    Raises
    ------
    ValueError
        Unknown target; ``steps_per_call`` not None nor an int in ``[1, 128]``.
    RuntimeError
        A GPU target on a machine without that GPU (after ``export`` was written).
    """
    # products keep their epilogues (.unfold); control flow as variables (lower_control)
    lowered = unfold_products(lower_control(graph))
    prefetch = options.get("prefetch")
    steps, ex, listing, stats = build(lowered, target, tune, trials, steps_per_call, prefetch)
    tgt = make_target(target)
    if report is not None:
        report.stats["tvm"] = stats
    if export:
        ex.export_library(export)
        stats["export"] = export
    dev = _device_for(tgt)
    if not dev.exist:
        raise RuntimeError(f"tvm device: no {tgt.kind.name} device on this machine to run "
                           "on (the module compiled; use export= to keep it)")
    t = time.perf_counter()
    code = any(isinstance(f, relax.Function) for _, f in listing.mod.functions_items())
    # codegen + link happen here; a program of host callbacks only has no VM to load
    vm = relax.VirtualMachine(ex, dev, memory_cfg="pooled") if code else None
    stats["load_s"] = time.perf_counter() - t
    exe = Executable(steps, vm, dev, [n.id for n in lowered.outputs], {"tvm": listing}, ex,
                     prefetch)
    if lowered is not graph:
        exe = _Renamed(exe, [(o.id, n.id) for o, n in zip(graph.outputs, lowered.outputs)])
    return exe


class _Renamed:
    """An executable of the control-lowered graph whose ``vals`` are keyed by the node ids
    of the graph given to :func:`compile` (its outputs by position)."""

    def __init__(self, exe, ids):
        self._exe, self._ids = exe, ids
        self.vals: dict = {}

    def run(self, store: dict) -> None:
        try:
            self._exe.run(store)
        finally:
            self.vals = {o: self._exe.vals[n] for o, n in self._ids if n in self._exe.vals}

    def __getattr__(self, name):
        return getattr(self._exe, name)


def _device_for(tgt):
    return tvm.cpu(0) if tgt.kind.name == "llvm" else tvm.device(tgt.kind.name, 0)
