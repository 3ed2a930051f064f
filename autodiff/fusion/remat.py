"""Remat: fused kernels store a minimal set of values; their consumers recompute the rest.

After the other fusions, a group often stores several elementwise functions of one value:
the FF1 matmul of a transformer with exact GELU stores ``0.5 * h``, ``1 + erf(h / sqrt 2)``
and ``c * exp(-(h / sqrt 2) ** 2)`` for the backward besides its output; the LayerNorm
backward's matmul stores three products of its result for the row reductions that follow.
Each such array is written once and loaded again by a later kernel. This pass chooses, per
fused kernel, the cheapest set of its registers to store such that every value a later
kernel reads is either stored or an elementwise function of stored values (and of buffers
the kernel loads), and rewrites those readers to recompute the dropped values at their own
index (the GELU matmul then stores ``h``, ``1 + erf`` and its output; the backward matmul
recomputes ``0.5 * h`` and the ``exp`` term, which the forward no longer evaluates).

The choice is the minimum cut of the min-cut recomputation partitioner of PyTorch's
AOTAutograd (``min_cut_rematerialization_partition``; H. He, "Min-cut optimal(*)
recomputation (i.e. activation checkpointing) with AOTAutograd", 2022), solved with
networkx's max-flow over the group's registers (the ``outs`` of its single-kernel form):

* every register ``r`` is an edge ``r_in -> r_out`` whose capacity is its cost when stored,
  ``bytes(r) * (1 + its loads by later kernels)`` (the store and the reloads; a dtype
  narrower than 4 bytes counts a word per element, see :func:`_traffic`);
* ``s_out -> r_in`` (infinite) when ``r``'s value reads register ``s``;
* ``source -> r_in`` (infinite) when ``r`` must not be recomputed elsewhere (*pinned*):
  its value holds the accumulator of the kernel's dot product or reduction, a random draw
  or a ``Select`` (padding, concatenation); it loads a buffer that a statement from this
  kernel up to the last reader writes (a load gives the value before this kernel); or it
  loads a large buffer at another index than its own (the reader would read that buffer
  in another layout). A register that must stay stored anyway (read by a dot product's
  operand, by a reader reading some elements twice or in a broadcast, by a later loop
  iteration, after the list, in place, or not a temporary) is also a source, of
  capacity 0 (free);
* a register not stored yet whose dtype is not 4 bytes wide (a bool mask) is never
  stored (its edge is infinite): epilogues load such values one lane at a time;
* ``r_out -> sink`` (infinite) for every other stored register (a *flexible* one):
  its readers need it, stored or recomputed.

The cut closest to the sink is taken (the least recomputation among equal cuts). Registers
on the cut are stored; a flexible register beyond it is recomputed by each reader from the
stored ones, at the reader's index (the readers' accesses are mapped back to the kernel's
iteration space through the register's own output index).

Cost model (the rule). The cut minimises bytes stored and reloaded; then:

* a flexible register whose recomputation costs a reader more than :data:`MAX_RECOMPUTE`
  ops per element (transcendentals, divisions and powers count :data:`TRANSCENDENTAL`), or
  loads a large buffer at another index than the register's own, stays stored;
* a transcendental that the kernel still evaluates (for a value it stores), or that two
  readers would recompute, is pinned: it is evaluated once;
* and the cut is taken again until neither applies. The plan is applied only when the
  work it changes goes down: bytes stored by the kernel, bytes loaded by the rewritten
  readers (each buffer once), plus :data:`BYTES_PER_OP` bytes per op evaluated per
  element, by the kernel (ops it no longer needs are subtracted) and by the readers.

Nothing containing a reduction or a dot product is ever recomputed, and a register is
recomputed only inside readers' epilogues and reduction sources (never in a dot product's
operands, which would recompute it ``K`` times).

Running op by op (``FusedKernel.members``) is unchanged: the members still compute and
store every value.
"""
from __future__ import annotations

import networkx as nx

from ..graph.ir import Op
from ..procedural.ir import (Acc, Apply, BufferKind, DotProduct, Elementwise, FusedKernel,
                             Load, Local, Output, Rand, Reduce, Select, Value,
                             distinct_values, walk_values)
from .group import at_p, invert, space_size, subst_index, subst_value

