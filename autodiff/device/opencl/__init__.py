"""The OpenCL device: procedural IR -> fused kernels -> one OpenCL C program on one arena.

``compile(graph)`` runs lower (:mod:`autodiff.procedural`) -> fuse (:mod:`autodiff.fusion`,
when present) -> plan (:mod:`autodiff.alloc`, else one slot per buffer) -> render (the
shared C-style templates of :mod:`autodiff.device.cstyle` in the OpenCL dialect,
:mod:`.dialect`: one kernel body per kernel statement, all in one program) -> chain
(:mod:`.chain`: runs of small kernels become one single-work-item launch, the others get
an NDRange wrapper) -> build (a large program in two parts, one built by a helper process
started before lowering: :mod:`.prejit`, :mod:`.split`), and returns
an :class:`~.runtime.Executable` whose ``run`` drives the ``For`` loops from the host.
Branches, while loops and loop counters: :mod:`.control`. Host functions inside the program
(``CALLBACK``, e.g. the all-reduce of data-parallel training): :mod:`.callback`.

Arena layout: :mod:`autodiff.device.cstyle.arena`.
"""
from __future__ import annotations

import dataclasses
import math
import re
import time

import numpy as np

from ...graph.dtypes import storage
from ...graph.ir import Op
from ...procedural.ir import (BufferKind, CallbackRead, CallbackWrite, FeederWrite, For,
                              FusedKernel, Gather, If, IndexValue, Kernel, ReceiverRead, Reduce,
                              ScatterAdd, While)
from .. import empty
from ..cstyle import arena, codegen, philox
from ..cstyle.kernels import Source
from ..host import ignored, prefetch_option
from . import (callback, chain, control, frontend, prejit, render, rings, runs, split, tiers,
               unify)
from .dialect import BODY
from .device import OpenCLUnavailable, context, for_device, select
from .runtime import (ArenaOutOfMemory, Executable, Feed, KernelBuildError, Launch, Loop,
                      RECEIVER_RING, RING, Receive, RingFeed, RingReceive, _feeds,
                      arena_buffer, arena_host, build_file, check_arena, prefault,
                      set_int_args, write_source)

__all__ = ["compile", "require", "OpenCLUnavailable", "KernelBuildError", "ArenaOutOfMemory",
           "select"]

def require(opencl_device: str | None = None, **options) -> None:
    """Check that an OpenCL device is there (``execute()`` calls it with its options before
    compiling).

    Raises:
        OpenCLUnavailable: pyopencl or an OpenCL platform is missing (the message names the
            install command), or no device matches ``opencl_device`` /
            ``AUTODIFF_OPENCL_DEVICE``.
    """
    select(opencl_device)


#: a float literal of a rendered body (``1.0f``, ``0.05416538938879967f``, ``1e-05f``)
FLOAT_LITERAL = re.compile(r"(?<![\w.])(?:\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)f(?!\w)")

#: most int parameters a body may have after its literals are lifted (:meth:`_Kernels.lift`;
#: the same bound as :func:`.unify.unify`'s)
MAX_PARAMS = unify.MAX_PARAMS


