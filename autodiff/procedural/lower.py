"""Lowering: graph IR -> procedural IR (one kernel per compute node, views as index algebra).

For each graph (the top level and every ``For`` body, recursively):

1. **Order.** A dependency DAG (networkx) over the graph's nodes: data edges, edges into a
   ``For`` from the values its body captures, program order between host callbacks
   (Feeders, Receivers and loops containing them), and the variable constraints below. A
   greedy list scheduler then picks, among ready nodes, the one with the smallest
   ``bytes allocated - bytes freed`` (a node frees a buffer when it is that buffer's last
   reader; views are free and go first), ties broken by program position: deterministic,
   O((N + E) log N), and it keeps live memory low for the planner.
   A ``CALLBACK`` (a host function inside the program) becomes two statements: its
   start (the operands copied to staging, :class:`~.ir.CallbackRead`) is scheduled as
   soon as its operands are ready, its finish (:class:`~.ir.CallbackWrite`, which the
   result's readers wait for) only when nothing else is ready, so that every kernel not
   needing the result runs in between (on a device that copies asynchronously, they
   overlap the copy and the host function, e.g. an all-reduce of gradients). Finishes keep
   program order among themselves (collectives must be called in the same order by every
   process).
2. **Emit.** Movement nodes (reshape, permute, expand, slice, pad, concat, window), constants,
   ``RAND`` and ``LOAD`` become *views*: functions from an index to a value expression over
   the producer's buffer. Elementwise nodes, ``DOT``, ``SUM``/``RMAX``, ``GATHER`` and
   ``SCATTER_ADD`` become one kernel each, writing a ``temp`` buffer ``t<node id>``.

Variables are updated in place. ``LOAD(v)`` reads ``v``'s buffer directly, so every kernel
reading the old value (through any chain of views) is ordered before the kernel that writes
``v``; the write is done by the kernel computing the assigned value itself (the SGD update
writes the weight) when that is its only use and it reads ``v`` at most at the index it
writes, else by a copy at the ``ASSIGN``. When those constraints would form a cycle (a value
needing both the old and the new ``v``, or a loop body capturing a ``LOAD(v)`` the loop
assigns), ``v`` falls back to snapshots: its loads copy the buffer to a temp.
"""
from __future__ import annotations

import contextlib
import gc
import heapq
import itertools
from dataclasses import dataclass
from typing import Callable

import networkx as nx

from ..graph import dtypes
from ..graph.ir import (COMPARE, CONTROL, ELEMENTWISE, MOVEMENT, Graph, Node, Op, bodies,
                        captures)
from ..opt.lower_control import lower_control
from ..opt.simplify import value_range
from .access import And, Expr, Lt, Num, flat, ge, simplify, space_vars, unflat, Var
from .ir import (Acc, Apply, Buffer, BufferKind, CallbackRead, CallbackWrite, Const, Copy,
                 DotProduct, Elementwise, FeederWrite, For, Gather, HostCall, If, IndexValue,
                 Load, Output, Program, Rand, ReceiverRead, Reduce, ScatterAdd, Select, Stmt,
                 Value, While, loads)

_KERNEL_OPS = ELEMENTWISE | {Op.DOT, Op.SUM, Op.RMAX, Op.GATHER, Op.SCATTER_ADD}
_VIEW_OPS = MOVEMENT | {Op.CONST, Op.RAND, Op.INDEX, Op.AFTER}
#: chain length the scheduler looks ahead along single readers (see ``_schedule``)
LOOKAHEAD = 4
#: the counter extent of a ``While`` without a bound (for access-expression ranges)
UNBOUNDED = 2 ** 31 - 1
_HOST = (Op.FEEDER, Op.RECEIVER, Op.CALLBACK)
#: scheduling scores of a host callback's two statements (see ``_schedule``): its start as
#: soon as its operands are ready, its finish only when nothing else is
START_SCORE, FINISH_SCORE = -(1 << 60), 1 << 60


@dataclass
class View:
    """A node's value as a function of its index: ``at(idx) -> Value``.

    ``buffer`` is set when the value is exactly a contiguous buffer of ``shape``'s size.
    """
    shape: tuple[int, ...]
    at: Callable[[list], Value]
    buffer: Buffer | None = None


def buffer_view(b: Buffer, shape) -> View:
    shape = tuple(shape)
    return View(shape, lambda idx: Load(b, flat(idx, shape)), b)


class _Out:
    """Pseudo-node: copy a top-level output value into its OUTPUT buffer."""

    def __init__(self, node: Node, k: int):
        self.node, self.id, self.op, self.srcs = node, -1 - k, None, (node,)
        self.nbytes = 0


class _Finish:
    """Pseudo-node: the :class:`~.ir.CallbackWrite` of a ``CALLBACK`` node (the node
    itself emits the :class:`~.ir.CallbackRead`); the node's readers wait for it."""

    def __init__(self, node: Node):
        self.node, self.id, self.op, self.srcs = node, -(1 << 40) - node.id, None, ()
        self.nbytes = 0


