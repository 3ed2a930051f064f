"""Machinery shared by the fusions: where a group may go, and how it becomes one kernel.

* :class:`Schedule`: a statement list with, per buffer, its readers and writers by rank. A
  group is placed at the rank of one of its members, the last one if possible;
  :meth:`Schedule.placement` checks that moving every member there changes no value (no
  outside reader of a member's result and no outside writer of a buffer a member touches
  lies in between), which also rules out cycles. Checks look only at the buffers the
  members touch (no whole-program scans).
* :func:`invert`: solve a mixed-radix access expression for its index variables.
* :func:`build`: the single-kernel form of a group: every member is re-indexed into the
  kernel's iteration space (a bijection found from the access expressions linking it to an
  already placed member) or, when that fails and only the group reads its result, inlined
  at each use; reads of values the group computed become :class:`Local` registers.
"""
from __future__ import annotations

import bisect
import itertools
import weakref

from ..procedural.access import Expr, Num, Var, simplify, substitute, variables
from ..procedural.ir import (BLOCKS, Apply, BufferKind, DotProduct, Elementwise, Load, Local,
                             Output, Rand, Reduce, Select, Stmt, Value, walk_values)

MAX_MEMBERS = 48        # members per group (keeps the O(k^2) rebuilds cheap)
MAX_VALUE_NODES = 4000  # expression size of one fused kernel (guards against inlining blow-up)
MAX_INLINE_NODES = 64   # expression size of one recomputed producer (read at another index):
                        # chains of such reads (scans, sorting networks) would grow exponentially

_P = "__p"


# -- access algebra ---------------------------------------------------------------------
def invert(index: Expr, vars_) -> tuple[dict, int] | None:
    """Solve ``index(vars) = p`` for ``vars``.

    Succeeds when ``index`` is ``sum(c_i * v_i)`` whose coefficients, sorted, form a mixed
    radix (``1, e_0, e_0 * e_1, ...`` for the extents ``e`` in that order) over every var of
    extent > 1: then ``index`` is a bijection from the var space onto ``[0, size)``.

    Returns
    -------
    (mapping, size) or None
        ``mapping``: Var -> expression in the placeholder ``Var("__p", size)``.
    """
    fast = (id(index), id(vars_))
    got = _INVERT_ID.get(fast)
    if got is not None and got[0] is index and got[1] is vars_:
        return got[2]
    key = (index, tuple(vars_))
    hit = _INVERT.get(key, _MISS)
    if hit is _MISS:
        hit = _invert(index, vars_)
        if len(_INVERT) >= _MEMO_MAX:
            _INVERT.clear()
        _INVERT[key] = hit
    _by_identity(_INVERT_ID, fast, (index, vars_, hit))
    return hit


def _by_identity(table: dict, key: tuple, entry: tuple) -> None:
    """Store ``entry`` (its leading objects, whose ids form ``key``, then the result) in a
    memo looked up by identity first: hashing the ids is C-level, an access expression's
    hash is not (the entry keeps the objects alive, so their ids are not reused)."""
    if len(table) >= _MEMO_MAX:
        table.clear()
    table[key] = entry


_MISS = object()
_MEMO_MAX = 1 << 16
_INVERT: dict = {}      # (index, vars) -> invert(...): groups are rebuilt as they grow
_AT_P: dict = {}        # (id(mapping), index) -> at_p(...)
_INVERT_ID: dict = {}   # (id(index), id(vars)) -> (index, vars, invert(...))
_AT_P_ID: dict = {}     # (id(mapping), id(index)) -> (mapping, index, at_p(...))
_SUB_ID: dict = {}      # (id(mapping), id(index)) -> (mapping, index, subst_index(...))