class _Kernels:
    """The kernel bodies of a program being rendered, each distinct source once.

    A kernel statement renders with its buffers' offsets as int arguments
    (:class:`~autodiff.device.cstyle.codegen.Args`; the extents of early exits and
    whole-array reductions too, :meth:`~autodiff.device.cstyle.codegen.Args.size`); one
    whose body (up to its name) and local size equal an earlier one's reuses that body and
    only brings its own arguments and global size (the main job's training program: 133
    -> 120 distinct bodies: the AdamW updates of parameters of eight sizes share one, so
    do the squared norms of seven gradients).
    An index-checked kernel's id in the error record is a literal of its body, so such
    kernels share a body only with themselves here; :func:`.unify.unify` then merges the
    bodies that differ only in such int literals (the ids, a weight gradient's row stride)
    into one taking them as arguments.

    The float literals of a one-point kernel (scalar bookkeeping: a learning-rate
    schedule, a clipping factor, a bias correction) are *lifted* (:meth:`lift`) into the
    arena's constants region (:attr:`constants`, after the planned arena from float
    offset ``base``), each occurrence its own slot read through an offset argument: these
    are the constants a run's configuration changes (``--steps``, ``--lr``, the warm-up),
    and with them out of the source a new configuration of the same model renders the same
    program and hits PoCL's disk cache of compiled kernels. Constant folding buys nothing
    in a kernel of one point; the larger kernels keep their literals.
    """

    def __init__(self, base: int = 0):
        self.bodies: list = []          # distinct bodies, in first-use order
        self.canon: dict = {}           # (source up to the name, sizes) -> body
        self.structures: dict = {}      # _structure key -> (sources, their params' buffers)
        self.count = 0
        self.base = base                # float offset of the constants region
        self.constants: list = []       # lifted literals, by slot

    def lift(self, src: Source) -> Source:
        """``src`` with each float literal of its body replaced by ``buf[p<n>_]``, a new
        int parameter whose argument is the literal's slot in the constants region
        (unchanged when that would exceed :data:`MAX_PARAMS` parameters)."""
        head, brace, body = src.src.partition("{")
        found = FLOAT_LITERAL.findall(body)
        if not found or len(src.params) + len(found) > MAX_PARAMS:
            return src
        params, args = list(src.params), list(src.args)

        def slot(m) -> str:
            name = f"p{len(params)}_"
            params.append(f"const int {name}")
            args.append(self.base + len(self.constants))
            self.constants.append(float(m.group(0)[:-1]))
            return f"buf[{name}]"
        body = FLOAT_LITERAL.sub(slot, body)
        new = params[len(src.params):]
        head = head.replace("const int g0", ", ".join(new + ["const int g0"]), 1)
        return dataclasses.replace(src, src=head + brace + body, params=tuple(params),
                                   args=tuple(args))

    def name(self, kind: str) -> str:
        """A fresh kernel name ``k<n>_<kind>``."""
        self.count += 1
        return f"k{self.count - 1}_{kind}"

    def reserve(self, words: int) -> int:
        """``words`` floats of the constants region (zero at each run's start) for state the
        device keeps itself (a Receiver ring, :mod:`.rings`); returns their offset."""
        at = self.base + len(self.constants)
        self.constants.extend([0.0] * words)
        return at

    def table(self, ints: list[int]) -> int:
        """Non-negative ints (under 2^31 - 2^23: never a NaN's bits) stored bit for bit in
        the constants region, for kernels that read it as ``int`` s (:mod:`.runs`);
        returns their word offset.

        Raises:
            ValueError: an int out of that range."""
        a = np.asarray(ints, np.int64)
        if a.size and (a.min() < 0 or a.max() >= 0x7F800000):
            raise ValueError(f"table: ints must be in [0, 0x7F800000), got {a.min()}..{a.max()}")
        at = self.base + len(self.constants)
        self.constants.extend(a.astype(np.int32).view(np.float32).tolist())
        return at

    def render(self, s, off, target, check=(1, None)) -> list:
        """The Sources to launch for kernel statement ``s`` (shared bodies renamed);
        ``check`` as :func:`~autodiff.device.cstyle.codegen.kernel`.

        A statement of the same structure as an earlier one (:func:`_structure`: the same
        statement but for its buffers' names) renders to the same sources over other
        arguments: those are taken from the earlier one's, with this statement's offsets
        as the arguments (the main job's training program: 168 of its 275 kernel
        statements, 0.10-0.13 s of its rendering)."""
        key, order = _structure(s, off, check)
        hit = self.structures.get(key)
        if hit is not None:
            out, names = hit
            values = tuple(int(off[order[i]]) if type(i) is int else i[0] for i in names)
            return [dataclasses.replace(x, args=values + x.args[len(values):]) for x in out]
        name = self.name(s.kind.replace('+', '_').lower())
        out = []
        one_point = chain.work(s) <= chain.POINT_FLOPS
        args = codegen.Args(off, literal=(codegen.SCRATCH_A, codegen.SCRATCH_B))
        for src in codegen.kernel(name, s, off, d=BODY, target=target, check=check,
                                  args=args):
            if one_point and not src.whole:
                src = self.lift(src)
            # a body's global size is its launch's (a work-group kernel's is its own);
            # its rank is its wrapper's (chain.wrap)
            key_ = (src.src.replace(src.name, "@"), src.local_size, src.whole,
                    src.global_size if src.whole else len(src.global_size))
            first = self.canon.get(key_)
            if first is None:
                self.canon[key_] = first = src
                self.bodies.append(src)
            out.append(dataclasses.replace(src, name=first.name, src=first.src))
        where = {n: i for i, n in enumerate(order)}
        if all(n in where or n in args.sizes for n in args.names):
            # copies: the caller sets each launch's own guard and touched ranges on what
            # it gets; a size parameter's value is the same for every statement here
            self.structures[key] = ([dataclasses.replace(x) for x in out],
                                    [where[n] if n in where else (args.sizes[n],)
                                     for n in args.names])
        return out


#: a buffer in a statement's repr (:meth:`~autodiff.procedural.ir.Buffer.__repr__`)
_BUFFER = re.compile(r"Buffer\(([^,()]+), ")


def _structure(s, off, check) -> tuple:
    """``(key, names)``: what renders ``s`` -- its single-kernel form's repr with each
    buffer's name replaced by its position in ``names`` (first appearance) and whether it
    has an arena offset, the index-error ``check`` and the statement's work -- and its
    buffers' names in that order. Two statements with equal keys render the same sources
    over their own buffers' offsets."""
    names: list = []
    pos: dict = {}

    def canon(m) -> str:
        n = m.group(1)
        if n not in pos:
            pos[n] = len(names)
            names.append(n)
        return f"Buffer(#{pos[n]}{'@' if n in off else ''}, "
    k = s.kernel if isinstance(s, FusedKernel) else s
    return (type(s).__name__, s.kind, _BUFFER.sub(canon, repr(k)), check,
            chain.work(s)), names


def _launch(steps, launches, src, small: bool, counters, team: int = 0) -> None:
    """Append kernel body ``src`` to the chain of the latest launch of ``steps`` (host
    bookkeeping of rings in between does not end a chain) when both are small, else as a
    new launch (a chain of it would be a team chain of ``team`` work-groups: 0, none)."""
    j = len(steps) - 1
    while j >= 0 and type(steps[j]) in (RingReceive, RingFeed):
        j -= 1
    prev = steps[j] if j >= 0 and type(steps[j]) is Launch else None
    if small and prev is not None and launches[prev][0]:
        launches[prev][1].append(src)
        prev.counters = prev.counters or counters
    else:
        la = Launch(src.name, src.global_size, src.local_size)
        la.counters, la.team = counters, team
        launches[la] = (small, [src])
        steps.append(la)


