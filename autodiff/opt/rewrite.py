"""Graph rewriting shared by the passes: rule patterns, rule tables and the rebuild walk.

A rule is a ``(Pat, fn)`` pair, tinygrad's ``PatternMatcher`` in small: the pattern says
what a node must look like, ``fn(ctx, **bound)`` builds the replacement from the named
parts (or returns ``None``: no match after all). :func:`rebuild` walks a graph in program
order, loop bodies included, and gives every node, with its operands already rewritten, to
a ``visit`` function that returns the node itself or its replacement. Nothing is mutated:
a node whose operands changed is copied with :meth:`Node.replace`.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from ..graph.ir import CONTROL, EFFECT, Graph, Node, Op, bodies, with_bodies

_ANY = object()


@dataclass(frozen=True, eq=False)
class Pat:
    """A node pattern.

    Attributes:
        op: an :class:`Op`, a set of ops, or ``None`` for any op.
        srcs: ``None`` (operands not looked at), a tuple with one pattern per operand, or a
            single pattern every operand must match.
        name: bind the matched node to this name; a name used twice must bind one node.
        arg: the node's ``arg`` must equal this (when given).
        pred: ``pred(node) -> bool``, a further test.
        commutative: with two operand patterns, also try the operands swapped.
    """
    op: Any = None
    srcs: Any = None
    name: str | None = None
    arg: Any = _ANY
    pred: Callable[[Node], bool] | None = None
    commutative: bool = False

    def match(self, n: Node, bound: dict) -> Iterator[dict]:
        """Every binding (name -> node) under which ``n`` matches, extending ``bound``."""
        if self.op is not None and (n.op not in self.op if isinstance(self.op, frozenset)
                                    else n.op is not self.op):
            return
        if self.arg is not _ANY and n.arg != self.arg:
            return
        if self.pred is not None and not self.pred(n):
            return
        if self.name is not None:
            if self.name in bound:
                if bound[self.name] is not n:
                    return
            else:
                bound = {**bound, self.name: n}
        if self.srcs is None:
            yield bound
        elif isinstance(self.srcs, Pat):
            yield from _match_seq((self.srcs,) * len(n.srcs), n.srcs, bound)
        elif len(self.srcs) == len(n.srcs):
            yield from _match_seq(self.srcs, n.srcs, bound)
            if self.commutative and len(n.srcs) == 2 and n.srcs[0] is not n.srcs[1]:
                yield from _match_seq(self.srcs, n.srcs[::-1], bound)


def _match_seq(pats, nodes, bound) -> Iterator[dict]:
    if not pats:
        yield bound
        return
    for b in pats[0].match(nodes[0], bound):
        yield from _match_seq(pats[1:], nodes[1:], b)


def var(name: str, pred=None) -> Pat:
    """Any node, bound to ``name``."""
    return Pat(name=name, pred=pred)


def cvar(name: str, pred=None) -> Pat:
    """A ``CONST`` node, bound to ``name``."""
    return Pat(Op.CONST, name=name, pred=pred)


def const(value: float) -> Pat:
    """A ``CONST`` node holding exactly ``value`` (``-0.0`` and ``0.0`` differ)."""
    return Pat(Op.CONST, pred=lambda n: same_value(n.arg, value))


def same_value(a, b) -> bool:
    """``a`` and ``b`` are the same number, sign of zero included, NaN equal to NaN."""
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


class PatternMatcher:
    """A table of ``(Pat, fn)`` rules, indexed by the root op.

    :meth:`rewrite` tries the rules for the node's op in table order and returns the first
    replacement. Rules whose root pattern names no op are tried for every node.
    """

    def __init__(self, rules) -> None:
        self.rules = list(rules)
        self._by_op: dict = defaultdict(list)
        for pat, fn in self.rules:
            ops = (set(Op) if pat.op is None else
                   pat.op if isinstance(pat.op, frozenset) else {pat.op})
            for op in ops:
                self._by_op[op].append((pat, fn))

    def __add__(self, other: "PatternMatcher") -> "PatternMatcher":
        return PatternMatcher(self.rules + other.rules)

    def rewrite(self, n: Node, ctx: Any = None) -> Node | None:
        """The replacement of ``n`` by the first rule that fires, or ``None``."""
        for pat, fn in self._by_op.get(n.op, ()):
            for bound in pat.match(n, {}):
                r = fn(ctx, **bound)
                if r is not None:
                    return r
        return None


def readers(graph: Graph) -> Counter:
    """Node id -> number of reads, sub-graphs included: as an operand or as a sub-graph's
    output; a program output counts twice (a rule that rewrites a node read once never
    takes it). O(nodes + edges)."""
    reads: Counter = Counter()
    for n in graph.walk():
        reads.update(s.id for s in n.srcs)
        for sub in bodies(n):
            reads.update(o.id for o in sub.outputs)
    reads.update(2 * [o.id for o in graph.outputs])
    return reads


def rebuild(graph: Graph, visit: Callable[[Node], Node], enter_loop=None, leave_loop=None,
            max_steps: int = 64) -> Graph:
    """A new graph with every node replaced by ``visit(node)``, in program order.

    ``visit`` sees each node with its operands already rewritten and returns the node
    itself, a node already in the new graph (the node is then dropped and its users read
    that one), or a new node (whose new operands are placed first and visited too; the
    result is visited again, at most ``max_steps`` times). Effects (``ASSIGN``,
    ``RECEIVER``, ``FEEDER``) must be returned unchanged, so their program order stays.
    ``enter_loop(node)`` / ``leave_loop(node)`` are called around each sub-graph of a
    control node (a loop body, each branch of an ``IF``, a ``WHILE``'s condition and body);
    sub-graph outputs are mapped like the nodes.
    ``outputs`` keep their positions. Side table ``inplace`` is dropped (node ids change);
    ``unused_feeders`` is kept (rewriting never makes a Feeder read).

    Complexity: O(nodes + edges) visits plus the nodes ``visit`` creates.

    Raises:
        AssertionError: ``visit`` changed an effect, or a node's shape or dtype.
    """
    mapped: dict[int, Node] = {}
    placed: set[int] = set()

    def place(n: Node, out: list) -> Node:
        if n.id in placed:
            return n
        n = _with_srcs(n, tuple(place(s, out) for s in n.srcs))
        for _ in range(max_steps):
            r = visit(n)
            if r is n:
                break
            if n.op in EFFECT or r.shape != n.shape or r.dtype != n.dtype:
                raise AssertionError(f"rewrite of {n} gave {r}")
            if r.id in placed:
                return r
            n = _with_srcs(r, tuple(place(s, out) for s in r.srcs))
        out.append(n)
        placed.add(n.id)
        return n

    def walk(g: Graph) -> list[Node]:
        out: list[Node] = []
        for n in g.nodes:
            if n.op in CONTROL:
                subs, changed = [], False
                for sub in n.arg.graphs():
                    if enter_loop is not None:
                        enter_loop(n)
                    body = walk(sub)
                    if leave_loop is not None:
                        leave_loop(n)
                    outs = [mapped.get(o.id, o) for o in sub.outputs]
                    changed |= (len(body) != len(sub.nodes)
                                or any(a is not b for a, b in zip(body, sub.nodes))
                                or any(a is not b for a, b in zip(outs, sub.outputs)))
                    subs.append(Graph(body, outs))
                srcs = tuple(mapped.get(s.id, s) for s in n.srcs)
                n2 = n
                if changed:
                    n2 = with_bodies(n, subs)
                if any(a is not b for a, b in zip(srcs, n.srcs)):
                    n2 = n2.replace(srcs=srcs)
                out.append(n2)
                placed.add(n2.id)
                mapped[n.id] = n2
                continue
            n2 = _with_srcs(n, tuple(mapped.get(s.id, s) for s in n.srcs))
            mapped[n.id] = place(n2, out)
        return out

    nodes = walk(graph)
    return Graph(nodes, [mapped.get(o.id, o) for o in graph.outputs],
                 unused_feeders=graph.unused_feeders)


def _with_srcs(n: Node, srcs: tuple) -> Node:
    if len(srcs) == len(n.srcs) and all(a is b for a, b in zip(srcs, n.srcs)):
        return n
    return n.replace(srcs=srcs)
