"""Launch chaining: run consecutive small kernels as one launch of one work-item.

Every kernel body is rendered as an inline function of its global index (the
:data:`~.dialect.BODY` dialect). A *wrapper* kernel then either

* runs one body per work-item over the body's own NDRange (:func:`wrap`, the usual
  parallel launch), or
* runs the bodies of several consecutive kernels back to back, each in plain loops over
  its whole index space, in a single work-item (:func:`chain`): one launch instead of many.

A launch costs the host 1.3-1.7 us to enqueue and PoCL several more to schedule over its
worker threads (measured on PoCL 3.1), which dominates kernels of a few thousand
flops: a 6-layer d64 transformer step has hundreds of them. Chaining trades the second
core for the launch overhead, so only kernels whose :func:`work` is at most
:data:`CHAIN_WORK` join a chain; a larger kernel keeps its parallel launch and ends the
chain, as does a complete work-group kernel (``Source.whole``: the GPU tree reduction).
On one core there is no second core to lose: every kernel joins (:func:`default_work`);
nor in a light loop body (:data:`LIGHT_BODY`), where the launches would cost more than the
second core saves. Chains never cross a Feeder write or Receiver read (those are queue
commands between launches; one through a ring, :mod:`.rings`, is a copy body in the chain
instead) nor a loop boundary. The same idea is a CUDA graph or a persistent "megakernel"; here the wrapper is
sequential C, so the order of the bodies is the program order and no barrier is needed.

A *team chain* (:func:`team`) keeps both: where a loop body is too heavy to chain onto one
core, its kernels all join chains still, each launched as one work-group per PoCL worker
thread (:func:`team_size`); the workers share every body's work-groups and meet at a
barrier in the arena between dependent bodies (:func:`independent`). W3 on two threads:
336 launches -> 2, 21.4-21.8 -> 17.5-18.3 ms per step. PoCL compiles such a kernel, with
every body it calls, on one core (the main job's first iteration 2.8 -> 4.5-4.8 s from an
empty cache), so by default the same sharing comes from the dispatch kernels' own team
mode instead (:func:`team_branch`, :mod:`.runs`), at no compile cost.
"""
from __future__ import annotations

import math
import sys

from ...procedural.ir import (Copy, DotProduct, Elementwise, For, FusedKernel, Gather, If,
                              Kernel, Reduce, ScatterAdd, While)
from ..cstyle.dialect import body_name
from ..cstyle.kernels import Source
from .dialect import BODY, OPENCL

#: largest kernel (:func:`work`, flop-equivalents) that joins a chain; chosen by a sweep on
#: PoCL (BENCHMARKS.md, "Where the OpenCL time goes")
CHAIN_WORK = 1 << 18


def is_cpu(device) -> bool:
    """Whether the ``pyopencl.Device`` is a CPU device."""
    import pyopencl as cl
    return bool(device.type & cl.device_type.CPU)


#: chain limit on a CPU device that runs on one core: every kernel joins a chain
ONE_CORE_WORK = 1 << 62


def default_work(device) -> int:
    """:data:`CHAIN_WORK` on a CPU device; :data:`ONE_CORE_WORK` (every kernel chained) on
    a CPU device that runs on one core (one compute unit, or this process pinned to one
    core): nothing runs beside a chain then, while each launch still costs PoCL's
    scheduling and a switch between the host thread and PoCL's worker (the main job, W5,
    pinned to one core: 59-70 -> 47-59 ms of CPU per step, 314 launches -> 6); 0 (no
    chains) elsewhere: a GPU needs every work-item it can get, and a one-work-item launch
    would waste all but one."""
    if not is_cpu(device):
        return 0
    from .prejit import usable_cores
    units = getattr(device, "max_compute_units", None) or usable_cores()
    return ONE_CORE_WORK if min(units, usable_cores()) == 1 else CHAIN_WORK


#: most work (:func:`work`, flop-equivalents) of a loop body, free of control flow, whose
#: kernels all join chains even where a second core could split the larger ones: there
#: the launches would cost more than the second core saves (W4, a 30 MFLOP step on two
#: cores: 19 launches 475 us per step, all chained 340 us, PoCL 3.1)
LIGHT_BODY = 1 << 26


def body_work(body) -> int | None:
    """Total :func:`work` of the kernels of loop body ``body``; None when it holds a loop
    or a branch (their work per iteration is not one number)."""
    if any(isinstance(x, (For, If, While)) for x in body):
        return None
    return sum(work(x) for x in body if isinstance(x, Kernel))