def lower(graph: Graph, **options) -> Program:
    """Lower ``graph`` (raw or optimized graph IR) to a :class:`~.ir.Program`.

    Parameters
    ----------
    graph : Graph
        The program; ``graph.outputs`` get OUTPUT buffers (``out<node id>``).
    options
        Ignored (accepted so ``compile(**options)`` can pass everything through).

    Control flow (:mod:`autodiff.opt.lower_control` runs first): ``FOR`` -> ``For``,
    ``IF`` -> ``If`` on a 1-element buffer holding the predicate, ``WHILE`` -> ``While``;
    variables made by that pass (scan carries and outputs, branch results) are ``temp``
    buffers. An ``INDEX`` is an :class:`~.ir.IndexValue` over the loop's counter; a
    ``GATHER`` of one row at such an index, provably in range, is a view (a dynamic slice);
    ``PUT`` writes its row in place; ``AFTER`` is a view ordered after its anchor.

    Returns
    -------
    Program
        Unfused: one kernel per elementwise / dot / reduce / gather / scatter node.

    Raises
    ------
    NotImplementedError
        A graph op with no lowering.
    """
    with gc_paused():
        lowered = lower_control(graph)
        prog = _Lowering(lowered).run()
    prog.graph = lowered
    if lowered is not graph:      # outputs by the caller's node ids
        prog.outputs = {o.id: prog.outputs[n.id] for o, n in zip(graph.outputs, lowered.outputs)}
    return prog


