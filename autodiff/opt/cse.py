"""Pass ``cse`` (repeat elimination): structurally identical nodes become one node.

Two nodes are the same value when they have the same op, the same operands (after merging),
shape, dtype and attribute, and the op is pure. The walk is in program order, so the later
node is replaced by the earlier one, which dominates it (straight-line code).

What may merge, and what may not:

* Pure ops (elementwise, reductions, ``DOT``, movement, ``GATHER``, ``SCATTER_ADD``,
  ``CONST``) merge freely; constants compare by exact value (``-0.0`` differs from ``0.0``).
* ``LOAD(v)`` nodes merge only when no ``ASSIGN`` of ``v`` runs between them: each
  ``ASSIGN`` of ``v`` starts a new version of ``v``, and so does entering or leaving a loop
  body that assigns ``v`` anywhere (nested bodies included), since later iterations (and
  the code after the loop) see the body's writes.
* A node inside a loop body may merge into a node computed before the loop (its value is
  the same in every iteration); values made inside a body are forgotten when the body ends,
  so nothing after the loop (or in another loop) merges into them.
* ``RAND`` draws depend on the loop iteration: they merge only within one loop body.
* Effects (``FEEDER``, ``RECEIVER``, ``ASSIGN``, ``FOR``) and unknown ops never merge.
* Control flow: each sub-graph (an ``IF`` branch, a ``WHILE`` condition or body, a
  ``SCAN`` body) is a scope like a loop body: its nodes may merge into values computed
  before the node, and are forgotten when the sub-graph ends (nothing in the other branch
  or after the node merges into them, so nothing is hoisted out of a branch). ``IF``,
  ``WHILE``, ``SCAN``, ``ARG``, ``RESULT`` and ``INDEX`` never merge.
"""
from __future__ import annotations

import math
from collections import defaultdict

from ..graph.ir import ELEMENTWISE, MOVEMENT, REDUCE, Graph, Node, Op, bodies
from .rewrite import rebuild

PURE = ELEMENTWISE | REDUCE | MOVEMENT | {Op.DOT, Op.GATHER, Op.SCATTER_ADD, Op.CONST}


def _argkey(a):
    if isinstance(a, float):
        return ("f", "nan" if math.isnan(a) else a.hex())
    if isinstance(a, tuple):
        return tuple(_argkey(x) for x in a)
    return a


def cse(graph: Graph) -> Graph:
    """The graph with repeated pure sub-expressions computed once.

    Args:
        graph: the program (not modified).

    Returns:
        A new :class:`Graph`; ``outputs`` keep their positions (two outputs may become the
        same node).

    Complexity: O(nodes + edges) expected (one hash-table lookup per node, keys of the
    node's operand count), plus one walk of each loop body to list the variables it assigns.
    """
    table: dict = {}
    added: list[list] = [[]]          # keys added per open scope, to forget them on exit
    version: dict[int, int] = defaultdict(int)
    scope: list[int] = [0]            # id of the innermost loop (0: top level)

    def assigned(for_node: Node) -> set[int]:
        return {n.arg.id for g in bodies(for_node) for n in g.walk() if n.op is Op.ASSIGN}

    def enter(for_node: Node) -> None:
        for v in assigned(for_node):
            version[v] += 1
        added.append([])
        scope.append(for_node.id)

    def leave(for_node: Node) -> None:
        for key in added.pop():
            del table[key]
        for v in assigned(for_node):
            version[v] += 1
        scope.pop()

    def visit(n: Node) -> Node:
        if n.op is Op.ASSIGN:
            version[n.arg.id] += 1
            return n
        if n.op is Op.LOAD:
            key = (Op.LOAD, n.arg.id, version[n.arg.id], n.shape, n.dtype)
        elif n.op is Op.RAND:
            key = (Op.RAND, _argkey(n.arg), n.shape, n.dtype, scope[-1])
        elif n.op in PURE:
            key = (n.op, tuple(s.id for s in n.srcs), n.shape, n.dtype, _argkey(n.arg))
        else:
            return n
        hit = table.get(key)
        if hit is not None:
            return hit
        table[key] = n
        added[-1].append(key)
        return n

    return rebuild(graph, visit, enter_loop=enter, leave_loop=leave)
