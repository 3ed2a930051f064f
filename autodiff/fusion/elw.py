"""ElwFuse: chains and trees of elementwise kernels over one iteration space -> one kernel.

Groups are seeded from the last unfused elementwise kernel backwards (the root of a tree)
and grow through producers and consumers. A member joins when its space maps one-to-one
onto the group's (the same shape, or a permutation/reshape of it); a producer whose result
only the group reads may instead be inlined at each use (broadcast inputs). A value also
needed outside the group stays an output, so a group can have several outputs.
"""
from __future__ import annotations

from ..procedural.ir import Elementwise
from .group import Schedule, grow

NAME = "ElwFuse"


def fuse_elw(stmts: list) -> list:
    """One statement list (not its ``For`` bodies) with ElwFuse groups formed."""
    sched = Schedule(stmts)
    for s in reversed(list(stmts)):
        if type(s) is Elementwise and sched.free(s):
            grow(sched, None, [s], NAME)
    return sched.statements()