def _steps(stmts, off, kernels: _Kernels, launches, chain_work: int, target, ctx,
           top: bool = True, guard: str | None = None, ring: int = 0,
           prefetch: int = 0, light: bool = False, team: int = 0, teamed: bool = False,
           spread: bool = False):
    """Host steps of ``stmts``. Kernel bodies go to ``kernels``; each Launch gets its body
    sources in ``launches[launch]`` (one, or several consecutive small ones: a chain).
    ``ctx``: ``(graph nodes by id, iterator over the graph's FOR sites in pre-order, the
    list of index-checked graph nodes, the check id of each being its position + 1)``.
    ``guard``: a C condition every kernel here runs under (a branch decided on the device,
    :mod:`.control`). ``ring``: the slots of the rings the Receivers (and Feeders) here go
    through, 0 for none (:mod:`.rings`; a loop body for which :func:`.rings.eligible`
    holds, on a device that chains; Feeders with ``prefetch`` of at least ``2 RING - 1``;
    :data:`.runtime.RECEIVER_RING` slots where the body has no Feeder). ``light``: a loop body
    of at most :data:`.chain.LIGHT_BODY` work with no control flow in it chains all its
    kernels (on a device that chains). ``team``: the work-groups of a team chain on this
    device (:func:`.chain.team_size`; 0: none): a heavier loop body chains all its kernels
    too, each chain a team chain (``teamed`` below it). ``spread``: a loop body whose own
    kernels (nested loops' and branches' aside) do more than :data:`.chain.LIGHT_BODY`
    work chains none of them, so that its team runs (:mod:`.runs`) share every kernel's
    work-groups among the workers (a chain is one work-group: the main job, W5, two
    threads, alternating: 22.5-23.5 -> 21.7-22.1 ms per step)."""
    nodes, sites, checked = ctx
    steps = []
    sub = lambda stmts, **kw: _steps(stmts, off, kernels, launches,  # noqa: E731
                                     kw.pop("chain_work", chain_work), target, ctx,
                                     **{"top": False, "guard": guard, "ring": 0,
                                        "prefetch": prefetch, "light": light, "team": team,
                                        "teamed": teamed, "spread": spread, **kw})
    for s in stmts:
        if isinstance(s, For):
            site = next(sites, "?")
            feeders = prefetch >= 2 * RING - 1
            work = chain.body_work(s.body)
            whole = light and chain_work > 0 and work is not None and work <= chain.LIGHT_BODY
            teams = team > 0 and light and chain_work > 0 and not whole
            spreads = spread and light and chain_work > 0 and sum(
                chain.work(x) for x in s.body if isinstance(x, Kernel)) > chain.LIGHT_BODY
            ringed = chain_work > 0 and rings.eligible(s.body, feeders)
            fed = any(isinstance(x, FeederWrite) for x in s.body)
            body = sub(s.body, ring=(RING if fed else RECEIVER_RING) if ringed else 0,
                       chain_work=chain.ONE_CORE_WORK if whole or teams else
                       0 if spreads else chain_work, teamed=teams)
            # ring Feeders write their slots first: the copy into the Feeder's buffer is in
            # the chain at the Feeder's place
            body = [x for x in body if type(x) is RingFeed] + \
                [x for x in body if type(x) is not RingFeed]
            feeds = [x for x in body if isinstance(x, Feed)]
            # Feeders run ahead (prefetch) only with no nested loop or host-decided branch
            # with callbacks: those call their Feeders in place
            inner = not any(isinstance(x, (For, While)) or (isinstance(x, If) and _callbacks(
                x.then + x.orelse)) for x in s.body)
            steps.append(Loop(s.range, body, feeds, recovers=top, site=site, inner=inner))
        elif isinstance(s, If) and _on_device(s, target):
            g = control.guard(s.cond, off)
            both = (lambda c: f"{guard} && {c}") if guard else (lambda c: c)
            steps += sub(s.then, guard=both(g)) + sub(s.orelse, guard=both(f"!{g}"))
        elif isinstance(s, If):
            steps.append(control.IfStep(_condition(s.cond, off), sub(s.then), sub(s.orelse)))
        elif isinstance(s, While):
            steps.append(control.WhileStep(sub(s.cond), _condition(s.pred, off), sub(s.body),
                                           s.max_iterations,
                                           recovers=top and _callbacks(s.cond + s.body)))
        elif isinstance(s, FeederWrite) and ring and \
                (fed := rings.feeder(s, off, kernels)) is not None:
            _launch(steps, launches, fed[0], True, False)   # the copy joins the chain
            steps.append(fed[1])
        elif isinstance(s, FeederWrite):
            b = s.buffer
            steps.append(Feed(s.spec, off[b.name] * 4, tuple(b.shape), storage(b.dtype)))
        elif isinstance(s, ReceiverRead) and ring and \
                (values := rings.parts(s, off)) is not None:
            src, step = rings.receiver(s, values, kernels, ring)
            _launch(steps, launches, src, True, False)      # the copy joins the chain
            steps.append(step)
        elif isinstance(s, ReceiverRead):
            steps.append(Receive(s.spec, [(off[b.name] * 4, tuple(b.shape), storage(b.dtype))
                                          for b in s.buffers]))
        elif isinstance(s, (CallbackRead, CallbackWrite)):     # a host boundary: callback.py
            steps.append(callback.steps_for(s, off, steps, storage))
        elif isinstance(s, Kernel):
            work, counters, srcs = _rendered(s, off, kernels, target, nodes, checked, guard)
            for src in srcs:
                _launch(steps, launches, src, work <= chain_work and not src.whole, counters,
                        team if teamed else 0)
        else:
            raise NotImplementedError(f"opencl: no step for {type(s).__name__}")
    return steps


