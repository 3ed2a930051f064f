"""Source generation from the procedural IR without running it: strides of access
expressions, dimension merging, the matmul/packing choices, the op table."""
import pytest

from autodiff.graph.ir import Op
from autodiff.procedural.access import Num, Var, flat
from autodiff.procedural.ir import (Acc, Apply, Buffer, BufferKind, Const, DotProduct,
                                    Elementwise, Load, Output, Reduce)
from autodiff.device.opencl import codegen, render

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
    src = codegen.elementwise("e", k, {"a": 100, "b": 400, "out": 500}).src
    assert "_ad_log(buf[(i + 100)])" in src and "buf[(i + 500)] = o0;" in src
    assert "(i % 40) + 400" in src                 # broadcast b: one mod, no div


def test_dot_product_picks_tiles_and_packs_transposed_b():
    a, w, out = _buf("a", (96, 24)), _buf("w", (40, 24)), _buf("out", (96, 40))
    Ym = Var("Y", 96)
    k = DotProduct((96, 40), (Ym, X), K, Load(a, flat([Ym, K], (96, 24))),
                   Load(w, flat([X, K], (40, 24))),
                   (Output(out, flat([Ym, X], (96, 40)), Apply(Op.RELU, (Acc(),))),))
    offs = {"a": 64, "w": 3000, "out": 5000, codegen.SCRATCH_A: 9000, codegen.SCRATCH_B: 12000}
    srcs = codegen.dot_product("mm", k, offs)
    assert [s.name for s in srcs] == ["mm_pb", "mm"]        # B^T packed, then 8x16 tiles
    assert "vload16(0, B + k*40 + n0)" in srcs[1].src and "_ad_max(" in srcs[1].src
    small = DotProduct((6, 40), (Y, X), K, Load(a, flat([Y, K], (6, 24))),
                       Load(w, flat([X, K], (40, 24))), (Output(out, flat([Y, X], (6, 40)), Acc()),))
    srcs = codegen.dot_product("mm2", small, offs)
    assert len(srcs) == 1 and "_hsum16" in srcs[0].src     # few rows: dot-product form


def test_const_operand_is_a_literal():
    a, out = _buf("a", (6, 24)), _buf("out", (6, 40))
    k = DotProduct((6, 40), (Y, X), K, Load(a, flat([Y, K], (6, 24))), Const(1.0),
                   (Output(out, flat([Y, X], (6, 40)), Acc()),))
    src = codegen.dot_product("c", k, {"a": 64, "out": 900, codegen.SCRATCH_A: 2000,
                                       codegen.SCRATCH_B: 3000})[0].src
    assert "(float16)(1.0f)" in src and "kk" not in src     # tile kernel, no scalar loop


def test_row_reduce_vectorises_over_merged_axes():
    x, out = _buf("x", (6, 40)), _buf("out", (1,))
    RY, RX = Var("RY", 6), Var("RX", 40)
    k = Reduce(Op.SUM, (6, 40), (RY, RX), (0, 1), Load(x, flat([RY, RX], (6, 40))),
               (Output(out, Num(0), Acc()),))
    src = codegen.reduce("r", k, {"x": 64, "out": 500}).src
    assert "vload16(0, buf + (j + 64))" in src


@pytest.mark.parametrize("op", sorted(render.CODE_FOR_OP, key=lambda o: o.name))
def test_op_table_renders_scalar_and_vector(op):
    n = 3 if op is Op.WHERE else (1 if op in {o for o in render.CODE_FOR_OP
                                              if o.name in render.UNARY_NAMES} else 2)
    args = ["a", "b", "c"][:n]
    assert render.code(op, args, 1) and render.code(op, args, 16)
