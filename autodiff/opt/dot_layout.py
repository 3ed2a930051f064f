"""Pass ``dot_layout``: a matrix product read only transposed is computed transposed.

Rule: ``swap_last(dot(a, b)) -> dot(swap_last(b), swap_last(a))`` (``(A B)^T = B^T A^T``,
per batch entry), when the ``DOT`` has no other reader and is not a program output. A
transpose of an operand that is itself a transpose folds away.

Why: reverse-mode AD writes the weight gradient of ``y = x @ W.T`` (``nn.Linear``) as
``(x^T g)^T``: the product is stored ``[in, out]`` and every reader (the optimizer's
update, a gradient-norm sum, the epilogue fused into the product) reads it through a
transpose, element by element against the layout. After the rewrite the product is stored
``[out, in]``, the layout of ``W`` itself, so the epilogue stores and the update's loads are
contiguous vectors. Each output element is the same sum over the same ``k`` in the same
order, so results are unchanged up to how a device tiles the product.

Complexity: O(nodes + edges) per sweep; a sweep rewrites every product whose transpose it
meets, and a product whose operands a rewrite changed is taken by the next sweep (at most
``max_sweeps``).
"""
from __future__ import annotations

from ..graph.ir import Graph, Node, Op
from .rewrite import readers, rebuild


def _swap(n: int) -> tuple[int, ...]:
    return tuple(range(n - 2)) + (n - 1, n - 2)


def _is_swap(n: Node) -> bool:
    return n.op is Op.PERMUTE and len(n.shape) >= 2 and n.arg == _swap(len(n.shape))


def _transposed(x: Node, like: Node) -> Node:
    """``swap_last(x)``, folding ``swap_last(swap_last(y))`` to ``y``."""
    if _is_swap(x):
        return x.srcs[0]
    shape = x.shape[:-2] + (x.shape[-1], x.shape[-2])
    return Node(Op.PERMUTE, (x,), shape, x.dtype, _swap(len(x.shape)), like.site,
                x.requires_grad)


def dot_layout(graph: Graph, max_sweeps: int = 4) -> Graph:
    """The graph with every transposed-only ``DOT`` computed in its readers' layout.

    Args:
        graph: the program (not modified).
        max_sweeps: bound on rebuild sweeps (one usually suffices).

    Returns:
        A new :class:`Graph` (or ``graph`` itself when no rule applies).
    """
    for _ in range(max_sweeps):
        reads = readers(graph)
        todo = {n.id for n in graph.walk()
                if _is_swap(n) and n.srcs[0].op is Op.DOT and reads[n.srcs[0].id] == 1}
        if not todo:
            break

        def visit(n: Node) -> Node:
            if n.id not in todo:
                return n
            d = n.srcs[0]
            a, b = d.srcs
            return d.replace(srcs=(_transposed(b, d), _transposed(a, d)), shape=n.shape,
                             site=d.site)
        graph = rebuild(graph, visit)
    return graph
