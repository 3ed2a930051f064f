"""Reductions, scans and sorting against PyTorch (float64 reference) and float64 finite
differences, forward and backward; index results compared exactly."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from op_helper import assert_like_torch, check_op, rand_inputs

F64 = torch.float64

# name, fn(x) on both libraries, shapes
REDUCE = [
    ("sum_all_empty_tuple", lambda x: x.sum(()), [(2, 3), ()]),
    ("sum_axis", lambda x: x.sum(axis=1), [(2, 3, 4)]),
    ("sum_dim_keepdim_kw", lambda x: x.sum(dim=(0, -1), keepdim=True), [(2, 3, 4), (1, 1, 1)]),
    ("sum_zero_size", lambda x: x.sum(0), [(0, 3)]),
    ("mean_axis", lambda x: x.mean(axis=-1, keepdim=True), [(3, 5), (1,)]),
    ("prod_all", lambda x: x.prod(), [(2, 3), (5,), (), (1,)]),
    ("prod_dim", lambda x: x.prod(1), [(2, 3), (3, 7), (4, 1), (2, 0)]),
    ("prod_dim_keep", lambda x: x.prod(-1, keepdim=True), [(2, 5)]),
    ("std", lambda x: x.std(), [(3, 4)]),
    ("std_dim", lambda x: x.std(1, keepdim=True), [(3, 4)]),
    ("std_unbiased_false", lambda x: x.std(0, unbiased=False), [(3, 4)]),
    ("var_correction", lambda x: x.var(dim=1, correction=0), [(3, 4)]),
    ("var_legacy_positional", lambda x: x.var(1, False, True), [(3, 4)]),
    ("var_mean", lambda x: torch.stack(torch.var_mean(x, 1)) if isinstance(x, torch.Tensor)
     else ad.stack(list(x.var_mean(1))), [(3, 4)]),
    ("std_mean", lambda x: torch.stack(torch.std_mean(x, (0, 1), keepdim=True))
     if isinstance(x, torch.Tensor) else ad.stack(list(x.std_mean((0, 1), keepdim=True))),
     [(3, 4, 2)]),
    ("logsumexp", lambda x: x.logsumexp(1), [(3, 5), (2, 1, 3)]),
    ("logsumexp_multi_keep", lambda x: x.logsumexp((0, 2), keepdim=True), [(2, 3, 4)]),
    ("logsumexp_0d", lambda x: x.logsumexp(0), [()]),
    ("norm_fro", lambda x: x.norm(), [(3, 4), (5,)]),
    ("norm_2_dim", lambda x: x.norm(2, dim=1), [(3, 4)]),
    ("norm_1", lambda x: x.norm(1), [(3, 4)]),
    ("norm_inf", lambda x: x.norm(float("inf"), dim=-1, keepdim=True), [(3, 4)]),
    ("norm_neg_inf", lambda x: x.norm(-float("inf")), [(3, 4)]),
    ("norm_3", lambda x: x.norm(3, dim=0), [(3, 4)]),
    ("norm_fro_dims", lambda x: x.norm("fro", dim=(0, 1)), [(3, 4, 2)]),
    ("amax_tuple", lambda x: x.amax((0, 2)), [(2, 3, 4)]),
    ("amin_axis", lambda x: x.amin(axis=1, keepdim=True), [(2, 3, 4)]),
    ("max_all", lambda x: x.max(), [(3, 4), ()]),
    ("max_dim_values", lambda x: x.max(dim=1).values, [(3, 4)]),
    ("min_dim_values_keep", lambda x: x.min(0, keepdim=True)[0], [(3, 4)]),
    ("cumsum", lambda x: x.cumsum(1), [(2, 5), (3, 1), (0, 4)]),
    ("cumsum_first_dim", lambda x: x.cumsum(dim=0), [(4, 3), (1,)]),
    ("cumsum_0d", lambda x: x.cumsum(0), [()]),
    ("cumprod", lambda x: x.cumprod(1), [(2, 5), (3, 1), (2, 7)]),
    ("cumprod_neg_dim", lambda x: x.cumprod(-2), [(5, 2)]),
    ("logcumsumexp", lambda x: x.logcumsumexp(1), [(2, 5), (1, 1), (3, 6)]),
    ("cummax_values", lambda x: x.cummax(1).values, [(3, 6), (2, 1)]),
    ("cummin_values", lambda x: x.cummin(0)[0], [(5, 3)]),
    ("sort", lambda x: x.sort(1).values, [(3, 5), (2, 8), (2, 1), (1, 6)]),
    ("sort_desc", lambda x: x.sort(0, descending=True).values, [(5, 3)]),
    ("sort_default_last", lambda x: x.sort()[0], [(2, 3, 4)]),
    ("msort", lambda x: x.msort(), [(4, 3)]),
    ("topk", lambda x: x.topk(2, 1).values, [(3, 5)]),
    ("topk_smallest", lambda x: x.topk(3, dim=0, largest=False)[0], [(4, 2)]),
]


@pytest.mark.parametrize("name,fn,shapes", REDUCE, ids=[r[0] for r in REDUCE])
def test_reduce(name, fn, shapes):
    for i, shape in enumerate(shapes):
        ad.reset()
        low, high = (0.5, 1.5) if name.startswith(("prod", "cumprod")) else (-2.0, 2.0)
        check_op([shape], fn, seed=i, low=low, high=high, torch_dtype=F64)


INDEX_RESULTS = [
    ("argmax", lambda x: x.argmax(), [(3, 4), ()]),
    ("argmax_dim", lambda x: x.argmax(1), [(3, 4)]),
    ("argmax_keep", lambda x: x.argmax(dim=0, keepdim=True), [(3, 4)]),
    ("argmin", lambda x: x.argmin(), [(3, 4)]),
    ("argmin_dim", lambda x: x.argmin(-1), [(3, 4, 2)]),
    ("max_indices", lambda x: x.max(1).indices, [(3, 4)]),
    ("min_indices", lambda x: x.min(0)[1], [(3, 4)]),
    ("argsort", lambda x: x.argsort(1), [(3, 6), (2, 1)]),
    ("argsort_desc", lambda x: x.argsort(0, descending=True), [(5, 3)]),
    ("sort_indices", lambda x: x.sort(-1).indices, [(2, 9)]),
    ("topk_indices", lambda x: x.topk(3).indices, [(2, 7)]),
    ("cummax_indices", lambda x: x.cummax(1).indices, [(3, 6)]),
    ("cummin_indices", lambda x: x.cummin(0).indices, [(5, 2)]),
    ("count_nonzero", lambda x: (x > 0).float().count_nonzero(), [(3, 4)]),
    ("count_nonzero_dim", lambda x: x.relu().count_nonzero(dim=1), [(3, 4)]),
]


@pytest.mark.parametrize("name,fn,shapes", INDEX_RESULTS, ids=[r[0] for r in INDEX_RESULTS])
def test_index_results(name, fn, shapes):
    for i, shape in enumerate(shapes):
        ad.reset()
        check_op([shape], fn, seed=10 + i, forward_only=True)


def test_sort_ties_are_stable_like_torch_stable():
    x = np.array([[2.0, 1.0, 2.0, 1.0, 3.0, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]], np.float32)
    for desc in (False, True):
        ad.reset()
        check_op(None, lambda t: t.sort(dim=1, descending=desc, stable=True).indices,
                 inputs=[x], forward_only=True)
        ad.reset()
        check_op(None, lambda t: t.argsort(dim=1, descending=desc, stable=True), inputs=[x],
                 forward_only=True)
        ad.reset()
        check_op(None, lambda t: t.sort(dim=1, descending=desc, stable=True).values,
                 inputs=[x], fd=False)


def test_sort_infinities():
    x = np.array([[np.inf, -1.0, -np.inf, 2.0, np.inf]], np.float32)
    check_op(None, lambda t: t.sort(1).values, inputs=[x], forward_only=True)


def test_cummax_ties_keep_the_later_index_like_torch():
    x = np.array([[1.0, 3.0, 3.0, 2.0, 3.0, 0.5]], np.float32)
    check_op(None, lambda t: t.cummax(1).indices, inputs=[x], forward_only=True)
    check_op(None, lambda t: t.cummax(1).values, inputs=[x], fd=False)


def test_logcumsumexp_wide_range_does_not_underflow():
    x = np.array([[-200.0, 0.0, 200.0, -1e4, 50.0]], np.float32)
    check_op(None, lambda t: t.logcumsumexp(1), inputs=[x], fd=False)


def test_long_cumsum_uses_two_stages():
    x, = rand_inputs([(2, 1100)], seed=3)
    check_op(None, lambda t: t.cumsum(1), inputs=[x], fd=False, fwd_atol=1e-3,
             torch_dtype=F64)


def test_cumprod_with_zeros_gradient_like_torch():
    x = np.array([[2.0, 0.0, 3.0, -1.5, 0.0, 4.0]], np.float32)
    check_op(None, lambda t: t.cumprod(1), inputs=[x], torch_dtype=F64)
    check_op(None, lambda t: t.prod(1), inputs=[x], torch_dtype=F64)


def test_norm_gradient_at_zero_is_zero_like_torch():
    x = np.zeros((2, 3), np.float32)
    check_op(None, lambda t: t.norm(dim=1), inputs=[x], fd=False)
    check_op(None, lambda t: t.norm(), inputs=[x], fd=False)


def test_amax_splits_ties_max_dim_routes_to_index():
    x = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], np.float32)
    for f in (lambda t: t.amax(1), lambda t: t.amin(0), lambda t: t.max(1).values,
              lambda t: t.min(dim=1)[0], lambda t: t.max(), lambda t: t.norm(float("inf"))):
        ad.reset()
        check_op(None, f, inputs=[x], fd=False)


def test_any_all_on_values_and_empty():
    x = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]], np.float32)
    for f in (lambda t: t.any(), lambda t: t.all(), lambda t: t.any(1), lambda t: t.all(dim=0),
              lambda t: t.any(1, keepdim=True), lambda t: (t == 0).all(1)):
        ad.reset()
        check_op(None, f, inputs=[x], forward_only=True)
    e = np.zeros((0, 3), np.float32)
    for f in (lambda t: t.any(), lambda t: t.all(), lambda t: t.any(0), lambda t: t.all(0)):
        ad.reset()
        check_op(None, f, inputs=[e], forward_only=True)


def test_empty_mean_is_nan_and_empty_max_raises():
    e = np.zeros((0, 3), np.float32)
    out = check_op(None, lambda t: t.mean(0), inputs=[e], forward_only=True)
    assert np.isnan(out).all()
    with pytest.raises(IndexError):
        ad.Tensor(e).amax(0)
    with pytest.raises(IndexError):
        torch.zeros(0, 3).amax(0)


def test_logsumexp_of_all_minus_inf_is_minus_inf():
    x = np.array([[-np.inf, -np.inf], [0.0, -np.inf]], np.float32)
    check_op(None, lambda t: t.logsumexp(1), inputs=[x], forward_only=True)


def test_var_of_one_element_is_nan_like_torch():
    x = np.array([[1.5]], np.float32)
    out = check_op(None, lambda t: t.var(1), inputs=[x], forward_only=True)
    assert np.isnan(out).all()


def test_softmax_dtype_keyword():
    check_op([(3, 4)], lambda x: x.softmax(0, dtype=torch.float32) * x,
             lambda x: x.softmax(0, dtype="float32") * x, fd=False)


def test_module_functions():
    check_op([(3, 4)], lambda x: torch.cumsum(x, 1), lambda x: ad.cumsum(x, 1), torch_dtype=F64)
    check_op([(3, 4)], lambda x: torch.logsumexp(x, 0), lambda x: ad.logsumexp(x, 0),
             torch_dtype=F64)
    check_op([(3, 4)], lambda x: torch.prod(x, 1), lambda x: ad.prod(x, 1), torch_dtype=F64)
    check_op([(3, 4)], lambda x: torch.sort(x, 1).values, lambda x: ad.sort(x, 1).values,
             torch_dtype=F64)
    check_op([(3, 4)], lambda x: torch.topk(x, 2).values, lambda x: ad.topk(x, 2).values)
    check_op([(3, 4)], lambda x: torch.argmax(x), lambda x: ad.argmax(x), forward_only=True)


def test_scan_lowering_uses_existing_ops():
    x = ad.randn(3, 6)
    x.cumsum(1), x.cumprod(1), x.cummax(1), x.logcumsumexp(1), x.sort(1), x.topk(2)
    ops = {n.op.name for n in ad.graph.trace.TRACER.root.graph.nodes}
    assert "DOT" not in ops      # cumsum: doubling with adds, not a triangular product
    assert not ops - {"LOAD", "PERMUTE", "RESHAPE", "EXPAND", "SUM", "RMAX", "SLICE",
                      "CONCAT", "CONST", "MUL", "ADD", "SUB", "NEG", "WHERE", "CMPGT", "CMPEQ",
                      "CMPLT", "CMPNE", "CMPGE", "CMPLE", "CAST", "MAX", "ABS", "EXP",
                      "LOG1P", "PAD", "AND", "OR"}, ops


EMPTY_REDUCTIONS = {
    "softmax": lambda x: x.softmax(-1), "log_softmax": lambda x: x.log_softmax(-1),
    "softmax_bad_dim": lambda x: x.softmax(3), "amax_all": lambda x: x.amax(),
    "max_all": lambda x: x.max(), "amax_dim": lambda x: x.amax(-1),
    "kthvalue": lambda x: x.kthvalue(1, -1), "sum": lambda x: x.sum(-1),
}


@pytest.mark.parametrize("shape", [(3, 0), (0,)])
@pytest.mark.parametrize("name", sorted(EMPTY_REDUCTIONS))
def test_reductions_of_empty_tensors_like_torch(name, shape):
    """No elements: softmax comes back empty; a max over every dim is PyTorch's
    RuntimeError, over a given empty dim (and kthvalue's) its IndexError."""
    assert_like_torch(EMPTY_REDUCTIONS[name], torch.zeros(shape),
                      ad.tensor(np.zeros(shape, np.float32)), "test_ops_reduce.py")


def test_softmax_of_an_empty_tensor_runs_and_stays_empty():
    x = ad.tensor(np.zeros((3, 0), np.float32))
    y = x.softmax(-1)
    ad.execute(device="numpy")
    assert y.numpy().shape == (3, 0)
