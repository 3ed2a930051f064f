"""Source generation from the procedural IR without running it (the shared C-style
codegen, rendered in the OpenCL dialect): strides of access expressions, dimension merging,
the matmul/packing choices, the op table."""
import pytest

from autodiff.graph.ir import Op
from autodiff.procedural.access import Num, Var, flat
from autodiff.procedural.ir import (Acc, Apply, Buffer, BufferKind, Const, DotProduct,
                                    Elementwise, Load, Local, Output, Reduce)
from autodiff.device.cstyle import codegen, render
from autodiff.device.opencl.dialect import OPENCL

Y, X, K = Var("Y", 6), Var("X", 40), Var("K", 24)


def _buf(name, shape):
    return Buffer(name, shape, "float32", BufferKind.TEMP)


def test_affine_stride():
    assert codegen.affine_stride(flat([Y, X], (6, 40)), X) == 1
    assert codegen.affine_stride(flat([Y, X], (6, 40)), Y) == 40
    assert codegen.affine_stride(flat([X, Y], (40, 6)), K) == 0
    assert codegen.affine_stride((X // 8) * 3 + X % 8, X) is None


def test_merge_dims_contiguous_and_permuted():
    merged, sub = codegen.merge_dims([Y, X], [flat([Y, X], (6, 40))])
    assert [v.extent for v in merged] == [240]
    merged, _ = codegen.merge_dims([Y, X], [flat([Y, X], (6, 40)), flat([X, Y], (40, 6))])
    assert [v.extent for v in merged] == [6, 40]          # a transposed read blocks it


def test_elementwise_source_has_flat_index_and_table_ops():
    a, b, out = _buf("a", (6, 40)), _buf("b", (40,)), _buf("out", (6, 40))
    v = Apply(Op.MUL, (Apply(Op.LOG, (Load(a, flat([Y, X], (6, 40))),)), Load(b, X)))
    k = Elementwise((6, 40), (Y, X), (Output(out, flat([Y, X], (6, 40)), v),))
    src = codegen.elementwise("e", k, {"a": 100, "b": 400, "out": 500}, d=OPENCL).src
    assert "_ad_log(buf[(i + 100)])" in src and "buf[(i + 500)] = o0;" in src
    assert "(i % 40) + 400" in src                 # broadcast b: one mod, no div


def test_dot_product_picks_tiles_and_packs_transposed_b():
    a, w, out = _buf("a", (96, 24)), _buf("w", (40, 24)), _buf("out", (96, 40))
    Ym = Var("Y", 96)
    k = DotProduct((96, 40), (Ym, X), K, Load(a, flat([Ym, K], (96, 24))),
                   Load(w, flat([X, K], (40, 24))),
                   (Output(out, flat([Ym, X], (96, 40)), Apply(Op.RELU, (Acc(),))),))
    offs = {"a": 64, "w": 3000, "out": 5000, codegen.SCRATCH_A: 9000, codegen.SCRATCH_B: 12000}
    srcs = codegen.dot_product("mm", k, offs, d=OPENCL)
    assert [s.name for s in srcs] == ["mm_pb", "mm"]        # B^T packed, then 8x16 tiles
    assert "vload16(0, B + k*40 + n0)" in srcs[1].src and "_ad_max(" in srcs[1].src
    small = DotProduct((6, 40), (Y, X), K, Load(a, flat([Y, K], (6, 24))),
                       Load(w, flat([X, K], (40, 24))), (Output(out, flat([Y, X], (6, 40)), Acc()),))
    srcs = codegen.dot_product("mm2", small, offs, d=OPENCL)
    assert len(srcs) == 1 and "_hsum16" in srcs[0].src     # few rows: dot-product form
    w10, out10 = _buf("w10", (10, 24)), _buf("out10", (96, 10))
    narrow = DotProduct((96, 10), (Ym, Var("N", 10)), K, Load(a, flat([Ym, K], (96, 24))),
                        Load(w10, flat([Var("N", 10), K], (10, 24))),
                        (Output(out10, flat([Ym, Var("N", 10)], (96, 10)), Acc()),))
    srcs = codegen.dot_product("mm3", narrow, {**offs, "w10": 7000, "out10": 8000}, d=OPENCL)
    assert len(srcs) == 1 and "_hsum16" in srcs[0].src     # few columns: no transpose


def test_const_operand_is_a_literal():
    a, out = _buf("a", (6, 24)), _buf("out", (6, 40))
    k = DotProduct((6, 40), (Y, X), K, Load(a, flat([Y, K], (6, 24))), Const(1.0),
                   (Output(out, flat([Y, X], (6, 40)), Acc()),))
    src = codegen.dot_product("c", k, {"a": 64, "out": 900, codegen.SCRATCH_A: 2000,
                                       codegen.SCRATCH_B: 3000}, d=OPENCL)[0].src
    assert "(float16)(1.0f)" in src and "kk" not in src     # tile kernel, no scalar loop


def test_row_reduce_vectorises_over_merged_axes():
    x, out = _buf("x", (6, 40)), _buf("out", (1,))
    RY, RX = Var("RY", 6), Var("RX", 40)
    k = Reduce(Op.SUM, (6, 40), (RY, RX), (0, 1), Load(x, flat([RY, RX], (6, 40))),
               (Output(out, Num(0), Acc()),))
    src = codegen.reduce("r", k, {"x": 64, "out": 500}, d=OPENCL).src
    assert "vload16(0, buf + (j + 64))" in src


def test_full_reduction_reads_row_and_column_broadcasts_as_vectors():
    """The sum over all of [6, 32] of ``x * a[row] + b[col]`` (layer_norm's output summed):
    ``j`` runs 0, 16, 32... so ``j / 32`` is one value per 16 lanes and ``j % 32`` 16
    consecutive ones -- a broadcast and a ``vload16``, not 16 scalar loads."""
    RY, RX = Var("RY", 6), Var("RX", 32)
    x, a, b, out = _buf("x", (6, 32)), _buf("a", (6,)), _buf("b", (32,)), _buf("out", (1,))
    v = Apply(Op.ADD, (Apply(Op.MUL, (Load(x, flat([RY, RX], (6, 32))), Load(a, RY))),
                       Load(b, RX)))
    k = Reduce(Op.SUM, (6, 32), (RY, RX), (0, 1), v, (Output(out, Num(0), Acc()),))
    src = codegen.reduce("r", k, {"x": 64, "a": 300, "b": 400, "out": 500}, d=OPENCL).src
    assert "vload16(0, buf + ((j % 32) + 400))" in src
    assert "((float16)(buf[((j / 32) + 300)]))" in src
    assert "j++" not in src                 # no scalar loop


@pytest.mark.parametrize("op", sorted(render.CODE_FOR_OP, key=lambda o: o.name))
def test_op_table_renders_scalar_and_vector(op):
    n = 3 if op is Op.WHERE else (1 if op in {o for o in render.CODE_FOR_OP
                                              if o.name in render.UNARY_NAMES} else 2)
    args = ["a", "b", "c"][:n]
    assert render.code(op, args, 1) and render.code(op, args, 16)


def test_vector_elementwise_loads_and_masks_the_tail():
    a, b, out = _buf("a", (6, 40)), _buf("b", (40,)), _buf("out", (6, 40))
    Yt = Var("Y", 6)
    v = Apply(Op.EXP, (Apply(Op.MUL, (Load(a, flat([Yt, X], (6, 40))), Load(b, X))),))
    k = Elementwise((6, 40), (Yt, X), (Output(out, flat([Yt, X], (6, 40)), v),))
    # b, broadcast over the rows, keeps rows of 40: 5 work-items of 8 lanes per row
    src = codegen.elementwise("e", k, {"a": 100, "b": 400, "out": 500}, width=16, d=OPENCL).src
    assert "exp(((vload8(0, buf + (((i * 40) + c) + 100)))*(vload8(0, buf + (c + 400)))))" in src
    assert "vstore8(o0, 0, (buf + (((i * 40) + c) + 500)));" in src and "c_0" not in src
    # rows of 20 with a transposed read: 16 lanes, the tail masked, b gathered lane by lane
    Xs = Var("X", 20)
    bt = _buf("bt", (20, 6))
    k2 = Elementwise((6, 20), (Yt, Xs), (Output(out, flat([Yt, Xs], (6, 20)), Apply(
        Op.ADD, (Load(a, flat([Yt, Xs], (6, 20))), Load(bt, flat([Xs, Yt], (20, 6)))))),))
    src2 = codegen.elementwise("e2", k2, {"a": 100, "bt": 400, "out": 500}, width=16, d=OPENCL).src
    assert "if (c+16 <= 20) vstore16(" in src2        # masked tail store
    assert "c_15 = min(c+15, 19)" in src2              # bt read lane by lane


def test_pick_width():
    assert [codegen.pick_width(16, e) for e in (1, 3, 4, 5, 8, 13, 20, 40, 64, 103)] == \
        [1, 1, 4, 8, 8, 16, 16, 8, 16, 16]
    assert codegen.pick_width(1, 512) == 1 and codegen.pick_width(8, 512) == 8


def test_column_sum_reads_rows_contiguously():
    """sum(dim=0) of a row-major [64, 36]: vector accumulators over column blocks."""
    x, out = _buf("x", (64, 36)), _buf("out", (36,))
    RY, Xc = Var("RY", 64), Var("X", 36)
    k = Reduce(Op.SUM, (64, 36), (RY, Xc), (0,), Load(x, flat([RY, Xc], (64, 36))),
               (Output(out, Xc, Apply(Op.MUL, (Acc(), Const(0.5)))),))
    src = codegen.reduce("r", k, {"x": 64, "out": 5000}, width=16, d=OPENCL).src
    assert "float16 acc" in src and "for (int j = 0; j < 64; j++)" in src
    assert "vload16(0, buf + (((j * 36) + c) + 64))" in src
    assert "if (c+16 <= 36) vstore16(" in src
    scalar = codegen.reduce("r", k, {"x": 64, "out": 5000}, width=1, d=OPENCL).src
    assert "float16" not in scalar


def test_column_sum_takes_adjacent_vectors_per_work_item():
    """sum(dim=0) of [64, 512]: 32 column vectors, four to a work-item (8 work-items),
    each a block with its own ``c``; 128 columns take two (4 work-items stay)."""
    RY = Var("RY", 64)
    for cols, per, items in ((512, 4, 8), (128, 2, 4)):
        Xc = Var("X", cols)
        x, out = _buf("x", (64, cols)), _buf("out", (cols,))
        k = Reduce(Op.SUM, (64, cols), (RY, Xc), (0,), Load(x, flat([RY, Xc], (64, cols))),
                   (Output(out, Xc, Acc()),))
        s = codegen.reduce("r", k, {"x": 64, "out": 90000}, width=16, d=OPENCL)
        assert s.src.count("const int c = c0_ +") == 2 * per
        # one outer point (the kept space is one row of columns): no division by the
        # work-item count, which stays out of the code but for the early exit
        assert f"const int c0_ = g_ * {16 * per};" in s.src and f"g_ >= {items}" in s.src
        assert s.global_size[0] >= items


def test_invariant_subexpressions_are_hoisted_and_dead_stores_dropped():
    """Adam's bias correction ``1 - 0.9 ** step`` is computed once per work-item, and the
    intermediate value of an in-place update is not stored."""
    w, step, out = _buf("w", (6, 40)), _buf("step", (1,)), _buf("w", (6, 40))
    Yt = Var("Y", 6)
    idx = flat([Yt, X], (6, 40))
    corr = Apply(Op.SUB, (Const(1.0), Apply(Op.POW, (Const(0.9), Load(step, Num(0))))))
    first = Apply(Op.MUL, (Load(w, idx), Const(0.5)))
    k = Elementwise((6, 40), (Yt, X), (Output(w, idx, first),
                                       Output(w, idx, Apply(Op.DIV, (first, corr)))))
    src = codegen.elementwise("h", k, {"w": 100, "step": 20}, width=16, d=OPENCL).src
    assert "const float u0_ = ((1.0f)-(_ad_pow(0.9f, buf[20])));" in src
    assert src.count("_ad_pow") == 1 and src.count("vstore16") == 1


def test_a_register_no_output_reads_is_not_computed():
    """A fused group's register that no stored output reads (GELU's ``exp(-x^2)`` kept
    in the forward after the backward recomputed it) renders no code; a register a stored
    output reads is computed once."""
    a, out = _buf("a", (6, 40)), _buf("out", (6, 40))
    dead, used = _buf("dead", (6, 40)), _buf("used", (6, 40))
    idx = flat([Y, X], (6, 40))
    x = Load(a, idx)
    k = Elementwise((6, 40), (Y, X), (
        Output(dead, idx, Apply(Op.EXP, (x,))),
        Output(used, idx, Apply(Op.SIN, (x,))),
        Output(out, idx, Apply(Op.MUL, (Local(used), Const(2.0))))))
    src = codegen.elementwise("g", k, {"a": 100, "out": 500}, d=OPENCL).src
    assert "exp(" not in src and src.count("sin(") == 1
    assert "buf[(i + 500)] =" in src


def test_register_tile_follows_the_target():
    a, b, out = _buf("a", (96, 24)), _buf("b", (24, 40)), _buf("out", (96, 40))
    Ym = Var("Y", 96)
    k = DotProduct((96, 40), (Ym, X), K, Load(a, flat([Ym, K], (96, 24))),
                   Load(b, flat([K, X], (24, 40))), (Output(out, flat([Ym, X], (96, 40)), Acc()),))
    offs = {"a": 64, "b": 3000, "out": 5000, codegen.SCRATCH_A: 9000, codegen.SCRATCH_B: 12000}
    avx2 = codegen.dot_product("m", k, offs, tile=(6, 8, 2), d=OPENCL)[-1]
    assert "float8 acc5_1" in avx2.src and "acc6" not in avx2.src
    assert avx2.global_size[:2] == (3, 16)
    avx512 = codegen.dot_product("m", k, offs, tile=(8, 16, 1), d=OPENCL)[-1]
    assert "float16 acc7" in avx512.src and avx512.global_size[:2] == (3, 12)


def test_aligned_vectors_load_head_split_views():
    """A head-merge view ``[T, H, 32] -> [T, H * 32]`` is not affine along the merged
    column, but 8 aligned lanes never cross a head: one vload8, not 8 loads."""
    src_b, out = _buf("heads", (4, 64, 32)), _buf("out", (64, 128))
    T, C = Var("Y", 64), Var("X", 128)
    idx = (C // 32) * 2048 + T * 32 + C % 32
    k = Elementwise((64, 128), (T, C), (Output(out, flat([T, C], (64, 128)),
                                               Apply(Op.MUL, (Load(src_b, idx), Const(2.0)))),))
    src = codegen.elementwise("h", k, {"heads": 100, "out": 20000}, width=8, d=OPENCL).src
    assert "vload8(0, buf + " in src and "c_0" not in src
    odd = Elementwise((64, 124), (T, Var("X", 124)), (Output(
        _buf("o2", (64, 124)), flat([T, Var("X", 124)], (64, 124)),
        Load(src_b, (Var("X", 124) // 31) * 2048 + T * 32 + Var("X", 124) % 31)),))
    src2 = codegen.elementwise("h2", odd, {"heads": 100, "o2": 20000}, width=8, d=OPENCL).src
    assert "c_7" in src2                   # extent not a multiple of 8: lane by lane