@contextlib.contextmanager
def gc_paused():
    """Pause Python's cyclic garbage collector for the block (restored after, on error too).

    Lowering and fusion allocate many small acyclic objects (expressions, kernels); the
    collector's full passes over them would make compile time grow faster than the program.
    Reference counting still frees everything; cycles wait for the next collection.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


class _Lowering:
    def __init__(self, graph: Graph):
        self.graph = graph
        self.buffers: list[Buffer] = []
        self.names: set[str] = set()
        self.params: dict[int, Buffer] = {}
        self.views: dict[int, View] = {}
        self.written: dict[int, Buffer] = {}      # node id -> buffer its kernel wrote
        self._roots: dict[int, frozenset] = {}
        self.uses: dict[int, int] = {}
        for n in graph.walk():
            for s in n.srcs:
                self.uses[s.id] = self.uses.get(s.id, 0) + 1
        for o in graph.outputs:
            self.uses[o.id] = self.uses.get(o.id, 0) + 1
        for n in graph.walk():
            for sub in bodies(n):
                for o in sub.outputs:
                    self.uses[o.id] = self.uses.get(o.id, 0) + 1
        self.outputs: dict[int, Buffer] = {}
        self.calls: dict[int, HostCall] = {}      # CALLBACK id -> call started, not finished
        self.loopvar: dict[int, Var] = {}         # loop key -> its counter
        self.index_ops = _index_values(graph)     # integer arithmetic on loop indices
        self.dynamic = _dynamic_gathers(graph, self.index_ops)   # GATHERs that are views

    # -- buffers ------------------------------------------------------------------------
    def _name(self, base: str) -> str:
        name, k = base, 1
        while name in self.names:
            name, k = f"{base}_{k}", k + 1
        self.names.add(name)
        return name

    def new_buffer(self, base, shape, dtype, kind, node=None, var=None) -> Buffer:
        b = Buffer(self._name(base), tuple(shape), dtype, kind, var, node)
        self.buffers.append(b)
        return b

    def param(self, var) -> Buffer:
        b = self.params.get(var.id)
        if b is None:
            b = self.new_buffer(var.name or f"v{var.id}", var.shape, var.dtype,
                                BufferKind.TEMP if var.transient else BufferKind.PARAM,
                                var=None if var.transient else var)
            self.params[var.id] = b
        return b

    def run(self) -> Program:
        body = self.lower_graph(self.graph, 0, top=True)
        return Program(body, self.buffers, self.outputs, "procedural")

    # -- ordering -----------------------------------------------------------------------
    def roots(self, n: Node) -> frozenset:
        """Ids of the non-view nodes whose buffers ``n``'s value reads (through views)."""
        r = self._roots.get(n.id)
        if r is None:
            if n.op in MOVEMENT:
                r = frozenset().union(*(self.roots(s) for s in n.srcs))
            elif n.op is Op.AFTER:
                r = self.roots(n.srcs[0])
            elif n.op is Op.GATHER and n.id in self.dynamic:
                r = self.roots(n.srcs[0])
            elif n.op in (Op.CONST, Op.RAND, Op.INDEX) or n.id in self.index_ops:
                r = frozenset()
            else:
                r = frozenset((n.id,))
            self._roots[n.id] = r
        return r

    def _reads(self, n) -> set:
        """Root ids read by the statement(s) node ``n`` emits (a For: all it captures)."""
        if n.op in CONTROL:
            srcs = list(n.srcs) + captures(n)
        elif self.is_view(n) or n.op in (Op.LOAD, Op.FEEDER):
            return set()
        else:
            srcs = n.srcs
        out: set = set()
        for s in srcs:
            out |= self.roots(s)
        return out

    def order(self, g: Graph, nodes: list, snap: set) -> list:
        """Nodes of ``g`` (plus output pseudo-nodes) in execution order (see module doc)."""
        pos = {n.id: i for i, n in enumerate(nodes)}
        dag = nx.DiGraph()
        dag.add_nodes_from(pos)
        for n in nodes:
            srcs = list(n.srcs) + captures(n) if n.op in CONTROL else n.srcs
            for s in srcs:
                if s.id in pos:
                    dag.add_edge(s.id, n.id)
        host = [n for n in nodes if n.op in _HOST or (n.op in CONTROL and any(
            m.op in _HOST for g in bodies(n) for m in g.walk()))]
        for a, b in zip(host, host[1:]):
            dag.add_edge(a.id, b.id)
        self._callback_edges(dag, nodes)
        for n in nodes:                          # AFTER: computed after its anchor
            if n.op is Op.AFTER and n.srcs[1].id in pos:
                dag.add_edge(n.srcs[1].id, n.id)
        readers: dict[int, list] = {}
        for n in nodes:
            for r in self._reads(n):
                readers.setdefault(r, []).append(n.id)
        tags = self._var_edges(nodes, snap, readers, pos)
        for (a, b) in tags:
            dag.add_edge(a, b)
        cyc = None if nx.is_directed_acyclic_graph(dag) else nx.find_cycle(dag)
        if cyc is not None:
            bad = set().union(*(tags.get((a, b), set()) for a, b, *_ in cyc))
            if not bad - snap:
                raise RuntimeError(f"lowering: dependency cycle not due to variables: {cyc}")
            snap |= bad
            return self.order(g, nodes, snap)
        return self._schedule(dag, nodes, pos, readers)

    def _callback_edges(self, dag, nodes) -> None:
        """A ``CALLBACK``'s readers wait for its finish, which follows its start; the
        finishes (the host functions: collectives must be called in the same order by
        every process) and loops or branches holding callbacks keep program order."""
        fin = {n.node.id: n.id for n in nodes if isinstance(n, _Finish)}
        if not fin:
            return
        by_id = {n.id: n for n in nodes}

        def reads(j, c) -> bool:
            n = by_id[j]
            return any(s.id == c for s in (list(n.srcs) + captures(n) if n.op in CONTROL
                                           else n.srcs))
        for c, f in fin.items():
            for j in list(dag.successors(c)):
                if reads(j, c):
                    dag.remove_edge(c, j)
                    dag.add_edge(f, j)
            dag.add_edge(c, f)
        calls = [fin[n.id] if n.id in fin else n.id for n in nodes
                 if n.id in fin or (n.op in CONTROL and any(
                     m.op is Op.CALLBACK for g in bodies(n) for m in g.walk()))]
        for x, y in zip(calls, calls[1:]):
            dag.add_edge(x, y)

    def _var_edges(self, nodes, snap, readers, pos) -> dict:
        """Edges ``(a, b) -> {var ids}`` ordering reads and writes of each variable."""
        tags: dict = {}

        def edge(a, b, v):           # a self-loop (a For capturing what it assigns) is a cycle
            tags.setdefault((a, b), set()).add(v)

        events: dict[int, list] = {}
        for n in nodes:
            if n.op in (Op.LOAD, Op.ASSIGN):
                events.setdefault(n.arg.id, []).append((n.op.name, n))
            elif n.op in CONTROL:
                inner = [m for g in bodies(n) for m in g.walk()]
                rd = {m.arg.id for m in inner if m.op is Op.LOAD}
                wr = {m.arg.id for m in inner if m.op is Op.ASSIGN}
                for v in rd | wr:
                    events.setdefault(v, []).append(("FOR_W" if v in wr else "FOR_R", n))
        for v, evs in events.items():
            if v in snap:
                for (_, a), (_, b) in zip(evs, evs[1:]):
                    edge(a.id, b.id, v)
                continue
            group: list = []          # alias nodes whose value is v's buffer right now
            extra: list = []          # For nodes reading v since the last write
            last_w = None
            for kind, n in evs:
                if kind == "LOAD":
                    if last_w is not None:
                        edge(last_w, n.id, v)
                    group.append(n)
                    continue
                if kind == "FOR_R":
                    if last_w is not None:
                        edge(last_w, n.id, v)
                    extra.append(n.id)
                    continue
                w = n.id
                if kind == "ASSIGN":
                    s = n.srcs[0]
                    if self._redirect(n, s, pos):
                        w = s.id
                for x in group:
                    for r in readers.get(x.id, ()):
                        if kind == "ASSIGN" and r in (w, n.id):
                            continue
                        edge(r, w, v)
                for r in extra:
                    edge(r, w, v)
                if last_w is not None:
                    edge(last_w, w, v)
                if w != n.id:
                    edge(w, n.id, v)
                last_w = n.id
                group = [n] if kind == "ASSIGN" else []
                extra = []
        return tags

    def _redirect(self, assign: Node, s: Node, pos) -> bool:
        """Whether the kernel computing ``s`` writes ``assign``'s variable directly."""
        return (s.id in pos and s.op in (ELEMENTWISE | {Op.DOT, Op.SUM, Op.RMAX, Op.PUT})
                and self.uses.get(s.id, 0) == 1)

    def _writes_variable(self, n, pos) -> bool:
        """Whether ``n``'s kernel writes the variable its only reader assigns (no temp)."""
        return any(a.id in pos and self._redirect(a, n, pos) for a in self._assign_of(n))

    def is_view(self, n) -> bool:
        """Whether node ``n`` lowers to a view (index arithmetic, no statement)."""
        return n.op in _VIEW_OPS or n.id in self.dynamic or n.id in self.index_ops

    def _schedule(self, dag, nodes, pos, readers) -> list:
        by_id = {n.id: n for n in nodes}
        indeg = {i: dag.in_degree(i) for i in dag.nodes}
        left = {r: len(ids) for r, ids in readers.items()}
        size = {n.id: (n.nbytes if (n.op in _KERNEL_OPS or n.op is Op.FEEDER)
                       and not self.is_view(n) and not self._writes_variable(n, pos)
                       else 0) for n in nodes}
        reads = {n.id: self._reads(n) for n in nodes}

        def own(i):
            n = by_id[i]
            if self.is_view(n) or n.op is Op.LOAD:
                return -(1 << 62)
            if n.op is Op.CALLBACK:
                return START_SCORE
            if isinstance(n, _Finish):
                return FINISH_SCORE
            freed = sum(size.get(r, 0) for r in reads[i] if left.get(r, 0) == 1)
            return size[i] - freed

        def ready_after(j, i) -> bool:
            """Whether ``j`` waits only for ``i`` (directly or through views of it)."""
            waits = [p for p in dag.pred[j] if p in indeg and (p in current or indeg[p])]
            return all(p == i or (self.is_view(by_id[p]) and indeg[p] == 1
                                  and i in dag.pred[p]) for p in waits) and bool(waits)

        chains: dict = {}         # node -> the readers it was scored with (see score)
        urgent: set = set()       # chain members: run as soon as they are ready

        def score(i):
            """Bytes allocated minus bytes freed by running ``i``, or by ``i`` and the chain
            of single readers it alone makes ready (a weight gradient, its scaling, the
            update writing the weight: :data:`LOOKAHEAD` nodes at most), the smallest. A
            node scored with a chain commits to it: the chain runs right after."""
            if i in urgent:
                return -(1 << 61)
            best = total = own(i)
            chain, k, cur = [], 0, i
            while total > 0 and k < LOOKAHEAD:
                users = readers.get(cur, ())
                if len(users) != 1 or users[0] not in by_id:
                    break
                j = users[0]
                if not ready_after(j, cur):
                    break
                total += size[j] - sum(size.get(r, 0) for r in reads[j]
                                       if r == cur or left.get(r, 0) == 1)
                chain.append(j)
                if total < best:
                    best, chains[i] = total, list(chain)
                cur, k = j, k + 1
            if best == own(i):
                chains.pop(i, None)
            return best

        current = {}
        heap = []

        def push(i):
            current[i] = score(i)
            heapq.heappush(heap, (current[i], pos[i], i))

        for i in dag.nodes:
            if indeg[i] == 0:
                push(i)
        out = []
        while heap:
            sc, _, i = heapq.heappop(heap)
            if current.get(i) != sc or i not in current:
                continue
            del current[i]
            out.append(by_id[i])
            for j in chains.pop(i, ()):
                urgent.add(j)
                for p in dag.pred[j]:           # the views between chain members too
                    if self.is_view(by_id[p]) if p in by_id else False:
                        urgent.add(p)
            for r in reads[i]:
                left[r] -= 1
                if left[r] == 1:
                    for j in readers[r]:
                        if j in current:
                            push(j)
            for j in dag.successors(i):
                indeg[j] -= 1
                if indeg[j] == 0:
                    push(j)
        if len(out) != len(nodes):
            raise RuntimeError("lowering: scheduler left nodes unscheduled")
        return out

    # -- emission -----------------------------------------------------------------------
    def lower_graph(self, g: Graph, depth: int, top: bool = False) -> list[Stmt]:
        nodes: list = list(g.nodes)
        if top:
            nodes += [_Out(o, k) for k, o in enumerate(g.outputs)]
        nodes += [_Finish(n) for n in g.nodes if n.op is Op.CALLBACK]
        snap: set = set()
        ordered = self.order(g, nodes, snap)
        pos = {n.id: i for i, n in enumerate(nodes)}
        out: list[Stmt] = []
        for n in ordered:
            self.snap_vars, self.pos = snap, pos
            self.emit(n, out, depth)
        return out

    def emit(self, n, out: list, depth: int) -> None:
        if isinstance(n, _Finish):
            call = self.calls.pop(n.node.id)
            out.append(CallbackWrite(call))
            self.views[n.node.id] = buffer_view(call.result, n.node.shape)
            return
        if isinstance(n, _Out):
            v = self.views[n.node.id]
            b = self.new_buffer(f"out{n.node.id}", n.node.shape, n.node.dtype,
                                BufferKind.OUTPUT, node=n.node.id)
            self.outputs[n.node.id] = b
            if n.node.size:
                out.append(self.copy_kernel(v, b))
            return
        if n.op in _KERNEL_OPS and self._empty(n, out):
            return
        op = n.op
        if op in MOVEMENT and n.size == 0:          # no element is ever read
            zero = Const(dtypes.check_scalar(0, n.dtype), n.dtype)
            self.views[n.id] = View(n.shape, lambda idx, c=zero: c)
        elif op in MOVEMENT:
            self.views[n.id] = self.movement(n)
        elif op is Op.CONST:
            val = n.arg
            self.views[n.id] = View(n.shape, lambda idx, c=Const(val, n.dtype): c)
        elif op is Op.RAND:
            self.views[n.id] = View(n.shape, lambda idx, n=n: Rand(n.arg, flat(idx, n.shape),
                                                                   n.shape))
        elif op is Op.LOAD:
            b = self.param(n.arg)
            if n.arg.id in self.snap_vars:
                t = self.new_buffer(f"t{n.id}", n.shape, n.dtype, BufferKind.TEMP, n.id)
                out.append(Copy(b, t))
                self.views[n.id] = buffer_view(t, n.shape)
            else:
                self.views[n.id] = buffer_view(b, n.shape)
        elif op is Op.FEEDER:
            b = self.new_buffer(n.arg.name, n.shape, n.dtype, BufferKind.FEEDER, n.id)
            out.append(FeederWrite(n.arg, b))
            self.views[n.id] = buffer_view(b, n.shape)
        elif n.id in self.index_ops and op is not Op.INDEX:
            self.views[n.id] = View((), lambda idx, c=self.index_value(n): c)
        elif op in ELEMENTWISE or op in (Op.DOT, Op.SUM, Op.RMAX):
            self.compute(n, out)
        elif op is Op.INDEX:
            e = simplify(Num(n.arg.start) + self.loopvar[n.arg.key] * n.arg.step)
            self.views[n.id] = View((), lambda idx, c=IndexValue(e): c)
        elif op is Op.AFTER:
            self.views[n.id] = self.views[n.srcs[0].id]
        elif op is Op.GATHER and n.id in self.dynamic:
            tv, e = self.views[n.srcs[0].id], self.views[n.srcs[1].id].at([]).expr
            self.views[n.id] = View(n.shape, lambda idx: tv.at([e] + list(idx)))
        elif op is Op.PUT:
            self.put(n, out)
        elif op is Op.GATHER:
            table, idx = (self.materialize(s, out) for s in n.srcs)
            t = self.temp(n)
            out.append(Gather(t, table, idx))
        elif op is Op.SCATTER_ADD:
            upd, idx = (self.materialize(s, out) for s in n.srcs)
            t = self.temp(n)
            out.append(ScatterAdd(t, upd, idx))
        elif op is Op.ASSIGN:
            self.assign(n, out)
        elif op is Op.RECEIVER:
            bufs = []
            for s in n.srcs:
                b = self.new_buffer(f"{n.arg.name}_{len(bufs)}" if len(n.srcs) > 1
                                    else n.arg.name, s.shape, s.dtype, BufferKind.RECEIVER,
                                    s.id)
                if s.size:
                    out.append(self.copy_kernel(self.views[s.id], b))
                bufs.append(b)
            out.append(ReceiverRead(n.arg, tuple(bufs)))
        elif op is Op.CALLBACK:
            name, args = n.arg.name, []
            for k, s in enumerate(n.srcs):
                b = self.new_buffer(f"{name}_arg{k}", s.shape, s.dtype, BufferKind.RECEIVER,
                                    s.id)
                out.append(self.copy_kernel(self.views[s.id], b))
                args.append(b)
            res = self.new_buffer(name, n.shape, n.dtype, BufferKind.FEEDER, n.id)
            self.calls[n.id] = HostCall(n.arg, tuple(args), res, n.id)
            out.append(CallbackRead(self.calls[n.id]))
        elif op is Op.FOR:
            if n.arg.index is not None:
                self.loopvar[n.arg.index] = Var(f"i{depth}", max(1, len(n.arg.range)))
            saved = (self.snap_vars, self.pos)
            body = self.lower_graph(n.arg.body, depth + 1)
            self.snap_vars, self.pos = saved
            out.append(For(n.arg.range, body, f"i{depth}"))
        elif op is Op.IF and isinstance(c := self.views[n.srcs[0].id].at(
                [0] * len(n.srcs[0].shape)), Const):
            # a condition the graph passes decided (``(i + 1) % 100 == 0`` over a range of
            # 20): the taken block in line, the other one never lowered nor compiled
            saved = (self.snap_vars, self.pos)
            out.extend(self.lower_graph(n.arg.then if c.value else n.arg.orelse, depth))
            self.snap_vars, self.pos = saved
        elif op is Op.IF:
            cond = self.predicate(n.srcs[0], out)
            saved = (self.snap_vars, self.pos)
            then = self.lower_graph(n.arg.then, depth)
            orelse = self.lower_graph(n.arg.orelse, depth)
            self.snap_vars, self.pos = saved
            out.append(If(cond, then, orelse))
        elif op is Op.WHILE:
            a = n.arg
            bound = UNBOUNDED if a.max_iterations is None else max(1, a.max_iterations)
            self.loopvar[a.index] = Var(f"i{depth}", bound)
            saved = (self.snap_vars, self.pos)
            cond = self.lower_graph(a.cond, depth + 1)
            pred = self.predicate(a.cond.outputs[0], cond)
            body = self.lower_graph(a.body, depth + 1)
            self.snap_vars, self.pos = saved
            out.append(While(cond, pred, body, a.max_iterations, f"i{depth}"))
        else:
            raise NotImplementedError(f"lowering: no rule for {op.name}")

    def index_value(self, n: Node) -> IndexValue:
        """The access expression of an integer op on loop indices and constants."""
        e = []
        for s in n.srcs:
            v = self.views[s.id].at([])
            e.append(v.expr if isinstance(v, IndexValue) else Num(int(v.value)))
        a, b = (e + [None, None])[:2]
        expr = {Op.ADD: lambda: a + b, Op.SUB: lambda: a - b, Op.MUL: lambda: a * b,
                Op.NEG: lambda: -a, Op.MOD: lambda: a % b, Op.FLOORDIV: lambda: a // b,
                Op.CMPLT: lambda: Lt(a, b), Op.CMPLE: lambda: Lt(a, b + 1),
                Op.CMPGT: lambda: Lt(b, a), Op.CMPGE: lambda: Lt(b, a + 1),
                Op.CMPEQ: lambda: And(Lt(a, b + 1), Lt(b, a + 1)),
                Op.CMPNE: lambda: 1 - And(Lt(a, b + 1), Lt(b, a + 1)),
                Op.CAST: lambda: a}[n.op]()
        return IndexValue(simplify(expr), n.dtype)

    def _empty(self, n: Node, out: list) -> bool:
        """Zero-size cases, which get no loop over an empty space: an empty result gets its
        (empty) buffer and no kernel; a reduction, contraction or scatter of nothing into
        a non-empty result is a fill with the identity. Returns whether ``n`` was handled."""
        empty_in = (n.op in (Op.SUM, Op.RMAX) and n.srcs[0].size == 0) or \
            (n.op is Op.DOT and n.srcs[0].shape[-1] == 0) or \
            (n.op is Op.SCATTER_ADD and n.srcs[0].size == 0)
        if n.size and not empty_in:
            return False
        t = self.temp(n)
        if n.size:
            fill = 0
            if n.op is Op.RMAX:
                fill = -float("inf") if dtypes.is_floating(n.dtype) else \
                    (False if dtypes.name(n.dtype) == "bool" else dtypes.INT32_MIN)
            vars_ = space_vars(n.shape)
            out.append(Elementwise(n.shape, vars_, (Output(
                t, flat(vars_, n.shape), Const(dtypes.check_scalar(fill, n.dtype),
                                               n.dtype)),)))
        return True

    def predicate(self, s: Node, out: list):
        """Predicate ``s`` as an :class:`IndexValue` (a condition on loop counters, which
        the host can evaluate), else a 1-element buffer nothing else writes (a kernel's
        result, else a copy: a variable's buffer could be assigned in the branch)."""
        v = self.views[s.id]
        iv = v.at([0] * len(s.shape))
        if isinstance(iv, IndexValue):
            return iv
        if v.buffer is not None and v.buffer.size == 1 and v.buffer.kind is BufferKind.TEMP \
                and v.buffer not in self.params.values():
            return v.buffer
        t = self.new_buffer(f"t{s.id}", s.shape, s.dtype, BufferKind.TEMP, s.id)
        out.append(self.copy_kernel(v, t))
        return t

    def put(self, n: Node, out: list) -> None:
        """``PUT(base, row, t)``: the row written at index ``t`` (an :class:`IndexValue`) of
        the assigned variable's buffer, in place (else of a copy of ``base``)."""
        base, row, idx = n.srcs
        dst, inplace = self.target(n)
        if not inplace or self.views[base.id].buffer is not dst:
            dst, inplace = self.temp(n), False
            out.append(self.copy_kernel(self.views[base.id], dst))
        iv = self.views[idx.id].at([])
        if not isinstance(iv, IndexValue):
            raise NotImplementedError("lowering: PUT needs a loop index as its row")
        vars_ = space_vars(row.shape)
        index = simplify(iv.expr * row.size + flat(vars_, row.shape))
        out.append(Elementwise(row.shape, vars_, (Output(dst, index,
                                                         self.views[row.id].at(list(vars_))),)))
        if inplace:
            self.written[n.id] = dst
            self.views[n.id] = buffer_view(dst, n.shape)

    def temp(self, n: Node) -> Buffer:
        t = self.new_buffer(f"t{n.id}", n.shape, n.dtype, BufferKind.TEMP, n.id)
        self.views[n.id] = buffer_view(t, n.shape)
        self.written[n.id] = t
        return t

    def target(self, n: Node) -> tuple[Buffer, bool]:
        """The buffer ``n``'s kernel writes: its assigned variable's, or a fresh temp."""
        for a in self._assign_of(n):
            if a.id in self.pos and a.arg.id not in self.snap_vars \
                    and self._redirect(a, n, self.pos):
                return self.param(a.arg), True
        return None, False

    def _assign_of(self, n: Node):
        if self.uses.get(n.id, 0) != 1:
            return []
        for m in self._consumers_in_graph(n):
            if m.op is Op.ASSIGN:
                return [m]
        return []

    def _consumers_in_graph(self, n):
        # the unique consumer of n is in the same graph when redirect applies; find it lazily
        if not hasattr(self, "_cons"):
            self._cons = {}
            for m in self.graph.walk():
                for s in m.srcs:
                    self._cons.setdefault(s.id, []).append(m)
        return self._cons.get(n.id, [])

    def compute(self, n: Node, out: list) -> None:
        vars_ = space_vars(n.shape)
        dst, inplace = self.target(n)
        if n.op in ELEMENTWISE:
            args = tuple(self.views[s.id].at(list(vars_)) for s in n.srcs)
            value = Apply(n.op, args, n.dtype, n.arg if n.op is Op.CAST else None)
            idx = flat(vars_, n.shape)
            if inplace and not _safe_inplace([value], dst, idx):
                inplace = False
            buf = dst if inplace else self.temp(n)
            out.append(Elementwise(n.shape, vars_, (Output(buf, idx, value),)))
        elif n.op is Op.DOT:
            a, b = (self.views[s.id] for s in n.srcs)
            k = Var("K", a.shape[-1])
            av = a.at(list(vars_[:-1]) + [k])
            bv = b.at(list(vars_[:-2]) + [k, vars_[-1]])
            if inplace and any(ld.buffer is dst for v in (av, bv) for ld in loads(v)):
                inplace = False
            buf = dst if inplace else self.temp(n)
            out.append(DotProduct(n.shape, vars_, k, av, bv,
                                  (Output(buf, flat(vars_, n.shape), Acc(n.dtype)),)))
        else:
            x = self.views[n.srcs[0].id]
            axes = tuple(n.arg)
            xv = tuple(Var("R" + v.name, v.extent) if i in axes else v
                       for i, v in enumerate(space_vars(x.shape)))
            src = x.at(list(xv))
            if inplace and any(ld.buffer is dst for ld in loads(src)):
                inplace = False
            buf = dst if inplace else self.temp(n)
            oidx = flat([Num(0) if i in axes else v for i, v in enumerate(xv)], n.shape)
            out.append(Reduce(n.op, x.shape, xv, axes, src, (Output(buf, oidx, Acc(n.dtype)),)))
        if inplace:
            self.written[n.id] = dst
            self.views[n.id] = buffer_view(dst, n.shape)

    def assign(self, n: Node, out: list) -> None:
        var = n.arg
        p = self.param(var)
        s = n.srcs[0]
        src = self.views[s.id]
        if self.written.get(s.id) is p:
            pass                                   # the value's kernel wrote v already
        elif src.buffer is p:
            pass                                   # v = v
        elif var.id in self.snap_vars:
            t = src.buffer if (src.buffer is not None and src.buffer.kind in
                               (BufferKind.TEMP, BufferKind.FEEDER)) else None
            if t is None:
                t = self.new_buffer(f"t{n.id}", n.shape, n.dtype, BufferKind.TEMP, n.id)
                out.append(self.copy_kernel(src, t))
            out.append(Copy(t, p))
            self.views[n.id] = buffer_view(t, n.shape)
            return
        elif src.buffer is not None and src.buffer.kind is not BufferKind.PARAM:
            out.append(Copy(src.buffer, p))
        else:
            k = self.copy_kernel(src, p)
            if _safe_inplace([k.outs[0].value], p, k.outs[0].index):
                out.append(k)
            else:
                t = self.new_buffer(f"t{n.id}", n.shape, n.dtype, BufferKind.TEMP, n.id)
                out.append(self.copy_kernel(src, t))
                out.append(Copy(t, p))
        self.views[n.id] = buffer_view(p, n.shape)

    def copy_kernel(self, v: View, dst: Buffer) -> Elementwise:
        """An elementwise kernel writing view ``v`` into ``dst`` (row-major)."""
        vars_ = space_vars(v.shape)
        return Elementwise(v.shape, vars_, (Output(dst, flat(vars_, v.shape),
                                                   v.at(list(vars_))),))

    def materialize(self, s: Node, out: list) -> Buffer:
        """A contiguous buffer of ``s``'s shape holding its value (else a copy kernel)."""
        v = self.views[s.id]
        if v.buffer is not None and v.buffer.shape == tuple(s.shape):
            return v.buffer
        t = self.new_buffer(f"t{s.id}", s.shape, s.dtype, BufferKind.TEMP, s.id)
        out.append(self.copy_kernel(v, t))
        return t

    # -- views --------------------------------------------------------------------------
    def movement(self, n: Node) -> View:
        x = self.views[n.srcs[0].id]
        op, arg, shape = n.op, n.arg, tuple(n.shape)
        if op is Op.RESHAPE:
            if x.buffer is not None:
                return buffer_view(x.buffer, shape)
            return View(shape, lambda idx: x.at(unflat(flat(idx, shape), x.shape)))
        if op is Op.PERMUTE:
            inv = [0] * len(arg)
            for i, p in enumerate(arg):
                inv[p] = i
            return View(shape, lambda idx: x.at([idx[inv[d]] for d in range(len(arg))]))
        if op is Op.EXPAND:
            return View(shape, lambda idx: x.at([Num(0) if d == 1 and e != 1 else i
                                                 for i, d, e in zip(idx, x.shape, shape)]))
        if op is Op.SLICE:
            return View(shape, lambda idx: x.at([simplify(i * s + a) if (a or s != 1) else i
                                                 for i, (a, _, s) in zip(idx, arg)]))
        if op is Op.PAD:
            def at(idx):
                cond: Expr | None = None
                src = []
                for i, (b, e), d in zip(idx, arg, x.shape):
                    src.append(simplify(i - b) if b else i)
                    if b or e:
                        c = And(ge(i, b), Lt(i, Num(b + d)))
                        cond = c if cond is None else And(cond, c)
                inner = x.at(src)
                if cond is None:
                    return inner
                cond = simplify(cond)
                if cond == Num(1):
                    return inner
                zero = dtypes.check_scalar(0, n.dtype)
                return Select(cond, inner, Const(zero, n.dtype))
            return View(shape, at)
        if op is Op.WINDOW:
            dim, size, step, dil = arg

            def at(idx):
                src = list(idx[:-1])
                src[dim] = simplify(idx[dim] * step + idx[-1] * dil)
                return x.at(src)
            return View(shape, at)
        if op is Op.CONCAT:
            parts = [self.views[s.id] for s in n.srcs]
            offs = list(itertools.accumulate([p.shape[arg] for p in parts]))

            def part(idx, j):
                lo = offs[j - 1] if j else 0
                sub = list(idx)
                sub[arg] = simplify(idx[arg] - lo) if lo else idx[arg]
                return parts[j].at(sub)

            def pick(idx, a, b):
                """Parts ``a..b-1`` as a balanced tree of selects: the nesting of the
                rendered expression grows with log2 of the number of parts (C compilers
                limit bracket nesting: 256 in clang)."""
                if b - a == 1:
                    return part(idx, a)
                m = (a + b) // 2
                c = simplify(Lt(idx[arg], Num(offs[m - 1])))
                if c == Num(1):
                    return pick(idx, a, m)
                if c == Num(0):
                    return pick(idx, m, b)
                return Select(c, pick(idx, a, m), pick(idx, m, b))
            return View(shape, lambda idx: pick(idx, 0, len(parts)))
        raise NotImplementedError(f"lowering: no view rule for {op.name}")