NAME = "Remat"
#: ops per element that a reader may recompute for one dropped register
MAX_RECOMPUTE = 40
#: the cost of one transcendental (or division, root, power) in ops
TRANSCENDENTAL = 8
#: the cost of one op per element, in bytes of memory traffic per element
BYTES_PER_OP = 2
#: a buffer at most 1/SMALL the size of a register (a bias, a row statistic) is cheap to
#: load at any index
SMALL = 8
_EXPENSIVE = frozenset({Op.EXP, Op.LOG, Op.EXP2, Op.LOG2, Op.SQRT, Op.RSQRT, Op.RECIP,
                        Op.SIN, Op.COS, Op.TANH, Op.SIGMOID, Op.ERF, Op.ATAN, Op.LOG1P,
                        Op.EXPM1, Op.DIV, Op.POW, Op.MOD, Op.FLOORDIV})


def op_cost(v: Value) -> int:
    """Ops to evaluate ``v`` once per element (loads and constants are free; a repeated
    sub-expression counts once, as the device compiler evaluates it once)."""
    return sum(TRANSCENDENTAL if x.op in _EXPENSIVE else 1
               for x in {x for x in distinct_values(v) if type(x) is Apply})


def remat(stmts: list) -> list:
    """One statement list (not its ``For`` bodies) with stored epilogue values recomputed by
    their readers where that stores fewer bytes (see the module docstring)."""
    stmts = list(stmts)
    readers: dict[int, list] = {}
    writers: dict[int, list] = {}
    for i, s in enumerate(stmts):
        for b in s.reads():
            readers.setdefault(id(b), []).append(i)
        for b in s.writes():
            writers.setdefault(id(b), []).append(i)
    for i in range(len(stmts)):
        k = stmts[i]
        if not isinstance(k, FusedKernel) or \
                not isinstance(k.kernel, (DotProduct, Reduce, Elementwise)):
            continue
        plan = _plan(stmts, i, readers, writers)
        if plan is None:
            continue
        new_k, rewrites = plan
        stmts[i] = new_k
        for j, r in rewrites.items():
            for b in r.reads():
                if j not in readers.setdefault(id(b), []):
                    readers[id(b)].append(j)
            stmts[j] = r
    return stmts


def _plan(stmts, i, readers, writers):
    """``(new kernel i, {reader rank: rewritten reader})`` or None (nothing to gain)."""
    fk = stmts[i]
    kern = fk.kernel
    outs = {}
    for o in kern.outs:
        if id(o.buffer) in outs:
            return None
        outs[id(o.buffer)] = o
    internal = {id(b) for b in fk.internal}
    space = kern.vars if not isinstance(kern, Reduce) else kern.kept
    deps = {b: [id(x.buffer) for x in distinct_values(o.value) if type(x) is Local]
            for b, o in outs.items()}
    flexible, loads_of = {}, {}
    for b, o in outs.items():
        if b not in internal:
            rs = readers.get(b, [])
            loads_of[b] = len(rs)
            if _flexible(o, i, rs, stmts, writers, space):
                flexible[b] = rs
    if not flexible:
        return None
    # a register is pinned (a source of the cut) when it reads an accumulator or a random
    # draw, or loads a buffer that a statement from kernel i up to the last reader writes
    # (a load gives the value before kernel i; a recomputation there would see another)
    last = max(max(rs) for rs in flexible.values())
    fixed = {b for b, o in outs.items() if _pinned(o, i, last, writers)}
    stored_now = {b for b in outs if b not in internal}
    while flexible:
        keep = _cut(outs, deps, fixed, flexible, stored_now, loads_of)
        stored = keep | (stored_now - set(flexible))
        # a transcendental the kernel still evaluates (for a value it stores) is not
        # evaluated again by a reader: it becomes a source, and the cut is taken again
        # (nor by two readers)
        by: dict = {}
        for b, rs in flexible.items():
            if b not in keep:
                for r in _through(deps, keep, b):
                    by.setdefault(r, set()).update(rs)
        twice = {r for r, rs in by.items() if r not in fixed and _expensive(outs[r].value)
                 and (len(rs) > 1 or r in _through(deps, (), *stored))}
        costly = [b for b in flexible if b not in keep and
                  _costly(_expand(outs, keep, b), outs[b])]
        if not costly and not twice:
            break
        fixed |= twice
        for b in costly:
            del flexible[b]
    if not flexible:
        return None
    new_stored = keep | (stored_now - set(flexible))
    if new_stored == stored_now:
        return None
    rewrites = {}
    for b, rs in flexible.items():
        if b in new_stored:
            continue
        for j in rs:
            r = rewrites.get(j, stmts[j])
            rewrites[j] = _rewrite(r, outs[b], outs, new_stored, space)
    # applied only when it saves work: bytes stored and loaded plus ops evaluated
    # (BYTES_PER_OP each), by this kernel and by the rewritten readers
    n = space_size(kern.shape) if not isinstance(kern, Reduce) else \
        space_size(v.extent for v in kern.kept)
    old_ops = sum(op_cost(outs[r].value) for r in _through(deps, (), *stored_now))
    new_ops = sum(op_cost(outs[r].value) for r in _through(deps, (), *new_stored))
    delta = sum(_traffic(outs[b].buffer) for b in new_stored - stored_now) \
        - sum(_traffic(outs[b].buffer) for b in stored_now - new_stored) \
        + BYTES_PER_OP * n * (new_ops - old_ops) \
        + sum(_work(r) - _work(stmts[j]) for j, r in rewrites.items())
    if delta >= 0:
        return None
    new_internal = tuple(o.buffer for b, o in outs.items() if b not in new_stored)
    return FusedKernel(fk.name, fk.members, kern, new_internal), rewrites


