"""Executor of the procedural IR with numpy: checks lowering and fusion without OpenCL.

Every buffer is a flat numpy array. Access expressions are evaluated once, at compile time,
into index arrays over the kernel's work items (one entry per work item); a kernel run is
then numpy gathers (``buf[idx]``), the interpreter's elementwise functions, ``np.matmul`` /
``np.sum`` / ``np.max`` for the accumulator, and scatters of the results
(``buf[idx] = value``). Loads whose index array is the identity read the buffer directly.
A :class:`~autodiff.procedural.ir.FusedKernel` runs as its single-kernel form by default
(``outs`` in order, :class:`~autodiff.procedural.ir.Local` values kept in a dict, stores
after all loads); ``by_member=True`` runs its members op by op instead.

With ``offsets`` (buffer -> byte offset, from the memory planner: temps and Feeder/Receiver
staging) every such buffer is a view into one flat byte arena, so two simultaneously live
buffers that overlap give wrong numbers. Parameters and outputs are always separate arrays.
"""
from __future__ import annotations

import numpy as np

from ...graph.ir import Op
from ...procedural.access import evaluate, variables
from ...procedural.ir import (Acc, Apply, BufferKind, CallbackRead, CallbackWrite, Const, Copy,
                              DotProduct, Elementwise, FeederWrite, For, FusedKernel, Gather,
                              If, IndexValue, Load, Local, Program, Rand, ReceiverRead, Reduce,
                              ScatterAdd, Select, While)
from .. import empty
from ..host import (FeedAhead, Progress, call_callback, call_feeder, call_receiver,
                    check_indices, check_memory, deferred_interrupts, prefetch_option,
                    safe_indices)
from ...graph import dtypes
from ...graph.reference import _gather, _scatter_add, kernel

_IDX = np.int64


class _OpNode:
    """What :func:`~autodiff.graph.reference.kernel` reads from a node: op, dtype, arg."""

    def __init__(self, op, dtype, arg):
        self.op, self.dtype, self.arg = op, dtype, arg


def _grid(shape, vars_) -> dict:
    """Var -> int index array over all points of ``shape`` (row-major), one entry each."""
    n = int(np.prod(shape, dtype=np.int64))
    env = {}
    rest = np.arange(n, dtype=_IDX)
    for d, v in zip(reversed(shape), reversed(vars_)):
        env[v] = rest % d
        rest = rest // d
    return env