_INDEX_OPS = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.NEG, Op.MOD, Op.FLOORDIV,
                        Op.CAST}) | COMPARE
_INTEGER = frozenset({"int32", "int64", "bool"})


def _index_values(graph: Graph) -> set[int]:
    """Ids of the 0-d integer (or bool) nodes computed from loop indices and integer
    constants by ``+ - *``, ``//`` and ``%`` by a positive constant (of a value known not to
    be negative), and comparisons: each lowers to an access expression over the loop
    counters (an :class:`IndexValue`), no kernel."""
    ok: set[int] = set()

    def operand(s: Node) -> bool:
        return s.shape == () and s.dtype in _INTEGER and (
            s.id in ok or (s.op is Op.CONST and float(s.arg).is_integer()))

    for n in graph.walk():
        if n.shape != () or n.dtype not in _INTEGER:
            continue
        if n.op is Op.INDEX:
            ok.add(n.id)
        elif n.op in _INDEX_OPS and all(operand(s) for s in n.srcs) and any(
                s.id in ok for s in n.srcs):
            if n.op in (Op.MOD, Op.FLOORDIV) and not (
                    n.srcs[1].op is Op.CONST and n.srcs[1].arg > 0
                    and (value_range(n.srcs[0]) or (-1, 0))[0] >= 0):
                continue                      # (C's / and % floor only from 0 up)
            if n.op is Op.MUL and not any(s.op is Op.CONST for s in n.srcs):
                continue
            if n.op is Op.CAST and n.dtype == "bool" and n.srcs[0].dtype != "bool":
                continue
            ok.add(n.id)
    return ok


def _dynamic_gathers(graph: Graph, index_ops: set) -> set[int]:
    """Ids of the ``GATHER`` s of one row at an index computed from loop indices whose
    every value is a row of the table: they lower to views (dynamic slices)."""
    out = set()
    for n in graph.walk():
        idx = n.srcs[1] if n.op is Op.GATHER else None
        if idx is not None and idx.shape == () and (idx.op is Op.INDEX or idx.id in index_ops):
            b = value_range(idx)
            if b is not None and 0 <= b[0] and b[1] < n.srcs[0].shape[0]:
                out.add(n.id)
    return out


def _safe_inplace(values: list[Value], buf: Buffer, index: Expr) -> bool:
    """Whether every load of ``buf`` in ``values`` is at exactly ``index`` (same work item)."""
    return all(ld.index == index for v in values for ld in loads(v) if ld.buffer is buf)