def _invert(index: Expr, vars_):
    from ..procedural.access import _lin
    terms, const = _lin(simplify(index))
    if const:
        return None
    by_var = {}
    for atom, coef in terms.items():
        if not isinstance(atom, Var) or coef <= 0 or atom in by_var:
            return None
        by_var[atom] = coef
    big = [v for v in vars_ if v.extent > 1]
    if set(by_var) != set(big):
        return None
    size = 1
    p = None
    order = sorted(big, key=lambda v: by_var[v])
    for v in order:
        if by_var[v] != size:
            return None
        size *= v.extent
    p = Var(_P, size)
    mapping = {v: (Num(0) if v.extent == 1 else simplify((p // by_var[v]) % v.extent))
               for v in vars_}
    return mapping, size


def at_p(mapping: dict, size: int, index: Expr) -> dict:
    """``mapping`` (from :func:`invert`) with the placeholder replaced by ``index``."""
    fast = (id(mapping), id(index))
    got = _AT_P_ID.get(fast)
    if got is not None and got[0] is mapping and got[1] is index:
        return got[2]
    key = (id(mapping), index)
    hit = _AT_P.get(key)
    if hit is None or hit[0] is not mapping:
        p = Var(_P, size)
        hit = (mapping, {v: simplify(substitute(e, {p: index})) for v, e in mapping.items()})
        if len(_AT_P) >= _MEMO_MAX:
            _AT_P.clear()
        _AT_P[key] = hit
    _by_identity(_AT_P_ID, fast, (mapping, index, hit[1]))
    return hit[1]                        # shared: callers never mutate it


def subst_index(e: Expr, mapping: dict) -> Expr:
    """``simplify(substitute(e, mapping))``, memoized per (mapping object, expression)."""
    fast = (id(mapping), id(e))
    got = _SUB_ID.get(fast)
    if got is not None and got[0] is mapping and got[1] is e:
        return got[2]
    key = (id(mapping), e)
    hit = _SUB.get(key)
    if hit is None or hit[0] is not mapping:
        same = all(k is v for k, v in mapping.items())
        hit = (mapping, e if same else simplify(substitute(e, mapping)))
        if len(_SUB) >= _MEMO_MAX:
            _SUB.clear()
        _SUB[key] = hit
    _by_identity(_SUB_ID, fast, (mapping, e, hit[1]))
    return hit[1]


_SUB: dict = {}


def subst_value(v: Value, mapping: dict) -> Value:
    """``v`` with index variables replaced per ``mapping`` in every access expression."""
    if isinstance(v, Load):
        return Load(v.buffer, subst_index(v.index, mapping))
    if isinstance(v, Apply):
        return Apply(v.op, tuple(subst_value(a, mapping) for a in v.args), v.dtype, v.arg)
    if isinstance(v, Select):
        c = subst_index(v.cond, mapping)
        a, b = subst_value(v.a, mapping), subst_value(v.b, mapping)
        if c == Num(1):
            return a
        if c == Num(0):
            return b
        return Select(c, a, b)
    if isinstance(v, Rand):
        return Rand(v.key, subst_index(v.index, mapping), v.shape, v.dtype)
    return v


def _count(v: Value) -> int:
    return sum(1 for _ in walk_values(v))


def space_size(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


# -- the single-kernel form -------------------------------------------------------------
class _Fail(Exception):
    pass


def build(anchor, members: list, read_outside) -> tuple | None:
    """Single-kernel form of ``anchor`` (DotProduct / Reduce / None) + elementwise ``members``.

    Parameters
    ----------
    anchor : DotProduct, Reduce or None
        The kernel whose iteration space the group takes; with None the last member's.
    members : list of Elementwise
        In program order. Members before a Reduce anchor must be inlinable into its source.
    read_outside : callable
        ``read_outside(buffer) -> bool``: whether a statement outside the group reads it.

    Returns
    -------
    (kernel, internal) or None
        None when the group cannot be one kernel (no bijection into the iteration space,
        an in-place hazard, a result needed at another work item, too large).
    """
    try:
        return _build(anchor, members, read_outside)
    except _Fail:
        return None


def _build(anchor, members, read_outside):
    if anchor is None:
        seed = members[-1]
        t_shape, t_vars = seed.shape, seed.vars
    elif isinstance(anchor, DotProduct):
        t_shape, t_vars = anchor.shape, anchor.vars
    else:
        t_vars = anchor.kept
        t_shape = tuple(v.extent for v in t_vars)
    size = space_size(t_shape)
    # dicts and sets below are keyed by the statements and buffers themselves (identity
    # hashes: statements and buffers compare by identity)
    mapped: dict = {}                        # member -> its vars as expressions over T
    out_at: dict = {}                        # buffer -> index over T (mapped producers)
    if anchor is None:
        mapped[seed] = _identity(seed)
    else:
        for o in anchor.outs:
            out_at[o.buffer] = o.index
    # a member of another size is never mapped (the fixpoint below tries only members of
    # the group's size): unless it can be inlined at its uses the group fails, and that
    # is known before the fixpoint (the same test as after it, done first)
    for m in members:
        if m not in mapped and member_size(m) != size and not _inlinable(m, read_outside):
            raise _Fail
    producer = {o.buffer: (m, o) for m in members for o in m.outs}
    loads_of = {m: member_loads(m) for m in members}
    load_invs = {m: member_load_inversions(m) for m in members}
    read_by: dict = {}                       # m -> (reader c, its load, m's output)
    loaders: dict = {}                       # buffer -> members loading it
    feeds: dict = {}                         # c -> members whose results c reads
    for c in members:
        for ld in loads_of[c]:
            b = ld.buffer
            loaders.setdefault(b, []).append(c)
            pm = producer.get(b)
            if pm:
                read_by.setdefault(pm[0], []).append((c, ld, pm[1]))
                feeds.setdefault(c, []).append(pm[0])
    published: set = set()                   # mapped members whose outs are in out_at
    # fixpoint: map members through any link to an already mapped one. Passes run over
    # the members in order until one maps nothing; a member is tried again only when
    # what its try reads changed since its last one (a result of a member it reads got
    # an index, or a member reading its result got mapped): otherwise it fails again.
    todo = [m for m in members if m in mapped or member_size(m) == size]
    dirty = set(todo)
    changed = True
    while changed:
        changed = False
        pending = []
        for m in todo:
            if m in mapped:
                if m not in published:
                    published.add(m)
                    for o in m.outs:
                        if o.buffer not in out_at:
                            out_at[o.buffer] = subst_index(o.index, mapped[m])
                            dirty.update(loaders.get(o.buffer, ()))
                continue
            pending.append(m)
            if m not in dirty:
                continue
            dirty.discard(m)
            got = None
            for b, inv in load_invs[m]:                # m reads a mapped result
                if b in out_at and inv and inv[1] == size:
                    got = at_p(*inv, out_at[b])
                    break
            if got is None:                            # a mapped member reads m's result
                for c, ld, o in read_by.get(m, ()):
                    if c not in mapped or c is m:
                        continue
                    inv = output_inversion(m, o)
                    if not (inv and inv[1] == size):
                        continue
                    read = subst_index(ld.index, mapped[c])
                    whole = invert(read, t_vars)     # c reads all of m, once
                    if whole and whole[1] == size:
                        got = at_p(*inv, read)
                        break
            if got is not None:
                mapped[m] = got
                changed = True
                dirty.update(feeds.get(m, ()))
        todo = pending
    mapping = {id(m): mp for m, mp in mapped.items()}
    inline = {}
    for m in members:
        if id(m) in mapping:
            continue
        if not _inlinable(m, read_outside):
            raise _Fail
        inline[id(m.outs[0].buffer)] = (m, output_inversion(m, m.outs[0]))

    regs: dict[int, Expr] = {}

    def resolve(v: Value, depth=0) -> Value:
        if depth > 64:
            raise _Fail
        if isinstance(v, Load):
            key = id(v.buffer)
            if key in regs:
                if v.index != regs[key]:
                    raise _Fail                      # needs another work item's value
                return Local(v.buffer)
            if key in inline:
                m, (inv, n) = inline[key]
                r = resolve(_memo(_SUBV, m.outs[0].value, at_p(inv, n, v.index), subst_value),
                            depth + 1)
                if _memo(_COUNT, r, None, _count) > MAX_INLINE_NODES:
                    raise _Fail
                return r
            return v
        if isinstance(v, Apply):
            args = tuple(resolve(a, depth) for a in v.args)
            if all(a is b for a, b in zip(args, v.args)):
                return v                             # unchanged: keep (and its memos)
            return Apply(v.op, args, v.dtype, v.arg)
        if isinstance(v, Select):
            a, b = resolve(v.a, depth), resolve(v.b, depth)
            return v if a is v.a and b is v.b else Select(v.cond, a, b)
        return v

    def env(v: Value, keep: list, depth=0) -> tuple:
        """What ``resolve(v)`` depends on besides ``v``: per load, the register index of
        its buffer (by identity: ``keep`` holds it), or the producer inlined there and,
        recursively, its own loads'."""
        out = []
        for ld in _memo(_LOADS, v, None, _loads):
            k = id(ld.buffer)
            if k in regs:
                keep.append(regs[k])
                out.append(id(regs[k]))
            elif k in inline:
                if depth > 64:
                    raise _Fail
                m = inline[k][0]
                keep.append(m)
                out.append((id(m), env(m.outs[0].value, keep, depth + 1)))
            else:
                out.append(None)
        return tuple(out)

    def resolved(v: Value) -> Value:
        """``resolve(v)``, memoized by the identity of ``v`` and what this group makes of
        each buffer ``v`` loads (:func:`env`): the same value in the next, larger group
        then resolves to the same object (whose node count, variables and loads are
        memoized in turn). An entry keeps the statements its key names by identity."""
        keep: list = []
        key = (id(v), env(v, keep))
        hit = _RESOLVED.get(key)
        if hit is None or hit[0] is not v:
            try:
                r = resolve(v)
            except _Fail:
                r = _Fail
            if len(_RESOLVED) >= _MEMO_MAX:
                _RESOLVED.clear()
            hit = _RESOLVED[key] = (v, r, keep)
        if hit[1] is _Fail:
            raise _Fail
        return hit[1]

    outs: list[Output] = []
    kernel_src = None
    if anchor is not None:
        if isinstance(anchor, Reduce):
            kernel_src = resolved(anchor.src)
        for o in anchor.outs:
            outs.append(o)
            regs[id(o.buffer)] = o.index
    for m in members:
        if id(m) not in mapping:
            continue
        mp = mapping[id(m)]
        for o in m.outs:
            idx = subst_index(o.index, mp)
            val = resolved(_memo(_SUBV, o.value, mp, subst_value))
            if not _within(idx, val, t_vars):
                raise _Fail
            outs.append(Output(o.buffer, idx, val))
            regs[id(o.buffer)] = idx
    internal = [o.buffer for o in outs
                if o.buffer.kind is BufferKind.TEMP and not read_outside(o.buffer)]
    inside = {id(b) for b in internal} | set(inline)
    values = [o.value for o in outs] + ([kernel_src] if kernel_src is not None else [])
    if isinstance(anchor, DotProduct):
        values += [anchor.a, anchor.b]
    if any(id(ld.buffer) in inside for v in values for ld in _memo(_LOADS, v, None, _loads)):
        raise _Fail                                  # a group-internal value read from memory
    _check_hazards(anchor, kernel_src, outs, inside)
    if sum(_memo(_COUNT, o.value, None, _count) for o in outs) \
            + (_memo(_COUNT, kernel_src, None, _count) if kernel_src else 0) \
            > MAX_VALUE_NODES:
        raise _Fail
    if anchor is None:
        kernel = Elementwise(t_shape, t_vars, tuple(outs))
    elif isinstance(anchor, DotProduct):
        kernel = DotProduct(anchor.shape, anchor.vars, anchor.k, anchor.a, anchor.b,
                            tuple(outs))
    else:
        kernel = Reduce(anchor.op, anchor.shape, anchor.vars, anchor.axes, kernel_src,
                        tuple(outs))
    return kernel, tuple(internal)


def _loads(v: Value):
    return [x for x in walk_values(v) if isinstance(x, Load)]


_SUBV: dict = {}        # (id(value), id(mapping)) -> subst_value(...)
_RESOLVED: dict = {}    # (id(value), registers of its loads) -> build's resolve(value)
_IDENTITY: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _identity(m) -> dict:
    """``{v: v for v in m.vars}``, one dict per statement (so memos keyed by the mapping's
    identity hit when the group seeded by ``m`` is rebuilt)."""
    hit = _IDENTITY.get(m)
    if hit is None:
        hit = _IDENTITY[m] = {v: v for v in m.vars}
    return hit
_VARS: dict = {}        # id(value or index) -> _value_vars(...) or variables(...)
_LOADS: dict = {}       # id(value) -> _loads(...)
_COUNT: dict = {}       # id(value) -> _count(...)


def _memo(table: dict, v, mapping, fn):
    """``fn(v, mapping)`` (``fn(v)`` when ``mapping`` is None), memoized by the identity
    of ``v`` and ``mapping`` (values and mappings are never mutated; the entry keeps
    both alive, so an id is not reused while it is in the table)."""
    key = (id(v), id(mapping))
    hit = table.get(key)
    if hit is None or hit[0] is not v or hit[1] is not mapping:
        if len(table) >= _MEMO_MAX:
            table.clear()
        hit = table[key] = (v, mapping, fn(v) if mapping is None else fn(v, mapping))
    return hit[2]


def member_loads(m) -> list:
    """Every :class:`Load` of ``m.values()``, in order; computed once per statement (a
    group is rebuilt at every candidate, its members' loads stay the same)."""
    hit = m.__dict__.get("_fusion_loads")
    if hit is None:
        hit = m.__dict__["_fusion_loads"] = [ld for v in m.values() for ld in _loads(v)]
    return hit


def member_load_inversions(m) -> list:
    """``[(buffer, invert(load.index, m.vars))]`` per load of ``m`` (:func:`member_loads`
    order), computed once per statement: the fixpoint of :func:`build` looks them up at
    every rebuild of a group."""
    hit = m.__dict__.get("_fusion_load_invs")
    if hit is None:
        hit = m.__dict__["_fusion_load_invs"] = [(ld.buffer, invert(ld.index, m.vars))
                                                 for ld in member_loads(m)]
    return hit


def output_inversion(m, o: Output):
    """``invert(o.index, m.vars)`` for the output ``o`` of ``m``, computed once per
    statement and output."""
    hit = m.__dict__.get("_fusion_out_invs")
    if hit is None:
        hit = m.__dict__["_fusion_out_invs"] = {}
    got = hit.get(id(o), _MISS)
    if got is _MISS:
        got = hit[id(o)] = invert(o.index, m.vars)
    return got


def _within(idx: Expr, val: Value, t_vars: tuple) -> bool:
    """Whether the index variables of output index ``idx`` and value ``val`` are all among
    ``t_vars`` (the kernel's), memoized by the identity of the three (groups are rebuilt
    at every candidate; a member's output usually stays the same objects)."""
    key = (id(idx), id(val), id(t_vars))
    hit = _WITHIN.get(key)
    if hit is None or hit[0] is not idx or hit[1] is not val or hit[2] is not t_vars:
        ok = (_memo(_VARS, idx, None, variables) | _memo(_VARS, val, None, _value_vars)) \
            <= set(t_vars)
        if len(_WITHIN) >= _MEMO_MAX:
            _WITHIN.clear()
        hit = _WITHIN[key] = (idx, val, t_vars, ok)
    return hit[3]


_WITHIN: dict = {}      # (id(index), id(value), id(vars)) -> _within(...)


def _inlinable(m, read_outside) -> bool:
    """Whether member ``m`` can be inlined at its uses in the group instead of mapped into
    its iteration space: one temporary result, read by no statement outside the group,
    whose index inverts."""
    return len(m.outs) == 1 and m.outs[0].buffer.kind is BufferKind.TEMP and \
        not read_outside(m.outs[0].buffer) and output_inversion(m, m.outs[0]) is not None


def member_size(m) -> int:
    """Points of ``m``'s iteration space, computed once per statement."""
    hit = m.__dict__.get("_fusion_size")
    if hit is None:
        hit = m.__dict__["_fusion_size"] = space_size(m.shape)
    return hit


def _value_vars(v: Value) -> set:
    out: set = set()
    for x in walk_values(v):
        if isinstance(x, Load) or isinstance(x, Rand):
            out |= variables(x.index)
        elif isinstance(x, Select):
            out |= variables(x.cond)
    return out


def _check_hazards(anchor, src, outs, inside) -> None:
    """A stored buffer may be read only in ``outs`` and only at the index it is stored at."""
    stored: dict[int, Expr] = {}
    for o in outs:
        if id(o.buffer) in inside:
            continue
        if id(o.buffer) in stored and stored[id(o.buffer)] != o.index:
            raise _Fail
        stored[id(o.buffer)] = o.index
    operands = []
    if isinstance(anchor, DotProduct):
        operands = [anchor.a, anchor.b]
    elif src is not None:
        operands = [src]
    for v in operands:
        for ld in _memo(_LOADS, v, None, _loads):
            if id(ld.buffer) in stored:
                raise _Fail
    for o in outs:
        for ld in _memo(_LOADS, o.value, None, _loads):
            if id(ld.buffer) in stored and ld.index != stored[id(ld.buffer)]:
                raise _Fail


# -- placement --------------------------------------------------------------------------
_INF = float("inf")


class _Placed:
    """A group :meth:`Schedule.placement` placed: its member ids, each member's movable
    interval (``los[i] < rank < his[i]``) and its members' ranks, sorted. A larger group
    starts from it: only its new members' intervals and those bounded by a new member's
    rank are recomputed."""
    __slots__ = ("ids", "los", "his", "ranks", "lo", "hi", "lo_at", "hi_at", "_bounded")

    def __init__(self, ids: frozenset, los: dict, his: dict, ranks: list, lo, hi):
        self.ids, self.los, self.his, self.ranks = ids, los, his, ranks
        self.lo, self.hi = lo, hi                   # max(los), min(his)
        self.lo_at = self.hi_at = None              # a member setting lo, one setting hi
        self._bounded = None

    def bounded_by(self) -> dict:
        """``{rank: [member ids whose interval ends at that rank]}`` (and ``lo_at``,
        ``hi_at``), built on first use: a placed group is the base of many candidates'
        placements, most groups placed are never one."""
        if self._bounded is None:
            out: dict = {}
            for i, a in self.los.items():
                out.setdefault(a, []).append(i)
                if a == self.lo:
                    self.lo_at = i
            for i, b in self.his.items():
                out.setdefault(b, []).append(i)
                if b == self.hi:
                    self.hi_at = i
            self._bounded = out
        return self._bounded


class Schedule:
    """A statement list being fused: ranks, per-buffer readers/writers, taken statements."""

    def __init__(self, stmts: list):
        self.rank = {id(s): i for i, s in enumerate(stmts)}
        self.stmt = {i: s for i, s in enumerate(stmts)}
        self.readers: dict[int, list] = {}
        self.writers: dict[int, list] = {}
        self.buf = {}
        self.seq = itertools.count()
        self._touched: dict[int, tuple] = {}
        self._keep = list(stmts)            # keeps ids in _touched unique while we run
        self._reaches: dict[int, tuple] = {}  # id(stmt) -> _reach's result, until a commit
        self._placed: list = []             # the last two placeable groups, until a commit
        self._near: dict[int, list] = {}    # id(stmt) -> neighbours(stmt), until a commit
        for s in stmts:
            self._index(s)
        self.taken: set[int] = set()

    def touched(self, s) -> tuple[list, list]:
        """``(s.reads(), s.writes())``, computed once per statement."""
        t = self._touched.get(id(s))
        if t is None:
            t = self._touched[id(s)] = (s.reads(), s.writes())
        return t

    def _index(self, s) -> None:
        r = self.rank[id(s)]
        reads, writes = self.touched(s)
        for b in reads:
            self.buf[id(b)] = b
            bisect.insort(self.readers.setdefault(id(b), []), (r, id(s)))
        for b in writes:
            self.buf[id(b)] = b
            bisect.insort(self.writers.setdefault(id(b), []), (r, id(s)))

    def _unindex(self, s) -> None:
        r = self.rank[id(s)]
        reads, writes = self.touched(s)
        for b in reads:
            self.readers[id(b)].remove((r, id(s)))
        for b in writes:
            self.writers[id(b)].remove((r, id(s)))

    def statements(self) -> list:
        return [self.stmt[r] for r in sorted(self.stmt)]

    def free(self, s) -> bool:
        """Whether ``s`` is in the list and not in a committed group yet."""
        return id(s) in self.rank and id(s) not in self.taken

    def readers_of(self, b) -> list:
        return [self.stmt[r] for r, _ in self.readers.get(id(b), ())]

    def writers_of(self, b) -> list:
        return [self.stmt[r] for r, _ in self.writers.get(id(b), ())]

    def read_outside(self, group_ids: set):
        return lambda b: any(i not in group_ids for _, i in self.readers.get(id(b), ()))

    def placement(self, group: list) -> int | None:
        """The rank at which all of ``group`` may run as one kernel, or None.

        The rank of the last member is tried first (every member moves down to it), then
        the ranks of the other members from the latest: members after the chosen rank move
        up to it. A member may move across the statements in between when none of them
        reads or writes what it writes, nor writes what it reads. (The memory-greedy
        schedule puts an update that needs no gradient, such as AdamW's weight decay of a
        bias, right after the forward pass's last read of the bias, between a matmul and
        its epilogue: the epilogue then joins at the matmul's rank.)

        A member may move anywhere strictly between the nearest statements outside the
        group that block it (:meth:`_reach`), so the group goes to the latest member rank
        inside the intersection of those open intervals: ``O(members x buffers)``
        bisections, not a scan per member and candidate rank.

        Groups grow one statement at a time, so the intervals of the last placed groups
        are kept (until a commit): a member's interval changes only when a statement
        bounding it joins the group, and a grown group reuses the others' (its new
        members' intervals and the bounded ones are recomputed).
        """
        ids = set(map(id, group))
        base = next((b for b in self._placed if b.ids <= ids), None)
        if base is None:
            los, his = {}, {}
            for s in group:
                los[id(s)], his[id(s)] = self._reach(s, ids)
            ranks = sorted(self.rank[i] for i in ids)
        else:
            new_ids = ids - base.ids
            new_ranks = {self.rank[i] for i in new_ids}
            ranks = sorted(base.ranks + list(new_ranks))
            los, his = dict(base.los), dict(base.his)
            stale = [i for r in new_ranks for i in base.bounded_by().get(r, ())]
            # the bounds so far: the base's where a member that keeps its interval sets them
            lo = base.lo if base.lo_at not in stale else -1
            hi = base.hi if base.hi_at not in stale else _INF
            for i in stale + list(new_ids):
                los[i], his[i] = a, b = self._reach(self.stmt[self.rank[i]], ids)
                lo, hi = max(lo, a), min(hi, b)
                k = bisect.bisect_left(ranks, hi) - 1
                if k < 0 or ranks[k] <= lo:   # the window only narrows: no rank will fit
                    return None
        lo = max(los.values(), default=-1)
        hi = min(his.values(), default=_INF)
        k = bisect.bisect_left(ranks, hi) - 1
        if k < 0 or ranks[k] <= lo:
            return None
        self._placed = [_Placed(frozenset(ids), los, his, ranks, lo, hi)] + self._placed[:1]
        return ranks[k]

    def _reach(self, s, ids: set) -> tuple:
        """``(lo, hi)``: the ranks of the nearest statements before and after ``s`` (-1 and
        inf if none) that are outside ``ids`` and read or write what ``s`` writes, or write
        what it reads: ``s`` may move to any rank strictly between them.

        Memoized per statement until the next :meth:`commit`: a result stays valid for
        another group while the two statements bounding it stay outside the group and the
        conflicting statements it skipped (group members in between) stay inside."""
        hit = self._reaches.get(id(s))
        if hit is not None:
            lo, hi, skipped = hit
            if (lo < 0 or id(self.stmt[lo]) not in ids) and \
                    (hi == _INF or id(self.stmt[hi]) not in ids) and ids.issuperset(skipped):
                return lo, hi
        r = self.rank[id(s)]
        reads, writes = self.touched(s)
        lists = [self.readers.get(id(b), ()) for b in writes] + \
            [self.writers.get(id(b), ()) for b in writes] + \
            [self.writers.get(id(b), ()) for b in reads]
        lo, hi = -1, _INF
        skipped = []
        for lst in lists:
            k = bisect.bisect_right(lst, (r, _INF))             # first entry after r
            while k < len(lst) and lst[k][0] < hi and lst[k][1] in ids:
                skipped.append(lst[k])
                k += 1
            if k < len(lst) and lst[k][0] < hi:
                hi = lst[k][0]
            k = bisect.bisect_left(lst, (r,)) - 1               # last entry before r
            while k >= 0 and lst[k][0] > lo and lst[k][1] in ids:
                skipped.append(lst[k])
                k -= 1
            if k >= 0 and lst[k][0] > lo:
                lo = lst[k][0]
        self._reaches[id(s)] = (lo, hi, [i for q, i in skipped if lo < q < hi])
        return lo, hi

    def neighbours(self, s) -> list:
        """The free plain elementwise kernels reading a result of ``s`` and, when ``s`` is
        one itself, those before it producing one it reads (fusion candidates next to
        ``s``); memoized until the next :meth:`commit`."""
        hit = self._near.get(id(s))
        if hit is None:
            reads, writes = self.touched(s)
            hit = [r for b in writes for r in self.readers_of(b)
                   if type(r) is Elementwise and self.free(r)]
            if type(s) is Elementwise:
                hit += [w for b in reads for w in self.writers_of(b)
                        if type(w) is Elementwise and self.free(w)
                        and self.rank[id(w)] < self.rank[id(s)]]
            self._near[id(s)] = hit
        return hit

    def legal(self, group: list) -> bool:
        """Whether all of ``group`` may run as one kernel (:meth:`placement`)."""
        return self.placement(group) is not None

    def commit(self, group: list, fused) -> None:
        """Replace ``group`` by ``fused`` at its :meth:`placement`."""
        at = self.placement(group)
        if at is None:
            raise ValueError("fusion: committing a group that cannot be placed")
        self._reaches.clear()
        self._placed = []
        self._near.clear()
        for s in group:
            self._unindex(s)
            del self.stmt[self.rank[id(s)]]
            del self.rank[id(s)]
        self.rank[id(fused)] = at
        self.stmt[at] = fused
        self._keep.append(fused)
        self._index(fused)
        self.taken.add(id(fused))


class _ReadElsewhere(Stmt):
    """Stands, at the end of a block being fused, for the reads of its buffers outside the
    block (after an ``If``, in the next iteration of an enclosing loop...): a group never
    keeps such a buffer as a register."""
    kind = "ReadElsewhere"

    def __init__(self, buffers):
        self.buffers = list(buffers)

    def reads(self):
        return self.buffers


def map_lists(stmts: list, fn, elsewhere: frozenset = frozenset()) -> list:
    """``fn(list) -> list`` applied to ``stmts`` and, recursively, to every block of a
    ``For``/``If``/``While``. ``elsewhere``: ids of buffers read outside ``stmts``; a
    block gets those read outside it (by its siblings, the other block, the condition)."""
    counts: dict[int, int] = {}
    for s in stmts:
        for b in s.reads():
            counts[id(b)] = counts.get(id(b), 0) + 1
    out = []
    for s in stmts:
        if isinstance(s, BLOCKS):
            mine = {id(b) for b in s.reads()}
            outside = {i for i, c in counts.items() if c > (i in mine)} | elsewhere
            reads = [{id(b) for t in blk for b in t.reads()} for blk in s.blocks()]
            cond = mine.difference(*reads) if reads else mine
            blocks = []
            for k, blk in enumerate(s.blocks()):
                other = set().union(cond, *(r for j, r in enumerate(reads) if j != k))
                blocks.append(map_lists(blk, fn, frozenset(outside | other)))
            s = s.with_blocks(blocks)
        out.append(s)
    keep = {id(b): b for t in out for b in t.writes() if id(b) in elsewhere}
    if not keep:
        return fn(out)
    fused = fn(out + [_ReadElsewhere(keep.values())])
    return [t for t in fused if not isinstance(t, _ReadElsewhere)]


MAX_TRIES = 200         # build attempts per group


def _candidates(sched: Schedule, group: list) -> list:
    """Free plain elementwise kernels reading a result of ``group`` or producing one it reads."""
    ids = {id(s) for s in group}
    found = {id(c): c for s in group for c in sched.neighbours(s) if id(c) not in ids}
    return sorted(found.values(), key=lambda s: sched.rank[id(s)])


def _space(anchor, members: list) -> int:
    """Points of the iteration space a group takes (:func:`build`'s choice)."""
    if anchor is None:
        return member_size(members[-1])
    if isinstance(anchor, DotProduct):
        return space_size(anchor.shape)
    return space_size(tuple(v.extent for v in anchor.kept))


def _closure(sched: Schedule, group: list, most: int, size: int) -> list:
    """The free plain elementwise kernels of ``size`` points reachable from ``group``
    through :meth:`Schedule.neighbours` of that size (breadth first, at most ``most``): a
    chain such as an optimizer's update grows one candidate at a time, each a rebuild of
    the whole group, where trying them all at once is one build."""
    seen = {id(s) for s in group}
    out, frontier = [], list(group)
    while frontier and len(out) < most:
        nxt = []
        for s in frontier:
            for c in sched.neighbours(s):
                if id(c) not in seen and member_size(c) == size:
                    seen.add(id(c))
                    out.append(c)
                    nxt.append(c)
        frontier = nxt
    return out[:most]


def grow(sched: Schedule, anchor, members: list, name: str, stands_for: list | None = None):
    """Grow a group from ``anchor`` (or None) and initial ``members``; commit it if it fused.

    First every free elementwise kernel of the group's size it reaches (:func:`_closure`)
    is tried at once: where that group is placeable and buildable it is the start (the main
    example's AdamW updates: 15 members in one build, not fourteen rebuilds; its fusion
    0.64 -> 0.31 s, the same groups). Then candidates (see :func:`_candidates`) are tried
    in program order; one joins when the group stays placeable (:meth:`Schedule.legal`)
    and buildable (:func:`build`). Returns the
    committed :class:`FusedKernel` or None (nothing fused: the statements stay as they are).

    ``stands_for``: the statements of the list that ``anchor`` replaces when it is not one
    of them itself (a dot product merged with the reduction of its batch dims); the group
    is then committed even with no elementwise member.
    """
    from ..procedural.ir import FusedKernel

    heads = list(stands_for) if stands_for else ([anchor] if anchor is not None else [])
    if stands_for:
        sched._keep.append(anchor)

    def attempt(ms):
        g = heads + ms
        if not sched.legal(g):
            return None
        return build(anchor, ms, sched.read_outside({id(x) for x in g}))

    members = sorted(members, key=lambda s: sched.rank[id(s)])
    best = attempt(members) if members else None
    if best is None:
        if anchor is None:
            return None
        members = []
    # not for a space of one point: the scalar arithmetic after reductions to a scalar
    # (gradient norms) is cheap to grow one by one, and all at once it goes to the first
    # reduction rather than spread as the one-by-one growth spreads it
    size = _space(anchor, members)
    batch = _closure(sched, heads + members, MAX_MEMBERS - len(members), size) \
        if size > 1 else []
    if batch:                           # all at once: one build instead of one per member
        trial = sorted(members + batch, key=lambda s: sched.rank[id(s)])
        r = attempt(trial)
        if r is not None:
            members, best = trial, r
    tries, rejected = 0, set()
    while len(members) < MAX_MEMBERS and tries < MAX_TRIES:
        added = False
        for c in _candidates(sched, heads + members):
            if id(c) in rejected:
                continue
            tries += 1
            trial = sorted(members + [c], key=lambda s: sched.rank[id(s)])
            r = attempt(trial)
            if r is None:                 # a producer may need its other readers along
                ids = {id(x) for x in trial}
                extra = [x for b in sched.touched(c)[1] for x in sched.readers_of(b)
                         if type(x) is Elementwise and sched.free(x) and id(x) not in ids]
                if extra and len(trial) + len(extra) <= MAX_MEMBERS:
                    tries += 1
                    trial = sorted(trial + list({id(x): x for x in extra}.values()),
                                   key=lambda s: sched.rank[id(s)])
                    r = attempt(trial)
            if r is not None:
                members, best, added = trial, r, True
                rejected.clear()
                break
            rejected.add(id(c))
            if tries >= MAX_TRIES:
                break
        if not added:
            break
    if stands_for and not members:
        best = build(anchor, [], sched.read_outside({id(x) for x in heads}))
        if best is None or not sched.legal(heads):
            return None
    elif not members or (anchor is None and len(members) < 2):
        return None
    group = sorted(heads + members, key=lambda s: sched.rank[id(s)])
    kernel, internal = best
    if stands_for:
        internal = tuple(internal) + tuple(
            b for h in heads for b in sched.touched(h)[1]
            if b.kind is BufferKind.TEMP and not any(b is o.buffer for o in kernel.outs))
    fused = FusedKernel(name, tuple(group), kernel, internal)
    sched.commit(group, fused)
    return fused
