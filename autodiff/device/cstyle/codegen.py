"""Kernel sources from the procedural IR: one C-style kernel per (fused) kernel statement,
in the dialect (:mod:`.dialect`) the device passes.

Every buffer lives in one arena (``buf``); ``offsets`` gives each buffer's first element
(floats). Index variables of a kernel become C ints computed from the work-item id; access
expressions are substituted and simplified (:mod:`autodiff.procedural.access`) and printed
as index arithmetic. Values are rendered through :data:`.render.CODE_FOR_OP`, either as
scalars or as ``float{w}`` vectors along one index variable (the N columns of a matmul tile,
the reduced axis of a row reduction): a load whose index moves by 1 along that variable is
a ``vload``, one that does not move is a broadcast; anything else falls back to building
the vector lane by lane (correct, slower).

Kernel kinds: :class:`~autodiff.procedural.ir.DotProduct` -> :func:`.kernels.matmul` when
both operands are plain affine loads (else a scalar loop); :class:`Reduce` ->
:func:`.kernels.row_reduce`; :class:`Elementwise`, :class:`Copy`, :class:`Gather`,
:class:`ScatterAdd` -> one work-item per element (per column for ScatterAdd).
"""
from __future__ import annotations

import math
from dataclasses import replace

from ...procedural import access as ax
from ...procedural.access import Expr, Num, Var
from ...procedural.ir import (Acc, Apply, Buffer, BufferKind, Const, Copy, DotProduct,
                              Elementwise, FusedKernel, Gather, IndexValue, Load, Local,
                              Output, Rand, Reduce, ScatterAdd, Select, Value, distinct_values,
                              value_dtype, walk_values)
from ...graph.ir import Op
from . import dtypes as D
from . import kernels as K
from . import philox
from . import render as R
from .dialect import Dialect
from .target import Target

#: B contiguous along K is transposed into scratch when C has at least this many rows
#: (the 8x16 broadcast tile then beats the 4x4 dot-product tile by 2-10x on PoCL); for
#: fewer rows the transpose would cost more than the product, and so it does for fewer
#: columns than the broadcast tile's 16 (W4's output layer, [64, 256] @ W.T with W [10,
#: 256]: transpose 3.8 us + 16-wide tiles 8.5 us -> dot form 5.2 us, PoCL, one thread)
PACK_MIN_ROWS = 64

#: float offset of the index-error record in every arena (int32 words, host-initialised
#: to ``FLAG_INIT``): word 0 the id of the first failing index-checked kernel (0: none),
#: words 1-2 the Philox iteration words, then at ``FLAG + 4`` the count, smallest and
#: largest out-of-range index of that kernel (filled only by it: first failing one wins)
FLAG = K.SLACK
#: the record's words after ``FLAG``: ``[id, words, words, spare, count, low, high, 0]``
FLAG_WORDS = 8
FLAG_INIT = (0, 0, 0, 0, 0, 2 ** 31 - 1, -(2 ** 31), 0)


def _index_report(check, var: str, d: Dialect) -> str:
    """C statements recording an out-of-range index ``var`` of the kernel with id
    ``check[0]`` into the arena's error record (OpenCL 1.1 32-bit global atomics, which the
    CUDA prelude maps to CUDA's: the first kernel to fail in program order owns the
    record)."""
    ptr = f"volatile {d.buffer} int*".replace("  ", " ")
    return (f"{{ {ptr} f = ({ptr})(buf + {FLAG}); "
            f"const int p = atomic_cmpxchg(f, 0, {check[0]}); "
            f"if (p == 0 || p == {check[0]}) {{ atomic_inc(f + 4); atomic_min(f + 5, {var}); "
            f"atomic_max(f + 6, {var}); }} }}")


def _bad(var: str, rows: int, check) -> str:
    """C condition: ``var`` is outside ``[0, rows)`` and not the ignored value."""
    cond = f"({var} < 0 || {var} >= {rows})"
    return cond if check is None or check[1] is None else f"({cond} && {var} != {check[1]})"


def affine_stride(e: Expr, v: Var) -> int | None:
    """How much ``e`` moves when ``v`` grows by 1, if that is a constant; else None
    (memoized: the same index is asked about for every vector lane, output and layer)."""
    key = (e, v)
    hit = _AFFINE.get(key, _AFFINE)
    if hit is not _AFFINE:
        return hit
    if v not in ax.variables(e):
        hit = 0
    else:
        d = ax.simplify(ax.substitute(e, {v: v + 1}) - e)
        hit = d.value if isinstance(d, Num) else None
    if len(_AFFINE) >= 1 << 16:
        _AFFINE.clear()
    _AFFINE[key] = hit
    return hit


_AFFINE: dict = {}      # (access expression, var) -> affine_stride(...)


_SUBST: dict = {}       # (env number, expression, extra) -> Values.sub(...)
_INDEX: dict = {}       # (env number, expression, offset, extra) -> Values.index(...)
_ENVS: dict = {}        # a kernel environment's items -> its number


def _env_number(env: dict) -> int:
    """A number per distinct variable environment (kernels of the same shape in every
    layer share theirs, and so their memoized indices)."""
    key = tuple(env.items())
    n = _ENVS.get(key)
    if n is None:
        if len(_ENVS) >= 1 << 14:
            _ENVS.clear()
            _SUBST.clear()
            _INDEX.clear()
        n = _ENVS[key] = len(_ENVS)
    return n


def _memo_env(table: dict, env: int, key: tuple, make):
    """``make()`` memoized by ``key`` and the environment's number ``env``."""
    k = (env,) + key
    hit = table.get(k)
    if hit is None:
        if len(table) >= 1 << 16:
            table.clear()
        hit = table[k] = make()
    return hit


def _lane(v: Var, j: int) -> Var:
    return Var(f"{v.name}_{j}", v.extent)


def lane_decls(v: Var, w: int) -> list[str]:
    """C declarations of the clamped lane indices ``v_j = min(v + j, extent - 1)``."""
    return [f"const int {v.name}_{j} = min({v.name}+{j}, {v.extent - 1});" for j in range(w)]


