"""Pass ``inplace``: mark elementwise nodes that may write over a dying operand's buffer.

The mark is for the memory planner: ``Graph.inplace[n.id] = s.id`` (on the top-level graph,
keys from every loop body too) says that node ``n`` may take the buffer of its operand
``s``, because ``s`` is not read after ``n``. The graph's nodes are unchanged. A node gets a
mark when all of these hold:

* ``n`` is elementwise and ``s`` is one of its operands with the same shape and dtype, in
  the same graph as ``n`` (a value from outside a loop is read by every iteration);
* ``n`` is the last reader of ``s`` in program order, counting reads through views of
  ``s`` (``RESHAPE``/``PERMUTE``/``EXPAND``/``SLICE`` share its buffer) and a ``For`` node
  as a reader of every outer value its body reads; ``n`` reads no view of ``s`` (it would
  read elements it has already overwritten); ``s`` is not an output of the program;
* ``s`` owns a buffer: not a ``CONST`` (the planner may never materialise it) and not a
  view itself;
* if ``s`` is a variable's storage (``LOAD`` or ``ASSIGN`` of ``v``): ``n``'s only reader
  is an ``ASSIGN`` of the same ``v`` in the same graph, with no effect between the two, and
  no other ``LOAD``/``ASSIGN`` node of ``v`` in that graph is read after ``n``. Writing in
  place then just performs the update early (``p -= lr * g``, momentum buffers).

Complexity: O(nodes + edges) per graph, plus one walk of each loop body per enclosing
level to list what it captures (O(nodes * loop depth)).
"""
from __future__ import annotations

from collections import defaultdict

from ..graph.ir import CONTROL, EFFECT, ELEMENTWISE, Graph, Node, Op, bodies, captures

VIEWS = frozenset({Op.RESHAPE, Op.PERMUTE, Op.EXPAND, Op.SLICE})
STORAGE = frozenset({Op.LOAD, Op.ASSIGN})
_NEVER = float("inf")


def inplace(graph: Graph) -> Graph:
    """The same program with ``Graph.inplace`` filled (see the module docstring).

    Args:
        graph: the program (not modified).

    Returns:
        A new top-level :class:`Graph` sharing the nodes, with ``inplace`` (node id ->
        operand id) and the input's ``unused_feeders``.
    """
    marks: dict[int, int] = {}
    _mark(graph, {o.id for o in graph.outputs}, marks)
    return Graph(list(graph.nodes), list(graph.outputs), inplace=marks,
                 unused_feeders=graph.unused_feeders)


def _mark(g: Graph, outputs: set, marks: dict) -> None:
    index = {n.id: i for i, n in enumerate(g.nodes)}
    readers: dict[int, list[int]] = defaultdict(list)       # id -> indices of readers in g
    for i, n in enumerate(g.nodes):
        if n.op in CONTROL:
            for sub in bodies(n):          # sub-graph outputs are read after the sub-graph
                _mark(sub, {o.id for o in sub.outputs}, marks)
            reads = list(n.srcs) + captures(n)
        else:
            reads = n.srcs
        for s in reads:
            if s.id in index and (not readers[s.id] or readers[s.id][-1] != i):
                readers[s.id].append(i)
    # end of each buffer's life: its own last read or that of any view of it
    base: dict[int, int] = {}
    end: dict[int, float] = {}
    view_end: dict[int, float] = {}                    # last read through a view only
    for n in g.nodes:
        b = n.id
        if n.op in VIEWS and n.srcs[0].id in index:
            b = base[n.srcs[0].id]
        base[n.id] = b
        last = _NEVER if n.id in outputs else (readers[n.id][-1] if readers[n.id] else -1)
        end[b] = max(end.get(b, -1), last)
        if b != n.id:
            view_end[b] = max(view_end.get(b, -1), last)
    effects = [0]                                           # effects among g.nodes[:k]
    for n in g.nodes:
        effects.append(effects[-1] + (n.op in EFFECT))
    storage_end: dict[int, list] = defaultdict(list)   # var id -> 2 latest (end, node id)
    for n in g.nodes:
        if n.op in STORAGE:
            top = storage_end[n.arg.id]
            top.append((end[base[n.id]], n.id))
            top.sort(reverse=True)
            del top[2:]
    for i, n in enumerate(g.nodes):
        if n.op not in ELEMENTWISE:
            continue
        for s in dict.fromkeys(n.srcs):
            if (s.id not in index or s.shape != n.shape or s.dtype != n.dtype
                    or s.op is Op.CONST or s.op in VIEWS or base[s.id] != s.id
                    or end[s.id] != i or view_end.get(s.id, -1) == i):
                continue
            if s.op in STORAGE and not _update_of(g, i, n, s.arg, readers, storage_end, effects):
                continue
            marks[n.id] = s.id
            break


def _update_of(g: Graph, i: int, n: Node, var, readers, storage_end, effects) -> bool:
    """Whether ``n`` (at index ``i``) is read only by an ``ASSIGN`` of ``var`` that follows
    with no effect in between, and no other node holding ``var`` is read after ``n``."""
    users = readers[n.id]
    if len(users) != 1:
        return False
    j = users[0]
    a = g.nodes[j]
    if a.op is not Op.ASSIGN or a.arg is not var or a.srcs[0] is not n:
        return False
    if effects[j] - effects[i + 1]:
        return False
    return all(e <= i for e, nid in storage_end[var.id] if nid != a.id)
