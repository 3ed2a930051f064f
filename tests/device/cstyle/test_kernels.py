"""The shared kernel templates in the OpenCL dialect, run standalone on PoCL on one arena
and checked against numpy: matmul (every layout, edge tiles, batches, fused epilogue), row
and tree reductions, elementwise, operand packing. The arena outside each output must stay
untouched (edge stores are masked)."""
import numpy as np
import pytest

from autodiff.device.cstyle import kernels as K
from autodiff.device.opencl import device
from autodiff.device.opencl.dialect import OPENCL

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)

from autodiff.device.opencl.runtime import run_sources  # noqa: E402

RNG = np.random.default_rng(0)


class Arena:
    """A host arena with SLACK floats of poison (nan) at both ends and between buffers."""

    def __init__(self):
        self.parts, self.top = [], K.SLACK

    def add(self, arr):
        off = self.top
        self.parts.append((off, np.asarray(arr, np.float32).ravel()))
        self.top += arr.size + 7          # odd gaps: no accidental alignment
        return off

    def host(self):
        h = np.full(self.top + K.SLACK, np.nan, np.float32)
        for off, a in self.parts:
            h[off:off + a.size] = a
        return h


MM_SHAPES = [(1, 1, 1), (2, 255, 255), (37, 19, 5), (8, 16, 16), (17, 33, 40), (9, 4, 3),
             (13, 10, 21), (5, 6, 40)]   # the last two: the narrow dot tile (dot_tile)
LAYOUTS = [(0, 0), (0, 1), (1, 0), (1, 1)]
AVX2 = (6, 8, 2)           # the register tile of 8-float vector registers (target.TILES)
WIDE = (8, 16, 2)          # ... of 16-float registers: 32 columns (two float16 per row)
#: N a multiple of 32, and ragged N the wide tile keeps (fit_tile): 255, 120, 80
WIDE_SHAPES = [(2, 255, 255), (17, 120, 40), (37, 64, 5), (9, 96, 3), (8, 32, 16), (11, 80, 7)]
MM_CASES = [(M, N, Kd, ta, tb, ()) for M, N, Kd in MM_SHAPES for ta, tb in LAYOUTS] + \
           [(5, 21, 18, 0, tb, (2, 3)) for tb in (0, 1)] + \
           [(M, N, Kd, ta, 0, (), AVX2) for M, N, Kd in MM_SHAPES + [(13, 50, 9), (9, 24, 7)]
            for ta in (0, 1)] + [(5, 21, 18, 0, 0, (2, 3), AVX2)] + \
           [(M, N, Kd, ta, 0, (), WIDE) for M, N, Kd in WIDE_SHAPES for ta in (0, 1)] + \
           [(5, 64, 18, 0, 0, (2, 3), WIDE)]


def _mm_source(ar, name, M, N, Kd, ta, tb, batch, tile=None):
    """A matmul with a bias + ReLU epilogue; with ``tile``, rendered with that register
    tile and its rows stored in the loop form (as a long fused epilogue is)."""
    A = RNG.standard_normal(batch + (M, Kd)).astype(np.float32)
    B = RNG.standard_normal(batch + (Kd, N)).astype(np.float32)
    bias = RNG.standard_normal(N).astype(np.float32)
    a_st = np.swapaxes(A, -1, -2).copy() if ta else A
    b_st = np.swapaxes(B, -1, -2).copy() if tb else B
    oa, ob, obias = ar.add(a_st), ar.add(b_st), ar.add(bias)
    oc = ar.add(np.full(batch + (M, N), -7.0, np.float32))
    bstr = lambda shape: tuple(int(np.prod(shape[i + 1:])) for i in range(len(batch)))
    sa = bstr(a_st.shape) + ((1, M) if ta else (Kd, 1))
    sb = bstr(b_st.shape) + ((1, Kd) if tb else (N, 1))
    sc = bstr(batch + (M, N)) + (N, 1)
    epi = lambda v, w, r, c: f"fmax({v} + vload{w}(0, buf + {obias} + {c}), 0.0f)"
    if tile is None:
        src = K.matmul(name, M, N, Kd, K.Ref(oa, sa), K.Ref(ob, sb), K.Ref(oc, sc), batch, epi,
                       d=OPENCL)
    else:
        loop, K.EPILOGUE_LOOP_CHARS = K.EPILOGUE_LOOP_CHARS, 0
        try:
            src = K.matmul(name, M, N, Kd, K.Ref(oa, sa), K.Ref(ob, sb), K.Ref(oc, sc), batch,
                           epi, tile=tile, d=OPENCL)
        finally:
            K.EPILOGUE_LOOP_CHARS = loop
        assert ("i_ <" in src.src) == (min(M, tile[0]) > 1)
    ref = np.maximum(np.matmul(A.astype(np.float64), B) + bias, 0)
    return src, oc, ref


