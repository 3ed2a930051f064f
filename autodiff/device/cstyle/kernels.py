"""Kernel templates, written once for every C-style dialect (:mod:`.dialect`) and tuned on
CPU-class OpenCL devices (PoCL 3.1 measurements behind each choice: BENCHMARKS.md,
"Where the OpenCL time goes").

Each template renders one kernel's source with every size, stride and arena offset as a
literal, so the compiler sees constant index arithmetic and a launch binds one argument,
the arena. Operands are :class:`Ref` s: an offset and per-dimension strides, in floats,
into the arena buffer ``buf``.

* :func:`matmul`: C = A @ B (batched), one work-item per 8x16 tile of C accumulating eight
  ``float16`` rows with ``fma``; when B is contiguous along K instead of N, a 4x4 tile of
  ``float16`` dot-product accumulators. Edge tiles run the same vector code on clamped rows
  (and, for the dot form, a lane-masked last K chunk); only the final store of an edge tile
  is per element. The arena keeps :data:`SLACK` floats before and after all buffers so that
  vector loads past a row end stay in bounds (their lanes are discarded or masked).
* :func:`row_reduce`: one work-item per row, a ``float16`` accumulator, masked tail.
* :func:`elementwise`: one work-item per element, straight-line code.
* :func:`tree_reduce`: the GPU form of a row reduction, one work-group per row and a
  tree in local memory (10-100x slower than :func:`row_reduce` on PoCL: GPU devices only).

Every template takes an *epilogue*: ``fn(v, width, row, col) -> str``, a C expression that
transforms the accumulated value ``v`` (a ``float{width}`` vector, or a float when
``width == 1``) of output row ``row`` and first column ``col`` before it is stored; this is
where fusion puts bias, activation and the rest of an elementwise tail.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Callable

from .dialect import Dialect

#: floats of slack kept before the first and after the last buffer of an arena.
SLACK = 32
TM, TN = 8, 16          # register tile of the broadcast form (rows x float16 columns)
PANEL = TN              # columns of a packed B panel (any tile reads whole panels)
WIDE = 32               # the widest tile's columns (two panels)
DM, DN, VK = 4, 4, 16   # register tile of the dot form and its vector width along K

Epilogue = Callable[[str, int, str, str], str]


@dataclass(frozen=True)
class Ref:
    """An operand in the arena: element ``idx`` is at ``offset + sum(idx * strides)`` floats
    (``offset`` an int or a C int expression: a kernel parameter); or, with ``const`` set,
    every element is that constant (no memory read); or, with ``panel`` set, a matmul
    operand packed in the register tile's panels (:func:`matmul`; strides ignored)."""
    offset: int | str
    strides: tuple[int, ...]
    const: float | None = None
    panel: bool = False

    def lit(self) -> str:
        return f"{float(self.const)!r}f"


@dataclass
class Source:
    """One rendered kernel: its name, source, and launch sizes (global, local).

    ``whole``: the source is a complete kernel that shares work between the work-items of
    a work-group (local memory, barriers), never a body to wrap or chain
    (:mod:`autodiff.device.opencl.chain`). ``params``: C declarations of the int
    parameters after ``buf`` (arena offsets, see :class:`.codegen.Args`) and ``args`` their
    values for this launch.

    Set by a device's compile on a launch's source (fields, so that a copy made with
    ``dataclasses.replace`` keeps them): ``guard``, the C condition of a branch decided on
    the device that the kernel runs under; ``touch``, the arena ranges it reads and writes
    (``(reads, writes)``, for the order of team chains); ``after``, whether it follows
    another source of the same statement."""
    name: str
    src: str
    global_size: tuple[int, ...]
    local_size: tuple[int, ...]
    flops: int = 0
    whole: bool = False
    params: tuple[str, ...] = ()
    args: tuple[int, ...] = ()
    guard: str | None = None
    touch: tuple | None = None
    after: bool = False


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def vtype(width: int) -> str:
    return "float" if width == 1 else f"float{width}"


def _batch_offset(batch: tuple[int, ...], strides: tuple[int, ...], b: str) -> str:
    """Index arithmetic for the flat batch index ``b`` over dims ``batch`` with ``strides``."""
    terms, inner = [], 1
    for d, s in reversed(list(zip(batch, strides))):
        if d > 1 and s:
            idx = b if inner == 1 else f"({b}/{inner})"
            idx = idx if inner * d == math.prod(batch) else f"({idx}%{d})"
            terms.append(f"{idx}*{s}")
        inner *= d
    return "+".join(terms) or "0"


#: OpenCL C's (and the CUDA prelude's) vector component names: lane ``j`` of a vector
#: ``v`` is ``v.s<LANES[j]>``
LANES = "0123456789abcdef"


def lane(v: str, j: int) -> str:
    """Lane ``j`` (0-15) of the vector expression ``v``: ``v.s0`` ... ``v.sf``."""
    return f"{v}.s{LANES[j]}"


#: the shared partial store every dialect's preamble defines for the widths 2, 4, 8, 16:
#: ``_ad_st<width>n(v, p, n)`` stores the first ``n`` lanes of ``v`` at ``p`` (none when
#: ``n <= 0``)
EDGE_STORE = "_ad_st{}n"


def store_lanes(v: str, width: int, ptr: str, col: str, ncols: int | None) -> list[str]:
    """Store ``width`` lanes of ``v`` at ``ptr``; with ``ncols`` only lanes ``col+j < ncols``
    (one vector store when the whole vector fits, else the shared partial store
    :data:`EDGE_STORE`: compiled once per kernel, where sixteen guarded lane stores in
    every body that has an edge took PoCL 7% of the main job's JIT)."""
    if width == 1:
        return [f"{ptr}[0] = {v};"]
    if ncols is None:
        return [f"vstore{width}({v}, 0, {ptr});"]
    return [f"{{ {vtype(width)} t_ = {v};",
            f"  if ({col}+{width} <= {ncols}) vstore{width}(t_, 0, {ptr});",
            f"  else {EDGE_STORE.format(width)}(t_, {ptr}, {ncols} - ({col}));",
            "}"]


#: store hook of a matmul: ``fn(acc, width, row, col) -> C statements`` storing (and
#: transforming) the ``float{width}`` accumulator of row ``row`` (a C int expression),
#: columns ``col .. col+width-1`` (``col`` a C int variable); lanes with ``col + j >= N``
#: must not be stored (:func:`store_lanes` does that). The flat batch index is the C
#: variable ``bi``.
Store = Callable[[str, int, str, str], list[str]]


def tile_columns(tile: tuple[int, int, int]) -> int:
    """Columns of C one register ``tile`` ``(rows, width, vectors)`` computes."""
    return tile[1] * tile[2]