#: flops one point of a non-matmul kernel counts for: in a chain, a body runs its points
#: one by one as scalar code (PoCL vectorises across work-items, not along a work-item's
#: loop), while the matmul tiles are explicit 16-wide vectors
POINT_FLOPS = 16


def work(stmt) -> int:
    """Size of a kernel statement in flop-equivalents: ``2*M*N*K*batch`` for a dot product,
    else :data:`POINT_FLOPS` per point of its index space (reduced points included)."""
    k = stmt.kernel if isinstance(stmt, FusedKernel) else stmt
    if isinstance(k, DotProduct):
        return 2 * math.prod(k.shape) * k.k.extent
    if isinstance(k, (Elementwise, Reduce)):
        points = math.prod(k.shape)
    elif isinstance(k, Copy):
        points = k.src.size
    elif isinstance(k, Gather):
        points = k.out.size
    elif isinstance(k, ScatterAdd):
        points = k.updates.size + k.out.size
    else:
        return 1 << 62      # unknown: never chained
    return POINT_FLOPS * points


def _guarded(body: Source) -> str:
    """``if (cond) `` for a body in a branch decided on the device (``guard``, set by the
    device's compile; see :mod:`.control`), else nothing."""
    g = getattr(body, "guard", None)
    return f"if ({g}) " if g else ""


def wrap(body: Source, d=OPENCL, name: str | None = None) -> Source:
    """A kernel running ``body`` (rendered with :data:`~.dialect.BODY`) once per work-item
    of its own NDRange; same launch sizes and int parameters (passed through), named
    ``name`` (default: the body's name)."""
    name = name or body.name
    ids = ", ".join(d.index("global", i) if i < len(body.global_size) else "0"
                    for i in range(3))
    names = [p.split()[-1] for p in body.params]
    src = (d.signature(name, [f"{d.pointer()} restrict buf"] + list(body.params))
           + f" {{\n  {_guarded(body)}{body_name(body.name)}"
             f"({', '.join(['buf'] + names + [ids])});\n}}")
    return Source(name, src, body.global_size, body.local_size, body.flops,
                  params=body.params, args=body.args)


def chain(name: str, bodies: list[Source], d=OPENCL, as_body: bool = False,
          loops: bool = False) -> Source:
    """A one-work-item kernel running ``bodies`` in order, each over its padded global
    size (a body returns early past its real extent, as in its NDRange form) with its
    own int arguments as literals. ``as_body``: the same as a body function
    (:data:`~.dialect.BODY`, no int parameters) for :func:`dispatch`. ``loops``: each
    body runs through its :func:`loop_function` (which the program must hold)."""
    if as_body:
        L = [BODY.signature(name, [f"{d.pointer()} restrict buf"]) + " {"]
    else:
        L = ["__attribute__((reqd_work_group_size(1, 1, 1)))",
             d.signature(name, [f"{d.pointer()} restrict buf"]) + " {"]
    for b in bodies:
        g = tuple(b.global_size) + (1,) * (3 - len(b.global_size))
        if loops:
            args = ", ".join(["buf"] + [str(a) for a in b.args] + [str(n) for n in g])
            L.append(f"  {_guarded(b)}{b.name}_loop({args});")
            continue
        loops_ = [f"for (int g{i} = 0; g{i} < {g[i]}; g{i}++)" for i in (2, 1, 0) if g[i] > 1]
        args = ", ".join(["buf"] + [str(a) for a in b.args] +
                         [f"g{i}" if g[i] > 1 else "0" for i in range(3)])
        L.append("  " + _guarded(b) + " ".join(loops_ + [f"{body_name(b.name)}({args});"]))
    L.append("}")
    return Source(name, "\n".join(L), (1,), (1,), sum(b.flops for b in bodies))


#: the arena words a team chain synchronises through (offsets from its ``sync`` word):
#: arrivals at the barrier, the barrier's generation, the next ticket -- each on its own
#: 64-byte line, so that spinning on one does not slow the atomic increments of another
ARRIVED, GENERATION, TICKET = 0, 16, 32
SYNC_WORDS = 48

#: ``team_sync(s, P)``: a barrier of the ``P`` work-groups of a team chain (a counter with a
#: generation: the last to arrive resets the count and starts the next generation; the
#: others spin until it does). The atomics are full fences, so every store before the
#: barrier is seen by every load after it.
TEAM_SYNC = """static void team_sync(__global int* s, const int P) {
  const int gen = atomic_add(s + %d, 0);
  if (atomic_inc(s + %d) == P - 1) { atomic_xchg(s + %d, 0); atomic_inc(s + %d); }
  else while (atomic_add(s + %d, 0) == gen) ;
}""" % (GENERATION, ARRIVED, ARRIVED, GENERATION, GENERATION)