def _rendered(s, off, kernels: _Kernels, target, nodes, checked, guard) -> tuple:
    """``(work, counters, sources)`` of kernel statement ``s`` (:func:`.chain.work`, whether
    it reads loop counters, its body sources with their word ranges and ``guard`` set);
    no sources for a statement over an empty space."""
    s = empty.rewrite(s)            # zero-size spaces: no kernel, or an epilogue
    if s is None:
        return 0, False, []
    work = chain.work(s)
    s, counters = control.with_counters(s)
    check = (1, None)
    if isinstance(s, (Gather, ScatterAdd)):     # its id in the index-error record
        node = nodes[s.out.node]
        checked.append(node)
        check = (len(checked), ignored(node))
    srcs = kernels.render(s, off, target, check)
    touch = chain.touches(s.reads(), s.writes(), off, scratch=len(srcs) > 1,
                          flag=(codegen.FLAG, codegen.FLAG + codegen.FLAG_WORDS)
                          if isinstance(s, (Gather, ScatterAdd)) else None)
    for i, src in enumerate(srcs):
        if guard is not None and src.whole:
            raise NotImplementedError("opencl: a work-group kernel in a branch "
                                      "decided on the device")
        src.touch, src.after, src.guard = touch, i > 0, guard
    return work, counters, srcs


def _wrappers(launches: dict, most: int = chain.DISPATCH_MAX,
              sync: int = -1, workers: int = 0, later=frozenset()) -> tuple[list, dict, dict]:
    """Give every launch its kernel. The entries -- a lone body (one entry per distinct
    body and guard) or a chain (rendered as a body) -- share :func:`.chain.dispatch`
    kernels of at most ``most`` entries each (``most=1``: every entry its own NDRange
    wrapper or chain kernel, as on a GPU, grouped by local size); a complete
    work-group kernel stays itself. Returns the kernel sources and, per launch, its int
    arguments and its kernel's name (``Launch.name`` stays the entry's: profiles and
    flops are per entry). A chain of a launch with ``team`` set is a :func:`.chain.team`
    chain synchronising through arena word ``sync`` on.

    On a CPU device (``most > 1``) every dispatch launch is one work-item per work-group
    (global size: the entry's work-groups; the first work-item of a group ran the whole
    group's block function anyway), so entries of any local size share a kernel (which
    entries: :func:`.runs.partition`, consecutive launches together), and each dispatch
    kernel is compiled for one local size, ``(1, 1, 1)``. With ``workers`` (and
    ``sync``), each dispatch kernel also has a team mode (:func:`.chain.team_branch`) for
    :mod:`.runs`. Entries only ``later`` launches use (:func:`_later_launches`) share
    dispatch kernels only among themselves: those kernels are compiled after the first
    iteration starts."""
    out, args, kernel, whole, looped = [], {}, {}, set(), {}
    now: set = set()            # (local size, position) of entries a launch needs now
    blocks: set = set()         # the block functions the program holds (chain.block_name)
    entries: dict = {}          # local size -> {entry key: (position, entry, is a chain)}
    where: dict = {}            # launch -> (local size, position, its args)
    for la, (_, members) in launches.items():
        m = members[0]
        if len(members) == 1 and m.whole:
            if m.name not in whole:
                whole.add(m.name)
                out.append(m)
            args[la], kernel[la] = m.args, m.name
            src = m
        else:
            if len(members) == 1:
                src, key, a = m, (chain.block_name(m), getattr(m, "guard", None)), m.args
            else:
                key = f"c{sum(map(len, entries.values()))}_x{len(members)}"
                src, a = chain.chain(key, members, as_body=most > 1, loops=most > 1), ()
                if la.team and most > 1:
                    src = chain.team(key, members, la.team, sync)
                    if "team_sync" not in blocks:
                        blocks.add("team_sync")
                        out.append(Source("team_sync", chain.TEAM_SYNC, (1,), (1,)))
                    for b in members:           # each body's block function once
                        if chain.block_name(b) not in blocks:
                            blocks.add(chain.block_name(b))
                            out.append(Source(chain.block_name(b), chain.block_function(b),
                                              (1,), (1,)))
                    out.append(src)
                elif most > 1:
                    for b in members:           # each body's loop function once
                        if b.name not in looped:
                            looped[b.name] = b
                            out.append(Source(f"{b.name}_loop", chain.loop_function(b),
                                              (1,), (1,)))
                    out.append(src)             # the body, before its dispatch kernel
            # a team chain is a dispatch kernel of its own (PoCL compiles a kernel with all
            # it calls: two team chains in one kernel would be compiled as one)
            at = (tuple(src.local_size), key) if la.team and len(members) > 1 \
                else (1, 1, 1) if most > 1 else tuple(src.local_size)
            group = entries.setdefault(at, {})
            if key not in group:
                group[key] = (len(group), src, len(members) > 1)
            where[la] = (at, group[key][0], a)
            if la not in later:
                now.add((at, group[key][0]))
        la.name, la.global_size, la.local_size = src.name, src.global_size, src.local_size
        if most > 1 and not m.whole and not (la.team and len(members) > 1):
            la.global_size, la.local_size = chain.groups(src), (1, 1, 1)
        la.rand = any(philox.uses_iteration_words(m.src) for m in members)
    slot: dict = {}             # (local size, position) -> (kernel, case)
    for local, group in entries.items():
        items = sorted(group.values(), key=lambda x: x[0])
        if most > 1 and local == (1, 1, 1):
            # entries launched one after the other share a kernel where they can: a team
            # run (runs.py) is a run of launches of one kernel
            uses = [k for la, (at, k, _) in where.items() if at == local]
            keep = [i for i in range(len(items)) if (local, i) in now]
            if len(keep) == len(items) or not keep:
                chunks = runs.partition(uses, len(items), most)
            else:                       # the later entries' kernels after the others
                num = {e: j for j, e in enumerate(keep)}
                chunks = [[keep[j] for j in c] for c in runs.partition(
                    [num[u] for u in uses if u in num], len(keep), most)]
                rest = [i for i in range(len(items)) if i not in num]
                chunks += [rest[j:j + most] for j in range(0, len(rest), most)]
        else:
            chunks = [range(j, min(j + most, len(items))) for j in range(0, len(items), most)]
        for chunk in chunks:
            part = [items[i][1] for i in chunk]
            j = chunk[0]
            if most > 1:
                for e in part:                  # each entry's block function once
                    if chain.block_name(e) not in blocks:
                        blocks.add(chain.block_name(e))
                        out.append(Source(chain.block_name(e), chain.block_function(e),
                                          (1,), (1,)))
                team = (workers, sync) if workers and sync >= 0 and local == (1, 1, 1) \
                    else None
                if team is not None and "team_sync" not in blocks:
                    blocks.add("team_sync")
                    out.append(Source("team_sync", chain.TEAM_SYNC, (1,), (1,)))
                src = chain.dispatch(f"d{len(out)}_x{len(part)}", part, team=team)
            elif items[j][2]:                   # a chain kernel
                src = part[0]
            else:                               # a guarded body: its own wrapper
                guarded = getattr(part[0], "guard", None) is not None
                src = chain.wrap(part[0], name=f"{part[0].name}_g{len(out)}"
                                 if guarded else part[0].name)
            out.append(src)
            slot.update({(local, i): (src, case) for case, i in enumerate(chunk)})
    for la, (local, k, a) in where.items():
        src, case = slot[local, k]
        kernel[la] = src.name
        args[la] = (case,) + tuple(a) + (0,) * (len(src.params) - 5 - len(a)) + \
            chain.ONCE if most > 1 else a
    return out, args, kernel