def _pinned(o: Output, i: int, last: int, writers: dict) -> bool:
    """Whether register ``o`` must not be recomputed by a reader: it reads an accumulator or
    a random draw; it loads a buffer that a statement from kernel ``i`` up to the last
    reader ``last`` writes (the load gives the value before kernel ``i``); it selects
    (padding, concatenation); or it loads a large buffer at another index than its own
    (a reader would then read that buffer in another layout than the register's)."""
    n = o.buffer.size
    for x in distinct_values(o.value):
        t = type(x)
        if t in (Acc, Rand, Select):
            return True
        if t is Load:
            if any(i <= w <= last for w in writers.get(id(x.buffer), [])):
                return True
            if x.buffer.size * SMALL > n and x.index != o.index:
                return True
    return False


def _costly(v: Value, o: Output) -> bool:
    """Whether recomputing ``v`` for register ``o`` is too dear for a reader: more than
    :data:`MAX_RECOMPUTE` ops per element, or a load of a large buffer at another index
    than ``o``'s own (the reader would read it in another layout: a weight gradient stored
    with its square transposed for the reader is not recomputed from the gradient)."""
    if op_cost(v) > MAX_RECOMPUTE:
        return True
    return any(type(x) is Load and x.buffer.size * SMALL > o.buffer.size and x.index != o.index
               for x in distinct_values(v))


def _work(s) -> float:
    """Bytes a kernel loads (each buffer once) plus ``BYTES_PER_OP`` per op it evaluates."""
    k = s.kernel if isinstance(s, FusedKernel) else s
    space_out = k.kept if isinstance(k, Reduce) else k.vars
    ops = space_size(v.extent for v in space_out) * sum(op_cost(o.value) for o in k.outs)
    if isinstance(k, Reduce):
        ops += space_size(k.shape) * op_cost(k.src)
    return sum(_traffic(b) for b in s.reads()) + BYTES_PER_OP * ops


def _traffic(b) -> int:
    """Bytes a kernel's store or load of buffer ``b`` costs: a word per element for a
    dtype narrower than 4 bytes (a bool mask), which vector epilogues store and load one
    lane at a time. ReLU's mask stored as bool beside its result cost its forward epilogue
    eight byte stores per vector; counted as bytes it looked cheaper than the reader
    loading the result it is recomputed from."""
    return b.size * max(b.itemsize, 4)


def _through(deps, keep, *bs) -> set:
    """The registers evaluated to compute ``bs``, stopping at those in ``keep``."""
    seen, todo = set(), list(bs)
    while todo:
        b = todo.pop()
        if b in seen:
            continue
        seen.add(b)
        todo += [d for d in deps[b] if d not in keep and d in deps]
    return seen


def _expensive(v: Value) -> bool:
    return any(type(x) is Apply and x.op in _EXPENSIVE for x in distinct_values(v))


def _cap(o: Output, loads: int) -> float:
    return float(_traffic(o.buffer) * (1 + loads))