class ProceduralExecutor:
    """A compiled procedural program: ``run(store)`` executes it.

    Parameters
    ----------
    program : Program
        The program to run (unfused or fused).
    stages : dict
        Listings kept for ``print_graph`` (``{"procedural": ..., "fused": ...}``).
    offsets : dict, optional
        TEMP :class:`~autodiff.procedural.ir.Buffer` -> byte offset into one arena (bytes,
        aligned to the buffer's itemsize). TEMP buffers missing from it get their own array.
    by_member : bool
        Run fused groups op by op (their members) instead of as one kernel.
    nodes : dict, optional
        Graph node id -> node: index-checked statements name their op and user line.
    sites : iterable of str
        The ``file:line`` of the graph's loops in the order of the program's ``For``
        statements (pre-order; error messages).
    prefetch : int or None
        ``execute()``'s order contract (:mod:`autodiff.device.host`).

    Attributes
    ----------
    vals : dict
        Graph node id -> numpy array (``graph.outputs`` values) after :meth:`run`.
    stages : dict
        As given.
    """

    def __init__(self, program: Program, stages: dict | None = None, offsets: dict | None = None,
                 by_member: bool = False, nodes: dict | None = None,
                 sites=(), prefetch: int | None = None):
        self.program = program
        self.stages = stages or {}
        self.by_member = by_member
        self.nodes = nodes or {}             # graph node id -> node (index-error messages)
        self._sites = iter(sites)            # the loops' sites, pre-order
        self.prefetch = prefetch_option(prefetch)
        self.progress = Progress()
        self._feeds: dict | None = None
        self.vals: dict[int, np.ndarray] = {}
        self.iters: list[int] = []
        self.counters: dict[str, int] = {}    # loop counter name -> current iteration
        self.mem: dict[int, np.ndarray] = {}
        self.taken: dict[int, list] = {}      # HostCall -> operand values read, not written
        self.arena = None
        if offsets:
            end = max((off + b.nbytes for b, off in offsets.items()), default=0)
            self.arena = np.zeros(end, dtype=np.uint8)
            for b, off in offsets.items():
                if off % b.itemsize:
                    raise ValueError(f"offset {off} of {b.name} is not aligned to "
                                     f"{b.itemsize} bytes")
                self.mem[id(b)] = self.arena[off:off + b.nbytes].view(dtypes.storage(b.dtype))
        self._internal: set = set()
        self.params = []
        for b in program.buffers:
            if b.kind is BufferKind.PARAM:
                self.params.append(b)
        self.steps = [self._compile(s) for s in program.body]

    # -- memory ---------------------------------------------------------------------------
    def _buf(self, b) -> np.ndarray:
        a = self.mem.get(id(b))
        if a is None:
            a = self.mem[id(b)] = np.zeros(b.size, dtype=dtypes.storage(b.dtype))
        return a

    # -- compilation ----------------------------------------------------------------------
    def _compile(self, s):
        if isinstance(s, (Elementwise, DotProduct, Reduce, Copy, Gather, ScatterAdd)) or \
                (isinstance(s, FusedKernel) and not self.by_member):
            k = empty.rewrite(s)            # zero-size spaces: no work, or an epilogue
            if k is None:
                return lambda: None
            if k is not (s.kernel if isinstance(s, FusedKernel) else s):
                s = k
        if isinstance(s, FusedKernel):
            if self.by_member:
                steps = [self._compile(m) for m in s.members]
                return lambda: [f() for f in steps] and None
            self._internal = {id(b) for b in s.internal}
            try:
                return self._compile(s.kernel)
            finally:
                self._internal = set()
        if isinstance(s, Elementwise):
            env = _grid(s.shape, s.vars)
            outs = self._outs(s.outs, env, int(np.prod(s.shape, dtype=np.int64)))
            return lambda: outs(None)
        if isinstance(s, DotProduct):
            return self._dot(s)
        if isinstance(s, Reduce):
            return self._reduce(s)
        if isinstance(s, Copy):
            src, dst = self._buf(s.src), self._buf(s.dst)
            return lambda: np.copyto(dst, src)
        if isinstance(s, Gather):
            table, idx, out = self._buf(s.table), self._buf(s.idx), self._buf(s.out)
            tshape, ishape = s.table.shape, s.idx.shape
            node = self.nodes.get(s.out.node)

            def gather():
                i = idx.reshape(ishape)
                if node is not None:
                    check_indices(i, tshape[0], node, tuple(self.iters))
                    i = safe_indices(i, node)
                out[:] = _gather(table.reshape(tshape), i).ravel()
            return gather
        if isinstance(s, ScatterAdd):
            upd, idx, out = self._buf(s.updates), self._buf(s.idx), self._buf(s.out)
            ushape, ishape, fn = s.updates.shape, s.idx.shape, _scatter_add(s.out.shape[0])
            node = self.nodes.get(s.out.node)

            def scatter():
                i = idx.reshape(ishape)
                if node is not None:
                    check_indices(i, s.out.shape[0], node, tuple(self.iters))
                out[:] = fn(upd.reshape(ushape), i).ravel()
            return scatter
        if isinstance(s, FeederWrite):
            buf = self._buf(s.buffer)
            return lambda: np.copyto(buf, self._feed(s).ravel())
        if isinstance(s, ReceiverRead):
            bufs = [(self._buf(b), b.shape) for b in s.buffers]
            return lambda: self._receive(s.spec, [a.reshape(sh).copy() for a, sh in bufs])
        if isinstance(s, CallbackRead):
            args = [(self._buf(b), b.shape) for b in s.call.args]
            return lambda: self.taken.__setitem__(
                id(s.call), [a.reshape(sh).copy() for a, sh in args])
        if isinstance(s, CallbackWrite):
            res = self._buf(s.call.result)
            return lambda: np.copyto(res, call_callback(
                s.call.spec, tuple(self.iters), self.taken.pop(id(s.call))).ravel())
        if isinstance(s, For):
            site = next(self._sites, "?")
            body = [self._compile(b) for b in s.body]
            feeders = None if any(isinstance(b, (For, If, While)) for b in s.body) else \
                [(id(b), b.spec) for b in s.body if isinstance(b, FeederWrite)]
            return lambda: self._loop(s.range, body, s.var, feeders, site)
        if isinstance(s, If):
            cond = self._condition(s.cond)
            then, orelse = ([self._compile(b) for b in blk] for blk in (s.then, s.orelse))
            return lambda: [f() for f in (then if cond() else orelse)] and None
        if isinstance(s, While):
            return self._while(s)
        raise NotImplementedError(f"numpy procedural executor: no rule for {type(s).__name__}")

    def _value(self, v, env, n):
        """``f(sel, acc, local) -> array`` of ``v`` at the selected work items (all if None)."""
        loop = self._loop_vars(v, env)
        if loop:                        # reads loop counters: evaluated at run time
            return self._dynamic(v, env, n, loop)
        if isinstance(v, IndexValue):
            c = np.asarray(evaluate(v.expr, env), dtype=v.dtype)
            return lambda sel, acc, loc: np.broadcast_to(c, (n if sel is None else len(sel),))
        if isinstance(v, Load):
            buf = self._buf(v.buffer)
            idx = np.broadcast_to(np.asarray(evaluate(v.index, env), dtype=_IDX), (n,))
            if idx.shape == buf.shape and n and idx[0] == 0 and \
                    np.array_equal(idx, np.arange(n, dtype=_IDX)):
                return lambda sel, acc, loc: buf if sel is None else buf[sel]
            idx = np.ascontiguousarray(idx)
            return lambda sel, acc, loc: buf[idx] if sel is None else buf[idx[sel]]
        if isinstance(v, Const):
            c = np.asarray(v.value, dtype=dtypes.storage(v.dtype))
            return lambda sel, acc, loc: np.broadcast_to(c, (n if sel is None else len(sel),))
        if isinstance(v, Acc):
            return lambda sel, acc, loc: acc if sel is None else acc[sel]
        if isinstance(v, Local):
            key = id(v.buffer)
            return lambda sel, acc, loc: loc[key] if sel is None else loc[key][sel]
        if isinstance(v, Rand):
            from ...graph.rng import philox_uniform
            idx = np.ascontiguousarray(np.broadcast_to(
                np.asarray(evaluate(v.index, env), dtype=_IDX), (n,)))
            seed, stream = v.key

            def rand(sel, acc, loc):
                r = philox_uniform(seed, stream, tuple(self.iters), v.shape).ravel()
                return r[idx] if sel is None else r[idx[sel]]
            return rand
        if isinstance(v, Select):
            cond = np.broadcast_to(np.asarray(evaluate(v.cond, env)) != 0, (n,))
            yes, no = np.flatnonzero(cond), np.flatnonzero(~cond)
            fa, fb = self._value(v.a, env, n), self._value(v.b, env, n)
            dtype = dtypes.storage(v.dtype)

            def select(sel, acc, loc):
                if sel is None:
                    out = np.empty(n, dtype)
                    out[yes] = fa(yes, acc, loc)
                    out[no] = fb(no, acc, loc)
                    return out
                c = cond[sel]
                out = np.empty(len(sel), dtype)
                out[c] = fa(sel[c], acc, loc)
                out[~c] = fb(sel[~c], acc, loc)
                return out
            return select
        if isinstance(v, Apply):
            fn = kernel(_OpNode(v.op, v.dtype, v.arg))
            args = [self._value(a, env, n) for a in v.args]
            dtype = dtypes.storage(v.dtype)

            def apply(sel, acc, loc):
                r = np.asarray(fn(*[f(sel, acc, loc) for f in args]))
                return r if r.dtype == dtype else r.astype(dtype)
            return apply
        raise TypeError(f"not a value: {v!r}")

    def _loop_vars(self, v, env) -> frozenset:
        """Loop counters (variables not in the kernel's ``env``) a Load / IndexValue /
        Select condition reads directly."""
        if isinstance(v, Load):
            e = [v.index]
        elif isinstance(v, IndexValue):
            e = [v.expr]
        elif isinstance(v, Select):
            e = [v.cond]
        else:
            return frozenset()
        return frozenset(x for x in variables(e[0]) if x not in env)

    def _dynamic(self, v, env, n, loop):
        """A value whose index expressions read loop counters: the expressions are evaluated
        per call with the counters' current values."""
        def env_now():
            return {**env, **{x: self.counters[x.name] for x in loop}}
        if isinstance(v, IndexValue):
            def index_value(sel, acc, loc):
                c = np.broadcast_to(np.asarray(evaluate(v.expr, env_now()), v.dtype), (n,))
                return c if sel is None else c[sel]
            return index_value
        if isinstance(v, Load):
            buf = self._buf(v.buffer)

            def load(sel, acc, loc):
                idx = np.broadcast_to(np.asarray(evaluate(v.index, env_now()), _IDX), (n,))
                return buf[idx] if sel is None else buf[idx[sel]]
            return load
        fa, fb = self._value(v.a, env, n), self._value(v.b, env, n)
        dtype = np.dtype(v.dtype)

        def select(sel, acc, loc):
            cond = np.broadcast_to(np.asarray(evaluate(v.cond, env_now())) != 0, (n,))
            sel = np.arange(n) if sel is None else sel
            c = cond[sel]
            out = np.empty(len(sel), dtype)
            out[c] = fa(sel[c], acc, loc)
            out[~c] = fb(sel[~c], acc, loc)
            return out
        return select

    def _outs(self, outs, env, n):
        """``f(acc)`` evaluating ``outs`` in order, then storing every non-local one."""
        plan = []
        for o in outs:
            f = self._value(o.value, env, n)
            if id(o.buffer) in self._internal:
                plan.append((id(o.buffer), f, None, None, dtypes.storage(o.buffer.dtype)))
                continue
            buf = self._buf(o.buffer)
            loop = frozenset(x for x in variables(o.index) if x not in env)
            if loop:                    # a row written at a loop counter (scan outputs)
                plan.append((id(o.buffer), f, buf, (o.index, env, loop),
                             np.dtype(o.buffer.dtype)))
                continue
            idx = np.ascontiguousarray(np.broadcast_to(
                np.asarray(evaluate(o.index, env), dtype=_IDX), (n,)))
            ident = idx.shape == buf.shape and np.array_equal(idx, np.arange(n, dtype=_IDX))
            plan.append((id(o.buffer), f, buf, None if ident else idx,
                         dtypes.storage(o.buffer.dtype)))

        def run(acc):
            loc = {}
            for key, f, _, _, dt in plan:
                r = f(None, acc, loc)
                loc[key] = r if r.dtype == dt else r.astype(dt)
            for key, _, buf, idx, _ in plan:
                if buf is None:
                    continue
                if idx is None:
                    buf[:] = loc[key]
                elif isinstance(idx, tuple):
                    e, env0, loop = idx
                    at = {**env0, **{x: self.counters[x.name] for x in loop}}
                    buf[np.broadcast_to(np.asarray(evaluate(e, at), _IDX), (n,))] = loc[key]
                else:
                    buf[idx] = loc[key]
        return run

    def _dot(self, s: DotProduct):
        batch = s.shape[:-2]
        m, nn, k = s.shape[-2], s.shape[-1], s.k.extent
        a_shape, b_shape = batch + (m, k), batch + (k, nn)
        a_env = _grid(a_shape, s.vars[:-1] + (s.k,))
        b_env = _grid(b_shape, s.vars[:-2] + (s.k, s.vars[-1]))
        na, nb = int(np.prod(a_shape)), int(np.prod(b_shape))
        fa, fb = self._value(s.a, a_env, na), self._value(s.b, b_env, nb)
        n = int(np.prod(s.shape, dtype=np.int64))
        outs = self._outs(s.outs, _grid(s.shape, s.vars), n)

        mm = kernel(_OpNode(Op.DOT, s.dtype, None))

        def dot():
            a = np.asarray(fa(None, None, None)).reshape(a_shape)
            b = np.asarray(fb(None, None, None)).reshape(b_shape)
            outs(mm(a, b).ravel())
        return dot

    def _reduce(self, s: Reduce):
        n_in = int(np.prod(s.shape, dtype=np.int64))
        fsrc = self._value(s.src, _grid(s.shape, s.vars), n_in)
        kept_shape = tuple(d for i, d in enumerate(s.shape) if i not in s.axes)
        outs = self._outs(s.outs, _grid(kept_shape, s.kept),
                          int(np.prod(kept_shape, dtype=np.int64)))
        axes, shape = tuple(s.axes), s.shape
        if s.op not in (Op.SUM, Op.RMAX):
            raise NotImplementedError(f"reduce {s.op}")
        red = kernel(_OpNode(s.op, s.dtype, axes))

        def reduce():
            x = np.asarray(fsrc(None, None, None)).reshape(shape)
            outs(np.asarray(red(x)).ravel())
        return reduce

    # -- running --------------------------------------------------------------------------
    def run(self, store: dict) -> None:
        """Execute against ``store`` (Variable -> array), updating it in place.

        Raises
        ------
        FeederError, ReceiverError, IndexOutOfRange, KeyboardInterrupt
            The run stopped; ``store`` then holds the variables' values at the start of
            the iteration of the outermost loop it stopped in (:attr:`progress`).
        """
        self.iters = []
        self.progress = Progress()
        self._feeds = None
        self.taken = {}
        for b in self.params:
            a = self._buf(b)
            a[:] = np.asarray(store[b.var], dtype=dtypes.storage(b.dtype)).ravel()
        try:
            for f in self.steps:
                f()
        finally:
            with deferred_interrupts():
                store.update({b.var: self._buf(b).reshape(b.shape).copy()
                              for b in self.params})
        self.vals = {nid: self._buf(b).reshape(b.shape).copy()
                     for nid, b in self.program.outputs.items()}

    def _condition(self, c):
        """``f() -> bool``: a 1-element buffer's element 0, or an :class:`IndexValue` of
        the loop counters, is nonzero."""
        if isinstance(c, IndexValue):
            return lambda: evaluate(c.expr, self.counters) != 0
        buf = self._buf(c)
        return lambda: buf[0] != 0

    def _while(self, s: While):
        cond = [self._compile(b) for b in s.cond]
        body = [self._compile(b) for b in s.body]
        pred = self._condition(s.pred)

        def run():
            self.iters.append(0)
            k = 0
            while s.max_iterations is None or k < s.max_iterations:
                self.iters[-1] = self.counters[s.var] = k
                for f in cond:
                    f()
                if not pred():
                    break
                snapshot = [self._buf(b).copy() for b in self.params]
                try:
                    for f in body:
                        f()
                except BaseException:
                    for b, a in zip(self.params, snapshot):
                        self._buf(b)[:] = a
                    raise
                k += 1
            self.iters.pop()
        return run

    def _loop(self, rng, body, var: str = "i0", feeders=None, site: str = "?") -> None:
        """As :meth:`autodiff.device.numpy.interpreter.Interpreter._loop`: the outermost
        loop keeps ``(k, parameters at the start of iteration k)`` and restores them when
        it stops; Feeders of a body without nested control flow are called ahead."""
        top = not self.iters
        length = len(rng)
        if top:
            self.progress.enter(site)
        outer = self.iters[0] if self.iters else None
        self.iters.append(0)
        ahead = None
        if feeders is not None and self.prefetch > 0:
            ahead = FeedAhead(feeders, length, self.prefetch, tuple(self.iters[:-1]),
                              self.progress, (lambda j: j) if top else (lambda j: outer))
        saved = self._feeds
        snap = (0, [self._buf(b).copy() for b in self.params])
        try:
            for k in range(length):
                if top:
                    snap = (k, [self._buf(b).copy() for b in self.params])
                    self.progress.done(k)
                self.iters[-1] = k
                self.counters[var] = k
                self._feeds = ahead.take(k) if ahead is not None else None
                for f in body:
                    f()
            if top:     # the final values from here on (as the interpreter's loop)
                snap = (length, [self._buf(b).copy() for b in self.params])
                self.progress.finished(length)
        except BaseException:
            if top:
                with deferred_interrupts():
                    for b, a in zip(self.params, snap[1]):
                        self._buf(b)[:] = a
                    self.progress.stopped(snap[0])
            raise
        finally:
            self.iters.pop()
            self._feeds = saved
            if top:
                self.progress.leave()

    def _feed(self, stmt) -> np.ndarray:
        if self._feeds is not None and id(stmt) in self._feeds:
            return self._feeds[id(stmt)]
        if self.iters:
            self.progress.fed(self.iters[0])
        return call_feeder(stmt.spec, tuple(self.iters))

    def _receive(self, spec, args) -> None:
        call_receiver(spec, tuple(self.iters), args)


