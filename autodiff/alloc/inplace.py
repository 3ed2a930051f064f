"""In-place reuse: a result takes the arena slot of an operand that dies where it is made.

The graph-opt pass (:mod:`autodiff.opt.inplace`) marks candidates on the graph
(``Graph.inplace``: result node id -> operand node id). Here, on the procedural program, a
mark is honoured when it is safe for any device:

* the statement writing the result is an elementwise kernel (or a fused group whose single
  kernel is elementwise) that stores to memory only the result (a second stored output
  could be a copy of the operand taken before, and stored after, the overwrite);
* every load of the operand in that kernel uses the result's output index, so each work item
  reads only the element it overwrites;
* the operand's live range ends at that step and the result's begins there (the operand is
  dead afterwards, the result not yet alive before), and the result is no larger;
* no other result took the same slot at the same step.

The two live ranges then merge into one (the operand's name keeps the slot; the result
becomes an alias of it).
"""
from __future__ import annotations

from ..procedural.ir import Buffer, Elementwise, FusedKernel, Stmt, loads
from .liverange import LiveRange


def merge_inplace(ranges: list[LiveRange], steps: list[Stmt], buffers: dict[str, Buffer],
                  marks: dict[int, int]) -> tuple[list[LiveRange], dict[str, str]]:
    """Apply the safe in-place marks.

    Args:
        ranges: live ranges of the planned buffers (named by buffer name).
        steps: statement per step of the time axis (:attr:`.liveness.Liveness.steps`).
        buffers: buffer name -> Buffer for the planned buffers.
        marks: graph node id of a result -> graph node id of the operand it may overwrite.

    Returns:
        ``(ranges, aliases)``: the ranges with each honoured pair merged into the operand's
        (root) range, and result buffer name -> root buffer name.
    """
    by_node = {b.node: b for b in buffers.values() if b.node is not None}
    pairs: dict[int, list[tuple[Buffer, Buffer]]] = {}   # step -> (result, operand)
    span = {r.buffer: r for r in ranges}
    for res_id, op_id in marks.items():
        res, opd = by_node.get(res_id), by_node.get(op_id)
        if res is None or opd is None or res is opd:
            continue
        t = span[res.name].start
        pairs.setdefault(t, []).append((res, opd))
    root: dict[str, str] = {}
    claimed: dict[str, int] = {}
    for t in sorted(pairs):
        for res, opd in pairs[t]:
            r_opd = root.get(opd.name, opd.name)
            if (res.name in root or claimed.get(r_opd) == t or span[r_opd].end != t
                    or res.nbytes > span[r_opd].size_bytes or not _same_index(steps[t], res, opd)):
                continue
            o, r = span[r_opd], span.pop(res.name)
            span[r_opd] = LiveRange(o.buffer, o.size_bytes, o.start, r.end)
            root[res.name], claimed[r_opd] = r_opd, t
    return [span[r.buffer] for r in ranges if r.buffer in span], root


def _same_index(stmt: Stmt, res: Buffer, opd: Buffer) -> bool:
    kernel = stmt.kernel if isinstance(stmt, FusedKernel) else stmt
    if not isinstance(kernel, Elementwise):
        return False
    internal = {id(b) for b in stmt.internal} if isinstance(stmt, FusedKernel) else set()
    outs = [o for o in kernel.outs if id(o.buffer) not in internal]
    if len(outs) != 1 or outs[0].buffer is not res:
        return False
    reads = [ld for v in kernel.values() for ld in loads(v) if ld.buffer is opd]
    return bool(reads) and all(ld.index == outs[0].index for ld in reads)
