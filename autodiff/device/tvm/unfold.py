"""Pass ``unfold_products`` (TVM device): a batch folded into a product's rows is unfolded.

Rule: ``reshape(dot(reshape(a, [R, K]), w), [*lead, N]) -> dot(a, expand(w, [*batch, K, N]))``
where ``a`` is ``[*batch, M, K]``, ``lead = [*batch, M]``, ``R = prod(lead)`` and the
product has no other reader.

Why: ``matmul`` folds ``[..., M, K] @ [K, N]`` into one 2-D product between two reshapes
(as ``torch.matmul`` does), which the procedural devices want: one tile kernel, and a
weight gradient that is one product. Relax's ``FuseOps`` fuses elementwise consumers into
a product (its *epilogue*: bias, activation) but not an injective ``reshape`` in between,
so on TVM the fold would cost the epilogue fusion. The batched form computes the same sums
in the same order. The weight gradient, already a single 2-D product in the graph, stays.

Complexity: O(nodes + edges).
"""
from __future__ import annotations

import math
from collections import Counter

from ...graph.ir import Graph, Node, Op, bodies
from ...opt.prune import prune
from ...opt.rewrite import readers, rebuild


def _readers(graph: Graph) -> tuple[Counter, set]:
    """:func:`~autodiff.opt.rewrite.readers`, and the ids of every output of the program
    and its sub-graphs (kept as they are: the runtime finds them by id)."""
    outs = {o.id for o in graph.outputs}
    for n in graph.walk():
        for sub in bodies(n):
            outs.update(o.id for o in sub.outputs)
    return readers(graph), outs


def _folded(n: Node, reads: tuple[Counter, set]) -> tuple[Node, Node] | None:
    """``(a, w)`` when ``n`` is the outer reshape of a folded product, else None."""
    reads, outs = reads
    if n.op is not Op.RESHAPE or n.srcs[0].op is not Op.DOT or n.id in outs:
        return None
    d = n.srcs[0]
    flat, w = d.srcs
    if reads[d.id] != 1 or flat.op is not Op.RESHAPE or len(w.shape) != 2:
        return None
    a = flat.srcs[0]
    if len(a.shape) < 3 or a.shape[:-1] != n.shape[:-1] or a.shape[-1] != w.shape[0]:
        return None
    if len(flat.shape) != 2 or flat.shape[0] != math.prod(a.shape[:-1]):
        return None
    return a, w


def unfold_products(graph: Graph, max_sweeps: int = 8) -> Graph:
    """The graph with every folded batch-against-one-matrix product computed batched.

    Args:
        graph: the program (not modified).
        max_sweeps: bound on rebuild sweeps (a product whose operand a rewrite replaced,
            e.g. the next layer's, is taken by the next sweep).

    Returns:
        A new :class:`Graph` without the replaced products (pruned), or ``graph`` itself
        when no product was folded.
    """
    start = graph
    for _ in range(max_sweeps):
        reads = _readers(graph)
        todo = {n.id for n in graph.walk() if _folded(n, reads)}
        if not todo:
            break

        def visit(n: Node) -> Node:
            if n.id not in todo:
                return n
            a, w = _folded(n, reads)
            wide = a.shape[:-2] + w.shape
            b = Node(Op.EXPAND, (w,), wide, w.dtype, wide, n.site, w.requires_grad)
            d = n.srcs[0]
            return d.replace(srcs=(a, b), shape=n.shape, site=d.site)
        graph = rebuild(graph, visit)
    return graph if graph is start else prune(graph)