def team_size(device) -> int:
    """Work-groups of a team chain on ``device``: its PoCL worker threads (the device's
    compute units, at most the cores this process may use) when there are two or more;
    0 (no team chains) on any other device. A team chain's work-groups wait for each other,
    so each must run on its own thread at once: PoCL's ``pthread`` driver hands a kernel's
    ``n`` groups out in chunks of ``ceil(remaining / threads)`` (``get_wg_index_range`` in
    its ``pthread_scheduler.c``, 3.1), one group per thread when there are no more groups
    than threads; other CPU drivers (PoCL's single-threaded ``basic``, other vendors) make no
    such promise.

    A waiting worker spins (OpenCL C has no way to yield its core), so a team needs its
    cores to itself: in a data-parallel run (:mod:`autodiff.distributed` initialised with
    several processes) each process counts only its share of this machine's cores (all
    processes assumed on this machine), and a share under two means no team chains."""
    if not is_cpu(device) or "portable computing language" not in device.platform.name.lower() \
            or not device.name.lower().startswith("pthread"):
        return 0
    from .prejit import usable_cores
    n = min(device.max_compute_units, usable_cores() // _processes())
    return n if n > 1 else 0


def _processes() -> int:
    """Processes of this program's data-parallel run (1 outside one)."""
    state = sys.modules.get("autodiff.distributed.state")
    return state.get_world_size() if state is not None and state.is_initialized() else 1


#: the scratch regions every packing matmul shares, as one word range of a body's
#: :attr:`touch` (no arena word is negative)
SCRATCH = (-2, -1)


def touches(reads, writes, off: dict, scratch: bool = False,
            flag: tuple[int, int] | None = None):
    """``(touched, written)`` arena word ranges ``[lo, hi)`` (4-byte words) of a kernel
    statement reading buffers ``reads`` and writing ``writes`` (``off``: word offset by
    buffer name), for :func:`independent`. A buffer with no offset is a fused group's
    register-only value (the kernel templates store nothing for it): it touches no word.
    (Such a kernel used to get no ranges at all, a barrier on either side: W3's team chain
    332 -> 280 barriers, its team runs 313 -> 263.) ``scratch``: its bodies pack
    operands into the shared scratch (:data:`SCRATCH`); ``flag``: the word range of
    the index-error record it may set."""
    span = lambda b: (off[b.name], off[b.name] + -(-b.nbytes // 4))  # noqa: E731
    written = [span(b) for b in writes if b.name in off] + \
        ([SCRATCH] if scratch else []) + ([flag] if flag is not None else [])
    return [span(b) for b in reads if b.name in off] + written, written


def independent(group: list[Source], body: Source, follows: bool = False) -> bool:
    """Whether ``body`` may run at the same time as the bodies of ``group`` (the bodies
    since a team chain's last barrier): every one has its word ranges (``touch``, set by
    the device's compile: :func:`touches`), none is guarded or a later part of the same
    statement as the one before it (``after``: a matmul after its packs; ``follows``: the
    body runs after that one on the same worker anyway, in one chain entry), and neither
    side writes a word the other touches."""
    def clear(b):
        return getattr(b, "touch", None) is not None and getattr(b, "guard", None) is None
    if not clear(body) or getattr(body, "after", False) and not follows or \
            not all(map(clear, group)):
        return False
    overlap = lambda xs, ys: any(a < d and c < b for a, b in xs for c, d in ys)  # noqa: E731
    t, w = body.touch
    return not any(overlap(w, g.touch[0]) or overlap(g.touch[1], t) for g in group)


def team(name: str, bodies: list[Source], workers: int, sync: int, d=OPENCL) -> Source:
    """A team chain, rendered as a body (:data:`~.dialect.BODY`, global index ``g0`` the
    worker) for :func:`dispatch`: ``bodies`` in order, each over its NDRange's work-groups
    (its :func:`block_function`, which the program must hold) shared among ``workers``
    one-work-item work-groups (launched as ``(workers,)`` by ``(1,)``), with a
    :data:`TEAM_SYNC` barrier before each body that is not :func:`independent` of those
    since the last one, and at the end.

    The groups are handed out by tickets: one counter (arena word ``sync + TICKET``) counts
    every group of the launch in body order; a worker takes the next ticket whenever it
    finishes a group, runs it if it belongs to the current body, and otherwise keeps it
    for the body it belongs to (after the barrier). So an uneven group or a late worker
    costs at most one group's time per body. The last barrier is followed by the reset of
    the counter (by worker 0), which the next launch then finds at 0 (as at a run's start:
    the words are in the arena's constants region).

    One launch instead of one per kernel: on PoCL each launch wakes the sleeping worker
    threads, 13 us per launch on average on two threads of a 2-vCPU VM (W3's 336 launches:
    4.3 of 17.7 ms per step replayed; BENCHMARKS.md), a barrier between two spinning
    workers costs 0.3-0.5 us. The same idea as a persistent kernel with a grid barrier on a
    GPU (CUDA's cooperative groups) or OpenMP's ``nowait``-free parallel region with a
    ``dynamic`` schedule."""
    L = [BODY.signature(name, [f"{d.pointer()} restrict buf"]) + " {",
         f"  __global int* s_ = (__global int*)buf + {sync};",
         f"  int t_ = atomic_inc(s_ + {TICKET}), e_;"]
    end, since = 0, []
    for b in bodies:
        if since and not independent(since, b):
            L.append(f"  team_sync(s_, {workers});")
            since = []
        since.append(b)
        n = groups(b)
        start, end = end, end + math.prod(n)
        ids = [f"q_ % {n[0]}" if n[0] > 1 else "0",
               (f"q_ / {n[0]} % {n[1]}" if n[2] > 1 else f"q_ / {n[0]}") if n[1] > 1 else "0",
               f"q_ / {n[0] * n[1]}" if n[2] > 1 else "0"]
        args = ", ".join(["buf"] + [str(a) for a in b.args] + ids)
        L.append(f"  for (e_ = {end}; t_ < e_; t_ = atomic_inc(s_ + {TICKET})) "
                 f"{{ const int q_ = t_ - {start}; {_guarded(b)}{block_name(b)}({args}); }}")
    L.append(f"  team_sync(s_, {workers});")
    L.append(f"  if (g0 == 0) atomic_xchg(s_ + {TICKET}, 0);")
    L.append("}")
    return Source(name, "\n".join(L), (workers,), (1,), sum(b.flops for b in bodies))


def groups(body: Source) -> tuple[int, int, int]:
    """Work-groups of ``body`` 's NDRange along each of the three axes."""
    g = tuple(body.global_size) + (1,) * (3 - len(body.global_size))
    loc = tuple(body.local_size) + (1,) * (3 - len(body.local_size))
    return tuple(-(-g[i] // loc[i]) for i in range(3))


def loop_function(body: Source, d=OPENCL) -> str:
    """``void name_loop(buf, int params..., n0, n1, n2)``: ``body`` over the index space
    ``n2 x n1 x n0``, never inlined. Chains call it instead of inlining the body's loops
    at each use: the same small body (a zero fill, one AdamW update shape) recurs dozens
    of times across a model's chains, and PoCL would compile every inlined copy."""
    names = [p.split()[-1] for p in body.params]
    params = [f"{d.pointer()} restrict buf"] + list(body.params) + \
        [f"const int n{i}" for i in range(3)]
    call = f"{body_name(body.name)}({', '.join(['buf'] + names + ['g0', 'g1', 'g2'])});"
    return (f"__attribute__((noinline)) static void {body.name}_loop({', '.join(params)}) {{\n"
            f"  for (int g2 = 0; g2 < n2; g2++) for (int g1 = 0; g1 < n1; g1++)\n"
            f"    for (int g0 = 0; g0 < n0; g0++) {call}\n}}")


def block_function(body: Source, d=OPENCL) -> str:
    """``void name_block<local size>(buf, int params..., b0, b1, b2)`` (:func:`block_name`):
    ``body`` over the work-items of work-group ``(b0, b1, b2)`` of its NDRange (its local
    size as literals, global offset 0), never inlined; :func:`dispatch` kernels call it
    from one work-item per group.

    Why not inline: PoCL 3.1 optimises a kernel as one function, and with every entry's
    body inlined into a dispatch kernel's ``switch`` that function grows with the entries;
    its JIT then costs 2-3x more than the same bodies as separate functions (the main job's
    12-case matmul dispatch kernel: 1.45 -> 0.52 s with its bodies never inlined; the
    whole training program with block functions: 5.7 -> 3.1 s of JIT CPU). A call per
    work-group, not per work-item, keeps the run time (a call per work-item cost its
    elementwise kernels 16%): the group's work-items run in this function's plain loops,
    as PoCL's own work-item loop would."""
    names = [p.split()[-1] for p in body.params]
    size = tuple(body.local_size) + (1,) * (3 - len(body.local_size))
    params = [f"{d.pointer()} restrict buf"] + list(body.params) + \
        [f"const int b{i}" for i in range(3)]
    loops = [f"for (int l{i} = 0; l{i} < {size[i]}; l{i}++)" for i in (2, 1, 0)
             if size[i] > 1]
    ids = [f"b{i}*{size[i]} + l{i}" if size[i] > 1 else f"b{i}" for i in range(3)]
    call = f"{body_name(body.name)}({', '.join(['buf'] + names + ids)});"
    return (f"__attribute__((noinline)) static void {block_name(body)}({', '.join(params)}) "
            f"{{\n  {' '.join(loops + [call])}\n}}")


def block_name(body: Source) -> str:
    """The name of ``body`` 's :func:`block_function` for its local size: one body may be
    launched with several (:mod:`.unify` merges bodies of other local sizes), each its own
    block function around the one body."""
    size = tuple(body.local_size) + (1,) * (3 - len(body.local_size))
    return f"{body.name}_block" + ("" if size == (1, 1, 1) else "x".join(map(str, size)))


#: most bodies one :func:`dispatch` kernel holds on a CPU device (1 on a GPU: every body
#: keeps its own wrapper)
DISPATCH_MAX = 24


#: the last four int arguments of a :func:`dispatch` launch as compiled (``reps``,
#: ``ctr``, ``wrd``, ``wstep``): the entry runs once and advances nothing
ONCE = (1, -1, -1, 0)


def dispatch(name: str, entries: list[Source], d=OPENCL,
             team: tuple[int, int] | None = None) -> Source:
    """One kernel running any of ``entries`` (bodies rendered with :data:`~.dialect.BODY`,
    or chains rendered ``as_body``) over their NDRange: ``switch`` on its first int
    argument ``which`` (the entry's position), then the entry's own int parameters as
    ``p0_, p1_, ...`` (unused trailing ones are 0). The first work-item of each work-group
    calls the entry's :func:`block_function` (which the program must hold) for the whole
    group; the group's other work-items return at once.

    PoCL compiles every kernel (per local size) at its first launch, about 100 ms each of
    fixed cost before any code generation (measured on PoCL 3.1: 20 kernels of one
    16-wide loop each take 2.4x longer to JIT as 20 kernels than as the 20 cases of one
    kernel), so the entries launched with the same local size share one kernel. The
    switch on a uniform argument costs one predictable branch per work-group.

    The int argument ``reps`` runs the entry that many times in a row: 1 for every
    launch but an iteration block (:attr:`~.runtime.Loop.block`: a one-work-item chain
    that is a whole loop iteration, run for several iterations per launch). The last
    three advance the block loop's state after each run, as the host would write it
    between iterations: ``ctr`` is -1 or the arena word of the loop's counter
    (:mod:`.control`), which goes up by one; ``wrd`` is -1 or the arena word of the Philox
    iteration word the loop's index enters (:func:`autodiff.graph.rng.iteration_words`),
    which goes up by ``wstep`` (a uint32 bit pattern, wrapping).

    ``team``: ``(workers, sync)`` adds the team mode (:func:`team_branch`): a ``which``
    under -1 runs a :mod:`.runs` table of entries as one team launch.

    The switch (and the team mode) are functions of their own that the kernel calls, not
    its body: PoCL generates each kernel three times (its work-group function, a "fast"
    variant and the kernel), so code in the kernel's body is optimised and compiled
    three times (the main job's six dispatch kernels: 16-19% less work-group compile,
    BENCHMARKS.md)."""
    n = max(len(e.params) for e in entries)
    params = ["const int which"] + [f"const int p{i}_" for i in range(n)] + \
        ["const int reps", "const int ctr", "const int wrd", "const int wstep"]
    buf = f"{d.pointer()} restrict buf"
    groups = ["const int b0", "const int b1", "const int b2"]
    L = []
    if team is not None:
        L += [f"__attribute__((noinline)) static void {name}_team({buf}, const int which, "
              "const int b0) {"] + team_branch(entries, *team, d) + ["}"]
    L += [f"__attribute__((noinline)) static void {name}_run("
          f"{', '.join([buf] + params + groups)}) {{",
          "  for (int r_ = 0; r_ < reps; r_++) {", "  switch (which) {"]
    for k, e in enumerate(entries):
        args = ", ".join(["buf"] + [f"p{i}_" for i in range(len(e.params))]
                         + ["b0", "b1", "b2"])
        L.append(f"  case {k}: {_guarded(e)}{block_name(e)}({args}); break;")
    L += ["  }", "  if (ctr >= 0) ((__global int*)buf)[ctr] += 1;",
          "  if (wrd >= 0) ((__global uint*)buf)[wrd] += (uint)wstep;", "  }", "}"]
    first = " | ".join(d.index("local", i) for i in range(3))
    L += [d.signature(name, [buf] + params) + " {",
          f"  if ({first}) return;",
          "  const int " + ", ".join(f"b{i} = {d.index('group', i)}" for i in range(3)) + ";"]
    if team is not None:
        L.append(f"{TEAM_MODE} {name}_team(buf, which, b0); return; }}")
    names = [p.split()[-1] for p in params]
    L += [f"  {name}_run({', '.join(['buf'] + names + ['b0', 'b1', 'b2'])});", "}"]
    return Source(name, "\n".join(L), entries[0].global_size, entries[0].local_size,
                  params=tuple(params))


def has_team_mode(kernel: Source) -> bool:
    """Whether ``kernel`` is a :func:`dispatch` kernel with a :func:`team_branch`."""
    return TEAM_MODE in kernel.src


#: how a :func:`dispatch` kernel with a team mode (:func:`team_branch`) starts it
TEAM_MODE = "  if (which < -1) {"

#: a team table row (:func:`team_branch`): barrier first (0/1), the entry's case, its
#: groups along axis 0, along axes 0 and 1 together, in all, then its int parameters
ROW_HEAD = 5


def team_branch(entries: list[Source], workers: int, sync: int, d=OPENCL) -> list[str]:
    """The team mode of a :func:`dispatch` kernel, as the lines of the body of its function
    ``<kernel>_team(buf, which, b0)`` (``b0``: the work-group): with ``which < -1`` (-1
    runs nothing: the pre-JIT's launch, :mod:`.prejit`) the kernel is launched as
    ``workers`` one-work-item
    work-groups (one per PoCL worker thread) that run the entries listed in the arena
    table at word ``-2 - which`` -- its length, then a row per
    entry of :data:`ROW_HEAD` ints and the entry's parameters -- one after the other, as a
    :func:`team` chain does: the workers take the entries' work-groups by ticket (arena
    word ``sync + TICKET``), meet at a :data:`TEAM_SYNC` barrier where a row asks for one
    and at the end, and worker 0 then resets the ticket counter.

    The table is data, not code: the same kernel, already compiled for its one-by-one
    launches (every launch of a dispatch kernel is one work-item per work-group: PoCL's
    work-group function for ``(1, 1, 1)``), runs any sequence of its entries, so a team
    launch needs no compile of its own (:mod:`.runs`)."""
    width = ROW_HEAD + max(len(e.params) for e in entries)
    L = ["    __global const int* T_ = (__global const int*)buf + (-2 - which);",
         f"    __global int* s_ = (__global int*)buf + {sync};",
         f"    int t_ = atomic_inc(s_ + {TICKET}), e_ = 0;",
         "    for (int r_ = 0; r_ < T_[0]; r_++) {",
         f"      __global const int* E_ = T_ + 1 + r_*{width};",
         f"      if (E_[0]) team_sync(s_, {workers});",
         "      const int s0_ = e_;",
         f"      for (e_ += E_[4]; t_ < e_; t_ = atomic_inc(s_ + {TICKET})) {{",
         "        const int q_ = t_ - s0_;",
         "        const int c0_ = q_ % E_[2], c1_ = q_ % E_[3] / E_[2], c2_ = q_ / E_[3];",
         "        switch (E_[1]) {"]
    for k, e in enumerate(entries):
        args = ", ".join(["buf"] + [f"E_[{ROW_HEAD + i}]" for i in range(len(e.params))]
                         + ["c0_", "c1_", "c2_"])
        L.append(f"        case {k}: {_guarded(e)}{block_name(e)}({args}); break;")
    L += ["        }", "      }", "    }",
          f"    team_sync(s_, {workers});",
          f"    if (b0 == 0) atomic_xchg(s_ + {TICKET}, 0);"]
    return L