def _parts(sources: list, kernels: set, n: int, counters: bool) -> tuple[list[str], dict]:
    """The program's source text in ``n`` parts (:func:`.split.split` of ``sources`` by
    the launched ``kernels``; loop counters' kernel in each when ``counters``) and the part
    of each launched kernel."""
    shared = render.shared_functions(sources) if n > 1 else []
    parts = split.split(sources + shared, sorted(kernels), n)    # shared: counted, not kept
    if shared:
        names = {s.name for s in shared}
        parts = [[s for s in p if s.name not in names] for p in parts]
    texts = [render.program(p) + ("\n" + control.SOURCE if counters else "") for p in parts]
    return texts, {s.name: i for i, p in enumerate(parts) for s in p if s.name in kernels}


def _build(ctx, dev, paths: list[str], first: list, helper, stats: dict,
           options: dict, later: list = ()) -> prejit.Programs:
    """Build every part of the program (``paths``: source files) and, on a CPU device with
    ``prejit`` on, compile the work-group functions of the ``first`` launches
    (:func:`.prejit.compile_all`) with ``helper`` (an early helper: it builds the last part
    meanwhile; this process builds that part from PoCL's cache afterwards). Records
    ``build_s``, ``source_path(s)``, ``prejit``, ``prejit_helper_kernels``, ``prejit_s``
    in ``stats``. The ``later`` launches (those the first iteration does not run) are
    then given to an idle helper to compile in the background
    (:func:`.prejit.compile_later`; ``prejit_later``: how many, whether a helper took
    them); without one each compiles at its first launch.

    Raises:
        KernelBuildError: a part did not build.
    """
    if helper is not None:
        helper.send(paths, first, mine=len(paths) - 1)
    fe = frontend.enabled(options)
    programs = prejit.Programs(paths, lambda path: build_file(ctx, dev, path, fe))
    t = time.perf_counter()
    programs.get(0)
    stats["build_s"] = time.perf_counter() - t
    sources = [frontend.source_of(p) for p in paths]
    stats["source_path"], stats["source_paths"] = sources[0], sources
    stats["prejit"] = False
    t = time.perf_counter()
    if options.get("prejit", True) and chain.is_cpu(dev):
        stats["prejit"], mine = prejit.compile_all(ctx, dev, programs, first, helper)
        stats["prejit_helper_kernels"] = len(first) - mine
    for i in range(len(paths)):
        programs.get(i, helper)
    stats["prejit_s"] = time.perf_counter() - t
    if later:
        stats["prejit_later"] = (len(later), options.get("prejit", True) and chain.is_cpu(dev)
                                 and prejit.compile_later(dev, paths, later))
    return programs


#: PoCL's "small grid" limit: work-group functions are specialised for grids whose every
#: dimension is narrower (``grid_width_specialization_limit``, ``USHRT_MAX`` on PoCL 3.1)
LARGE_GRID = 65535


def _first_launches(steps, launch_kernel: dict, switch: set) -> list:
    """``(kernel name, global size, local size)`` of each dispatch kernel (named in
    ``switch``) and specialisation (local size, a grid dimension of at least 65535 or
    not), in the order of their first launch (loop bodies and both blocks of a branch in program
    order): what :func:`.prejit.start` compiles from the end."""
    from .runtime import _blocks
    out, seen = [], set()

    def visit(steps):
        for s in steps:
            if type(s) is Launch:
                name = launch_kernel[s]
                key = (name, tuple(s.local_size), max(s.global_size) >= LARGE_GRID)
                if key not in seen and name in switch:
                    seen.add(key)
                    out.append((name, tuple(s.global_size), tuple(s.local_size)))
            for blk in _blocks(s):
                visit(blk)
    visit(steps)
    return out