class Values:
    """Renders value expressions of one kernel against the arena ``buf``.

    Args:
        offsets: buffer name -> first element in the arena (floats).
        env: kernel index Var -> access expression over C-level Vars.
        acc: C expression of :class:`Acc`.
    """

    def __init__(self, offsets: dict, env: dict, acc: str = "acc",
                 hoisted: dict | None = None, align: int = 0):
        self.offsets, self.env, self.acc = offsets, env, acc
        self.locals: dict = {}     # id(buffer) -> C name of an output computed earlier
        self.hoisted = {} if hoisted is None else hoisted   # id(Value) -> C name (hoist)
        self.align = align         # the vector variable is a multiple of it (0: unknown)
        self._strides: dict = {}
        self._env = _env_number(env)

    def stride(self, idx: Expr, vec: Var) -> int | None:
        """How ``idx`` (C-level) moves from lane to lane of a vector along ``vec``: 0 or 1
        (one broadcast or one ``vload``), else None (lane by lane).

        Beyond :func:`affine_stride`: when ``vec`` is always a multiple of the vector width
        ``align`` (and the extent too, so no lane passes it), an index that is not affine
        can still be contiguous within each aligned vector: the heads of a split
        ``[..., H, 32]`` view read 8 lanes ``(c // 32) * 2048 + c % 32`` with ``c % 8 == 0``
        contiguously."""
        st = affine_stride(idx, vec)
        if st is not None or not self.align or vec not in ax.variables(idx):
            return st
        key = (idx, vec)
        if key not in self._strides:
            w = self.align
            q = Var(vec.name + "_q", max(vec.extent // w, 1))
            base = ax.simplify(ax.substitute(idx, {vec: q * w}))
            diffs = [ax.simplify(ax.substitute(idx, {vec: q * w + j}) - base)
                     for j in range(1, w)]
            st = None
            if all(isinstance(d, Num) for d in diffs):
                got = [d.value for d in diffs]
                st = 1 if got == list(range(1, w)) else 0 if not any(got) else None
            self._strides[key] = st
        return self._strides[key]

    def hoist(self, values, allowed=frozenset()) -> list[str]:
        """Declare once the largest subexpressions of ``values`` that do not change from
        point to point (their loads use no index variable but those named in ``allowed``):
        Adam's bias corrections ``1 - beta ** step``, a learning rate read from memory.
        Later renderings of them name the declared scalar (broadcast in vectors).
        Returns the C declarations, in dependency order."""
        lines: list[str] = []

        def uniform(v) -> bool:
            if isinstance(v, Const):
                return True
            if isinstance(v, Load):
                return all(x.name in allowed for x in ax.variables(self.sub(v.index)))
            if isinstance(v, Apply):
                return all(uniform(a) for a in v.args)
            if isinstance(v, Select):
                return all(x.name in allowed for x in ax.variables(self.sub(v.cond))) \
                    and uniform(v.a) and uniform(v.b)
            return False

        def visit(v):
            if id(v) in self.hoisted:
                return
            if isinstance(v, (Apply, Select)) and uniform(v):
                name = f"u{len(self.hoisted)}_"
                expr = self.scalar(v)
                ctype = D.ctype(value_dtype(v))
                self.hoisted[id(v)] = name
                lines.append(f"const {ctype} {name} = {expr};")
                return
            if isinstance(v, Apply):
                for a in v.args:
                    visit(a)
            elif isinstance(v, Select):
                visit(v.a)
                visit(v.b)
        for v in values:
            visit(v)
        return lines

    def index(self, buf, e: Expr, extra: dict | None = None) -> Expr:
        """Arena index of ``buf[e]``, in ``buf``'s storage units (floats for 4-byte dtypes,
        see :mod:`.dtypes`): kernel vars substituted by ``env``, then C-level vars by
        ``extra`` (the lanes of a vector)."""
        off = self.offsets[buf.name] * D.per_float(buf.dtype)
        return _memo_env(_INDEX, self._env, (e, off, tuple(extra.items()) if extra else None),
                         lambda: ax.simplify(self.sub(e, extra) + off))

    def sub(self, e: Expr, extra: dict | None = None) -> Expr:
        """``e`` with the kernel vars substituted by ``env`` (then ``extra``), simplified;
        memoized (every vector lane, output and operand asks again)."""
        def make():
            x = ax.substitute(e, self.env)
            return ax.simplify(ax.substitute(x, extra) if extra else x)
        return _memo_env(_SUBST, self._env, (e, tuple(extra.items()) if extra else None),
                         make)

    def scalar(self, v: Value, extra: dict | None = None, lane: int | None = None) -> str:
        """C expression of ``v`` for one work item (``extra``: more Var substitutions;
        ``lane``: the vector lane being built, for registers computed as vectors)."""
        if id(v) in self.hoisted:
            return self.hoisted[id(v)]
        if isinstance(v, Local):
            name = self.locals[id(v.buffer)]
            return name if lane is None else K.lane(name, lane)
        if isinstance(v, Load):
            return R.load(R.access(self.index(v.buffer, v.index, extra)), v.buffer.dtype)
        if isinstance(v, Const):
            return R.const(v.value, 1, v.dtype)
        if isinstance(v, Acc):     # a lane of the accumulator vector when building lanes
            return D.round_to(self.acc if lane is None else
                              K.lane(self.acc, lane), v.dtype)
        if isinstance(v, Rand):
            return philox.call(v.key, R.access(self.sub(v.index, extra)))
        if isinstance(v, IndexValue):            # loop-counter arithmetic: an int (0/1 bool)
            return f"((int)({R.access(self.sub(v.expr, extra))}))"
        if isinstance(v, Select):
            cond = R.access(self.sub(v.cond, extra))
            return (f"(({cond}) ? ({self.scalar(v.a, extra, lane)}) : "
                    f"({self.scalar(v.b, extra, lane)}))")
        if isinstance(v, Apply):
            return self._apply(v, [self.scalar(a, extra, lane) for a in v.args], 1)
        raise NotImplementedError(f"codegen: cannot render value {type(v).__name__}")

    def _apply(self, v: Apply, args: list[str], w: int) -> str:
        operand = value_dtype(v.args[1 if v.op is Op.WHERE else 0])
        if v.op is Op.CAST:
            return R.cast(args[0], operand, v.dtype, w)
        return R.code(v.op, args, w, v.dtype, operand)

    def vectorizable(self, v: Value, vec: Var) -> bool:
        """Whether every load of ``v`` moves by 0 or 1 along ``vec`` (and no Select
        condition depends on it, and no random draw is in it), and every value in it is a
        ``float{w}`` vector or a bool mask of one (:func:`.dtypes.vector_ok`)."""
        if id(v) in self.hoisted:
            return value_dtype(v) == "float32"
        if isinstance(v, Load):
            return v.buffer.dtype == "float32" and \
                self.stride(self.index(v.buffer, v.index), vec) in (0, 1)
        if isinstance(v, Select):
            cond = self.sub(v.cond)
            return self.stride(cond, vec) == 0 and all(
                self.vectorizable(x, vec) for x in (v.a, v.b))
        if isinstance(v, Apply):
            operand = value_dtype(v.args[1 if v.op is Op.WHERE else 0])
            return D.vector_ok(v.op, operand, v.dtype) and all(
                self.vectorizable(a, vec) for a in v.args)
        if isinstance(v, (Const, Acc)):
            return v.dtype == "float32"
        if isinstance(v, Local):
            return v.dtype in ("float32", "bool")
        return not isinstance(v, (Rand, IndexValue))    # built lane by lane

    def vector(self, v: Value, vec: Var, w: int) -> str:
        """C expression of the ``float{w}`` vector of ``v`` at ``vec .. vec+w-1``.

        Lanes past ``vec``'s extent read memory next to the operand (kept in bounds by the
        arena slack) or, on the lane-by-lane path, the last valid element; callers do not
        store them. Lane-by-lane rendering needs :func:`lane_decls` in scope.
        """
        if w == 1:
            return self.scalar(v)
        if not self.vectorizable(v, vec):
            lanes = [self.scalar(v, {vec: _lane(vec, j)}, j) for j in range(w)]
            return f"(({D.ctype(value_dtype(v), w)})({', '.join(lanes)}))"
        return self._vector(v, vec, w)

    def _vector(self, v: Value, vec: Var, w: int) -> str:
        if id(v) in self.hoisted:
            return f"(({D.ctype(value_dtype(v), w)})({self.hoisted[id(v)]}))"
        if isinstance(v, Load):
            idx = self.index(v.buffer, v.index)
            s = R.access(idx)
            if self.stride(idx, vec) == 0:
                return f"(({D.ctype(v.buffer.dtype, w)})({R.load(s, v.buffer.dtype)}))"
            return f"vload{w}(0, buf + {s})"          # float32 only (vectorizable)
        if isinstance(v, Const):
            return R.const(v.value, w, v.dtype)
        if isinstance(v, Acc):
            return self.acc
        if isinstance(v, Local):
            return self.locals[id(v.buffer)]
        if isinstance(v, Select):
            cond = R.access(self.sub(v.cond))
            return f"(({cond}) ? ({self._vector(v.a, vec, w)}) : ({self._vector(v.b, vec, w)}))"
        if isinstance(v, Apply):
            if v.op is Op.DIV and v.dtype == "float32" and self.uniform(v.args[1], vec):
                # one scalar division per vector, then a product (softmax's x / sum(x)
                # by rows; ATen's vectorised softmax multiplies by the reciprocal too):
                # ``_ad_divs`` in the device's math library
                return f"_ad_divs({self._vector(v.args[0], vec, w)}, {self.scalar(v.args[1])})"
            return self._apply(v, [self._vector(a, vec, w) for a in v.args], w)
        raise NotImplementedError(f"codegen: cannot render value {type(v).__name__}")

    def uniform(self, v: Value, vec: Var) -> bool:
        """Whether float32 ``v`` is the same in every lane of a vector along ``vec``:
        constants and loads that move by 0 along it, and ops of those."""
        if value_dtype(v) != "float32":
            return False
        if id(v) in self.hoisted or isinstance(v, Const):
            return True
        if isinstance(v, Load):
            return self.stride(self.index(v.buffer, v.index), vec) == 0
        if isinstance(v, Apply):
            return all(self.uniform(a, vec) for a in v.args)
        return False


def _flat_env(vars, shape, flat: Var) -> dict:
    if 0 in tuple(shape):               # an empty space: no work-item ever runs
        return {v: Num(0) for v in vars}
    return {v: e for v, e in zip(vars, ax.unflat(flat, shape))}


def _indices(values, outs=()) -> list[Expr]:
    """Every access expression of ``values`` (loads, random draws, Select conditions) and
    ``outs``."""
    out = [o.index for o in outs]
    for v in values:
        for x in walk_values(v):
            if isinstance(x, (Load, Rand)):
                out.append(x.index)
            elif isinstance(x, Select):
                out.append(x.cond)
    return out


def merge_dims(vars_, indices) -> tuple[list[Var], dict]:
    """Merge adjacent index variables that every access expression walks contiguously.

    ``(outer, inner)`` merge into one variable ``m`` of extent ``outer * inner`` when every
    index is affine in both with ``stride(outer) == stride(inner) * extent(inner)``; then
    ``outer -> 0, inner -> m`` gives the same addresses. Flattening a kernel's space over
    fewer variables removes div/mod index arithmetic and exposes unit strides to vector
    loads.

    Returns:
        ``(merged variables, substitution: original var -> expression)``.
    """
    vars_ = list(vars_)
    sub: dict = {v: v for v in vars_}
    i = len(vars_) - 2
    while i >= 0:
        o, n = vars_[i], vars_[i + 1]
        strides = [(affine_stride(e, o), affine_stride(e, n)) for e in indices]
        if all(so is not None and sn is not None and so == sn * n.extent for so, sn in strides):
            m = Var(f"{o.name}{n.name}", o.extent * n.extent)
            rep = {o: Num(0), n: m}
            indices = [ax.simplify(ax.substitute(e, rep)) for e in indices]
            sub = {k: ax.simplify(ax.substitute(e, rep)) for k, e in sub.items()}
            vars_[i:i + 2] = [m]
        i -= 1
    return vars_, sub


def _space_env(vars_, indices, flat_name: str):
    """``(flat Var, env)``: the kernel's vars as expressions of one flat work-item index
    over the merged space."""
    merged, sub = merge_dims(vars_, indices)
    shape = tuple(v.extent for v in merged)
    flat = Var(flat_name, max(math.prod(shape), 1))
    fenv = _flat_env(merged, shape, flat)
    return flat, {k: ax.simplify(ax.substitute(e, fenv)) for k, e in sub.items()}


def _stores(vals: Values, outs, w: int = 1, vec: Var | None = None,
            ncols: int | None = None) -> list[str]:
    """Compute every output value, then store them (reads before writes). Outputs whose
    buffer has no arena offset (internal to a fused group) are registers only, and so
    are outputs a later one overwrites (the steps of an in-place update)."""
    lines, stores = [], []
    final = {(id(o.buffer), o.index): n for n, o in enumerate(outs)}
    live = _live_outputs(outs, vals.offsets, final)
    for n, o in enumerate(outs):
        if not live[n]:
            continue
        dt = o.buffer.dtype
        val = vals.vector(o.value, vec, w) if w > 1 else vals.scalar(o.value)
        lines.append(f"const {D.ctype(dt, w)} o{n} = {val};")
        vals.locals[id(o.buffer)] = f"o{n}"
        if o.buffer.name not in vals.offsets or final[(id(o.buffer), o.index)] != n:
            continue                 # a register, or overwritten by a later output
        idx = vals.index(o.buffer, o.index)
        if w == 1:
            stores.append(D.store(R.access(idx), f"o{n}", dt))
        elif vals.stride(idx, vec) == 1 and D.is_word(dt):
            v = f"o{n}" if dt == "float32" else f"as_float{w}(o{n})"
            stores += K.store_lanes(v, w, f"(buf + {R.access(idx)})", vec.name, ncols)
        else:
            for j in range(w):
                lane = R.access(vals.index(o.buffer, o.index, {vec: vec + j}))
                guard = f"if ({vec.name}+{j} < {ncols}) " if ncols else ""
                stores.append(guard + D.store(lane, K.lane(f"o{n}", j), dt))
    return lines + stores


def _live_outputs(outs, offsets, final) -> list[bool]:
    """Which of a kernel's outputs to compute: those stored to the arena (the last write
    of their point) and those a computed later output reads. A fused group can keep a
    register nobody reads (GELU's forward kept ``exp(-x^2/2)`` of its derivative after the
    backward recomputed it). LLVM deletes such code when it compiles, so no step gets
    faster (measured); the source does not carry it: the main job's training program
    2% shorter, and kernels that differed only by dead code share a body (100 -> 99)."""
    live, read = [False] * len(outs), set()
    for n in reversed(range(len(outs))):
        o = outs[n]
        if (o.buffer.name in offsets and final[(id(o.buffer), o.index)] == n) or \
                id(o.buffer) in read:
            live[n] = True
            read |= {id(x.buffer) for x in distinct_values(o.value) if type(x) is Local}
    return live


def vector_space(vars_, indices, width: int, names=("i", "c")):
    """Split a kernel space into work-items of ``width`` consecutive points along its
    innermost (merged) variable.

    Returns:
        ``(n, chunks, vec, env)``: ``n`` work-items; ``chunks`` per outer point; ``vec``
        the C-level vector variable (``c``, a multiple of ``width`` below the inner
        extent); ``env`` the kernel's vars as expressions of ``c`` and the flat outer
        index (``i``). With ``width == 1`` (or an empty space) ``vec`` is None and the
        space is one flat index ``i``, as :func:`_space_env`.
    """
    merged, sub = merge_dims(vars_, indices)
    if width == 1 or not merged or 0 in [v.extent for v in merged]:
        flat, env = _space_env(vars_, indices, names[0])
        return flat.extent, 1, None, env
    inner = merged[-1]
    outer_shape = tuple(v.extent for v in merged[:-1])
    chunks = K._cdiv(inner.extent, width)
    q = Var(names[0], max(math.prod(outer_shape), 1))
    vec = Var(names[1], inner.extent)
    fenv = _flat_env(merged[:-1], outer_shape, q)
    fenv[inner] = vec
    env = {k: ax.simplify(ax.substitute(e, fenv)) for k, e in sub.items()}
    return q.extent * chunks, chunks, vec, env


def pick_width(width: int, extent: int) -> int:
    """Lanes of a vector kernel along a variable of ``extent``: the largest power of two up
    to ``width`` that divides ``extent`` when that is at least 8 (no masked tail), else the
    largest that is at most ``extent`` rounded up to a multiple of 4; scalar for extents
    below 4, where lanes would go to waste."""
    if width <= 1 or extent < 4:
        return 1
    w = width
    while w > 8 and extent % w:
        w //= 2
    if extent % w == 0:
        return w
    w = width
    while w > 4 and w > extent + 3:
        w //= 2
    return w


def _split_index(d: Dialect, n: int, chunks: int, vec: Var | None, w: int,
                 outer: str = "i", bound: str | None = None) -> list[str]:
    """C lines computing the work-item's outer index ``outer`` (and ``vec``, see
    :func:`vector_space`) with an early exit past ``n`` work-items (``bound``: the C text
    of ``n`` there, default the literal)."""
    bound = bound or str(n)
    if vec is None:
        return [f"  const int {outer} = {d.index('global', 0)};",
                f"  if ({outer} >= {bound}) return;"]
    L = [f"  const int g_ = {d.index('global', 0)};", f"  if (g_ >= {bound}) return;"]
    if chunks == 1:
        return L + [f"  const int {outer} = g_;", f"  const int {vec.name} = 0;"]
    if n == chunks:                     # one outer point: the code holds no extent
        return L + [f"  const int {outer} = 0;", f"  const int {vec.name} = g_ * {w};"]
    return L + [f"  const int {outer} = g_ / {chunks};",
                f"  const int {vec.name} = (g_ % {chunks}) * {w};"]


def elementwise(name: str, k: Elementwise, offsets: dict, d: Dialect,
                width: int = 1) -> K.Source:
    """Straight-line code, one work-item per ``w`` consecutive points along the innermost
    (merged) variable (``w`` from :func:`pick_width`; 1 gives one work-item per point).

    Loads moving by 1 along that variable are ``vload`` s, those not moving are broadcasts,
    others are gathered lane by lane; stores past the extent are masked."""
    idx = _indices(k.values(), k.outs)
    merged, _ = merge_dims(k.vars, idx)
    w = pick_width(width, merged[-1].extent if merged else 1)
    if w > 1 and _unsafe_lanes(k.values()):
        w = 1
    n, chunks, vec, env = vector_space(k.vars, idx, w)
    vals = Values(offsets, env, align=w if vec is not None and vec.extent % w == 0 else 0)
    head = vals.hoist(k.values())
    if vec is not None and not all(vals.vectorizable(v, vec) for v in k.values()):
        head += lane_decls(vec, w)
    ncols = None if vec is None or vec.extent % w == 0 else vec.extent
    body = _stores(vals, k.outs, w, vec, ncols)
    local = 64
    L = [d.signature(name, [f"{d.pointer()} restrict buf"]) + " {"]
    L += _split_index(d, n, chunks, vec, w, bound=_bound(offsets, n))
    L += [f"  {s}" for s in head + body] + ["}"]
    return K.Source(name, "\n".join(L), (K._cdiv(max(n, 1), local) * local,), (local,))


#: int32 ops that may trap on the garbage lanes past a vector's extent (x86 integer
#: division): kernels with them run one point per work-item
_TRAPPING_INT_OPS = frozenset({Op.DIV})


def _unsafe_lanes(values) -> bool:
    return any(isinstance(x, Apply) and x.dtype == "int32" and x.op in _TRAPPING_INT_OPS
               for v in values for x in walk_values(v))


#: extent given to the Vars standing for arena offsets passed as kernel arguments
PARAM_EXTENT = 1 << 30


class Args:
    """The arena offsets of a kernel's buffers as kernel arguments.

    Rendering against an ``Args`` instead of a plain ``{name: offset}`` dict makes every
    buffer's offset a C ``int`` parameter (``p0_``, ``p1_``, ... in first-use order) instead
    of a literal: kernels of the same structure over different buffers (the layers of a
    model, the AdamW update of same-shaped parameters) then render to the same source, are
    built and JIT-compiled once, and differ only in the arguments each launch sets
    (PoCL compiles a kernel per name and local size at its first launch: 60-400 ms each).
    Offsets named in ``literal`` (the shared scratch regions) stay literals.

    A renderer may also make an int of the code a parameter (:meth:`size`): the extent a
    work-item's early exit compares with, the trip count of a whole-array reduction.
    Kernels of the same code over spaces of other sizes (the AdamW update of each
    parameter, the squared norm of each gradient) then share one body as well.

    Mapping interface as used by the renderers: ``args[name]`` (a Var, or the literal),
    ``name in args``; :meth:`with_` adds a literal entry; :meth:`params` / :meth:`values`
    give the C declarations and this kernel's argument values.
    """

    def __init__(self, offsets: dict, literal=()):
        self.offsets, self.literal = offsets, frozenset(literal)
        self.names: list[str] = []
        self.vars: dict = {}
        self.extra: dict = {}
        self.sizes: dict = {}           # a size parameter's key in names -> its value

    def __getitem__(self, name: str):
        if name in self.extra:
            return self.extra[name]
        if name in self.literal:
            return self.offsets[name]
        v = self.vars.get(name)
        if v is None:
            self.offsets[name]                         # KeyError for an unknown buffer
            v = self.vars[name] = Var(f"p{len(self.names)}_", PARAM_EXTENT)
            self.names.append(name)
        return v

    def __contains__(self, name) -> bool:
        return name in self.extra or name in self.offsets

    def with_(self, name: str, value: int) -> "Args":
        """A view recording into the same parameters, with ``name`` at literal ``value``."""
        view = Args(self.offsets, self.literal)
        view.names, view.vars, view.extra = self.names, self.vars, {**self.extra, name: value}
        view.sizes = self.sizes
        return view

    def size(self, value: int) -> str:
        """The C name of a new int parameter whose argument is ``value``."""
        key = f"#size{len(self.names)}"
        self.vars[key] = Var(f"p{len(self.names)}_", PARAM_EXTENT)
        self.sizes[key] = int(value)
        self.names.append(key)
        return self.vars[key].name

    def params(self) -> tuple[str, ...]:
        return tuple(f"const int {self.vars[n].name}" for n in self.names)

    def values(self) -> tuple[int, ...]:
        return tuple(self.sizes[n] if n in self.sizes else int(self.offsets[n])
                     for n in self.names)


def _bound(offsets, n: int) -> str:
    """C text of extent ``n`` in a work-item's early exit: a parameter when rendering with
    :class:`Args` (see :meth:`Args.size`), else the literal (and for a one-point kernel,
    whose extent is always 1)."""
    return offsets.size(n) if isinstance(offsets, Args) and n != 1 else str(n)


def _with(offsets, name: str, value: int):
    """``offsets`` plus ``name -> value`` (a dict or an :class:`Args`)."""
    return offsets.with_(name, value) if isinstance(offsets, Args) else {**offsets, name: value}


def _param_free(e: Expr) -> bool:
    """Whether ``e`` uses no index variable, only offset parameters."""
    return all(v.extent == PARAM_EXTENT for v in ax.variables(e))


def _affine_ref(vals: Values, v: Value, vars_: list[Var]) -> K.Ref | None:
    if isinstance(v, Const) and v.dtype == "float32":
        return K.Ref(0, (0,) * len(vars_), float(v.value))
    if not isinstance(v, Load) or v.buffer.dtype != "float32":
        return None
    idx = vals.index(v.buffer, v.index)
    strides = [affine_stride(idx, x) for x in vars_]
    if any(s is None for s in strides):
        return None
    base = ax.simplify(ax.substitute(idx, {x: Num(0) for x in vars_}))
    if isinstance(base, Num):
        return K.Ref(base.value, tuple(strides))
    return K.Ref(f"({R.access(base)})", tuple(strides)) if _param_free(base) else None


def dot_product(name: str, k: DotProduct, offsets: dict, d: Dialect,
                tile: tuple[int, int, int] = (K.TM, K.TN, 1), width: int = 1,
                micro: bool = False) -> list:
    """A matmul tile kernel with the outputs' epilogue fused (register ``tile``, see
    :func:`.kernels.matmul`), or a scalar fallback; operands that are not strided arrays
    are first packed by kernels of ``width`` lanes per work-item. ``micro``: the tile loop
    of a product from panels is the shared :func:`.kernels.micro_kernel`."""
    if math.prod(k.shape) == 0:
        return [_dot_scalar(name, k, offsets, d)]          # an empty product: no tiles
    *batch, M, N = k.shape
    batch = tuple(batch)
    bv, mv, nv = list(k.vars[:-2]), k.vars[-2], k.vars[-1]
    Kd = k.k.extent
    vals = Values(offsets, {})
    va, vb = k.a, k.b
    if _transposed_outputs(k, offsets, mv, nv):
        # outputs run along M: compute C^T = B^T A^T so that the stores are vectors
        va, vb, M, N, mv, nv = k.b, k.a, N, M, nv, mv
    a = _affine_ref(vals, va, bv + [mv, k.k])
    b = _affine_ref(vals, vb, bv + [k.k, nv])
    tile = K.fit_tile(tile, N)
    cols = K.tile_columns(tile)
    pre = []
    consts = any(r is not None and r.const is not None for r in (a, b))
    if not batch and not consts and SCRATCH_A in offsets and Kd >= PANEL_MIN_K and \
            2 * M * N * Kd >= PANEL_MIN_FLOPS and D.CTYPE[k.dtype] != "int" and \
            not _in_place(M, Kd, a, b):
        if a is None or a.strides[-1] != 1:      # A not contiguous along K: panels
            pre.append(_pack_panel(name + "_pa", va, a, False, mv, k.k, M, Kd,
                                   K.panel_rows(tile, M), offsets[SCRATCH_A], offsets, d,
                                   width))
            a = K.Ref(offsets[SCRATCH_A], (0, 0), panel=True)
        pre.append(_pack_panel(name + "_pb", vb, b, True, nv, k.k, N, Kd, K.TN,
                               offsets[SCRATCH_B], offsets, d, width))
        b = K.Ref(offsets[SCRATCH_B], (0, 0), panel=True)
    else:
        if b is not None and b.const is None and b.strides[-1] != 1 and M >= PACK_MIN_ROWS \
                and N >= K.TN:
            b = None      # B runs along K: packing it (a transpose) beats the dot form
        if Kd and (a is None or b is None) and SCRATCH_A in offsets:
            # an operand that is not a strided array (head split/merge views, computed
            # prologues): pack it densely into scratch first, then run the tile kernel
            if a is None:
                a, src = _pack(name + "_pa", va, bv + [mv, k.k], offsets[SCRATCH_A],
                               offsets, d, len(bv), width)
                pre.append(src)
            if b is None:
                b, src = _pack(name + "_pb", vb, bv + [k.k, nv], offsets[SCRATCH_B],
                               offsets, d, len(bv), width)
                pre.append(src)
        if a is None or b is None or Kd == 0 or D.CTYPE[k.dtype] == "int":
            return [_dot_scalar(name, k, offsets, d)]
    bi = Var("bi", max(math.prod(batch), 1))
    benv = _flat_env(bv, batch, bi) if batch else {}
    row = Var("rr", M)
    hv = Values(offsets, {**benv, mv: row, nv: Var("n0", N)})
    prelude = hv.hoist([o.value for o in k.outs], allowed={"bi"})

    def store(acc, w, rexpr, cexpr):
        col = Var(cexpr, N)            # a multiple of w: n0 = 16 g0 (+ 8 for a half)
        vs = Values(offsets, {**benv, mv: row, nv: col}, acc, hv.hoisted,
                    align=w if N % cols == 0 else 0)
        body = _stores(vs, k.outs, w, col, None if N % cols == 0 else N)
        lanes = [] if all(vs.vectorizable(o.value, col) for o in k.outs) else \
            lane_decls(col, w)
        return [f"{{ const int rr = {rexpr};"] + lanes + body + ["}"]
    return pre + [K.matmul(name, M, N, Kd, a, b, store, batch, d=d, tile=tile,
                           prelude=prelude, micro=micro)]


#: offsets keys of the two scratch regions operands are packed into
SCRATCH_A, SCRATCH_B = "__scratch_a", "__scratch_b"

#: a DotProduct without batch dims packs B (and A when A is not contiguous along K) into
#: register-tile panels (:func:`.kernels.panel_rows`) when it has at least this many flops
#: and this long a K: a streaming pass over the operand buys 1.3-2x in the tile loop. At
#: 2^20 rather than 2^22, W4's first layer (x [64, 64] @ W.T, 2.1 MFLOP) packs its weight
#: into panels by rows (vector loads) instead of transposing it element by element into
#: a dense copy: that pack 14.4 -> 7.2 us, the step's kernels 281-283 -> 273-275 us (one
#: PoCL thread, in the run); W1-W3's programs are unchanged
PANEL_MIN_FLOPS = 1 << 20
PANEL_MIN_K = 32

#: ... and, when both operands are read in place (A along K, B along N), at least this
#: many rows: B's panels are a copy of all of B that only the product's ceil(M / rows)
#: row tiles share. W4 ([64, 256] @ [256, 256], one PoCL thread, Sapphire Rapids, in
#: the run): its step 0.258-0.276 -> 0.250-0.254 ms without them; W3's M = 1024 products
#: are 1-2% faster with them
PANEL_MIN_ROWS = 256

#: ... and when A runs along M (``dY^T`` in a weight gradient ``dY^T @ X``, B along N), at
#: most :data:`PANEL_MIN_ROWS` rows and this long a K: per ``k`` a tile reads its 8 rows of
#: A as one cache line, and packing both operands costs more than it buys. One PoCL thread
#: (Sapphire Rapids, kernels replayed alone, best of 15): [256, K] x [K, 256] with both
#: packs -> read in place, K 64: 109 -> 103 us, K 128: 188 -> 175 us, K 256: 209 -> 213
#: us; [1024, 64] x [64, 256]: 356 -> 391 us (so not for more rows). W4's two weight
#: gradients (K = 64, the batch): the step's kernels 261 -> 250 us. (Measured on Intel
#: only: on Zen 3, A^T read in place ran at 27-44 GFLOP/s against 69-79 from panels for
#: long K, :func:`.kernels.panel_rows`; short K was not measured there)
STRIDED_A_MAX_K = 128


def _in_place(M: int, Kd: int, a: K.Ref | None, b: K.Ref | None) -> bool:
    """Whether a product large enough for panels reads both operands where they are
    (strided arrays, B along N): A along K and fewer than :data:`PANEL_MIN_ROWS` rows, or A
    along M with a short K (:data:`STRIDED_A_MAX_K`)."""
    if a is None or b is None or b.strides[-1] != 1:
        return False
    if a.strides[-1] == 1:
        return M < PANEL_MIN_ROWS
    return a.strides[-2] == 1 and M <= PANEL_MIN_ROWS and Kd <= STRIDED_A_MAX_K


def pack_sizes(k: DotProduct) -> tuple[int, int]:
    """Floats of scratch needed to pack the A and B operands of a DotProduct (row-major,
    or in panels padded to 8 rows, and to whole tiles of up to :data:`.kernels.WIDE`
    columns: a wide tile reads the panel after the last one; ``max(N, M)``: a product
    computed transposed packs its A as the B panels)."""
    *batch, M, N = k.shape
    B, Kd = math.prod(batch), k.k.extent
    return B * (M + 8) * Kd, B * Kd * (max(N, M) + K.WIDE)


def _pack_panel(name, value, ref, is_b: bool, rv, kv, R_, Kd, rows, dst, offsets, d,
                width) -> K.Source:
    """A kernel packing operand ``value`` (A, or B when ``is_b``; over the row-or-column
    var ``rv`` of extent ``R_`` and the contraction var ``kv``) into panels
    ``[ceil(R_/rows)][Kd][rows]`` at ``dst``: :func:`.kernels.pack_panels` when the operand
    is a strided array ``ref``, else an elementwise kernel (vectors along K, or along the
    panel rows when the operand is contiguous along them), zeros past ``R_``."""
    if ref is not None:
        st = ref.strides[-2:]
        view = K.Ref(ref.offset, (st[1], st[0]) if is_b else st)
        return K.pack_panels(name, R_, Kd, view, rows, dst, d, width)
    view = _chunked_view(value, rv, kv, Kd, offsets)
    if view is not None:
        return K.pack_panels(name, R_, Kd, view, rows, dst, d, width)
    from ...fusion.group import subst_value
    T, I, Kq = Var("T", K._cdiv(R_, rows)), Var("I", rows), Var("Kq", Kd)
    r = T * rows + I
    v = subst_value(value, {rv: ax.simplify(r), kv: Kq})
    if R_ % rows:
        v = Select(ax.simplify(ax.Lt(r, Num(R_))), v, Const(0.0))
    probe = Values({}, {}, align=8 if rv.extent % 8 == 0 else 0)
    along_r = any(probe.stride(ld.index, rv) == 1 for ld in _loads_of(value))
    vars_ = (T, Kq, I) if along_r else (T, I, Kq)     # vectors along K unless A^T-like
    out = Buffer("__panel", (T.extent, Kd, rows), "float32", BufferKind.TEMP)
    idx = ax.flat([T, Kq, I], (T.extent, Kd, rows))
    k = Elementwise(tuple(x.extent for x in vars_), vars_, (Output(out, idx, v),))
    return elementwise(name, k, _with(offsets, out.name, dst), d, width)


def _chunked_view(value, rv: Var, kv: Var, Kd: int, offsets):
    """For an operand that is a float32 view moving by a constant stride along ``kv``
    within each aligned chunk of 16 (head merges ``[.., H, 32] -> [.., H*32]``, and their
    transposes), ``(hook, stride)`` for :func:`.kernels.pack_panels`: the hook gives the
    arena index of element ``(r, k0)``. None for any other operand."""
    if not isinstance(value, Load) or value.buffer.dtype != "float32" or Kd % 16:
        return None
    q = Var("Kq_", Kd // 16)
    at = lambda j: ax.substitute(value.index, {kv: q * 16 + j})
    diffs = [ax.simplify(at(j) - at(0)) for j in (1, 15)]
    if not all(isinstance(x, Num) for x in diffs) or diffs[1].value != 15 * diffs[0].value:
        return None
    step = diffs[0].value
    if any(ax.simplify(at(j) - at(0)) != Num(j * step) for j in range(2, 15)):
        return None
    r_ = Var("PROW_", rv.extent)
    e = R.access(Values(offsets, {rv: r_, kv: Var("k0", Kd)}).index(value.buffer,
                                                                    value.index))
    return (lambda r: e.replace("PROW_", f"({r})")), step


def _pack(name, value, vars_, dst, offsets, d, batch: int = 0, width: int = 1):
    """Elementwise kernel writing ``value`` over ``vars_`` densely (row-major) at ``dst``
    (with ``width`` >= 8, a strided array contiguous along the second-to-last var only:
    :func:`.kernels.transpose_pack`). When ``value`` does not depend on the first
    ``batch`` vars (a weight broadcast over the batch), it is packed once and the
    returned Ref has stride 0 along them."""
    used = set().union(*(ax.variables(e) for e in _indices([value])))
    shared = batch and not any(v in used for v in vars_[:batch])
    if shared:
        ref, src = _pack(name, value, vars_[batch:], dst, offsets, d, width=width)
        return K.Ref(ref.offset, (0,) * batch + ref.strides), src
    shape = tuple(v.extent for v in vars_)
    strides = tuple(int(math.prod(shape[i + 1:])) for i in range(len(shape)))
    ref = _affine_ref(Values(offsets, {}), value, list(vars_))
    if width >= 8 and len(shape) >= 2 and shape[-2] % 8 == 0 and shape[-1] % 8 == 0 and \
            ref is not None and ref.const is None and ref.strides[-2] == 1 and \
            ref.strides[-1] != 1:
        # contiguous along the second-to-last axis only (a transpose): 8x8 register
        # transposes, not a gather of eight scalar loads per vector
        return K.Ref(dst, strides), K.transpose_pack(name, shape[:-2], shape[-2], shape[-1],
                                                     ref, dst, d)
    out = Buffer("__pack", shape, "float32", BufferKind.TEMP)
    k = Elementwise(shape, tuple(vars_), (Output(out, ax.flat(list(vars_), shape), value),))
    src = elementwise(name, k, _with(offsets, out.name, dst), d, width)
    return K.Ref(dst, strides), src


def _transposed_outputs(k: DotProduct, offsets: dict, mv: Var, nv: Var) -> bool:
    """Whether every stored output is contiguous along M and none along N."""
    idx = [o.index for o in k.outs if o.buffer.name in offsets]
    along = lambda v: [affine_stride(e, v) == 1 for e in idx]
    return bool(idx) and all(along(mv)) and not any(along(nv))


def _dot_scalar(name, k: DotProduct, offsets, d):
    n = math.prod(k.shape)
    gid = Var("i", max(n, 1))
    env = _flat_env(k.vars, k.shape, gid)
    kk = Var("kk", max(k.k.extent, 1))
    vals = Values(offsets, {**env, k.k: kk}, "acc")
    a, b = vals.scalar(k.a), vals.scalar(k.b)
    integer = D.CTYPE[k.dtype] == "int"           # integers wrap: computed on uint
    L = [d.signature(name, [f"{d.pointer()} restrict buf"]) + " {",
         f"  const int i = {d.index('global', 0)};", f"  if (i >= {n}) return;",
         "  int acc = 0;" if integer else "  float acc = 0.0f;",
         f"  for (int kk = 0; kk < {k.k.extent}; kk++)",
         f"    acc = (int)((uint)acc + (uint)({a}) * (uint)({b}));" if integer
         else f"    acc = fma({a}, {b}, acc);"]
    L += [f"  {s}" for s in _stores(Values(offsets, env, "acc"), k.outs)] + ["}"]
    return K.Source(name, "\n".join(L), (K._cdiv(max(n, 1), 64) * 64,), (64,))


def reduce(name: str, k: Reduce, offsets: dict, d: Dialect,
           tree: bool = False, width: int = 1) -> K.Source:
    """A reduction with its epilogue, in one of three forms:

    * row form: one work-item per kept point, the reduced points flattened to ``j`` and
      read 16 at a time when the source is contiguous (or constant) along ``j``;
    * column form (``width > 1``, the source not contiguous along ``j`` but along the
      innermost kept variable, e.g. ``sum(dim=0)`` of a row-major matrix): one work-item per
      ``w`` consecutive kept points, accumulating ``float{w}`` rows read contiguously, the
      epilogue computed and stored as vectors;
    * with ``tree`` (GPU devices), one work-group per kept point
      (:func:`.kernels.tree_reduce`, a complete kernel in ``d.whole``).
    """
    kept_shape = tuple(k.shape[i] for i in range(len(k.shape)) if i not in k.axes)
    red_shape = tuple(k.shape[i] for i in k.axes)
    rows, length = math.prod(kept_shape), math.prod(red_shape)
    idx = _indices([k.src] + [o.value for o in k.outs], k.outs)   # epilogue loads too
    _, kenv = _space_env(k.kept, idx, "r")
    j, renv = _space_env(k.reduced, _indices([k.src]), "j")
    env = {**kenv, **renv}
    # the row form's vector loop reads j = 0, 16, 32...: an index that is not affine in j
    # (a full reduction of [1024, 128] broadcasting a per-row value, j / 128) can still be
    # one broadcast or one vload per 16 lanes
    vals = Values(offsets, env, align=16 if length % 16 == 0 else 0)
    vector = length >= 16 and vals.vectorizable(k.src, j)
    op = {Op.SUM: "sum", Op.RMAX: "max"}[k.op]
    if D.CTYPE[k.dtype] == "int":             # integer and bool sources: an int accumulator
        src, local = D.int_reduce(name, rows, length, lambda jj: vals.scalar(k.src),
                                  lambda s: _stores(Values(offsets, env, s), k.outs), op,
                                  d.signature(name, [f"{d.pointer()} restrict buf"]),
                                  d.index("global", 0))
        return K.Source(name, src, (K._cdiv(max(rows, 1), local) * local,), (local,))
    if not tree and not vector and width > 1:
        col = _column_reduce(name, k, offsets, d, width, renv, j, op)
        if col is not None:
            return col

    setup = vals.hoist([k.src] + [o.value for o in k.outs])

    def x(w, jexpr):
        return vals.vector(k.src, j, 16) if w == 16 else vals.scalar(k.src)

    def out(s):
        return _stores(Values(offsets, env, s, vals.hoisted), k.outs)
    if tree:
        return K.tree_reduce(name, rows, length, x, out, op, setup, d=d.whole)
    # a whole-array reduction (the squared norm of each gradient) takes its length as a
    # parameter: one body for every size (a row's trip count stays a literal)
    trip = (lambda n: offsets.size(n)) if rows == 1 and isinstance(offsets, Args) else None
    return K.row_reduce(name, rows, length, x, out, op, setup=setup, vector=vector, d=d,
                        rows_bound=_bound(offsets, rows), trip=trip)


#: adjacent vectors of a row one work-item of a column reduction sums at most
#: (``sum(dim=0)`` of [1024, 512] on one core: 0.071 -> 0.043 ms, ``python -m bench.kernels``)
COLUMN_VECTORS = 4


def _column_reduce(name, k: Reduce, offsets, d, width, renv, j, op) -> K.Source | None:
    """The column form of :func:`reduce`, or None when the source does not run
    contiguously along the innermost kept variable."""
    idx = _indices([k.src] + [o.value for o in k.outs], k.outs)
    merged, _ = merge_dims(k.kept, idx)
    if not merged:
        return None
    w = pick_width(width, merged[-1].extent)
    if w == 1:
        return None
    n, chunks, vec, kenv = vector_space(k.kept, idx, w, ("r", "c"))
    env = {**kenv, **renv}
    vals = Values(offsets, env, align=w if vec.extent % w == 0 else 0)
    if not vals.vectorizable(k.src, vec) or not any(
            vals.stride(vals.index(ld.buffer, ld.index), vec) == 1
            for ld in _loads_of(k.src)):
        return None
    head = vals.hoist([k.src] + [o.value for o in k.outs])
    lanes = not all(vals.vectorizable(o.value, vec) for o in k.outs)
    if lanes:
        head += lane_decls(vec, w)
    vt = R.vt(w)
    ident = "0.0f" if op == "sum" else "(-INFINITY)"
    comb = (lambda a, b: f"{a} + {b}") if op == "sum" else K.vector_max
    ncols = None if vec.extent % w == 0 else vec.extent
    src = vals.vector(k.src, vec, w)
    stores = _stores(Values(offsets, env, "acc", vals.hoisted, vals.align), k.outs, w, vec,
                     ncols)
    # a work-item sums up to COLUMN_VECTORS adjacent vectors of each row where they fit,
    # keeping 4 work-items or more (cores): one strided stream of whole 256-byte pieces of
    # rows rather than four of 64 bytes
    u = next((u for u in (COLUMN_VECTORS, 2) if vec.extent % (w * u) == 0 and n // u >= 4),
             1) if not lanes and len(src) <= K.CHAIN_CHARS else 1
    L = [d.signature(name, [f"{d.pointer()} restrict buf"]) + " {"]
    if u == 1:
        L += _split_index(d, n, chunks, vec, w, "r", _bound(offsets, n))
        L += [f"  {x}" for x in head]
        L += [f"  {vt} acc = ({vt})({ident});",
              f"  for (int j = 0; j < {j.extent}; j++) {{",
              f"    const {vt} v = {src};",
              f"    acc = {comb('acc', 'v')};", "  }"] + [f"  {x}" for x in stores]
    else:                       # each vector a block of its own with its own `c`
        n //= u
        L += _split_index(d, n, chunks // u, Var(vec.name + "0_", vec.extent), w * u, "r",
                          _bound(offsets, n))
        L += [f"  {x}" for x in head]
        L += [f"  {vt} {', '.join(f'a{i}_ = ({vt})({ident})' for i in range(u))};",
              f"  for (int j = 0; j < {j.extent}; j++) {{"]
        L += [f"    {{ const int {vec.name} = {vec.name}0_ + {i * w}; const {vt} v = {src}; "
              f"a{i}_ = {comb(f'a{i}_', 'v')}; }}" for i in range(u)] + ["  }"]
        for i in range(u):
            L += [f"  {{ const int {vec.name} = {vec.name}0_ + {i * w}; "
                  f"const {vt} acc = a{i}_;"] + [f"    {x}" for x in stores] + ["  }"]
    L.append("}")
    local = 1                   # at least 4 work-groups (cores), at most 16 work-items each
    while local < 16 and local * 8 <= n:
        local *= 2
    return K.Source(name, "\n".join(L), (K._cdiv(max(n, 1), local) * local,), (local,))


def _loads_of(v: Value) -> list[Load]:
    return [x for x in walk_values(v) if isinstance(x, Load)]


def copy(name: str, k: Copy, offsets: dict, d: Dialect) -> K.Source:
    n = k.src.size
    if D.is_word(k.src.dtype):
        expr = f"buf[{offsets[k.src.name]} + i]"
        return K.elementwise(name, n, expr, K.Ref(offsets[k.dst.name], (1,)), d=d)
    dt, scale = k.src.dtype, D.per_float(k.src.dtype)          # narrow dtypes: typed copy
    L = [d.signature(name, [f"{d.pointer()} restrict buf"]) + " {",
         f"  const int i = {d.index('global', 0)};", f"  if (i >= {n}) return;",
         "  " + D.store(f"{offsets[k.dst.name] * scale} + i",
                        D.load(f"{offsets[k.src.name] * scale} + i", dt), dt), "}"]
    return K.Source(name, "\n".join(L), (K._cdiv(max(n, 1), 64) * 64,), (64,))


def gather(name: str, k: Gather, offsets: dict, d: Dialect,
           check=(1, None), lanes: int = 1) -> K.Source:
    """out[r, c] = table[idx[r], c]. ``check`` = ``(id, ignored value or None)``: a bad
    index is recorded (column 0 reports it) in the arena's error record under ``id``
    and row 0 is read instead. With ``lanes`` > 1 (a CPU target) and float32 rows that
    split into vectors, a work-item copies a vector of a row (one index read per vector,
    not per element: an embedding lookup [1024 x 128] 0.65 -> 0.33 ms on one PoCL
    thread); else one work-item per element."""
    rows, width = k.idx.size, k.table.size // max(k.table.shape[0], 1)
    n, nt = rows * width, k.table.shape[0]
    dt, scale = k.table.dtype, D.per_float(k.table.dtype)
    w = _row_vector(width, dt, lanes)
    if w > 1:                      # a work-item per row chunk: one index, vector copies
        src, dst = offsets[k.table.name], offsets[k.out.name]
        L = [d.signature(name, [f"{d.pointer()} restrict buf"]) + " {",
             f"  const int i = {d.index('global', 0)};", f"  if (i >= {n // w}) return;",
             f"  const int r = i / {width // w}, c = (i % {width // w}) * {w};",
             f"  int t = as_int(buf[{offsets[k.idx.name]} + r]);",
             f"  if (t < 0 || t >= {nt}) {{",
             f"    if ({_bad('t', nt, check)} && c == 0) {_index_report(check, 't', d)}",
             "    t = 0;", "  }",
             f"  vstore{w}(vload{w}(0, buf + {src} + t*{width} + c), 0, "
             f"buf + {dst} + r*{width} + c);", "}"]
        return K.Source(name, "\n".join(L), (K._cdiv(max(n // w, 1), 16) * 16,), (16,))
    L = [d.signature(name, [f"{d.pointer()} restrict buf"]) + " {",
         f"  const int i = {d.index('global', 0)};", f"  if (i >= {n}) return;",
         f"  const int r = i / {max(width, 1)}, c = i % {max(width, 1)};",
         f"  int t = as_int(buf[{offsets[k.idx.name]} + r]);",
         f"  if (t < 0 || t >= {nt}) {{",
         f"    if ({_bad('t', nt, check)} && c == 0) {_index_report(check, 't', d)}",
         "    t = 0;", "  }",
         "  " + D.store(f"{offsets[k.out.name] * scale} + i",
                        D.load(f"{offsets[k.table.name] * scale} + t*{width} + c", dt), dt),
         "}"]
    return K.Source(name, "\n".join(L), (K._cdiv(max(n, 1), 64) * 64,), (64,))


def scatter_add(name: str, k: ScatterAdd, offsets: dict, d: Dialect,
                check=(1, None), lanes: int = 1) -> K.Source:
    """One work-item per column (per vector of ``lanes`` columns on a CPU target, float32):
    zero it, then add the updates in index order (no races). A bad index is recorded under
    ``check[0]`` (column 0 reports it) and skipped."""
    nout, width, nidx = k.out.shape[0], k.out.size // max(k.out.shape[0], 1), k.idx.size
    o, u, ix = offsets[k.out.name], offsets[k.updates.name], offsets[k.idx.name]
    dt, scale = k.out.dtype, D.per_float(k.out.dtype)
    w = _row_vector(width, dt, lanes)
    if w > 1:                      # a work-item per chunk of columns, vector adds
        v = f"float{w}"
        L = [d.signature(name, [f"{d.pointer()} restrict buf"]) + " {",
             f"  const int c = {d.index('global', 0)} * {w};", f"  if (c >= {width}) return;",
             f"  for (int t = 0; t < {nout}; t++) vstore{w}(({v})(0.0f), 0, "
             f"buf + {o} + t*{width} + c);",
             f"  for (int i = 0; i < {nidx}; i++) {{",
             f"    int t = as_int(buf[{ix} + i]);",
             f"    if (t < 0 || t >= {nout}) {{",
             f"      if ({_bad('t', nout, check)} && c == 0) {_index_report(check, 't', d)}",
             "      continue;", "    }",
             f"    {d.pointer()} y = buf + {o} + t*{width} + c;",
             f"    vstore{w}(vload{w}(0, y) + vload{w}(0, buf + {u} + i*{width} + c), 0, y);",
             "  }", "}"]
        return K.Source(name, "\n".join(L), (width // w,), (1,))
    L = [d.signature(name, [f"{d.pointer()} restrict buf"]) + " {",
         f"  const int c = {d.index('global', 0)};", f"  if (c >= {width}) return;"]
    if dt == "float32":
        L += [f"  for (int t = 0; t < {nout}; t++) buf[{o} + t*{width} + c] = 0.0f;",
              f"  for (int i = 0; i < {nidx}; i++) {{",
              f"    int t = as_int(buf[{ix} + i]);",
              f"    if (t < 0 || t >= {nout}) {{",
              f"      if ({_bad('t', nout, check)} && c == 0) {_index_report(check, 't', d)}",
              "      continue;", "    }",
              f"    buf[{o} + t*{width} + c] += buf[{u} + i*{width} + c];", "  }", "}"]
    else:     # other dtypes: a register per output row (16-bit floats round once)
        add = "(int)((uint)s + (uint)v)" if D.CTYPE[dt] == "int" else "s + v"
        L += [f"  for (int t = 0; t < {nout}; t++) {{", f"    {D.ctype(dt)} s = 0;",
              f"    for (int i = 0; i < {nidx}; i++) {{",
              f"      const int ti = as_int(buf[{ix} + i]);",
              f"      if (ti < 0 || ti >= {nout}) {{",
              f"        if ({_bad('ti', nout, check)} && c == 0 && t == 0) "
              f"{_index_report(check, 'ti', d)}",
              "        continue;", "      }",
              f"      if (ti == t) {{ const {D.ctype(dt)} v = "
              f"{D.load(f'{u * scale} + i*{width} + c', dt)}; s = {add}; }}", "    }",
              "    " + D.store(f"{o * scale} + t*{width} + c", D.round_to("s", dt), dt),
              "  }", "}"]
    return K.Source(name, "\n".join(L), (K._cdiv(max(width, 1), 8) * 8,), (8,))


def _row_vector(width: int, dtype: str, lanes: int) -> int:
    """Vector width (16, 8 or 4 floats, at most ``lanes``) for rows of ``width`` float32s;
    1 when the rows do not split into such vectors or are not float32."""
    fits = [w for w in (16, 8, 4) if w <= lanes and width % w == 0]
    return fits[0] if fits and dtype == "float32" else 1


RENDERERS = {Elementwise: elementwise, DotProduct: dot_product, Reduce: reduce, Copy: copy,
             Gather: gather, ScatterAdd: scatter_add}


def kernel(name: str, k, offsets: dict, d: Dialect,
           target: Target = Target(), check=(1, None),
           args: "bool | Args" = False) -> list[K.Source]:
    """The :class:`~.kernels.Source` s of kernel statement ``k``, launched in order (a fused
    group renders its single-kernel form; a DotProduct may first pack an operand), rendered
    for ``target`` (vector lanes, matmul tile, reduction form: :mod:`.target`).
    ``check``: ``(id, ignored index or None)`` of a Gather/ScatterAdd, for the arena's
    index-error record (:data:`FLAG`).

    With ``args``, buffer offsets are kernel parameters (:class:`Args`; the scratch
    regions stay literals): every returned Source declares the same ``params`` and carries
    their ``args``. ``args`` may be the :class:`Args` (over ``offsets``) to render against:
    its ``names`` then tell the caller which buffer each parameter is.

    Raises:
        NotImplementedError: a statement or value kind with no renderer.
    """
    if isinstance(k, FusedKernel):
        k = k.kernel
    fn = RENDERERS.get(type(k))
    if fn is None:
        raise NotImplementedError(f"codegen: no kernel template for {type(k).__name__}")
    if args is True:
        args = Args(offsets, literal=(SCRATCH_A, SCRATCH_B))
    if args:
        offsets = args
    if fn is reduce:
        out = reduce(name, k, offsets, d, tree=target.reductions == "tree",
                     width=target.vector)
    elif fn is elementwise:
        out = elementwise(name, k, offsets, d, width=target.vector)
    elif fn is dot_product:
        out = dot_product(name, k, offsets, d, tile=target.tile, width=target.vector,
                          micro=target.micro)
    elif fn in (gather, scatter_add):
        out = fn(name, k, offsets, d, check, lanes=target.vector)
    else:
        out = fn(name, k, offsets, d)
    out = out if isinstance(out, list) else [out]
    if args and offsets.names:
        out = [_with_params(s, d, offsets.params(), offsets.values()) for s in out]
    return out


def _with_params(s: K.Source, d: Dialect, params, values) -> K.Source:
    """``s`` with int ``params`` declared after the arena pointer (every template opens with
    ``d.signature(name, [arena pointer])``)."""
    buf = f"{d.whole.pointer() if s.whole else d.pointer()} restrict buf"
    dd = d.whole if s.whole else d
    for inline in (True, False):        # (a body may stay a function: Body.signature)
        head = dd.signature(s.name, [buf], inline)
        if head in s.src:
            src = s.src.replace(head, dd.signature(s.name, [buf] + list(params), inline), 1)
            return replace(s, src=src, params=tuple(params), args=tuple(values))
    raise AssertionError(f"{s.name}: signature {dd.signature(s.name, [buf])!r} not found")
