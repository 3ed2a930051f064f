"""Fusion: procedural program -> program of fewer, bigger kernels (one fusion per module).

Passes, in this order, each over every statement list (``For`` bodies separately):

1. :mod:`.dp_elw` (``DP+Elw``): a dot product + the elementwise kernels consuming its
   result (bias, activation, scaling, the SGD update when it is a gradient) as epilogue;
   a batched dot product read only by a ``SUM`` over its batch dims (a weight gradient)
   is first merged with that sum into one contraction over ``batch * K``.
2. :mod:`.reduce_elw` (``Reduce+Elw``): a reduction + its sole elementwise producer
   (inlined into the source) + its elementwise consumers over the kept space.
3. :mod:`.elw` (``ElwFuse``): remaining elementwise chains and trees -> one kernel, with
   several outputs where a value is also needed outside the group.
4. :mod:`.remat` (``Remat``): a group stores the cheapest set of its values (a min cut);
   later kernels recompute the other elementwise values they read from it.

Policy (TVM's op patterns with tinygrad's one-reduction rule). Ops rank, from most to least
fusable: elementwise < broadcast < injective (views: already index arithmetic here) <
reduction < out-elementwise-fusable (the dot product). A group has exactly one *anchor* of
the highest pattern (one dot product or one reduction, or none for ``ElwFuse``) and takes
lower-pattern ops around it:

* elementwise/broadcast consumers of the anchor join its epilogue when their iteration space
  maps one-to-one onto the anchor's output space (same shape, permuted or reshaped); a
  consumer that would need the anchor's value at another work item (a broadcast of a
  reduction, a transposed read of a result stored earlier in the group) does not join;
* elementwise producers join only when only the group reads them: into a reduction's source
  (recomputed per reduced element) or into an epilogue; never into dot-product operands;
* a group never holds two reductions or dot products (no duplicated reduction; the batch-sum
  merge above is one contraction, not two), never spans
  a ``For`` boundary, and is placed at one member's position (the last one's if possible)
  only when no statement between it and another member reads that member's result or
  writes what it touches (so no cycle can form and variables updated in place keep their
  read-before-write order);
* a kernel never reads a buffer it stores except at the index the same work item stores;
* groups are bounded (``group.MAX_MEMBERS`` members, ``group.MAX_VALUE_NODES`` expression
  nodes), so fusion is O(program size) with a per-group constant.
"""
from __future__ import annotations

from ..procedural.ir import Program
from ..procedural.lower import gc_paused
from .dp_elw import fuse_dp_elw
from .elw import fuse_elw
from .group import map_lists
from .reduce_elw import fuse_reduce_elw
from .remat import remat

PASSES = (fuse_dp_elw, fuse_reduce_elw, fuse_elw, remat)


def fuse(program: Program, passes=PASSES) -> Program:
    """The fused program (``program`` itself is not modified).

    Parameters
    ----------
    program : Program
        An unfused program from :func:`autodiff.procedural.lower.lower`.
    passes : sequence of callables
        Statement-list passes to run, in order (default: DP+Elw, Reduce+Elw, ElwFuse, Remat).

    Returns
    -------
    Program
        Same buffers minus the ones no statement touches any more (group-internal
        values), titled ``"fused"``.
    """
    with gc_paused():
        return _fuse(program, passes)


def _fuse(program: Program, passes) -> Program:
    body = program.body
    for p in passes:
        body = map_lists(body, p)
    used: set[int] = set()

    def visit(stmts):
        from ..procedural.ir import BLOCKS
        for s in stmts:
            if isinstance(s, BLOCKS):
                used.update(id(b) for b in s.reads())
                for blk in s.blocks():
                    visit(blk)
            else:
                used.update(id(b) for b in s.reads() + s.writes())
    visit(body)
    bufs = [b for b in program.buffers if id(b) in used or b.kind.value in ("param", "output")]
    return Program(body, bufs, dict(program.outputs), "fused", program.graph)


__all__ = ["fuse", "fuse_dp_elw", "fuse_reduce_elw", "fuse_elw", "remat", "PASSES"]
