"""Render a graph as one CUDA program and its host steps, with no GPU involved.

``render(graph, limits)`` runs the stages the OpenCL device runs (lower, fuse, plan the
arena: the same functions) and renders every kernel statement through the shared
templates (:mod:`autodiff.device.cstyle.codegen`) in the CUDA dialect, in their GPU form:
work-group tree reductions, no launch chains. Each kernel gets its block and grid from
:mod:`.launch`; the host steps are the OpenCL device's (Feeds, Receives, Loops, branches
and while loops decided on the host: :mod:`.control`) with launches instead of NDRanges,
plus the two halves of a host callback (:class:`Take`, :class:`Call`), and
:func:`segments` groups everything between two host boundaries (launches, and the Feeder,
Receiver and callback operand copies among them) into one :class:`Segment`, which the
runtime captures as one CUDA graph. A branch decided on the device is no step: its
kernels return unless its flag holds.

Arena layout: the OpenCL device's (:func:`autodiff.device.cstyle.arena.layout`), so the error
flag, the Philox iteration words and every buffer sit at the same offsets.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ...graph.dtypes import storage
from ...graph.ir import Op
from ...procedural.ir import (BufferKind, CallbackRead, CallbackWrite, FeederWrite, For, If,
                              Kernel, ReceiverRead, While)
from .. import opencl as _cl
from ..cstyle import arena, codegen, philox
from ..opencl import control
from . import launch, prelude
from .control import STEPS, IfStep, WhileStep
from .dialect import BODY, TARGET, translate
from .launch import Geometry, Limits


@dataclass(eq=False)
class Launch:
    """One kernel launch: ``geometry`` blocks and threads; ``rand``: the kernel draws random
    numbers (it reads the current iteration words); ``counters``: it reads loop counters
    (:mod:`autodiff.device.opencl.control`)."""
    name: str
    geometry: Geometry
    rand: bool = False
    counters: bool = False


@dataclass(eq=False)
class Segment:
    """What runs between two host boundaries (the start of an iteration, a nested loop):
    ``items`` are :class:`Launch` es, and the :class:`Feed` and :class:`Receive` copies
    between them, in program order; captured as one CUDA graph. A Feed inside a segment is
    a device-to-device copy from its staging allocation (filled from pinned host memory
    before the graph launch); a Receive copies into its staging allocation (read back
    into pinned host memory after the graph launch)."""
    items: list
    graph: object = None          # the instantiated graph (runtime)

    @property
    def launches(self) -> list:
        return [x for x in self.items if type(x) is Launch]

    @property
    def feeds(self) -> list:
        return [x for x in self.items if type(x) is Feed]

    @property
    def receives(self) -> list:
        return [x for x in self.items if type(x) is Receive]

    @property
    def takes(self) -> list:
        return [x for x in self.items if type(x) is Take]

    @property
    def rand(self) -> bool:
        return any(la.rand for la in self.launches)

    @property
    def counters(self) -> bool:
        return any(la.counters for la in self.launches)


@dataclass(eq=False)
class Feed:
    """Host -> arena: ``spec.fn()`` staged in pinned memory, copied to byte ``offset``."""
    spec: object
    offset: int
    shape: tuple
    dtype: str
    pending: object = None
    staging: int = 0              # device staging allocation (runtime)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize


@dataclass(eq=False)
class Receive:
    """Arena -> host: ``parts`` = [(byte offset, shape, dtype)] copied for ``spec.fn``."""
    spec: object
    parts: list
    ring: list = field(default_factory=list)
    count: int = 0
    staging: list = field(default_factory=list)    # device allocation per part (runtime)


@dataclass(eq=False)
class Take:
    """Start of a host callback (``CallbackRead``): the graph copies the operands at
    ``parts`` = [(byte offset, shape, dtype)] into device staging allocations, which the
    :class:`Call` reads back."""
    parts: list
    staging: list = field(default_factory=list)    # device allocation per part (runtime)


@dataclass(eq=False)
class Call:
    """End of a host callback (``CallbackWrite``), a host boundary: the operands of ``take``
    are read back into pinned memory (a stream synchronisation), ``spec.fn`` is called
    (:func:`autodiff.device.host.call_callback`), and its result is copied from pinned
    memory to byte ``offset`` of the arena."""
    spec: object
    take: Take
    offset: int
    shape: tuple
    dtype: str
    pinned: list = field(default_factory=list)     # pinned arrays of the operands (runtime)


@dataclass(eq=False)
class Loop:
    """A ``For`` run by the host: ``body`` once per element of ``range``; ``feeds``: the
    Feeds directly in the body (called at each iteration's start); ``recovers``: an
    outermost loop with host callbacks (checkpointed for failure recovery); ``site``: the
    user's ``file:line`` of its ``ir_for`` (for errors and interrupts)."""
    range: range
    body: list
    feeds: list
    recovers: bool = False
    site: str = "?"


@dataclass
class Rendered:
    """A program ready for NVRTC and the host loop.

    Attributes:
        source: the CUDA C++ source of every kernel (one translation unit).
        steps: host steps (:class:`Segment`, :class:`Feed`, :class:`Receive`,
            :class:`Loop`), launches grouped by :func:`segments`.
        kernels: kernel name -> :class:`Launch`, in program order.
        arena_bytes: arena size in bytes.
        params: ``(Variable, byte offset)`` of every parameter.
        outputs: graph node id -> ``(byte offset, shape, dtype)``.
        written: ``(byte offset, bytes)`` of the parameters loops write (checkpointed).
        stages: printable stages (``procedural``, ``fused``, ``alloc``, ``cuda``).
        stats: figures (kernel and launch counts, seconds per phase).
        limits: the device limits the launches were planned for.
        plan: the arena plan (:mod:`autodiff.alloc`), if planned.
        counters: name of the kernel writing the loop counters (None: nothing reads them).
    """
    source: str
    steps: list
    kernels: dict
    arena_bytes: int
    params: list
    outputs: dict
    written: tuple
    stages: dict
    stats: dict
    limits: Limits
    plan: object = None
    counters: str | None = None


def _walk(stmts):
    for s in stmts:
        yield s
        if isinstance(s, (For, If, While)):
            for blk in s.blocks():
                yield from _walk(blk)


def _callbacks(stmts) -> bool:
    """Whether ``stmts`` (nested blocks included) call host functions: Feeders, Receivers,
    host callbacks."""
    return any(isinstance(x, (FeederWrite, ReceiverRead, CallbackRead)) for x in _walk(stmts))


def _host_steps(steps) -> bool:
    """Whether ``steps`` (a loop body) hold a host-decided branch or a while loop."""
    return any(type(x) in STEPS for x in steps)


def _target():
    """The target the shared templates are rendered for (codegen's ``target``)."""
    from ..cstyle.target import Target
    return Target(**TARGET)


def _steps(stmts, off, limits: Limits, texts: list, kernels: dict, prefix: str,
           top: bool = True, guard: str | None = None, calls: dict | None = None,
           sites=None) -> list:
    """Host steps of ``stmts``; ``guard``: the C condition every kernel here runs under (a
    branch decided on the device: :mod:`autodiff.device.opencl.control`); ``calls``: the
    :class:`Take` of each host callback started and not yet finished; ``sites``: an
    iterator over the graph's loop sites in pre-order (the ``For`` statements' order)."""
    calls = {} if calls is None else calls
    sites = iter(()) if sites is None else sites
    sub = lambda stmts, **kw: _steps(stmts, off, limits, texts, kernels, prefix,  # noqa
                                     **{"top": False, "guard": guard, "calls": calls,
                                        "sites": sites, **kw})
    steps = []
    for s in stmts:
        if isinstance(s, For):
            site = next(sites, "?")
            body = sub(s.body)
            feeds = [] if _host_steps(body) else [x for x in body if type(x) is Feed]
            steps.append(Loop(s.range, body, feeds, recovers=top and _callbacks(s.body),
                              site=site))
        elif isinstance(s, If) and _cl._on_device(s, _target()):
            g = control.guard(s.cond, off)
            both = (lambda c: f"{guard} && {c}") if guard else (lambda c: c)
            steps += sub(s.then, guard=both(g)) + sub(s.orelse, guard=both(f"!{g}"))
        elif isinstance(s, If):
            steps.append(IfStep(_cl._condition(s.cond, off), sub(s.then), sub(s.orelse)))
        elif isinstance(s, While):
            steps.append(WhileStep(sub(s.cond), _cl._condition(s.pred, off), sub(s.body),
                                   s.max_iterations,
                                   recovers=top and _callbacks(s.cond + s.body)))
        elif isinstance(s, FeederWrite):
            b = s.buffer
            steps.append(Feed(s.spec, off[b.name] * 4, tuple(b.shape), storage(b.dtype)))
        elif isinstance(s, ReceiverRead):
            steps.append(Receive(s.spec, [(off[b.name] * 4, tuple(b.shape), storage(b.dtype))
                                          for b in s.buffers]))
        elif isinstance(s, CallbackRead):
            take = calls[id(s.call)] = Take([(off[b.name] * 4, tuple(b.shape),
                                              storage(b.dtype)) for b in s.call.args])
            steps.append(take)
        elif isinstance(s, CallbackWrite):
            b = s.call.result
            steps.append(Call(s.call.spec, calls.pop(id(s.call)), off[b.name] * 4,
                              tuple(b.shape), storage(b.dtype)))
        elif isinstance(s, Kernel):
            s, counters = control.with_counters(s)
            name = f"{prefix}k{len(kernels)}_{s.kind.replace('+', '_').lower()}"
            for src in _kernel(name, s, off):
                geo = launch.geometry(src, limits)
                if src.whole:
                    if guard is not None:
                        raise NotImplementedError("cuda: a work-group kernel in a branch "
                                                  "decided on the device")
                    texts.append(launch.bounded(src.name, translate(src.src), geo))
                else:
                    texts.append(translate(src.src))
                    texts.append(launch.wrapper(src, geo, BODY, guard))
                la = Launch(src.name, geo, philox.uses_iteration_words(src.src), counters)
                kernels[src.name] = la
                steps.append(la)
        else:
            raise NotImplementedError(f"cuda: no step for {type(s).__name__}")
    return steps


def _kernel(name: str, stmt, off: dict) -> list:
    """The shared templates' sources of ``stmt`` in the CUDA body dialect and
    :data:`.dialect.TARGET` (codegen's ``target`` argument where it has one, else its
    ``reductions`` form)."""
    import inspect
    if "target" in inspect.signature(codegen.kernel).parameters:
        from ..cstyle.target import Target
        return codegen.kernel(name, stmt, off, d=BODY, target=Target(**TARGET))
    return codegen.kernel(name, stmt, off, d=BODY, reductions=TARGET["reductions"])


def segments(steps: list) -> list:
    """``steps`` with every run of launches, Feeds, Receives and callback operand copies
    (:class:`Take`) replaced by one :class:`Segment` (recursively in loop bodies and
    branches): nested loops, host-decided branches, while loops and the end of a host
    callback (:class:`Call`) are the host boundaries inside an iteration, so an iteration
    without one is one graph launch. A loop's ``feeds`` stay the Feeds directly in its body
    (called at each iteration's start), none when the body holds a host-decided branch or
    a while loop (its Feeders are then called in place)."""
    out: list = []
    for st in steps:
        if type(st) is Loop:
            st.body = segments(st.body)
            st.feeds = [] if _host_steps(st.body) else \
                [f for x in st.body if type(x) is Segment for f in x.feeds]
            out.append(st)
        elif type(st) is IfStep:
            st.then, st.orelse = segments(st.then), segments(st.orelse)
            out.append(st)
        elif type(st) is WhileStep:
            st.cond, st.body = segments(st.cond), segments(st.body)
            out.append(st)
        elif type(st) is Call:
            out.append(st)
        elif out and type(out[-1]) is Segment:
            out[-1].items.append(st)
        else:
            out.append(Segment([st]))
    return out


def blocks(st) -> list:
    """The step lists inside host step ``st`` (a loop's body, a branch's or while loop's
    blocks)."""
    if type(st) is Loop:
        return [st.body]
    if type(st) is IfStep:
        return [st.then, st.orelse]
    if type(st) is WhileStep:
        return [st.cond, st.body]
    return []


def launches_per_iteration(steps: list) -> dict:
    """What one iteration of the first top-level loop issues: ``graph_launches`` (inner
    loops counted once per inner iteration, both sides of a host-decided branch and one
    iteration of a while loop counted), ``kernels`` (kernel launches inside the graphs),
    ``copies`` (host<->device transfers: one per Feeder, one per Receiver part, one per
    host callback operand and result). Empty when there is no loop."""
    def count(body):
        g = k = c = 0
        for st in body:
            if type(st) is Segment:
                g, k = g + 1, k + len(st.launches)
                c += len(st.feeds) + sum(len(r.parts) for r in st.receives)
            elif type(st) is Call:
                c += len(st.take.parts) + 1
            else:
                n = len(st.range) if type(st) is Loop else 1
                for blk in blocks(st):
                    gi, ki, ci = count(blk)
                    g, k, c = g + n * gi, k + n * ki, c + n * ci
        return g, k, c
    for st in steps:
        if type(st) is Loop:
            g, k, c = count(st.body)
            return {"graph_launches": g, "kernels": k, "copies": c}
    return {}


def program(texts: list[str]) -> str:
    """One CUDA translation unit: the prelude, then every kernel, in ``namespace ad``."""
    return "\n".join([prelude.source()] + texts + [prelude.TAIL])


class _Listing:
    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text


def render(graph, limits: Limits, prefix: str = "", **options) -> Rendered:
    """Lower, fuse, plan and render ``graph`` for a device with ``limits`` (no GPU needed).

    Args:
        graph: the (optimized) graph IR program.
        limits: launch limits (the device's, or :data:`.launch.ARCH` ``[arch]``).
        prefix: prepended to every kernel name (to put several programs in one source).
        options: ``fuse=False`` skips fusion; others are ignored here.

    Raises:
        NotImplementedError: a statement or value kind with no kernel template.
        LaunchError: a kernel does not fit the device's launch limits.
    """
    stats: dict = {"device": limits.name, "arch": limits.arch}
    prog, stages = arena.lower(graph, stats, options)
    planned, planned_bytes, plan = arena.plan(prog, stats)
    if plan is not None:
        stages["alloc"] = plan
    off, arena_bytes, snap = arena.layout(prog, planned, planned_bytes)
    t = time.perf_counter()
    texts: list = []
    kernels: dict = {}
    sites = iter([n.site for n in graph.walk() if n.op in (Op.FOR, Op.SCAN)])
    steps = segments(_steps(prog.body, off, limits, texts, kernels, prefix, sites=sites))
    counters = None
    if any(la.counters for la in kernels.values()):
        counters = prefix + control.SET_KERNEL
        texts.append(prelude.counters(counters))
    src = program(texts)
    stats["render_s"] = time.perf_counter() - t
    stats["kernels"] = len(kernels)
    stats["segments"] = sum(1 for _ in _segments(steps))
    stats["per_iteration"] = launches_per_iteration(steps)
    stats["source_chars"] = len(src)
    stats["arena_bytes"] = arena_bytes
    stages["cuda"] = _Listing(src)
    params = [(b.var, off[b.name] * 4) for b in prog.buffers if b.kind is BufferKind.PARAM]
    outputs = {nid: (off[b.name] * 4, tuple(b.shape), storage(b.dtype))
               for nid, b in prog.outputs.items()}
    return Rendered(src, steps, kernels, arena_bytes, params, outputs, snap, stages, stats,
                    limits, plan, counters)


def walk(steps):
    """Every step of ``steps``, those inside loops and branches included (pre-order)."""
    for st in steps:
        yield st
        for blk in blocks(st):
            yield from walk(blk)


def _segments(steps):
    return (st for st in walk(steps) if type(st) is Segment)