def _later_launches(steps) -> set:
    """The launches the first iteration does not run: those in the block of a branch the
    host decides on loop counters (:class:`.control.IfStep` on an ``IndexValue``) that the
    first iteration of every loop around it does not take -- ``ir_if((i + 1) % 100 == 0,
    ...)``, the main example's validation every 100th step. Their dispatch kernels are
    compiled after the first iteration starts (:func:`.prejit.compile_later`)."""
    from .runtime import _blocks
    out: set = set()

    def visit(steps, skip: bool):
        for s in steps:
            if type(s) is Launch and skip:
                out.add(s)
            if type(s) is control.IfStep and isinstance(s.cond, IndexValue):
                first = control.first_iteration(s.cond)
                visit(s.then, skip or first is False)
                visit(s.orelse, skip or first is True)
                continue
            for blk in _blocks(s):
                visit(blk, skip)
    visit(steps, False)
    return out


def _mark_blocks(steps, launch_args: dict, dispatched: set) -> None:
    """Set :attr:`~.runtime.Loop.block` on every loop whose body is Feeders through rings,
    one one-work-item launch of a :func:`.chain.dispatch` kernel (``dispatched``; its
    ``reps`` argument repeats it; ``ctr``, ``wrd`` and ``wstep`` advance the loop's counter
    and Philox iteration word between repeats), then Receivers through rings: its
    iterations need nothing from the host but the launch and the Feeders' slot writes."""
    from .runtime import _blocks
    for s in steps:
        lead = len(s.feeds) if type(s) is Loop else 0
        if type(s) is Loop and len(s.body) > 1 and lead < len(s.body) and \
                all(type(x) is RingFeed for x in s.body[:lead]) and \
                type(s.body[lead]) is Launch and \
                all(type(x) is RingReceive for x in s.body[lead + 1:]) and \
                len(slots := {x.slots for i, x in enumerate(s.body) if i != lead}) == 1:
            la = s.body[lead]
            if la in dispatched and math.prod(la.global_size) == 1 and \
                    math.prod(la.local_size) == 1:
                la.reps_arg = len(launch_args[la]) - 3
                s.block, s.lead = slots.pop(), lead
        for blk in _blocks(s):
            _mark_blocks(blk, launch_args, dispatched)


def _walk(stmts):
    for s in stmts:
        yield s, 0
        if isinstance(s, (For, If, While)):
            for blk in s.blocks():
                yield from _walk(blk)


def _callbacks(stmts) -> bool:
    """Whether ``stmts`` (nested blocks included) call Feeders, Receivers or host
    functions."""
    return any(isinstance(x, (ReceiverRead, FeederWrite, CallbackRead, CallbackWrite))
               for x, _ in _walk(stmts))


def _on_device(s: If, target) -> bool:
    """Whether a branch is decided on the device: its condition is a flag in the arena (a
    condition on loop counters is cheaper on the host) and both branches hold only kernels
    (and such branches), no work-group reductions (GPU targets)."""
    if isinstance(s.cond, IndexValue):
        return False
    for x, _ in _walk(s.then + s.orelse):
        if isinstance(x, If) and not isinstance(x.cond, IndexValue):
            continue
        if not isinstance(x, Kernel):
            return False
        k = x.kernel if isinstance(x, FusedKernel) else x
        if target.reductions == "tree" and isinstance(k, Reduce):
            return False
    return True


def _condition(c, off):
    """What a host step tests: an :class:`IndexValue` as it is, a flag buffer as its
    ``(byte offset, dtype)``."""
    return c if isinstance(c, IndexValue) else (off[c.name] * 4, c.dtype)


class _Listing:
    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text


def prepare(graph, opencl_device: str | None = None, **options) -> "prejit.Helper | None":
    """Start what :func:`compile` of ``graph`` (the traced program, before the graph
    passes) can use: on a PoCL CPU device with several cores, a large program's pre-JIT
    helper process (:func:`.prejit.early`; its start, ~0.8 s with PoCL's compiler warmed
    up, then overlaps the graph passes too: the main job's compile 2.90-2.94 ->
    2.78-2.80 s on a cold cache). Returns the helper (``execute()`` passes it to
    :func:`compile` as ``prepared`` and stops it afterwards) or None; raises nothing (a
    missing platform is :func:`compile`'s error to report)."""
    try:
        _, dev = context(opencl_device)
    except OpenCLUnavailable:
        return None
    if (fe := frontend.for_device(dev, options)) is not None:
        fe.warm()                   # the headers' PCH, if missing, while the passes run
    return prejit.early(dev, graph, options, traced=True) if chain.is_cpu(dev) else None


