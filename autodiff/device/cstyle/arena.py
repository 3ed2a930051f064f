"""The arena every C-style device runs on: lowering and fusion, the memory plan, and where
each buffer sits.

Layout (floats): ``SLACK`` | error record (16: :data:`.codegen.FLAG`, the Philox
iteration words, loop counters) | parameters written by loops | other parameters |
outputs | planned buffers (temps, Feeder/Receiver staging) | scratch for packed matmul
operands | ``SLACK``. The OpenCL and CUDA devices share it, so the error record, the
iteration words and every buffer sit at the same offsets on both.
"""
from __future__ import annotations

import time

from ...procedural.ir import BufferKind, DotProduct, For, FusedKernel, While
from . import codegen, kernels

ALIGN = 64   # bytes: every buffer starts on a cache line (and a float16 boundary)


def lower(graph, stats: dict, options: dict):
    """``(procedural program, printable stages)``: ``graph`` lowered, then fused unless
    ``options["fuse"]`` is false; ``stats`` gets the seconds (``lower_s``, ``fuse_s``)."""
    from ... import procedural
    t = time.perf_counter()
    prog = procedural.lower(graph)
    stats["lower_s"] = time.perf_counter() - t
    stages = {"procedural": prog}
    try:
        from ... import fusion
    except ImportError:
        return prog, stages
    if not options.get("fuse", True) or not hasattr(fusion, "fuse"):
        return prog, stages
    t = time.perf_counter()
    prog = fusion.fuse(prog)
    stats["fuse_s"] = time.perf_counter() - t
    stages["fused"] = prog
    return prog, stages


def plan(prog, stats) -> tuple[dict, int, object]:
    """``(byte offsets from the planned region's start of the TEMP/FEEDER/RECEIVER
    buffers, the region's bytes, the memory plan or None)``; ``stats["plan_s"]`` the
    seconds."""
    t = time.perf_counter()
    try:
        from ...alloc import plan_memory
    except ImportError:
        offsets, top = {}, 0
        for b in prog.buffers:
            if b.kind in (BufferKind.TEMP, BufferKind.FEEDER, BufferKind.RECEIVER):
                offsets[b.name] = top
                top += -(-b.nbytes // ALIGN) * ALIGN
        stats["plan_s"] = time.perf_counter() - t
        return offsets, top, None
    memory = plan_memory(prog, ALIGN, members=False)
    stats["plan_s"] = time.perf_counter() - t
    return memory.offsets, memory.arena_bytes, memory


def layout(prog, planned: dict, planned_bytes: int):
    """Float offsets of every buffer and the arena size (bytes), plus the region (byte
    offset, bytes) of the parameters loops write (what a checkpoint copies)."""
    written = {id(b) for s, _ in prog.walk() if isinstance(s, (For, While))
               for b in s.writes() if b.kind is BufferKind.PARAM}
    params = [b for b in prog.buffers if b.kind is BufferKind.PARAM]
    params.sort(key=lambda b: id(b) not in written)
    off = {}
    top = (kernels.SLACK + 16) * 4
    snap_start = top
    for b in params:
        off[b.name] = top // 4
        top += -(-b.nbytes // ALIGN) * ALIGN
        if id(b) in written:
            snap_end = top
    snap = (snap_start, snap_end - snap_start) if written else (0, 0)
    for b in prog.buffers:
        if b.kind is BufferKind.OUTPUT:
            off[b.name] = top // 4
            top += -(-b.nbytes // ALIGN) * ALIGN
    for name, o in planned.items():
        off[name] = (top + o) // 4
    top += planned_bytes
    sa, sb = scratch(prog)
    off[codegen.SCRATCH_A] = top // 4
    top += -(-sa * 4 // ALIGN) * ALIGN
    off[codegen.SCRATCH_B] = top // 4
    top += -(-sb * 4 // ALIGN) * ALIGN + kernels.SLACK * 4
    return off, top, snap


def scratch(prog) -> tuple[int, int]:
    """Floats of scratch for packing DotProduct operands (the largest A and B spaces)."""
    sa = sb = 0
    for s, _ in prog.walk():
        k = s.kernel if isinstance(s, FusedKernel) else s
        if isinstance(k, DotProduct):
            n = max(codegen.pack_sizes(k))     # either operand may land in either slot
            sa, sb = max(sa, n), max(sb, n)
    return sa, sb