@pytest.fixture(scope="module")
def matmuls():
    """Every case in one program on one arena (one build): case -> (result, reference)."""
    ar, srcs, where = Arena(), [], {}
    for i, case in enumerate(MM_CASES):
        src, oc, ref = _mm_source(ar, f"mm{i}", *case)
        srcs.append(src)
        where[case] = (oc, ref)
    host = ar.host()
    out, _ = run_sources(srcs, host)
    written = np.zeros(out.size, bool)
    res = {}
    for case, (oc, ref) in where.items():
        res[case] = (out[oc:oc + ref.size].reshape(ref.shape), ref)
        written[oc:oc + ref.size] = True
    return res, out[~written], host[~written]


@pytest.mark.parametrize("case", MM_CASES, ids=[f"{c[0]}x{c[1]}x{c[2]}-t{c[3]}{c[4]}-b{len(c[5])}"
                                                + ({AVX2: "-avx2", WIDE: "-wide"}[c[6]]
                                                   if len(c) > 6 else "")
                                                for c in MM_CASES])
def test_matmul_layouts_edges_batches(matmuls, case):
    C, ref = matmuls[0][case]
    np.testing.assert_allclose(C, ref, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(ref).max()))


def test_matmul_writes_nothing_else(matmuls):
    """Edge tiles store only their valid lanes: the rest of the arena is unchanged."""
    np.testing.assert_array_equal(matmuls[1], matmuls[2])   # nan == nan here


@pytest.mark.parametrize("M, rows", [(1, 1), (5, 5), (8, 8), (9, 5), (10, 5), (17, 6),
                                     (49, 7), (50, 8), (56, 8), (64, 8), (103, 8), (1024, 8)])