def compile_procedural(graph, fuse: bool = True, offsets: dict | None = None,
                       by_member: bool = False, plan: bool = True, alignment: int = 64,
                       debug: bool = False, **options) -> ProceduralExecutor:
    """Lower ``graph`` (and fuse it when ``fuse``) and return a :class:`ProceduralExecutor`.

    ``stages`` holds ``"procedural"`` (the lowered program) and, when fused, ``"fused"``.
    ``report`` (in ``options``) gets ``stats["kernels"]`` (unfused -> fused counts).
    With ``plan`` (and no ``offsets`` given) the memory planner (:mod:`autodiff.alloc`)
    places temps and staging buffers in one arena (offsets multiples of ``alignment``
    bytes, ``graph.inplace`` marks honoured where safe, the plan verified when ``debug``):
    stage ``"alloc"`` is the plan, ``report.stats["memory"]`` its figures.
    """
    from ...procedural.lower import lower
    check_memory(graph.walk(), "numpy")
    prog = lower(graph)
    stages = {"procedural": prog}
    run = prog
    if fuse:
        from ...fusion import fuse as fuse_program
        run = fuse_program(prog)
        stages["fused"] = run
    report = options.get("report")
    if report is not None:
        report.stats["kernels"] = (f"{len(prog.kernels())} unfused -> {len(run.kernels())}"
                                   if fuse else f"{len(prog.kernels())}")
    if plan and offsets is None:
        from ...alloc import plan_memory
        mem = plan_memory(run, alignment, inplace=getattr(graph, "inplace", None),
                          members=by_member, debug=debug)
        offsets, stages["alloc"] = mem.buffer_offsets(), mem
        if report is not None:
            report.stats["memory"] = mem.stats()
    nodes = {n.id: n for g in (graph, prog.graph or graph) for n in g.walk()}
    sites = [n.site for n in graph.walk() if n.op in (Op.FOR, Op.SCAN)]
    return ProceduralExecutor(run, stages, offsets, by_member, nodes, sites,
                              options.get("prefetch"))
