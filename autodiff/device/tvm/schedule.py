"""Default CPU schedule for matmul-like fused kernels (no tuning).

Untuned TVM matmuls run the textbook ``i, j, k`` loop nest (about 2 GFLOP/s). For every
fused PrimFunc holding a ``dot`` block (:data:`.te_ops.DOT_BLOCK`), this schedule

* inlines the elementwise prologue blocks (transposes, broadcasts) into the matmul's loads;
* tiles ``i`` by ``TILE_I`` and ``j`` by a vector-friendly ``TILE_J`` and reorders to
  ``batch, i_o, j_o, k, i_i, j_i``: a ``TILE_I x TILE_J`` accumulator tile stays in cache
  while ``k`` streams, each ``k`` step a rank-1 update vectorized along ``j_i``;
* moves the elementwise epilogue (bias, activation) into the ``j_o`` loop, so it runs on
  the tile while it is hot, when it runs over exactly the product's space (an epilogue
  over a larger one, a product padded into a gradient sum, stays after the product);
* parallelizes the outer tile loop when the kernel has enough work, and splits the
  reduction's init off last (``decompose_reduction`` must follow ``parallel``).

Every step is tried and skipped on a ``ScheduleError``, so an unusual kernel keeps a
correct (if slower) schedule. Blocks named other than ``dot`` are left alone.
"""
from __future__ import annotations

import tvm
from tvm import tirx
from tvm.s_tir import Schedule, ScheduleError

from .te_ops import DOT_BLOCK

TILE_I = 8
TILE_J = 32                 # floats: two AVX-512 or four AVX2 vectors
PARALLEL_FLOPS = 1 << 18    # below this many multiply-adds a thread pool launch costs more
_ERRORS = (ScheduleError, tvm.error.InternalError, ValueError)


def _try(fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except _ERRORS:
        return None


def _extent(sch: Schedule, loop) -> int | None:
    ext = sch.get(loop).extent
    return int(ext) if isinstance(ext, tirx.IntImm) else None


def _is_dot(sch: Schedule, block) -> bool:
    name = sch.get(block).name_hint
    return name == DOT_BLOCK or name.startswith(DOT_BLOCK + "_")


def _dot_blocks(sch: Schedule):
    return [b for b in sch.get_child_blocks(sch.get_sblock("root"))
            if _is_dot(sch, b)] if _has_root(sch) else []


def _has_root(sch: Schedule) -> bool:
    try:
        sch.get_sblock("root")
        return True
    except _ERRORS:
        return False


def _tile(n: int, limit: int) -> int:
    """The largest divisor of ``n`` up to ``limit`` when it is at least half of ``limit``,
    else ``limit`` (a partial last tile)."""
    best = max(d for d in range(1, min(n, limit) + 1) if n % d == 0)
    return best if best * 2 >= min(n, limit) else min(n, limit)


def _schedule_dot(sch: Schedule, block) -> bool:
    loops = sch.get_loops(block)
    if len(loops) < 3:
        return False
    *batch, i, j, k = loops
    exts = [_extent(sch, lp) for lp in (i, j, k)]
    if None in exts:
        return False
    m, n, kk = exts
    space = [_extent(sch, lp) for lp in (*batch, i, j)]
    # only consumers over exactly the product's space move into its tile loop: one over a
    # larger space (a padded or concatenated gradient) would be computed on the product's
    # rows only, leaving the rest of its output unwritten
    same = [c for c in sch.get_consumers(block)
            if [_extent(sch, lp) for lp in sch.get_loops(c)] == space]
    io, ii = sch.split(i, [None, _tile(m, TILE_I)])
    jo, ji = sch.split(j, [None, _tile(n, TILE_J)])
    sch.reorder(*batch, io, jo, k, ii, ji)
    # epilogue: consumers of the matmul computed on the tile
    for c in same:
        _try(sch.reverse_compute_at, c, jo)
    size = m * n * kk
    for b in batch:
        size *= _extent(sch, b) or 1
    outer = sch.fuse(*batch, io) if batch else io
    if size >= PARALLEL_FLOPS:
        _try(sch.parallel, outer)
    _try(sch.vectorize, ji)
    _try(sch.unroll, ii)
    _try(sch.decompose_reduction, block, k)
    return True


def schedule_func(func: tirx.PrimFunc) -> tirx.PrimFunc | None:
    """``func`` with its ``dot`` blocks scheduled, or None when it has none."""
    sch = Schedule(func)
    dots = _dot_blocks(sch)
    if not dots:
        return None
    # Inline elementwise producers (transposes, broadcasts) into the matmul's loads, and
    # elementwise chains after it into their last block.
    for b in sch.get_child_blocks(sch.get_sblock("root")):
        if not _is_dot(sch, b):
            _try(sch.compute_inline, b)
    for b in reversed(sch.get_child_blocks(sch.get_sblock("root"))):
        if not _is_dot(sch, b):
            _try(sch.reverse_compute_inline, b)
    done = False
    for b in _dot_blocks(sch):
        done |= bool(_try(_schedule_dot, sch, b))
    return sch.mod["main"] if done else None


def schedule_module(mod: tvm.IRModule) -> tuple[tvm.IRModule, int]:
    """Apply :func:`schedule_func` to every PrimFunc of ``mod`` that is not yet scheduled.

    Returns
    -------
    mod : tvm.IRModule
        The module with its matmul-like kernels scheduled.
    count : int
        How many PrimFuncs were scheduled.
    """
    count = 0
    for gv, func in list(mod.functions_items()):
        if not isinstance(func, tirx.PrimFunc):
            continue
        if func.attrs is not None and "tirx.is_scheduled" in func.attrs:
            continue
        new = schedule_func(func)
        if new is not None:
            mod[gv] = new.with_attr("global_symbol", gv.name_hint) \
                if "global_symbol" in (func.attrs or {}) else new
            count += 1
    return mod, count