def compile(graph, report=None, opencl_device: str | None = None,
            prepared: "prejit.Helper | None" = None, **options) -> Executable:
    """Compile ``graph`` for the OpenCL device.

    Args:
        graph: the (optimized) graph IR program.
        report: the ``execute()`` report; ``report.stats["opencl"]`` gets the kernel count,
            the launch steps and the chains among them, the kernels of the program that
            launches use (``program_kernels``: :func:`.chain.dispatch` kernels), the
            programs they are built as (``program_parts``: two, one per process, when an
            early :mod:`.prejit` helper runs; :mod:`.split`) and their source files
            (``source_paths``; ``source_path`` the first), source size, the seconds
            spent lowering, fusing, planning, rendering, building, the arena size (its
            constants region included), the seconds spent compiling the kernels before
            the first iteration (``prejit_s``), the seconds the parts spent in
            :mod:`.frontend` (``frontend_s``, where it compiled them), whether a
            :mod:`.prejit` helper process took part (``prejit``) and how many kernels it
            compiled (``prejit_helper_kernels``), the kernels left for after the first
            iteration starts and whether a helper took them (``prejit_later``: ``(count,
            bool)``, only where there are some), and the Receivers and Feeders through
            rings (``rings``: each one copy body among the kernels; :mod:`.rings`).
        opencl_device: platform/device substring (else ``AUTODIFF_OPENCL_DEVICE``, else the
            first GPU, else the first device).
        prepared: the helper :func:`prepare` started for this program, if any (else one
            may start here).
        options: ``profile=True`` records each kernel's device time
            (``report.stats["opencl"]["kernel_us"]``: name -> (launches, mean us)) and
            matmul flops (``["kernel_flops"]``: name -> flops of all its launches;
            each launch's in ``Launch.flops``);
            ``fuse=False`` skips fusion; ``chain_work`` (flops or points) is the largest
            kernel run inside a launch chain (:mod:`.chain`; default
            :data:`.chain.CHAIN_WORK` on a CPU device, 0 on a GPU: no chains);
            ``reductions`` is ``"row"`` (a work-item per row, default on a CPU device) or
            ``"tree"`` (a work-group per row, default on a GPU); ``vector`` (lanes per
            work-item of elementwise and reduction kernels) and ``tile`` (matmul register
            tile) override :func:`.device.for_device`'s choice; ``prejit=False`` leaves
            PoCL's work-group functions to the first iteration (default: compiled before
            it, in this process and a helper, :mod:`.prejit`, on a PoCL CPU device with
            several cores); ``frontend=False`` leaves the build of OpenCL C to PoCL
            (default: :mod:`.frontend` compiles it where it can); ``prefetch`` is
            ``execute()``'s order contract (:mod:`autodiff.device.host`; from ``2 RING -
            1`` on, a light loop's Feeders go through rings too); an explicit
            ``chain_work`` also turns off the chaining of whole light loop bodies
            (:data:`.chain.LIGHT_BODY`) and the team chains of heavier ones;
            ``team`` shares a heavier loop body's kernels among the PoCL worker threads
            in few launches (one work-group per thread, on a PoCL CPU device with two or
            more): by default as team runs of the dispatch kernels (:mod:`.runs`),
            swapped in between iterations while other processes leave the cores free
            (:mod:`.tiers`); ``True``: each body one :func:`.chain.team` chain (a kernel
            of its own, compiled with the program) from the first iteration; ``False``:
            one launch per kernel. Others are ignored here.

    Returns:
        An :class:`~.runtime.Executable`.

    Raises:
        OpenCLUnavailable: no OpenCL platform (the message names the install command).
        KernelBuildError: the generated program did not build (source path + build log).
        ArenaOutOfMemory: the arena exceeds the device's largest allocation.
        NotImplementedError: a statement kind with no kernel template.
    """
    t_all = time.perf_counter()
    ctx, dev = context(opencl_device)
    helper = prepared
    if helper is None and chain.is_cpu(dev):
        helper = prejit.early(dev, graph, options)
    try:
        exe = _compile(graph, report, ctx, dev, helper, t_all, options)
    finally:
        if helper is not None:
            helper.stop()
    if exe.tier is not None:    # the cores' first sample from here (the helper has ended):
        exe.tier.watch()        # the first iteration's check then covers a whole window
    return exe