def _flexible(o, i, rs, stmts, writers, space) -> bool:
    """Whether every reader of ``o.buffer`` may recompute it instead of loading it."""
    b = o.buffer
    if b.kind is not BufferKind.TEMP or writers.get(id(b), []) != [i] or not rs:
        return False
    inv = invert(o.index, space)
    if inv is None or inv[1] != b.size:
        return False
    if any(j <= i for j in rs):
        return False
    for j in rs:
        r = stmts[j]
        k = r.kernel if isinstance(r, FusedKernel) else r
        if not isinstance(k, (DotProduct, Reduce, Elementwise)) or \
                any(w is b for w in r.writes()):
            return False
        if isinstance(k, DotProduct) and any(
                type(x) is Load and x.buffer is b for v in (k.a, k.b) for x in walk_values(v)):
            return False
        space_r = k.kept if isinstance(k, Reduce) else k.vars
        where = [(x.value, space_r) for x in k.outs]
        if isinstance(k, Reduce):
            where.append((k.src, k.vars))
        for v, vs in where:                # each element read once: no broadcast re-reads
            for x in walk_values(v):
                if type(x) is Load and x.buffer is b:
                    got = invert(x.index, vs)
                    if got is None or got[1] != b.size:
                        return False
    return True


def _cut(outs, deps, fixed, flexible, stored_now, loads_of) -> set:
    """The registers to store: the minimum cut nearest the sink (see module docstring).

    networkx's ``minimum_cut`` puts on the sink side every node that still reaches the
    sink in the residual graph, so its cut is the one nearest the sink (the least
    recomputation); ties between registers of equal cost go to the later out."""
    g = nx.DiGraph()
    g.add_nodes_from("st")
    n = len(outs)
    for pos, (b, o) in enumerate(outs.items()):
        free = b in stored_now and b not in flexible
        cap = 0.0 if free else _cap(o, loads_of.get(b, 1)) * (1 + 1e-9 * (n - pos))
        if b in stored_now or o.buffer.itemsize == 4:
            g.add_edge((b, 0), (b, 1), capacity=cap)
        else:                   # never newly stored (infinite): see the module docstring
            g.add_edge((b, 0), (b, 1))
        if b in fixed or free:
            g.add_edge("s", (b, 0))
        for d in deps[b]:
            if d in outs:
                g.add_edge((d, 1), (b, 0))
        if b in flexible:
            g.add_edge((b, 1), "t")
    _, (_, near_t) = nx.minimum_cut(g, "s", "t")
    return {b for b in outs if (b, 0) not in near_t and (b, 1) in near_t}


def _expand(outs, keep, b, sub=None, memo: dict | None = None) -> Value:
    """Register ``b``'s value with every register not in ``keep`` expanded (stored ones
    become loads at their output index); over the kernel's space, or through ``sub``
    (kernel vars -> the reader's expressions). Locals only name earlier outs: no cycle.
    Each register is expanded once per call (``memo``): a register read twice is one
    shared sub-value, so a chain whose steps read the one before twice stays linear."""
    memo = {} if memo is None else memo
    if b in memo:
        return memo[b]
    o = outs[b]
    v = o.value if sub is None else subst_value(o.value, sub)

    def go(x):
        if type(x) is Local:
            k = id(x.buffer)
            if k in keep:
                ko = outs[k]
                return Load(ko.buffer, ko.index if sub is None else subst_index(ko.index, sub))
            return _expand(outs, keep, k, sub, memo)
        if type(x) is Apply:
            return Apply(x.op, tuple(go(a) for a in x.args), x.dtype, x.arg)
        if type(x) is Select:
            return Select(x.cond, go(x.a), go(x.b))
        return x
    memo[b] = out = go(v)
    return out


def _rewrite(r, o: Output, outs, keep, space):
    """Reader ``r`` with every load of ``o.buffer`` replaced by its recomputation."""
    inv = invert(o.index, space)

    def fix(v: Value) -> Value:
        if type(v) is Load:
            if v.buffer is o.buffer:
                return _expand(outs, keep, id(o.buffer), at_p(*inv, v.index))
            return v
        if type(v) is Apply:
            args = tuple(fix(a) for a in v.args)
            return v if all(a is b for a, b in zip(args, v.args)) else \
                Apply(v.op, args, v.dtype, v.arg)
        if type(v) is Select:
            return Select(v.cond, fix(v.a), fix(v.b))
        return v

    k = r.kernel if isinstance(r, FusedKernel) else r
    new_outs = tuple(Output(x.buffer, x.index, fix(x.value)) for x in k.outs)
    if isinstance(k, Elementwise):
        nk = Elementwise(k.shape, k.vars, new_outs)
    elif isinstance(k, DotProduct):
        nk = DotProduct(k.shape, k.vars, k.k, k.a, k.b, new_outs)
    else:
        nk = Reduce(k.op, k.shape, k.vars, k.axes, fix(k.src), new_outs)
    if isinstance(r, FusedKernel):
        return FusedKernel(r.name, r.members, nk, r.internal)
    return FusedKernel(NAME, (r,), nk)