def test_tile_rows_split_m_evenly(M, rows):
    """``ceil(M / 8)`` row tiles of equal height (the last one short by less than a tile's
    row count): M = 10 is two tiles of 5, not 8 + 8 with 6 rows computed in vain."""
    assert K.panel_rows((K.TM, K.TN, 1), M) == rows
    assert -(-M // rows) == -(-M // K.TM)


@pytest.mark.parametrize("M, N, tile", [(64, 10, (8, 2)), (64, 6, (8, 2)), (5, 14, (5, 2)),
                                        (64, 12, (4, 4)), (64, 16, (4, 4)), (64, 19, (4, 4)),
                                        (64, 18, (4, 4)), (2, 4, (2, 4))])
def test_dot_tile_is_narrow_only_for_an_even_n_under_16_that_4_does_not_divide(M, N, tile):
    assert K.dot_tile(M, N) == tile


def test_wide_tile_is_kept_or_narrowed_by_n():
    assert K.fit_tile(WIDE, 64) == WIDE and K.fit_tile(WIDE, 255) == WIDE
    assert K.fit_tile(WIDE, 80) == WIDE                 # 16 of 96 columns idle: kept
    assert K.fit_tile(WIDE, 40) == (8, 16, 1)           # 24 of 64 idle: 16-column tiles
    assert K.fit_tile(WIDE, 16) == (8, 16, 1) and K.fit_tile(AVX2, 3) == AVX2
    src = K.matmul("mm", 64, 64, 64, K.Ref(0, (64, 1)), K.Ref(0, (64, 1)),
                   K.Ref(0, (64, 1)), tile=WIDE, d=OPENCL)
    assert "acc7_1" in src.src and src.global_size == (2, 8, 1)


@pytest.mark.parametrize("M,N,Kd", [(19, 80, 33), (8, 64, 16), (3, 255, 20)])
def test_wide_tile_reads_two_b_panels(M, N, Kd):
    """B packed as [ceil(N/16)][K][16] panels: a 32-column tile reads two neighbouring
    panels; the panel after the last one (read by a ragged last tile) holds NaN and no
    NaN reaches C."""
    A = RNG.standard_normal((M, Kd)).astype(np.float32)
    B = RNG.standard_normal((Kd, N)).astype(np.float32)
    cols = -(-N // 32) * 32
    padded = np.full((Kd, cols), np.nan, np.float32)
    padded[:, :N] = B
    panels = padded.reshape(Kd, cols // 16, 16).transpose(1, 0, 2).copy()
    ar = Arena()
    oa, ob = ar.add(A), ar.add(panels)
    oc = ar.add(np.full((M, N), -7.0, np.float32))
    src = K.matmul("mmp", M, N, Kd, K.Ref(oa, (Kd, 1)), K.Ref(ob, (0, 0), panel=True),
                   K.Ref(oc, (N, 1)), tile=WIDE, d=OPENCL)
    assert "acc0_1" in src.src
    out, _ = run_sources([src], ar.host())
    np.testing.assert_allclose(out[oc:oc + M * N].reshape(M, N), A.astype(np.float64) @ B,
                               rtol=1e-5, atol=1e-4)


def _panels(X, cols: int, rows: bool = False) -> np.ndarray:
    """``X`` [K, N] as B panels ([ceil(N/16)][K][16], NaN past N up to ``cols``), or with
    ``rows`` ``X`` [M, K] as A panels of ``cols`` rows ([ceil(M/cols)][K][cols])."""
    if rows:
        M, Kd = X.shape
        padded = np.full((-(-M // cols) * cols, Kd), np.nan, np.float32)
        padded[:M] = X
        return padded.reshape(-1, cols, Kd).transpose(0, 2, 1).copy()
    Kd, N = X.shape
    padded = np.full((Kd, cols), np.nan, np.float32)
    padded[:, :N] = X
    return padded.reshape(Kd, cols // 16, 16).transpose(1, 0, 2).copy()


@pytest.mark.parametrize("tile", [WIDE, AVX2, (8, 16, 1)])
@pytest.mark.parametrize("M,N,Kd,apanel", [(19, 80, 33, False), (3, 64, 20, False),
                                           (16, 96, 7, True), (5, 37, 12, True)])
def test_shared_tile_loop_matches_the_inline_one(tile, M, N, Kd, apanel):
    """``micro=True``: the tile loop is one call of the shared function (its definition
    pulled into the program once, by name), with A read from rows or from panels; the
    results equal the inline loop's bit for bit and numpy's to rounding."""
    A = RNG.standard_normal((M, Kd)).astype(np.float32)
    B = RNG.standard_normal((Kd, N)).astype(np.float32)
    bias = RNG.standard_normal(N).astype(np.float32)
    ar = Arena()
    tm = K.panel_rows(K.fit_tile(tile, N), M)
    oa = ar.add(_panels(A, tm, rows=True) if apanel else A)
    ob = ar.add(_panels(B, -(-N // 32) * 32))
    obias = ar.add(bias)
    outs = [ar.add(np.full((M, N), -7.0, np.float32)) for _ in range(2)]
    epi = lambda v, w, r, c: f"fmax({v} + vload{w}(0, buf + {obias} + {c}), 0.0f)"
    a = K.Ref(oa, (0, 0), panel=True) if apanel else K.Ref(oa, (Kd, 1))
    srcs = [K.matmul(f"mm{m}", M, N, Kd, a, K.Ref(ob, (0, 0), panel=True),
                     K.Ref(oc, (N, 1)), epilogue=epi, tile=tile, d=OPENCL, micro=m)
            for m, oc in zip((False, True), outs)]
    name = K.micro_name(tm, tile[1], K.fit_tile(tile, N)[2], apanel)
    assert f"{name}(" in srcs[1].src and "for (int k" not in srcs[1].src
    assert f"{name}(" not in srcs[0].src
    from autodiff.device.opencl import render
    assert render.program(srcs + srcs).count(f"static void {name}(") == 1
    out, _ = run_sources(srcs, ar.host())
    got = [out[oc:oc + M * N].reshape(M, N) for oc in outs]
    np.testing.assert_array_equal(got[1], got[0])
    np.testing.assert_allclose(got[1], np.maximum(A.astype(np.float64) @ B + bias, 0),
                               rtol=1e-5, atol=1e-4)


def test_a_body_calling_the_shared_tile_loop_stays_a_function():
    """As a body (the OpenCL CPU device's dispatch kernels), a matmul calling the shared tile
    loop is never inlined into its block function's loops; one with the loop inline is."""
    from autodiff.device.opencl.dialect import BODY
    a, b = K.Ref(0, (33, 1)), K.Ref(4096, (0, 0), panel=True)
    call, inline = (K.matmul("mm", 19, 80, 33, a, b, K.Ref(8192, (80, 1)), d=BODY, micro=m)
                    for m in (True, False))
    assert call.src.startswith("static __attribute__((noinline)) void mm_body(")
    assert inline.src.startswith("static inline void mm_body(")


def test_shared_tile_loop_unrolls_by_vector_width():
    """The AVX2 tile's shared loop (run-time K) is unrolled by 4; the AVX-512 one stays
    rolled (not measured there). The results are checked against the inline loop above."""
    assert "#pragma unroll 4\n  for (int k = 0; k < K; k++)" in \
        K.micro_kernel("_ad_mm6x8x2r", OPENCL)
    assert "#pragma unroll" not in K.micro_kernel("_ad_mm8x16x2p", OPENCL)


def test_shared_tile_loop_names_are_checked():
    with pytest.raises(ValueError, match="not a shared tile loop"):
        K.micro_kernel("_ad_mm8x16", OPENCL)


def test_matmul_uses_vector_tiles():
    src = K.matmul("mm", 64, 64, 64, K.Ref(0, (64, 1)), K.Ref(0, (64, 1)), K.Ref(0, (64, 1)),
                   d=OPENCL)
    assert "vload16" in src.src and "fma" in src.src
    assert src.global_size == (64 // K.TN, 64 // K.TM, 1)
    dot = K.matmul("mm", 64, 64, 64, K.Ref(0, (64, 1)), K.Ref(0, (1, 64)), K.Ref(0, (64, 1)),
                   d=OPENCL)
    assert dot.global_size == (64 // K.DN, 64 // K.DM, 1)   # B contiguous along K: dot form


RED_CASES = [(r, n, op) for r, n in [(1, 1), (3, 5), (4, 16), (7, 17), (2, 255), (33, 100)]
             for op in ("sum", "max")]


@pytest.fixture(scope="module")
def reductions():
    ar, srcs, where = Arena(), [], {}
    for i, (rows, length, op) in enumerate(RED_CASES):
        x = RNG.standard_normal((rows, length)).astype(np.float32)
        ox, oo = ar.add(x), ar.add(np.zeros(rows, np.float32))
        pro = lambda v, w, r, c: f"exp({v} - 1.0f)"
        srcs.append(K.row_reduce(f"red{i}", rows, length, K.Ref(ox, (length, 1)),
                                 K.Ref(oo, (1,)), op, prologue=pro,
                                 epilogue=lambda v, w, r, c: f"({v} * 2.0f)", d=OPENCL))
        e = np.exp(x.astype(np.float64) - 1)
        where[(rows, length, op)] = (oo, 2 * (e.sum(1) if op == "sum" else e.max(1)))
    host = ar.host()
    out, _ = run_sources(srcs, host)
    written = np.zeros(out.size, bool)
    res = {}
    for case, (oo, ref) in where.items():
        res[case] = (out[oo:oo + ref.size], ref)
        written[oo:oo + ref.size] = True
    return res, out[~written], host[~written]


@pytest.mark.parametrize("case", RED_CASES)
def test_row_reduce(reductions, case):
    got, ref = reductions[0][case]
    np.testing.assert_allclose(got, ref, rtol=2e-6)


def test_row_reduce_writes_nothing_else(reductions):
    np.testing.assert_array_equal(reductions[1], reductions[2])


@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("length", [256, 519, 1024])
def test_row_reduce_in_chains_matches_numpy(op, length):
    """Rows of 16+ vectors take :data:`~.kernels.CHAINS` accumulators (and a tail of whole
    vectors and of single elements past the last round); a NaN still reaches its row's
    maximum and sum."""
    rows = 5
    x = RNG.standard_normal((rows, length)).astype(np.float32)
    x[3, length // 2 + 1] = np.nan
    ar = Arena()
    ox, oo = ar.add(x), ar.add(np.zeros(rows, np.float32))
    src = K.row_reduce("chained", rows, length, K.Ref(ox, (length, 1)), K.Ref(oo, (1,)), op,
                       d=OPENCL)
    assert "acc3" in src.src and "jj" in src.src
    out, _ = run_sources([src], ar.host())
    ref = x.astype(np.float64).sum(1) if op == "sum" else x.max(1)
    np.testing.assert_allclose(out[oo:oo + rows], ref, rtol=2e-6, atol=1e-5)
    assert np.isnan(out[oo + 3])


@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("length, chains", [(7, 1), (10, 2), (15, 2), (640, 4)])
def test_scalar_row_reduce_in_chains_matches_numpy(op, length, chains):
    """A row read element by element (``vector=False``: a source not contiguous along the
    row) takes two accumulators from :data:`~.kernels.SCALAR_PAIR_MIN` elements (even and
    odd ``j``, an odd last one to the first) and four where ``_chains`` takes them; a
    NaN still reaches its row's maximum and sum."""
    rows = 6
    x = RNG.standard_normal((rows, length)).astype(np.float32)
    x[4, length - 1] = np.nan
    ar = Arena()
    ox, oo = ar.add(x), ar.add(np.zeros(rows, np.float32))
    src = K.row_reduce("scalar", rows, length, K.Ref(ox, (length, 1)), K.Ref(oo, (1,)), op,
                       vector=False, d=OPENCL)
    two = "acc1 = " in src.src and "acc2" not in src.src
    assert two == (chains == 2) and ("acc3" in src.src) == (chains == 4)
    assert "vload16" not in src.src
    out, _ = run_sources([src], ar.host())
    ref = x.astype(np.float64).sum(1) if op == "sum" else x.max(1)
    np.testing.assert_allclose(out[oo:oo + rows], ref, rtol=2e-6, atol=1e-5)
    assert np.isnan(out[oo + 4])


def test_row_reduce_keeps_one_chain_for_a_call_in_its_source():
    """A source calling ``exp`` is compute-bound: one accumulator, not four copies."""
    src = K.row_reduce("one", 2, 1024, K.Ref(64, (1024, 1)), K.Ref(3000, (1,)), "sum",
                       prologue=lambda v, w, r, c: f"exp({v})", d=OPENCL).src
    assert "acc1" not in src


@pytest.mark.parametrize("group", [1, 4, 128])
def test_tree_reduce_matches_numpy_and_writes_nothing_else(group):
    """The GPU form (a work-group per row, local-memory tree with barriers) runs on PoCL
    too: rows shorter and longer than the group, sum and max."""
    ar, srcs, where = Arena(), [], []
    for i, (rows, length, op) in enumerate(RED_CASES):
        x = RNG.standard_normal((rows, length)).astype(np.float32)
        ox, oo = ar.add(x), ar.add(np.zeros(rows, np.float32))
        srcs.append(K.tree_reduce(
            f"tree{i}", rows, length, lambda w, j, ox=ox, n=length: f"buf[{ox} + r*{n} + {j}]",
            lambda s, oo=oo: [f"buf[{oo} + r] = {s} * 2.0f;"], op, group=group, d=OPENCL))
        where.append((oo, 2 * (x.sum(1, dtype=np.float64) if op == "sum" else x.max(1))))
    host = ar.host()
    out, _ = run_sources(srcs, host)
    written = np.zeros(out.size, bool)
    for oo, ref in where:
        np.testing.assert_allclose(out[oo:oo + ref.size], ref, rtol=2e-6, atol=2e-5)
        written[oo:oo + ref.size] = True
    np.testing.assert_array_equal(out[~written], host[~written])
    assert all(s.whole and s.local_size == (group,) for s in srcs)


def test_tree_reduce_rejects_a_group_that_is_not_a_power_of_two():
    with pytest.raises(ValueError, match="power of two"):
        K.tree_reduce("t", 2, 8, lambda w, j: "0.0f", lambda s: [], group=6, d=OPENCL)


def test_elementwise_template():
    x = RNG.standard_normal(1000).astype(np.float32)
    ar = Arena()
    ox, oo = ar.add(x), ar.add(np.zeros(1000, np.float32))
    src = K.elementwise("e", 1000, f"tanh(buf[{ox} + i]) * 3.0f", K.Ref(oo, (1,)), d=OPENCL)
    out, _ = run_sources([src], ar.host())
    np.testing.assert_allclose(out[oo:oo + 1000], np.tanh(x) * 3, rtol=2e-6, atol=1e-7)


PANEL_CASES = [(R, Kd, rows, layout) for R, Kd in [(13, 20), (32, 32), (7, 45), (37, 18),
                                                   (21, 35)]
               for rows in (6, 16) for layout in ("row", "col", "strided")]


@pytest.mark.parametrize("vector", [16, 8])
@pytest.mark.parametrize("case", PANEL_CASES, ids=[f"{c[0]}x{c[1]}-r{c[2]}-{c[3]}"
                                                   for c in PANEL_CASES])
def test_pack_panels(case, vector):
    """A matmul operand (R x K, contiguous along K, along R, or neither) copied into
    panels [ceil(R/rows)][K][rows]: every element of the first R rows in place, nothing
    written outside the panels; with 8 lanes (AVX2) a B^T through the 8x8 transposes."""
    R, Kd, rows, layout = case
    x = RNG.standard_normal((R, Kd)).astype(np.float32)
    ar = Arena()
    if layout == "row":
        ox, st = ar.add(x), (Kd, 1)
    elif layout == "col":
        ox, st = ar.add(x.T.copy()), (1, R)
    else:                                              # every other element of a row
        wide = np.zeros((R, 2 * Kd), np.float32)
        wide[:, ::2] = x
        ox, st = ar.add(wide), (2 * Kd, 2)
    nt = -(-R // rows)
    od = ar.add(np.full(nt * Kd * rows, -7.0, np.float32))
    src = K.pack_panels("pp", R, Kd, K.Ref(ox, st), rows, od, d=OPENCL, vector=vector)
    tp = K.TRANSPOSE16_BY8 if vector == 8 else K.TRANSPOSE16
    assert (tp + "(" in src.src) == (rows == 16 and layout == "row")
    _check_panels(src, ar, x, rows, od)


def _check_panels(src, ar, x: np.ndarray, rows: int, od: int) -> None:
    """Run pack kernel ``src`` on arena ``ar``: the panels at ``od`` hold every element of
    ``x`` (R x K) in place, and nothing outside them was written."""
    R, Kd = x.shape
    nt = -(-R // rows)
    host = ar.host()
    out, _ = run_sources([src], host)
    panel = out[od:od + nt * Kd * rows].reshape(nt, Kd, rows)
    got = panel.transpose(0, 2, 1).reshape(nt * rows, Kd)[:R]
    np.testing.assert_array_equal(got, x)
    rest = np.ones(out.size, bool)
    rest[od:od + nt * Kd * rows] = False
    np.testing.assert_array_equal(out[rest], host[rest])


TRANSPOSE_CASES = [((), 8, 8), ((3,), 16, 24), ((2, 3), 32, 8), ((4, 2), 8, 64)]


@pytest.mark.parametrize("case", TRANSPOSE_CASES, ids=[f"{c[0]}-{c[1]}x{c[2]}"
                                                       for c in TRANSPOSE_CASES])
def test_transpose_pack(case):
    """An operand contiguous along its rows (a head of ``[B, T, H*D]`` read as ``[B, H,
    D, T]``: batch dims at their own strides, R = D along the row, C = T a whole row
    apart) copied row-major by 8x8 register transposes: every element in place, nothing
    written outside ``[prod(batch)][R][C]``."""
    batch, R, C = case
    nb = int(np.prod(batch))
    # source [C][nb][R + 3]: element (b, r, c) at c * nb * (R + 3) + b * (R + 3) + r
    pad = R + 3
    x = RNG.standard_normal((*batch, R, C)).astype(np.float32)
    src_arr = np.zeros((C, nb, pad), np.float32)
    src_arr[:, :, :R] = x.reshape(nb, R, C).transpose(2, 0, 1)
    ar = Arena()
    ox = ar.add(src_arr)
    od = ar.add(np.full(nb * R * C, -7.0, np.float32))
    bstrides = tuple(int(np.prod(batch[i + 1:])) * pad for i in range(len(batch)))
    src = K.transpose_pack("tp", batch, R, C, K.Ref(ox, bstrides + (1, nb * pad)), od,
                           d=OPENCL)
    assert K.TRANSPOSE8 + "(" in src.src
    host = ar.host()
    out, _ = run_sources([src], host)
    np.testing.assert_array_equal(out[od:od + x.size].reshape(x.shape), x)
    rest = np.ones(out.size, bool)
    rest[od:od + x.size] = False
    np.testing.assert_array_equal(out[rest], host[rest])


@pytest.mark.parametrize("R,C,strides", [(12, 8, (1, 12)), (8, 12, (1, 8)), (8, 8, (8, 1))])
def test_transpose_pack_refuses_what_it_cannot_tile(R, C, strides):
    with pytest.raises(ValueError, match="transpose_pack tp: needs R and C multiples of 8"):
        K.transpose_pack("tp", (), R, C, K.Ref(0, strides), 100, d=OPENCL)


@pytest.mark.parametrize("width", [8, 1])
def test_head_product_packs_its_transposed_operand(width):
    """Attention scores ``q @ k^T`` with q and k heads of ``[B, T, H*D]`` arrays: B = k^T
    runs along the key's contiguous axis (D), so it is packed first; with 8 lanes by the
    8x8 register transposes, else element by element. Both match numpy."""
    from autodiff.device.cstyle import codegen
    from autodiff.procedural.access import Var, flat
    from autodiff.procedural.ir import Acc, Buffer, BufferKind, DotProduct, Load, Output
    Bn, H, T, D = 2, 3, codegen.PACK_MIN_ROWS, 16     # rows enough for a packed B
    q, k = (RNG.standard_normal((Bn, T, H * D)).astype(np.float32) for _ in range(2))
    buf = {n: Buffer(n, shp, "float32", BufferKind.TEMP)
           for n, shp in (("q", (Bn, T, H * D)), ("k", (Bn, T, H * D)), ("s", (Bn, H, T, T)))}
    b, h, m, n, d = Var("b", Bn), Var("h", H), Var("m", T), Var("n", T), Var("d", D)
    head = lambda t: flat([b, t, h, d], (Bn, T, H, D))
    prod = DotProduct((Bn, H, T, T), (b, h, m, n), d, Load(buf["q"], head(m)),
                      Load(buf["k"], head(n)),
                      (Output(buf["s"], flat([b, h, m, n], (Bn, H, T, T)), Acc()),))
    ar = Arena()
    offs = {"q": ar.add(q), "k": ar.add(k), "s": ar.add(np.zeros((Bn, H, T, T)))}
    offs[codegen.SCRATCH_A] = ar.add(np.zeros(Bn * H * (T + 8) * D))
    offs[codegen.SCRATCH_B] = ar.add(np.zeros(Bn * H * D * (T + K.WIDE)))
    srcs = codegen.dot_product("att", prod, offs, d=OPENCL, tile=(6, 8, 2), width=width)
    assert [s.name for s in srcs] == ["att_pb", "att"]
    assert (K.TRANSPOSE8 + "(" in srcs[0].src) == (width == 8)
    out, _ = run_sources(srcs, ar.host())
    qh, kh = (x.reshape(Bn, T, H, D).transpose(0, 2, 1, 3) for x in (q, k))
    want = qh @ kh.transpose(0, 1, 3, 2)
    got = out[offs["s"]:offs["s"] + want.size].reshape(want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


VIEW_CASES = [(R, Kd, rows, step) for R, Kd in [(13, 32), (16, 16), (37, 48)]
              for rows in (6, 16) for step in (1, 3)]


@pytest.mark.parametrize("case", VIEW_CASES, ids=[f"{c[0]}x{c[1]}-r{c[2]}-s{c[3]}"
                                                  for c in VIEW_CASES])
def test_pack_panels_from_a_view(case):
    """An operand reached through a row hook (a head merge's layout: chunks of 16 along K,
    each row's chunk at its own place) copied into panels: with step 1 (contiguous along
    K: the 16-row register transpose when rows is 16) and a strided step."""
    R, Kd, rows, step = case
    x = RNG.standard_normal((R, Kd)).astype(np.float32)
    # element (r, k) at chunk k // 16, row r, lane (k % 16) * step: [Kd/16][R][16*step]
    blocked = np.zeros((Kd // 16, R, 16 * step), np.float32)
    blocked[:, :, ::step] = x.reshape(R, Kd // 16, 16).transpose(1, 0, 2)
    ar = Arena()
    ox = ar.add(blocked.ravel())
    nt = -(-R // rows)
    od = ar.add(np.full(nt * Kd * rows, -7.0, np.float32))
    view = (lambda r: f"{ox} + (k0/16)*{R * 16 * step} + ({r})*{16 * step}", step)
    src = K.pack_panels("pv", R, Kd, view, rows, od, d=OPENCL)
    assert (K.TRANSPOSE16_ROWS in src.src) == (rows == 16 and step == 1)
    _check_panels(src, ar, x, rows, od)