def _compile(graph, report, ctx, dev, helper, t_all, options) -> Executable:
    """:func:`compile` after the device is chosen; ``helper``: an early :mod:`.prejit`
    helper (it gets the program's second part) or None."""
    import pyopencl as cl
    stats: dict = {"device": dev.name.strip()}
    prog, stages = arena.lower(graph, stats, options)
    planned, planned_bytes, plan = arena.plan(prog, stats)
    if plan is not None:
        stages["alloc"] = plan
        if report is not None:
            report.stats["memory"] = plan.stats()
    off, arena_bytes, snap = arena.layout(prog, planned, planned_bytes)
    check_arena(arena_bytes, dev)
    # the arena's memory now (its constants region, appended below, fits the rounding to
    # 2 MiB pages as a rule), its pages faulted in on another thread while this one renders
    host = arena_host(dev, arena_bytes)
    if host is not None:
        prefault(host)
    t = time.perf_counter()
    kernels_, by_launch = _Kernels(arena_bytes // 4), {}
    chain_work = options.get("chain_work", chain.default_work(dev))
    tgt = for_device(dev).with_options(reductions=options.get("reductions"),
                                              vector=options.get("vector"),
                                              tile=options.get("tile"))
    nodes = {n.id: n for g in (graph, prog.graph or graph) for n in g.walk()}
    sites = [n.site for n in graph.walk() if n.op in (Op.FOR, Op.SCAN)]
    checked: list = []
    # team chains from the start (team=True); by default team runs of tier 1's kernels,
    # swapped in while other processes leave the cores free (runs.py, tiers.py); or
    # neither (team=False)
    workers = chain.team_size(dev) if options.get("team") is not False else 0
    ran = workers > 0 and options.get("team") is None and "chain_work" not in options
    steps = _steps(prog.body, off, kernels_, by_launch, chain_work, tgt,
                   (nodes, iter(sites), checked),
                   prefetch=prefetch_option(options.get("prefetch")),
                   light="chain_work" not in options, team=0 if ran else workers, spread=ran)
    kernels_.bodies = unify.unify(kernels_.bodies, by_launch)
    sync = -1
    if ran or any(la.team and len(m) > 1 for la, (_, m) in by_launch.items()):
        sync = kernels_.reserve(chain.SYNC_WORDS + 15)
        sync += -sync % 16                  # 64-byte lines
    later = _later_launches(steps)
    sources, launch_args, launch_kernel = _wrappers(
        by_launch, chain.DISPATCH_MAX if chain.is_cpu(dev) else 1, sync, workers if ran else 0,
        later)
    switch = {x.name for x in sources if x.params[:1] == ("const int which",)}
    _mark_blocks(steps, launch_args, {la for la in by_launch if launch_kernel[la] in switch})
    tier = None
    if ran:
        ups = runs.upgrades(steps, {la: m for la, (_, m) in by_launch.items()}, launch_kernel,
                            launch_args, {x.name for x in sources if chain.has_team_mode(x)},
                            workers, kernels_.table)
        tier = tiers.Tier(ups) if ups else None
    launches = list(by_launch)
    bodies = kernels_.bodies
    counters = any(getattr(la, "counters", False) for la in launches)
    texts, part_of = _parts([b for b in bodies if not b.whole] + sources,
                            set(launch_kernel.values()), 2 if helper else 1, counters)
    stats["render_s"] = time.perf_counter() - t
    stats["kernels"] = sum(len(m) for _, m in by_launch.values())
    stats["distinct_kernels"] = len(bodies)
    stats["launches"] = len(launches)
    stats["chains"] = sum(len(m) > 1 for _, m in by_launch.values())
    # ring copies (one-point bodies among the kernels): Receivers', Feeders'
    stats["rings"] = len(list(_feeds(steps, RingReceive))) + len(list(_feeds(steps, RingFeed)))
    stats["program_kernels"] = len(set(launch_kernel.values()))
    stats["program_parts"] = len(texts)
    stats["source_chars"] = sum(map(len, texts))
    if any(isinstance(x, CallbackRead) for x, _ in _walk(prog.body)):
        from .runtime import _blocks
        stats["callbacks"] = callback.trace(steps, _blocks)
    constants = np.array(kernels_.constants, np.float32)
    arena_bytes += constants.nbytes         # the constants region ends the arena
    check_arena(arena_bytes, dev)          # before anything is built or run
    paths = [write_source(x) for x in texts]
    if (fe := frontend.for_device(dev, options)) is not None:
        # every part's front end at once (a process each), the helper's first
        t = time.perf_counter()
        jobs = [fe.start(p) for p in reversed(paths)][::-1]
        paths = [j.result() or p for j, p in zip(jobs, paths)]
        stats["frontend_s"] = time.perf_counter() - t
    # each part's kernels together, in first-launch order: this process compiles the first
    # part's from the front, the helper the last part's from the back
    first = sorted([(part_of[n], n, g, loc)
                    for n, g, loc in _first_launches(steps, launch_kernel, switch)],
                   key=lambda x: x[0])
    # kernels only later launches use: compiled in the background once the others are
    deferred = {launch_kernel[la] for la in later} - \
        {launch_kernel[la] for la in launches if la not in later}
    rest = [x for x in first if x[1] in deferred]
    first = [x for x in first if x[1] not in deferred]
    programs = _build(ctx, dev, paths, first, helper, stats, options, rest)
    if tier is not None:
        tier.make = lambda name: cl.Kernel(programs.get(part_of[name]), name)  # noqa: E731
    prg = programs.get(0)
    kern = {n: cl.Kernel(prg, n) for n in [philox.SET_KERNEL] +
            ([control.SET_KERNEL] if counters else [])}
    buf = arena_buffer(ctx, dev, arena_bytes, host)
    for la in launches:             # one kernel object per launch: its own arguments
        la.kernel = cl.Kernel(programs.get(part_of[launch_kernel[la]]), launch_kernel[la])
        la.kernel.set_arg(0, buf)
        set_int_args(la.kernel, 1, launch_args[la])
    props = cl.command_queue_properties.PROFILING_ENABLE if options.get("profile") else 0
    if options.get("profile"):
        flops = stats["kernel_flops"] = {}
        for la in launches:     # a body shared by launches of different sizes: each counts
            la.flops = sum(m.flops for m in by_launch[la][1])
            flops[la.name] = flops.get(la.name, 0) + la.flops
    queue = cl.CommandQueue(ctx, dev, properties=props)
    params = [(b.var, off[b.name] * 4) for b in prog.buffers if b.kind is BufferKind.PARAM]
    outputs = {nid: (off[b.name] * 4, tuple(b.shape), storage(b.dtype))
               for nid, b in prog.outputs.items()}
    stats["arena_bytes"] = arena_bytes
    stats["compile_s"] = time.perf_counter() - t_all
    stages["opencl"] = _Listing("\n".join(texts))
    exe = Executable(ctx, dev, queue, buf, arena_bytes, steps, params, outputs,
                     codegen.FLAG * 4, stages, stats, snap, kern[philox.SET_KERNEL],
                     checked, options.get("prefetch"))
    exe.counter_kernel = kern.get(control.SET_KERNEL)
    exe.tier = tier
    stats["team_launches"] = sum(len(u.launches) for u in tier.upgrades) if tier else 0
    exe.constants = (arena_bytes - constants.nbytes, constants)
    if report is not None:
        report.stats["opencl"] = stats
    return exe
