"""Indexing (basic, advanced, setitem) and the gather/scatter family against PyTorch
(float64 reference) and float64 finite differences, forward and backward."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from op_helper import check_op, rand_inputs

F64 = torch.float64
I = np.array

# name, fn(x) with constant (host) keys, input shape
CONST_KEYS = [
    ("list", lambda x: x[[0, 2, 2]], (3, 4)),
    ("list_neg", lambda x: x[[-1, 0]], (3, 4)),
    ("second_dim", lambda x: x[:, [3, 0, 1]], (2, 4)),
    ("two_dims_adjacent", lambda x: x[:, [0, 1], [2, 0]], (2, 3, 4)),
    ("two_dims_split", lambda x: x[[0, 1], :, [3, 1]], (2, 3, 4)),
    ("int_and_array_split", lambda x: x[1, :, [0, 2]], (2, 3, 4)),
    ("arrays_around_int", lambda x: x[[0, 1], 1, [3, 1]], (2, 3, 4)),
    ("none_int_array", lambda x: x[None, 1, [0, 1]], (2, 3, 4)),
    ("broadcast_arrays", lambda x: x[I([[0], [1]]), I([1, 2, 3])], (2, 4)),
    ("ellipsis_array", lambda x: x[..., [1, 1]], (2, 3)),
    ("none_and_array", lambda x: x[None, [1, 0]], (2, 3)),
    ("slice_and_array", lambda x: x[1:, [0, 2]], (3, 4)),
    ("bool_mask", lambda x: x[I([True, False, True])], (3, 2)),
    ("bool_mask_2d", lambda x: x[I([[True, False], [False, True], [True, True]])], (3, 2)),
    ("empty_list", lambda x: x[I([], dtype=np.int64)], (3, 2)),
    ("zero_size", lambda x: x[:, [0, 0]], (0, 2)),
]


@pytest.mark.parametrize("name,fn,shape", CONST_KEYS, ids=[c[0] for c in CONST_KEYS])
def test_getitem_constant_keys(name, fn, shape):
    check_op([shape], fn, torch_dtype=F64)


def test_constant_advanced_index_is_one_gather_of_a_constant():
    x = ad.randn(3, 4)
    x[[0, 2], 1:]
    ops = [n.op.name for n in ad.graph.trace.TRACER.root.graph.nodes]
    assert ops.count("GATHER") == 1 and "CAST" not in ops, ops


# name, fn(x, i), x shape, index array (int32 tensors: data for both libraries)
TENSOR_KEYS = [
    ("rows", lambda x, i: x[i], (4, 3), I([3, 0, 0, 2])),
    ("rows_negative", lambda x, i: x[i], (4, 3), I([-1, 0, -4])),
    ("rows_2d_index", lambda x, i: x[i], (4, 3), I([[1, 2], [3, 0]])),
    ("cols", lambda x, i: x[:, i], (2, 5), I([4, 0, 2])),
    ("cols_negative", lambda x, i: x[:, i], (2, 5), I([-1, 1])),
    ("last_dim_ellipsis", lambda x, i: x[..., i], (2, 3, 4), I([[0, 3], [1, 1]])),
    ("with_int_split", lambda x, i: x[i, 1, :], (3, 4, 2), I([2, 0])),
    ("two_tensors", lambda x, i: x[i, i], (3, 3), I([0, 2, 1])),
    ("tensor_and_list_split", lambda x, i: x[i, :, [1, 0]], (2, 3, 2), I([1, 0])),
    ("slice_none_tensor", lambda x, i: x[1:, None, i], (3, 4), I([3, 3, 0])),
    ("index_0d", lambda x, i: x[:, i], (2, 3), I(2)),
]


@pytest.mark.parametrize("name,fn,shape,idx", TENSOR_KEYS, ids=[t[0] for t in TENSOR_KEYS])
def test_getitem_tensor_keys(name, fn, shape, idx):
    x, = rand_inputs([shape], seed=1)
    check_op(None, fn, inputs=[x, idx], torch_dtype=F64)


def test_traced_index_tensor():
    """An index tensor computed in the program (not data) works the same."""
    x, = rand_inputs([(4, 3)], seed=2)
    i = I([3, 1, 0])
    check_op(None, lambda t, k: t[(k.float() * 1.0).long()] if isinstance(t, torch.Tensor)
             else t[(k.float() * 1.0).int()], inputs=[x, i], torch_dtype=F64)
    check_op(None, lambda t, k: t[:, (k + 0).clamp(max=2)] if isinstance(t, torch.Tensor)
             else t[:, (k.float().clamp(max=2.0)).int()], inputs=[x, i], torch_dtype=F64)


def test_out_of_range_index_tensor_raises():
    x = ad.randn(3, 4)
    y = x[:, ad.Tensor(I([0, 4], np.int32))]
    with pytest.raises(IndexError):
        ad.execute(device="numpy")
    del y
    with pytest.raises(IndexError):
        ad.randn(3, 4)[[0, 3]]


def test_mask_tensor_index_has_a_data_dependent_shape():
    x = ad.randn(3, 4)
    with pytest.raises(IndexError, match="data-dependent"):
        x[x > 0]


# -- setitem --------------------------------------------------------------------------------
def _set(key, value):
    """``y = x * 1; y[key] = value(x); return y`` on both libraries (out of place here)."""
    def f(x, *rest):
        y = x * 1.0
        y[key if not callable(key) else key(*rest)] = value(x) if callable(value) else value
        return y
    return f


SETITEM = [
    ("int_scalar", _set(1, 5.0), (3, 4)),
    ("slice_tensor", _set((slice(None), slice(1, 3)), lambda x: x[:, :2] * 3.0), (3, 4)),
    ("strided", _set((slice(None), slice(None, None, 2)), lambda x: x[:, 1::2].exp()), (2, 6)),
    ("ellipsis_broadcast", _set((Ellipsis, 0), lambda x: x[0, :, 1]), (2, 3, 2)),
    ("none", _set((None, 1), -1.0), (3, 2)),
    ("list", _set(([0, 2],), lambda x: x[1] * 2.0), (3, 4)),
    ("advanced_2d", _set(([0, 2], [1, 3]), lambda x: x[1, :2].sin()), (3, 4)),
    ("bool_mask", _set((I([True, False, True]),), 0.5), (3, 2)),
    ("empty_slice", _set((slice(2, 2),), 7.0), (3, 2)),
]


@pytest.mark.parametrize("name,fn,shape", SETITEM, ids=[s[0] for s in SETITEM])
def test_setitem(name, fn, shape):
    check_op([shape], fn, torch_dtype=F64)


def test_setitem_with_index_tensor():
    x, = rand_inputs([(4, 3)], seed=3)
    check_op(None, _set(lambda i: i, lambda t: t[0] * 2.0), inputs=[x, I([3, 1])],
             torch_dtype=F64)
    check_op(None, _set(lambda i: (slice(None), i), 0.0), inputs=[x, I([2, 0])],
             torch_dtype=F64)


def test_setitem_is_out_of_place_for_traced_tensors():
    """``y[k] = v`` makes ``y`` name a new value; a view taken before keeps the old one."""
    x = ad.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = x * 1.0
    before = y[0]
    y[0, 1] = 100.0
    ad.execute()
    np.testing.assert_array_equal(before.numpy(), [0, 1, 2])
    np.testing.assert_array_equal(y.numpy(), [[0, 100, 2], [3, 4, 5]])


def test_setitem_on_a_variable_assigns_in_place():
    v = ad.zeros(2, 3)

    def step():
        v[:, 1] = v[:, 1] + 1.0
    ad.ir_for(range(3), step)
    ad.execute()
    np.testing.assert_array_equal(v.numpy(), [[0, 3, 0], [0, 3, 0]])


def test_setitem_on_a_leaf_requiring_grad_raises():
    w = ad.randn(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="in place"):
        w[0] = 1.0


# -- gather / scatter family ----------------------------------------------------------------
GATHER_IDX = I([[0, 2, 2], [1, 0, 3]])          # [2, 3] into a [2, 4] (dim 1) or [4, 3] (dim 0)

FAMILY = [
    ("index_select", lambda x, i: x.index_select(1, i), (2, 4), I([3, 0, 0])),
    ("index_select_dim0", lambda x, i: x.index_select(0, i), (3, 2), I([2, 2, 0, 1])),
    ("index_select_neg_dim", lambda x, i: x.index_select(-1, i), (2, 3, 4), I([1])),
    ("gather_dim1", lambda x, i: x.gather(1, i), (2, 4), GATHER_IDX),
    ("gather_dim0", lambda x, i: x.gather(0, i), (4, 3), GATHER_IDX),
    ("gather_smaller_index", lambda x, i: x.gather(1, i), (3, 5), I([[4], [0]])),
    ("gather_3d", lambda x, i: x.gather(-1, i), (2, 3, 4), I([[[3, 0], [1, 1], [0, 2]]] * 2)),
    ("take_along_dim", lambda x, i: x.take_along_dim(i, 1), (2, 4), GATHER_IDX),
    ("take_along_dim_bcast", lambda x, i: x.take_along_dim(i, 1), (3, 4), I([[1, 0]])),
    ("take_along_dim_flat", lambda x, i: x.take_along_dim(i), (2, 4), I([7, 0, 3])),
    ("scatter_src", lambda x, i: x.scatter(1, i, x[:, :2] * 2.0 + 1.0),
     (2, 4), I([[3, 0], [1, 2]])),
    ("scatter_value", lambda x, i: x.scatter(0, i, 2.5), (3, 2), I([[2, 0]])),
    ("scatter_add", lambda x, i: x.scatter_add(1, i, x[:, :3].exp()), (2, 4), GATHER_IDX),
    ("scatter_add_dim0", lambda x, i: x.scatter_add(0, i, x[:2].sin()), (4, 3), GATHER_IDX),
    ("index_add", lambda x, i: x.index_add(0, i, x[:3] * 3.0), (4, 2), I([3, 0, 3])),
    ("index_add_alpha_dim1", lambda x, i: x.index_add(1, i, x[:, :2], alpha=-2.0),
     (3, 4), I([1, 1])),
]


@pytest.mark.parametrize("name,fn,shape,idx", FAMILY, ids=[f[0] for f in FAMILY])
def test_gather_scatter_family(name, fn, shape, idx):
    x, = rand_inputs([shape], seed=4)
    check_op(None, fn, inputs=[x, idx], torch_dtype=F64)


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
def test_scatter_reduce(reduce, include_self):
    x, src = rand_inputs([(3, 5), (2, 4)], seed=5)
    idx = I([[0, 2, 2, 4], [1, 1, 3, 3]])
    check_op(None, lambda a, s, i: a.scatter_reduce(1, i, s, reduce, include_self=include_self),
             inputs=[x, src, idx], torch_dtype=F64)
    idx0 = I([[2, 0, 2, 1]])
    check_op(None, lambda a, s, i: a.scatter_reduce(0, i, s, reduce, include_self=include_self),
             inputs=[x, src[:1], idx0], torch_dtype=F64)


def test_scatter_reduce_amax_ties_share_the_gradient_like_torch():
    x = np.array([[1.0, 2.0, 0.0]], np.float32)
    src = np.array([[2.0, 2.0, 1.0]], np.float32)
    idx = I([[1, 1, 0]])
    check_op(None, lambda a, s, i: a.scatter_reduce(1, i, s, "amax"), inputs=[x, src, idx],
             fd=False)


@pytest.mark.parametrize("mask_shape", [(3, 4), (4,), (3, 1)])
def test_masked_fill(mask_shape):
    x, m = rand_inputs([(3, 4), mask_shape], seed=6)
    check_op(None, lambda a, b: a.masked_fill(b > 0, -1.5), inputs=[x, m], torch_dtype=F64)
    check_op(None, lambda a, b: a.masked_fill(b > 0.5, float("-inf")).softmax(-1),
             inputs=[x, m], fd=False)


def test_module_functions():
    x, = rand_inputs([(3, 4)], seed=7)
    i = I([[0, 1], [3, 3], [2, 0]])
    check_op(None, lambda a, b: torch.gather(a, 1, b), lambda a, b: ad.gather(a, 1, b),
             inputs=[x, i], torch_dtype=F64)
    check_op(None, lambda a, b: torch.take_along_dim(a, b, 1),
             lambda a, b: ad.take_along_dim(a, b, 1), inputs=[x, i], torch_dtype=F64)
    check_op(None, lambda a, b: torch.index_select(a, 1, b[:, 0]),
             lambda a, b: ad.index_select(a, 1, b[:, 0]), inputs=[x, i], torch_dtype=F64)