def fit_tile(tile: tuple[int, int, int], N: int) -> tuple[int, int, int]:
    """``tile``, or the same rows with half its vectors when its columns are more than
    :data:`TN` and ``N`` would leave a quarter or more of the last column tile empty (a
    product narrower than the tile computes columns it never stores)."""
    rows, w, nv = tile
    cols = tile_columns(tile)
    if cols > TN and nv % 2 == 0 and -N % cols * 4 >= N:
        return fit_tile((rows, w, nv // 2), N)
    return tile


def ref_store(c: Ref, N: int, batch: tuple[int, ...] = (),
              epilogue: Epilogue | None = None, cols: int = TN) -> Store:
    """The store hook writing ``epilogue(acc)`` into ``c`` (column stride 1); ``cols``: the
    tile's columns (a partial last tile stores lane by lane)."""
    if c.strides[-1] != 1:
        raise ValueError(f"matmul output must be contiguous along N, strides {c.strides}")
    epi = epilogue or (lambda v, w, r, col: v)
    boff = _batch_offset(batch, c.strides[:len(batch)], "bi")

    def store(acc, w, row, col):
        ptr = f"(buf + {c.offset} + {boff} + ({row})*{c.strides[-2]} + {col})"
        return store_lanes(epi(acc, w, row, col), w, ptr, col, None if N % cols == 0 else N)
    return store


def matmul(name: str, M: int, N: int, K: int, a: Ref, b: Ref, c: Ref | Store,
           batch: tuple[int, ...] = (), epilogue: Epilogue | None = None, *,
           d: Dialect, tile: tuple[int, int, int] = (TM, TN, 1),
           prelude: list[str] = (), micro: bool = False) -> Source:
    """C[..., M, N] = epilogue(A[..., M, K] @ B[..., K, N]).

    Args:
        name: kernel name.
        M, N, K: matrix sizes (any positive ints; no multiple of the tile needed).
        a, b: operands; strides are (batch strides..., row stride, column stride), in floats.
        c: the output :class:`Ref` (column stride 1), or a :data:`Store` hook that writes
            any number of outputs (fused epilogues).
        batch: batch dims (the same for all operands).
        epilogue: with a ``Ref`` output, see the module docstring; ``row``/``col`` index C.
        tile: register tile of the broadcast form, ``(rows, width, vectors)`` with
            ``width * vectors`` 16 or 32 columns (:mod:`.target`; narrowed by
            :func:`fit_tile` for a narrow N).
        prelude: C statements run by each work-item before the tile loop (declarations
            the store hook uses; the flat batch index ``bi`` is in scope).
        micro: with B in panels, call the shared tile loop (:func:`micro_kernel`, whose
            definition the program must hold: :func:`micro_names`) instead of inlining
            it; a body (:class:`.dialect.Body`) that does is then itself never inlined.

    Returns:
        The kernel :class:`Source`; global size (column tiles, row tiles, batch).

    Raises:
        ValueError: C not contiguous along N, or a stride tuple of the wrong length.
    """
    nb = len(batch)
    for r in (a, b) + ((c,) if isinstance(c, Ref) else ()):
        if len(r.strides) != nb + 2:
            raise ValueError(f"{name}: strides {r.strides} do not match batch {batch} + 2")
    tile = fit_tile(tile, N)
    store = ref_store(c, N, batch, epilogue, tile_columns(tile)) if isinstance(c, Ref) else c
    sam, sak = a.strides[-2:]
    sbk, sbn = b.strides[-2:]
    B = math.prod(batch)
    # a body calling the shared tile loop stays a function: its callers' loops hold a call
    shared_loop = micro and b.panel
    head = [d.signature(name, [f"{d.pointer()} restrict buf"], inline=not shared_loop) + " {",
            f"  const int bi = {d.index('global', 2)};"]
    boff = {x: _batch_offset(batch, r.strides[:nb], "bi") for x, r in (("a", a), ("b", b))}
    if a.panel or b.panel:
        if nb or not b.panel or a.const is not None:
            raise ValueError(f"{name}: panels need B packed, A an array, and no batch")
        body, gs = _mm_broadcast(d, M, N, K, sam, sak, 0, 0, store, tile=tile,
                                 panels=(a.panel, True), micro=micro)
    elif sbn in (0, 1) or sbk != 1 or a.const is not None or b.const is not None:
        body, gs = _mm_broadcast(d, M, N, K, sam, sak, sbk, sbn, store,
                                 a.lit() if a.const is not None else None,
                                 b.lit() if b.const is not None else None, tile)
    else:
        body, gs = _mm_dot(d, M, N, K, sam, sak, sbk, sbn, store)
    ptrs = [f"  {d.pointer(const=True)} A = buf + {a.offset} + {boff['a']};",
            f"  {d.pointer(const=True)} B = buf + {b.offset} + {boff['b']};"]
    ptrs += [f"  {x}" for x in prelude]
    src = "\n".join(head + ptrs + body + ["}"])
    return Source(name, src, (gs[0], gs[1], B), group_size(gs), 2 * M * N * K * B)


#: work-items per work-group of a tile kernel: PoCL pays a fixed cost per work-group, which
#: dominates when the tiles are cheap (K small)
GROUP_TILES = 16
MIN_GROUPS = 8         # ... but at least this many groups per batch entry when possible


def _divisor(n: int, most: int) -> int:
    """The largest divisor of ``n`` that is at most ``most``."""
    return max(x for x in range(1, min(n, most) + 1) if n % x == 0)


def group_size(gs: tuple[int, int]) -> tuple[int, int, int]:
    """Local size of a tile kernel with global size ``(gs[0], gs[1], batch)``: up to
    :data:`GROUP_TILES` tiles, dividing the global size (OpenCL 1.2 uniform groups)."""
    most = min(GROUP_TILES, max(1, gs[0] * gs[1] // MIN_GROUPS))
    l0 = _divisor(gs[0], most)
    return (l0, _divisor(gs[1], max(1, most // l0)), 1)


def _mm_broadcast(d, M, N, K, sam, sak, sbk, sbn, store, aconst=None, bconst=None,
                  tile=(TM, TN, 1), panels=(False, False), micro=False):
    """``rows`` x ``width * vectors`` tile: acc_i += A[m_i, k] (broadcast) * B[k, n:n+cols]
    for ``rows`` rows m_i (as many as there are when M is smaller: no clamped rows
    computed in vain), each row held in ``vectors`` registers of ``float{width}``
    (``tile``). ``panels``: whether A and B are packed in panels (:func:`panel_rows`) and
    stream contiguously; a 32-column tile reads two neighbouring B panels. ``micro``: with
    B in panels, the tile loop is a call of the shared :func:`micro_kernel` instead of
    inline code.

    Per k the tile loads ``rows`` broadcasts of A and ``vectors`` vectors of B for
    ``rows * vectors`` FMAs: with AVX-512 (two 16-float loads and two FMAs per cycle) an
    8 x 16 tile is bound by its 9 loads per 8 FMAs, an 8 x 32 tile (16 accumulators, the
    shape of BLIS's Skylake-X micro-kernel) by its FMAs: 116-121 -> 145 GFLOP/s for
    [512, 512] x [512, 512] and [1024, 128] x [128, 512] from panels (PoCL 3.1, one
    thread of a Sapphire Rapids core; OpenBLAS 1024^3: 138)."""
    rows, w, nv = tile
    tc = w * nv
    tm = panel_rows(tile, M)
    vt = vtype(w)
    apanel, bpanel = panels
    L = [f"  const int n0 = {d.index('global', 0)}*{tc};",
         f"  const int m0 = {d.index('global', 1)}*{tm};"]
    acc = lambda i, v: f"acc{i}" if nv == 1 else f"acc{i}_{v}"
    if apanel:
        L.append(f"  {d.pointer(const=True)} ap = A + {d.index('global', 1)}*{K * tm};")
    if bpanel:
        L.append(f"  {d.pointer(const=True)} bp = B + {d.index('global', 0)}*{K * tc};")
    gs = (_cdiv(N, tc), _cdiv(M, tm))
    if micro and bpanel:
        fn = micro_name(tm, w, nv, apanel)
        L.append(f"  {vt} c_[{tm * nv}];")
        L.append(f"  {fn}(ap, bp, {K}, c_);" if apanel else
                 f"  {fn}(A, {sam}, {sak}, {M - 1}, m0, bp, {K}, c_);")
        L += [f"  const {vt} {acc(i, v)} = c_[{i * nv + v}];"
              for i in range(tm) for v in range(nv)]
        return L + _mm_epilogue(M, N, tm, w, nv, acc, store), gs
    if not apanel:
        L += [f"  {d.pointer(const=True)} a{i} = A + min(m0+{i}, {M - 1})*{sam};"
              for i in range(tm)]

    def bload(v):
        if bpanel:
            return _panel_load(w, v, K)
        if bconst is not None:
            return f"({vt})({bconst})"
        if sbn == 0:
            return f"({vt})(B[k*{sbk}])"
        if sbn == 1:
            return f"vload{w}(0, B + k*{sbk} + n0{f' + {v * w}' if v else ''})"
        # B strided along N: gather (used only when neither layout is contiguous)
        return f"({vt})(" + ", ".join(
            f"B[k*{sbk} + min(n0+{v * w + j}, {N - 1})*{sbn}]" for j in range(w)) + ")"
    aval = (lambda i: aconst) if aconst is not None else (lambda i: f"a{i}[k*{sak}]")
    if apanel:
        aval = lambda i: f"ap[k*{tm} + {i}]"
    L += _tile_loop(tm, w, nv, K, aval, bload, acc)
    return L + _mm_epilogue(M, N, tm, w, nv, acc, store), gs


def _panel_load(w: int, v: int, K: int | str) -> str:
    """Vector ``v`` (of ``w`` floats) of row ``k`` of a tile's B panels, each ``K`` rows of
    :data:`PANEL` floats (``K`` an int or a C name)."""
    panel, lane = divmod(v * w, PANEL)
    at = [f"k*{PANEL}"]
    if panel:
        at.append(str(panel * K * PANEL) if isinstance(K, int) else f"{panel}*{K}*{PANEL}")
    if lane:
        at.append(str(lane))
    return f"vload{w}(0, bp + {' + '.join(at)})"


def _tile_loop(tm, w, nv, K, aval, bload, acc, unroll: int = 1) -> list[str]:
    """The accumulators of a ``tm`` x ``w * nv`` tile and its loop over ``K`` (an int or a
    C name): ``aval(i)`` is A's element of row ``i``, ``bload(v)`` B's vector ``v``;
    ``unroll`` > 1 asks the compiler to unroll the loop that many times."""
    vt = vtype(w)
    bk = lambda v: "bk" if nv == 1 else f"bk{v}"
    L = [f"  {vt} {acc(i, v)} = ({vt})(0.0f);" for i in range(tm) for v in range(nv)]
    if unroll > 1:
        L.append(f"  #pragma unroll {unroll}")
    L.append(f"  for (int k = 0; k < {K}; k++) {{")
    L += [f"    const {vt} {bk(v)} = {bload(v)};" for v in range(nv)]
    for i in range(tm):
        if nv == 1:
            L.append(f"    {acc(i, 0)} = fma(({vt})({aval(i)}), bk, {acc(i, 0)});")
        else:
            L.append(f"    {{ const {vt} ai = ({vt})({aval(i)});")
            L += [f"      {acc(i, v)} = fma(ai, {bk(v)}, {acc(i, v)});" for v in range(nv)]
            L.append("    }")
    L.append("  }")
    return L


def micro_name(tm: int, w: int, nv: int, apanel: bool) -> str:
    """Name of the shared tile loop (:func:`micro_kernel`) of a ``tm`` x ``w * nv`` tile
    reading B from panels and A from panels (``apanel``) or from rows."""
    return f"_ad_mm{tm}x{w}x{nv}{'p' if apanel else 'r'}"


#: unroll factor of a shared tile loop (its K is a run-time argument, so LLVM leaves the
#: loop rolled) by vector width. ``float8`` (AVX2): by 4. One Zen 3 vCPU, PoCL 3.1, both
#: programs built in one process and their whole training steps replayed in alternation
#: (best of two per round, 60 rounds, 2026-11-29): W5 67.3 against 76.1 ms by the median
#: round (unrolled faster in 57 rounds), W3 56.8 against 59.9 (49 rounds), W4 0.476
#: against 0.497 (33 rounds). ``float16`` (AVX-512) not measured: rolled, as before.
MICRO_UNROLL = {8: 4}

#: a call of a shared tile loop (:func:`micro_name`)
MICRO_CALL = re.compile(r"\b_ad_mm(\d+)x(\d+)x(\d+)([pr])\(")


def micro_kernel(name: str, d: Dialect) -> str:
    """The definition of the shared tile loop ``name`` (:func:`micro_name`): a never-inlined
    function with every size a parameter, storing its accumulators into the caller's
    private array ``c`` (row-major, ``vectors`` per row) for the caller's epilogue.

    Rows mode: ``(A, sam, sak, mlast, m0, bp, K, c)``, row ``i`` of the tile read from
    ``A + min(m0 + i, mlast) * sam`` with stride ``sak`` along K; panels mode
    ``(ap, bp, K, c)``. Why shared: PoCL compiles every kernel body that holds a tile
    loop anew, and a model has one matmul body per shape and epilogue; with the loop in
    one function per tile shape, each dispatch kernel compiles it once (the main job's
    training program: clBuildProgram 1.67 -> 1.47 s, its kernels' JIT 2.31 -> 2.14 s on
    two cores, PoCL 3.1), at no measurable cost per step (the tile loop runs ``K``
    iterations per call; its accumulators pass through 16 private vector stores).

    Raises:
        ValueError: ``name`` is not a shared tile loop's name.
    """
    m = MICRO_CALL.match(name + "(")
    if m is None:
        raise ValueError(f"not a shared tile loop name: {name!r}")
    tm, w, nv, apanel = int(m[1]), int(m[2]), int(m[3]), m[4] == "p"
    vt, p = vtype(w), d.pointer(const=True)
    acc = lambda i, v: f"acc{i}_{v}"
    head = [f"{p} restrict ap"] if apanel else \
        [f"{p} restrict A", "const int sam", "const int sak", "const int mlast", "const int m0"]
    L = [f"__attribute__((noinline)) static void {name}("
         + ", ".join(head + [f"{p} restrict bp", "const int K", f"{vt}* restrict c"]) + ") {"]
    if not apanel:
        L += [f"  {p} a{i} = A + min(m0+{i}, mlast)*sam;" for i in range(tm)]
    aval = (lambda i: f"ap[k*{tm} + {i}]") if apanel else (lambda i: f"a{i}[k*sak]")
    L += _tile_loop(tm, w, nv, "K", aval, lambda v: _panel_load(w, v, "K"), acc,
                    MICRO_UNROLL.get(w, 1))
    L += [f"  c[{i * nv + v}] = {acc(i, v)};" for i in range(tm) for v in range(nv)]
    return "\n".join(L + ["}"])


def micro_names(text: str) -> list[str]:
    """Names of the shared tile loops that ``text`` calls, each once, sorted."""
    return sorted({m[0][:-1] for m in MICRO_CALL.finditer(text)})


#: placeholders :func:`_mm_epilogue` renders a tile's stores over
_ACC, _ROW = "__ad_tile_acc__", "__ad_tile_row__"


def _mm_epilogue(M, N, tm, w, nv, acc, store) -> list[str]:
    """The stores (``store``, with the epilogue) of a ``tm`` x ``w * nv`` tile's
    accumulators ``acc(i, v)``."""
    vt = vtype(w)
    L = []
    # the epilogue runs on the accumulator registers as they are (``vectors`` registers of
    # ``width`` per row): transcendentals in an epilogue are 1.6x faster as float8 than as
    # float16 on 16 AVX2 registers (erf: 0.61 vs 0.38 Gelem/s, one PoCL thread)
    cols = ["n0"] + [f"nv{v}_" for v in range(1, nv)]
    L += [f"  const int {cols[v]} = n0 + {v * w};" for v in range(1, nv)]
    # each column vector's stores rendered once, over placeholder names for the
    # accumulator and the row, then instantiated per row (a store hook only embeds them)
    tmpl = [store(_ACC, w, _ROW, cols[v]) for v in range(nv)]

    def code(v: int, acc_: str, row: str) -> list[str]:
        return [x.replace(_ACC, acc_).replace(_ROW, row) for x in tmpl[v]]
    st = [x for v in range(nv) for x in code(v, f"c{v}_[i_]", "(m0+i_)")]
    if tm > 1 and sum(len(x) for x in st) > EPILOGUE_LOOP_CHARS:
        # a long epilogue runs in a loop over the tile's rows: its code once, not per row
        # (PoCL's compile time grows with the code; the loop costs nothing measurable)
        guard = "" if M % tm == 0 else f"if (m0+i_ < {M}) "
        L += [f"  const {vt} c{v}_[{tm}] = {{{', '.join(acc(i, v) for i in range(tm))}}};"
              for v in range(nv)]
        L.append("  #pragma unroll 1")
        L.append(f"  for (int i_ = 0; i_ < {tm}; i_++) {guard}{{ " + " ".join(st) + " }")
        return L
    for i in range(tm):
        row = f"(m0+{i})"
        st = [x for v in range(nv) for x in code(v, acc(i, v), row)]
        guard = "" if M % tm == 0 else f"if ({row} < {M}) "
        L.append(f"  {guard}{{ " + " ".join(st) + " }")
    return L


def panel_rows(tile, M: int) -> int:
    """Rows of A per tile (and per A panel): the tile's, or fewer so that the ``ceil(M /
    rows)`` tiles split M evenly (M = 10: two tiles of 5, not 8 and 8 of which 6 rows are
    clamped copies computed in vain; W4's output-layer weight gradient, [10, 64] x [64,
    256]: 4.9 -> 3.9 us, one PoCL thread). Only products of fewer than 50 rows change.

    Panels (``Ref.panel``): B packed as ``[ceil(N / 16)][K][16]`` floats and A, when it is
    not contiguous along K, as ``[ceil(M / rows)][K][rows]``, so that a tile reads B (and A)
    as one contiguous stream. On PoCL (Zen 3, one core, GFLOP/s of CPU time, A row-major ->
    B row-major / B panels): 1024x512x128 62 -> 84, 1024x128x512 60 -> 78, 128x512x1024
    45 -> 83; A^T (contiguous along M, a weight gradient) read directly 27-44, from panels
    69-79, row-major A from panels no faster than directly. Panel rows past M or columns
    past N hold copies of the last one and are never stored."""
    return _cdiv(M, _cdiv(M, tile[0])) if M else 0


def pack_panels(name: str, R: int, K: int, x: Ref | tuple[Callable[[str], str], int],
                rows: int, dst: int, d: Dialect, vector: int = 16) -> Source:
    """Copy a matmul operand into panels ``[ceil(R / rows)][K][rows]`` at ``dst``.

    ``x`` holds the operand as ``R`` x ``K`` (strides: along R, along K): A's rows with
    ``rows`` = the tile's rows, or B's columns (``x`` = B^T's view) with ``rows`` = 16.
    One work-item per panel and chunk of 16 along K, reading the operand in vectors along
    whichever axis it is contiguous (element by element when neither). Neighbouring
    work-items take neighbouring panels (the source lines they share stay in L1: 1.4-1.5x
    faster than walking K first for A^T [512, 1024] into 6-row panels, PoCL 3.1, one
    thread) -- except for an operand contiguous along K (a weight read as ``x @ W.T``),
    where they walk K first: then the work-items read each of their 16 rows and write
    their panel in order, a stream the hardware prefetchers follow when the weight comes
    from beyond L2 at the start of a step (W3 one thread, in the run: its transposing
    packs 3.15-3.30 -> 2.40-2.60 ms per step; [128, 512] weight 142 -> 70 us). Rows past ``R``
    read the floats after the operand's last row or are clamped to it: they feed tile rows
    or columns that are never stored. Nothing past ``K`` is written.

    ``vector``: the target's float lanes; 8 (AVX2) transposes a B^T of a strided array
    with :data:`TRANSPOSE16_BY8` instead of :data:`TRANSPOSE16`.

    ``x`` may also be a view ``(fn, step)``: ``fn(r) -> C int expression`` the arena index
    of element ``(r, k0)`` (``r`` a C int expression, ``k0`` the C int of the K chunk, a
    multiple of 16), and element ``(r, k0 + kk)`` ``step * kk`` floats further for ``kk <
    16`` (head merges and their transposes); ``K`` must then be a multiple of 16. Each
    work-item then gathers its panel rows from ``rows`` row pointers.
    """
    if not isinstance(x, Ref):
        at_row, sk = x
        sr = None
    else:
        sr, sk = x.strides
        at_row = lambda r: f"{x.offset} + ({r})*{sr} + k0"
    nt, nk = _cdiv(R, rows), _cdiv(K, 16)
    X = f"(buf + {x.offset})" if sr is not None else None
    L = [d.signature(name, [f"{d.pointer()} restrict buf"]) + " {",
         f"  const int g_ = {d.index('global', 0)};", f"  if (g_ >= {nt * nk}) return;",
         (f"  const int t = g_ / {nk}, k0 = (g_ % {nk}) * 16;" if sk == 1 and sr != 1 else
          f"  const int t = g_ % {nt}, k0 = (g_ / {nt}) * 16;"),
         f"  {d.pointer()} P = buf + {dst} + t*{K * rows} + k0*{rows};"]
    # loops with vector bodies, not fully unrolled copies: PoCL's compile time grows with
    # the code (an unrolled 16x16 transpose of float16 lanes took 300 ms to JIT)
    L.append(f"  const int kn = min(16, {K} - k0);")
    if sr == 1:                           # contiguous along the panel: a row per k
        L += ["  for (int kk = 0; kk < kn; kk++) {",
              f"    {d.pointer(const=True)} src = {X} + (k0+kk)*{sk} + t*{rows};"]
        at = 0
        for w in (16, 8, 4, 2, 1):        # rows past R read the next floats (never stored)
            while rows - at >= w:
                L.append(f"    vstore{w}(vload{w}(0, src + {at}), 0, P + kk*{rows} + {at});"
                         if w > 1 else f"    P[kk*{rows} + {at}] = src[{at}];")
                at += w
        L.append("  }")
    elif sr is None and sk != 1:          # a view: a panel row per k from row pointers
        L += [f"  {d.pointer(const=True)} s{j}_ = buf + {at_row(f'min(t*{rows}+{j}, {R - 1})')};"
              for j in range(rows)]
        L.append("  for (int kk = 0; kk < kn; kk++) {")
        at = 0
        for w in (16, 8, 4, 2, 1):
            while rows - at >= w:
                el = [f"s{at + j}_[kk*{sk}]" for j in range(w)]
                L.append(f"    vstore{w}(({vtype(w)})({', '.join(el)}), 0, P + kk*{rows} + {at});"
                         if w > 1 else f"    P[kk*{rows} + {at}] = {el[0]};")
                at += w
        L.append("  }")
    elif sk == 1 and rows == 16 and sr is not None:   # B^T of a strided array
        # the shared register transpose (:data:`TRANSPOSE16`, each dialect's preamble):
        # 16 row loads, 16 panel-row stores (a 256x256 weight 23.5 -> 10.8 us alone, PoCL
        # 3.1, one thread: the lane-by-lane stores below were store-bound)
        tp = TRANSPOSE16_BY8 if vector == 8 else TRANSPOSE16
        L.append(f"  {tp}(buf + {at_row('t*16')}, {sr}, {R - 1} - t*16, P, kn);")
    elif sk == 1 and rows == 16:          # B^T of a view: its rows, then the same transpose
        L += ["  float16 r_[16];", "  for (int i = 0; i < 16; i++)",
              f"    r_[i] = vload16(0, buf + {at_row(f'min(t*16+i, {R - 1})')});",
              f"  {TRANSPOSE16_ROWS}(r_, P, kn);"]
    elif sk == 1:                         # contiguous along K, panels not 16 wide (A's)
        # lane by lane stores (B's 16-wide panels take the shared transposes above: these
        # stores were store-bound there)
        L += [f"  for (int i = 0; i < {rows}; i++) {{",
              f"    const float16 r = vload16(0, buf + {at_row(f'min(t*{rows}+i, {R - 1})')});"]
        whole = K % 16 == 0               # every chunk is 16 long: no guards
        L += [f"    {'' if kk == 0 or whole else f'if ({kk} < kn) '}P[{kk * rows} + i] = "
              f"{lane('r', kk)};" for kk in range(16)]
        L.append("  }")
    else:                                 # element by element
        L += ["  for (int kk = 0; kk < kn; kk++)", f"    for (int i = 0; i < {rows}; i++)",
              f"      P[kk*{rows} + i] = {X}[min(t*{rows}+i, {R - 1})*{sr} + (k0+kk)*{sk}];"]
    L.append("}")
    return _pack_source(name, L, nt * nk)


def transpose_pack(name: str, batch: tuple[int, ...], R: int, C: int, x: Ref, dst: int,
                   d: Dialect) -> Source:
    """Copy ``x`` (``batch + (R, C)``, contiguous along R: ``x.strides[-2] == 1``) densely
    row-major to ``[prod(batch)][R][C]`` at ``dst``, by 8x8 register transposes
    (:data:`TRANSPOSE8`): eight vector loads along R and eight vector stores along C per
    work-item.

    A matmul operand that runs along the contiguous axis of its source (a key or query
    head read as ``q @ k^T``, ``[B, T, H*D]`` seen as ``[B, H, D, T]``) is packed this way
    instead of element by element (eight scalar loads per vector): W3's two head packs
    (32 heads of [32, 64] floats each) 70 and 83 -> 19 and 23 us per launch replayed
    alone (PoCL, one Zen 3 thread, 2026-11-29), 0.44 ms of a 41-43 ms step.

    Raises:
        ValueError: R or C not a multiple of 8, or ``x`` not contiguous along R."""
    if R % 8 or C % 8 or x.strides[-2] != 1:
        raise ValueError(f"transpose_pack {name}: needs R and C multiples of 8 and a unit "
                         f"stride along R, got R={R}, C={C}, strides {x.strides}")
    nb, nr, nc = max(math.prod(batch), 1), R // 8, C // 8
    sc = x.strides[-1]
    at = _batch_offset(batch, x.strides[:-2], "bi")
    L = [d.signature(name, [f"{d.pointer()} restrict buf"]) + " {",
         f"  const int g_ = {d.index('global', 0)};", f"  if (g_ >= {nb * nr * nc}) return;",
         # neighbouring work-items take neighbouring row blocks: they read the two halves
         # of the same source lines
         f"  const int bi = g_ / {nr * nc}, c0 = (g_ / {nr}) % {nc} * 8, r0 = g_ % {nr} * 8;",
         f"  {TRANSPOSE8}(buf + {x.offset} + {at} + c0*{sc} + r0, {sc}, "
         f"buf + {dst} + bi*{R * C} + r0*{C} + c0, {C});", "}"]
    return _pack_source(name, L, nb * nr * nc)


def _pack_source(name: str, lines: list[str], n: int) -> Source:
    """A pack kernel of ``n`` work-items (source ``lines``): work-groups of
    :data:`PACK_GROUP` once there are four of them, else one work-item each."""
    local = PACK_GROUP if n >= 4 * PACK_GROUP else 1
    return Source(name, "\n".join(lines), (_cdiv(n, local) * local,), (local,))


#: work-items per work-group of a pack kernel
PACK_GROUP = 16

#: the shared 16x16 transpose every dialect's preamble defines:
#: ``_ad_tp16(src, stride, last, P, kn)`` reads rows ``src + min(i, last) * stride``
#: (``i < 16``, 16 floats each) and writes column ``kk`` of that block as the 16 floats at
#: ``P + 16 * kk``, for ``kk < kn``
TRANSPOSE16 = "_ad_tp16"

#: :data:`TRANSPOSE16` as four 8x8 transposes of ``float8`` rows, for 16 AVX2 registers
#: (the ``float16`` form's 16 rows take two registers each and spill). Training steps
#: replayed in alternation with the ``float16`` form (``python -m bench.alternate``, one
#: Zen 3 vCPU, 60 rounds each, 2026-11-29): W3 55.0 against 57.7 ms by the median round
#: (faster in 55) while the vCPU ran slow, 43.3 against 43.6 (28) while it ran fast; W5
#: 66.7 / 67.4, 68.4 / 68.7 and 66.1 / 66.8 ms (faster in 22, 21 and 31); W4 even
#: (33). ``float16`` targets keep :data:`TRANSPOSE16`
TRANSPOSE16_BY8 = "_ad_tp16h"

#: the shared 8x8 transpose of ``float8`` rows: ``_ad_tp8(src, st, P, pst)`` reads the 8
#: floats at ``src + i * st`` for ``i < 8`` (row ``i``) and writes column ``c`` of that
#: block as the 8 floats at ``P + c * pst`` (:func:`transpose_pack`)
TRANSPOSE8 = "_ad_tp8"

#: :data:`TRANSPOSE16` of 16 rows already loaded: ``_ad_tp16v(r, P, kn)``, ``r`` a private
#: array of 16 ``float16`` (rows of a view, which no single stride reaches)
TRANSPOSE16_ROWS = "_ad_tp16v"

#: store code (characters) above which a tile's rows are stored in a loop
EPILOGUE_LOOP_CHARS = 400


def dot_tile(M: int, N: int) -> tuple[int, int]:
    """Rows and columns of the dot form's tile: :data:`DM` x :data:`DN`, or 8 x 2 for a
    narrow N that 4 does not divide but 2 does (a 10-class output layer: five column tiles
    instead of three of which the last computes two columns past N, and 16% fewer dot
    products and horizontal sums; W4's x [64, 256] @ W.T with W [10, 256]: 5.6 -> 4.7 us,
    one PoCL thread); fewer rows when M is smaller."""
    dm, dn = (2 * DM, DN // 2) if N < 4 * DN and N % DN and N % (DN // 2) == 0 else (DM, DN)
    return min(dm, M), dn


def _mm_dot(d, M, N, K, sam, sak, sbk, sbn, store):
    """A tile (:func:`dot_tile`) of float16 dot-product accumulators along K (B contiguous
    along K)."""
    dm, dn = dot_tile(M, N)
    L = [f"  const int n0 = {d.index('global', 0)}*{dn};",
         f"  const int m0 = {d.index('global', 1)}*{dm};"]
    for i in range(dm):
        L.append(f"  {d.pointer(const=True)} a{i} = A + min(m0+{i}, {M - 1})*{sam};")
    for j in range(dn):
        L.append(f"  {d.pointer(const=True)} b{j} = B + min(n0+{j}, {N - 1})*{sbn};")
    L += [f"  float16 acc{i}{j} = (float16)(0.0f);" for i in range(dm) for j in range(dn)]

    def aload(i, k):
        if sak == 1:
            return f"vload16(0, a{i} + {k})"
        return "(float16)(" + ", ".join(f"a{i}[max({k}+{t}, 0)*{sak}]" for t in range(VK)) + ")"

    def chunk(k, mask):
        out = [f"    const float16 va{i} = {aload(i, k)};" for i in range(dm)]
        out += [f"    const float16 vb{j} = vload16(0, b{j} + {k});" for j in range(dn)]
        for i in range(dm):
            for j in range(dn):
                if mask is None:
                    out.append(f"    acc{i}{j} = fma(va{i}, vb{j}, acc{i}{j});")
                else:
                    out.append(f"    acc{i}{j} += select((float16)(0.0f), va{i}*vb{j}, {mask});")
        return out

    kfull = K // VK * VK
    if kfull:
        L.append(f"  for (int k = 0; k < {kfull}; k += {VK}) {{")
        L += chunk("k", None)
        L.append("  }")
    rem = K - kfull
    if rem:
        # the last K chunk: a vector ending at K (starting before 0 when K < 16 reads the
        # arena slack), lanes already summed or outside the row masked out
        start = K - VK
        first = VK - rem
        mask = "(int16)(" + ", ".join("-1" if t >= first else "0" for t in range(VK)) + ")"
        L.append("  {")
        L += chunk(str(start), mask)
        L.append("  }")
    for i in range(dm):
        row = f"(m0+{i})"
        parts = [f"_hsum16(acc{i}{j})" for j in range(dn)]
        L.append(f"  {{ const float{dn} s_ = (float{dn})({', '.join(parts)});")
        st = store("s_", dn, row, "n0")
        guard = "" if M % dm == 0 else f"if ({row} < {M}) "
        L.append(f"    {guard}{{ " + " ".join(st) + " } }")
    return L, (_cdiv(N, dn), _cdiv(M, dm))


def row_reduce(name: str, rows: int, length: int, x: Ref | Callable[[int, str], str],
               out: Ref | Callable[[str], list[str]], op: str = "sum",
               prologue: Callable[[str, int, str, str], str] | None = None,
               epilogue: Epilogue | None = None, setup: list[str] = (),
               vector: bool = True, *, d: Dialect, rows_bound: str | None = None,
               trip: Callable[[int], str] | None = None) -> Source:
    """out[r] = epilogue(reduce_j prologue(x[r, j])) with one work-item per row ``r``.

    Args:
        rows, length: number of rows and the reduced length of each row.
        x: input :class:`Ref` with strides (row stride, 1), or a hook ``fn(width, j) ->
            C expression`` of the ``float{width}`` value at columns ``j .. j+width-1`` of row
            ``r`` (C ints ``r`` and ``j`` are in scope).
        out: output :class:`Ref` with strides (row stride,), or a hook ``fn(s) -> C
            statements`` storing the reduced value ``s`` of row ``r``.
        op: ``"sum"`` or ``"max"``.
        prologue: ``fn(v, width, row, col) -> str`` applied to loaded values.
        epilogue: applied to the reduced value (width 1).
        setup: C statements run first by each work-item (index variables of the hooks).
        vector: load 16 columns at a time (``float16`` accumulator, scalar tail); ``False``
            for inputs that are not contiguous along the row.
        rows_bound: C text of ``rows`` in the early exit (default the literal).
        trip: ``fn(n) -> C text`` of the vector loop's bound ``n`` when that loop covers
            the whole row (no tail; default the literal).

    Raises:
        ValueError: a Ref input whose rows are not contiguous, or an unknown ``op``.
    """
    if isinstance(x, Ref):
        if x.strides[-1] != 1:
            raise ValueError(f"{name}: row_reduce needs contiguous rows, strides {x.strides}")
        xr = x
        x = lambda w, j: (f"vload16(0, buf + {xr.offset} + r*{xr.strides[0]} + {j})"
                          if w == 16 else f"buf[{xr.offset} + r*{xr.strides[0]} + {j}]")
    if isinstance(out, Ref):
        o = out
        out = lambda s: [f"buf[{o.offset} + r*{o.strides[0]}] = {s};"]
    if op not in ("sum", "max"):
        raise ValueError(f"{name}: unknown reduction {op!r}")
    pro = prologue or (lambda v, w, r, c: v)
    epi = epilogue or (lambda v, w, r, c: v)
    ident = "0.0f" if op == "sum" else "(-INFINITY)"
    comb = (lambda acc, v: f"{acc} + {v}") if op == "sum" else (lambda acc, v: f"_ad_max({acc}, {v})")
    hred = "_hsum16" if op == "sum" else "_hmax16"
    L = [d.signature(name, [f"{d.pointer()} restrict buf"]) + " {",
         f"  const int r = {d.index('global', 0)};",
         f"  if (r >= {rows_bound or rows}) return;"] + [f"  {s}" for s in setup]
    full = length // 16 * 16 if vector else 0
    if full:
        L += _chains(full, 16, x(16, "j"), pro("v", 16, "r", "j"),
                     comb if op == "sum" else vector_max, "float16", ident,
                     trip=trip if full == length else None) + \
            [f"  float s = {hred}(acc);"]
    elif length >= SCALAR_PAIR_MIN:         # a scalar row: two chains or more (see below)
        value, body = x(1, "j"), pro("v", 1, "r", "j")
        L += _chains(length, 1, value, body, comb, "float", ident,
                     max(2, _chain_count(length, 1, value + body))) + ["  float s = acc;"]
        full = length
    else:
        L.append(f"  float s = {ident};")
    if length - full:
        L += [f"  for (int j = {full}; j < {length}; j++) {{", f"    const float v = {x(1, 'j')};",
              f"    s = {comb('s', pro('v', 1, 'r', 'j'))};", "  }"]
    L += [f"  {st}" for st in out(epi("s", 1, "r", "0"))] + ["}"]
    local = min(max(rows, 1), ROW_GROUP)
    return Source(name, "\n".join(L), (_cdiv(max(rows, 1), local) * local,), (local,))


#: independent accumulators of a reduction loop: one accumulator makes every step wait for
#: the previous one's add (4 cycles) or NaN-propagating max; four keep the vector units
#: busier (``amax(dim=-1)`` of [1024, 512]: 0.106 -> 0.071 ms, the sum of ``H * 2 + 1``
#: 0.045 -> 0.038 ms on one core, ``python -m bench.kernels``)
CHAINS = 4
#: fewest whole rounds of the chains a loop must run to be chained: rows of 128 (layer_norm
#: forward and backward on [1024, 128]: 0.196-0.206 ms either way) gain nothing, and each
#: chained loop is four copies of its source for PoCL to compile (the main job's program
#: 294 K characters against 309 K with rows of 128 chained)
CHAIN_ROUNDS = 4
#: longest source expression (characters) a reduction loop repeats for its chains: each
#: copy is code PoCL compiles (the cold start), and a long expression is compute-bound
CHAIN_CHARS = 600
#: the only calls a chained source may make: a call to anything else (``exp``, ``_ad_erf``)
#: makes a step compute-bound, and four copies of it in flight spill registers (the sum of
#: ``gelu`` over [1024, 512]: 0.348 -> 0.377 ms with four chains)
CHAIN_CALLS = frozenset({"vload16", "vload8", "vload4", "vload2", "select", "convert_float",
                         "as_float", "as_int"})


def vector_max(acc: str, v: str) -> str:
    """C of the lane-wise maximum of vectors ``acc`` and ``v`` propagating NaN (a NaN lane
    of either stays NaN): ``v`` where it is greater or NaN. A compare, a NaN test and a
    blend, against ``_ad_max``'s ``fmax`` with two NaN tests, an add and a select, on the
    path from one step of a reduction loop to the next (``amax(dim=-1)`` of [1024, 512] on
    one core: 0.071 -> 0.050 ms). ``v`` is repeated: a name or a short expression."""
    return f"select({acc}, {v}, ({v} > {acc}) | ({v} != {v}))"


def _chain_count(n: int, step: int, code: str) -> int:
    """Accumulators of :func:`_chains`' loop: :data:`CHAINS` or 1."""
    return CHAINS if n >= CHAIN_ROUNDS * CHAINS * step and len(code) <= CHAIN_CHARS and \
        set(re.findall(r"([A-Za-z_]\w*)\s*\(", code)) <= CHAIN_CALLS else 1


def _chains(n: int, step: int, value: str, body: str, comb: Callable[[str, str], str],
            vt: str, ident: str, chains: int | None = None,
            trip: Callable[[int], str] | None = None) -> list[str]:
    """C lines of a reduction loop over ``j = 0, step, ..., < n`` into ``acc`` (a ``vt``
    from ``ident``): ``value`` is the C value at ``j`` (a C int named ``j`` in scope),
    ``body`` the value combined (an expression of it, named ``v``), ``comb(acc, v)`` the
    combination. ``chains`` accumulators (default :func:`_chain_count`'s: :data:`CHAINS`
    from :data:`CHAIN_ROUNDS` rounds of a short source calling nothing but
    :data:`CHAIN_CALLS`, else one) take the steps in turn (the loop unrolled by hand, each
    step a block with its own ``const int j``) and are combined pairwise at the end, into
    ``acc``; steps past the last whole round go to ``acc``. ``trip``: ``fn(n) -> C text``
    of the loop's bound when the loop runs all ``n`` (no steps left past its rounds)."""
    k = chains or _chain_count(n, step, value + body)
    if k == 1:
        return [f"  {vt} acc = ({vt})({ident});",
                f"  for (int j = 0; j < {trip(n) if trip else n}; j += {step}) {{",
                f"    const {vt} v = {value};", f"    acc = {comb('acc', body)};", "  }"]
    accs = ["acc"] + [f"acc{i}" for i in range(1, k)]
    whole = n // (k * step) * (k * step)
    bound = trip(whole) if trip and whole == n else whole
    L = [f"  {vt} {', '.join(f'{a} = ({vt})({ident})' for a in accs)};",
         f"  for (int jj = 0; jj < {bound}; jj += {k * step}) {{"]
    for i, a in enumerate(accs):
        L.append(f"    {{ const int j = jj + {i * step}; const {vt} v = {value}; "
                 f"{a} = {comb(a, body)}; }}")
    L.append("  }")
    if whole < n:
        L += [f"  for (int j = {whole}; j < {n}; j += {step}) {{",
              f"    const {vt} v = {value};", f"    acc = {comb('acc', body)};", "  }"]
    while len(accs) > 1:                    # pairwise: (acc + acc2) + (acc1 + acc3)
        half = len(accs) // 2
        L += [f"  {a} = {comb(a, b)};" for a, b in zip(accs[:half], accs[half:])]
        accs = accs[:half]
    return L


#: shortest row a scalar row reduction (a source not contiguous along the row: a short row
#: of a softmax over 10 classes, a full sum broadcasting per-row values) splits into two
#: chains (:func:`_chains`); from CHAINS * CHAIN_ROUNDS elements four. One chain waits on
#: each previous add or NaN-propagating max (4-6 cycles): W4's cross-entropy over [64, 10]
#: (max, exp-sum and the loss's sum of 640), one PoCL thread, kernels replayed alone: 5.7
#: -> 4.3 us with two chains per row
SCALAR_PAIR_MIN = 8


#: rows (work-items) per work-group of a row reduction: one group per row pays PoCL's
#: per-group cost once per row, which dominates short rows
ROW_GROUP = 16


def elementwise(name: str, n: int, expr: str, out: Ref, local: int = 64, *,
                d: Dialect) -> Source:
    """out[i] = expr for i < n, one work-item per element, ``i`` the flat index.

    ``expr`` is a C expression in ``i`` (and ``buf``) already containing the index
    arithmetic of its loads, as rendered by :mod:`.render`. ``out`` is contiguous
    (``out.strides == (1,)``).
    """
    L = [d.signature(name, [f"{d.pointer()} restrict buf"]) + " {",
         f"  const int i = {d.index('global', 0)};",
         f"  if (i >= {n}) return;",
         f"  buf[{out.offset} + i*{out.strides[0]}] = {expr};", "}"]
    return Source(name, "\n".join(L), (_cdiv(n, local) * local,), (local,))


#: work-items per row of :func:`tree_reduce` (a power of two)
TREE_GROUP = 128


def tree_reduce(name: str, rows: int, length: int, x: Callable[[int, str], str],
                out: Callable[[str], list[str]], op: str = "sum", setup: list[str] = (),
                group: int = TREE_GROUP, *, d: Dialect) -> Source:
    """out[r] = reduce_j x[r, j] with one work-group of ``group`` work-items per row: each
    work-item reduces the columns ``j = lid, lid + group, ...`` (coalesced on a GPU), then
    a tree over local memory halves the partial results ``log2(group)`` times, with a
    barrier per level (the classic GPU reduction, Harris, "Optimizing Parallel Reduction
    in CUDA", 2007). In a dialect with warp shuffles (``d.warp`` lanes, fewer than
    ``group``) the tree stops at two warps' partials: the first warp adds them pairwise
    and finishes with ``log2(d.warp)`` register shuffles (``d.shuffle_down``) and no
    barrier or shared-memory traffic (Harris's last-warp unrolling, done with the
    ``__shfl_down_sync`` of the CUDA Programming Guide's warp shuffle functions). Both
    forms add the same pairs in the same order.

    Args:
        rows, length: number of rows and the reduced length of each row.
        x: hook ``fn(1, j) -> C expression`` of the value at column ``j`` of row ``r`` (C
            ints ``r`` and ``j`` in scope), as for :func:`row_reduce`.
        out: hook ``fn(s) -> C statements`` storing the reduced value ``s`` of row ``r``;
            run by work-item 0 of the row's group.
        op: ``"sum"`` or ``"max"``.
        setup: C statements run first by each work-item.
        group: work-items per row, a power of two.

    Returns:
        A :class:`Source` with ``whole=True``: global size ``(rows * group,)``, local size
        ``(group,)``.

    Raises:
        ValueError: an unknown ``op`` or a group size that is not a power of two.
    """
    if op not in ("sum", "max"):
        raise ValueError(f"{name}: unknown reduction {op!r}")
    if group < 1 or group & (group - 1):
        raise ValueError(f"{name}: group size {group} is not a power of two")
    ident = "0.0f" if op == "sum" else "(-INFINITY)"
    comb = (lambda a, b: f"{a} + {b}") if op == "sum" else (lambda a, b: f"_ad_max({a}, {b})")
    L = [d.signature(name, [f"{d.pointer()} restrict buf"]) + " {",
         f"  {d.local} float part[{group}];",
         f"  const int r = {d.index('group', 0)};",
         f"  const int lid = {d.index('local', 0)};"] + [f"  {s}" for s in setup]
    L += [f"  float s = {ident};",
          f"  for (int j = lid; j < {length}; j += {group}) {{",
          f"    const float v = {x(1, 'j')};", f"    s = {comb('s', 'v')};", "  }",
          "  part[lid] = s;", f"  {d.barrier}"]
    warp = d.warp if 0 < d.warp < group else 0          # the tree's last lanes: shuffles
    if not warp or group // 2 > warp:
        L += [f"  for (int h = {group // 2}; h > {warp or 0}; h >>= 1) {{",
              f"    if (lid < h) part[lid] = {comb('part[lid]', 'part[lid + h]')};",
              f"    {d.barrier}", "  }"]
    if not warp:
        L += ["  if (lid == 0) {", "    s = part[0];"]
        L += [f"    {st}" for st in out("s")] + ["  }", "}"]
    else:
        down = d.shuffle_down.format(x="s", o="o")
        L += [f"  if (lid < {warp}) {{",
              f"    s = {comb('part[lid]', f'part[lid + {warp}]')};",
              "    #pragma unroll",
              f"    for (int o = {warp // 2}; o > 0; o >>= 1) s = {comb('s', down)};",
              "    if (lid == 0) {"]
        L += [f"      {st}" for st in out("s")] + ["    }", "  }", "}"]
    return Source(name, "\n".join(L), (max(rows, 1) * group,), (group,), whole=True)
