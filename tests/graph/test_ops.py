"""Every traced op, forward and backward, against PyTorch and float64 finite differences."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff.graph.ir import Op
from op_helper import check_op, rand_inputs

BROADCAST_PAIRS = [
    ((3, 4), (3, 4)),
    ((3, 4), (4,)),
    ((4,), (3, 4)),
    ((3, 1), (1, 4)),
    ((2, 3, 4), (3, 1)),
    ((), (2, 3)),
    ((2, 1, 4), (1, 3, 1)),
]


# -- binary arithmetic ------------------------------------------------------------------
@pytest.mark.parametrize("sa,sb", BROADCAST_PAIRS)
@pytest.mark.parametrize("name,fn", [
    ("add", lambda x, y: x + y),
    ("sub", lambda x, y: x - y),
    ("mul", lambda x, y: x * y),
    ("div", lambda x, y: x / y),
])
def test_binary_broadcast(name, fn, sa, sb):
    # Divisors kept 0.3 away from zero, so that 1/y and its gradient stay moderate.
    check_op([sa, sb], fn, margin=0.3)


@pytest.mark.parametrize("name,fn", [
    ("radd", lambda x: 2.5 + x),
    ("rsub", lambda x: 2.5 - x),
    ("rmul", lambda x: 2.5 * x),
    ("rdiv", lambda x: 2.5 / x),
    ("add_scalar", lambda x: x + 1.5),
    ("sub_scalar", lambda x: x - 1.5),
    ("div_scalar", lambda x: x / 3.0),
    ("neg", lambda x: -x),
    ("method_add_alpha", lambda x: x.add(x * x, alpha=0.5)),
])
def test_scalar_operands_and_neg(name, fn):
    check_op([(3, 4)], fn)


@pytest.mark.parametrize("name,fn,positive", [
    ("pow2", lambda x: x ** 2, False),
    ("pow3", lambda x: x ** 3, False),
    ("pow_half", lambda x: x ** 0.5, True),
    ("pow_neg", lambda x: x ** -1.5, True),
    ("rpow", lambda x: 2.0 ** x, False),
    ("method_pow", lambda x: x.pow(2.0), False),
])
def test_pow_constant(name, fn, positive):
    low = 0.5 if positive else -2.0
    check_op([(3, 4)], fn, low=low)


@pytest.mark.parametrize("sa,sb", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1), (1, 3))])
def test_pow_tensor_exponent(sa, sb):
    base, = rand_inputs([sa], low=0.5, high=2.0, seed=1)
    expo, = rand_inputs([sb], low=-2.0, high=2.0, seed=2)
    check_op(None, lambda x, y: x ** y, inputs=[base, expo])


# -- unary ------------------------------------------------------------------------------
UNARY = [
    ("exp", lambda x: x.exp(), False),
    ("log", lambda x: x.log(), True),
    ("exp2", lambda x: x.exp2(), False),
    ("log2", lambda x: x.log2(), True),
    ("sqrt", lambda x: x.sqrt(), True),
    ("rsqrt", lambda x: x.rsqrt(), True),
    ("reciprocal", lambda x: x.reciprocal(), False),
    ("sin", lambda x: x.sin(), False),
    ("cos", lambda x: x.cos(), False),
    ("tanh", lambda x: x.tanh(), False),
    ("sigmoid", lambda x: x.sigmoid(), False),
    ("relu", lambda x: x.relu(), False),
    ("abs", lambda x: x.abs(), False),
    ("erf", lambda x: x.erf(), False),
    ("square", lambda x: x.square(), False),
]


@pytest.mark.parametrize("name,fn,positive", UNARY, ids=[u[0] for u in UNARY])
def test_unary(name, fn, positive):
    check_op([(3, 5)], fn, low=0.2 if positive else -3.0, high=3.0)


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "sin", "tanh", "sigmoid", "relu", "abs"])
def test_unary_module_functions(name):
    """``autodiff.exp(x)`` spells the same op as ``torch.exp(x)``."""
    check_op([(4,)], getattr(torch, name), getattr(ad, name), low=0.2 if name in
             ("log", "sqrt") else -3.0, high=3.0)


def test_relu_gradient_reads_the_result_like_torch():
    """ReLU's backward is torch's ``threshold_backward(grad, result, 0)``: 0 at x <= 0
    (-0.0 included) even for an infinite incoming gradient, the gradient passed through at
    a NaN input."""
    x = np.array([-1.0, 0.0, -0.0, 2.0, np.nan, -3.0], np.float32)
    g = np.array([np.inf, 1.5, 1.5, np.inf, 3.0, -2.0], np.float32)
    xa = ad.Tensor(x, requires_grad=True)
    (xa.relu() * ad.Tensor(g)).sum().backward()
    ad.execute()
    xt = torch.tensor(x, requires_grad=True)
    (xt.relu() * torch.tensor(g)).sum().backward()
    np.testing.assert_array_equal(xa.grad.numpy(), xt.grad.numpy())
    np.testing.assert_array_equal(xa.grad.numpy(), [0, 0, 0, np.inf, 3, 0])


def test_sign_forward():
    x = np.array([-2.0, -0.5, 0.0, 0.5, 3.0], np.float32)
    check_op(None, lambda t: t.sign(), inputs=[x], forward_only=True)


def test_sigmoid_saturates_without_overflow():
    x = np.array([-100.0, -30.0, 0.0, 30.0, 100.0], np.float32)
    out = check_op(None, lambda t: t.sigmoid(), inputs=[x], fd=False)
    assert np.isfinite(out).all()


# -- maximum, minimum, comparisons, where -----------------------------------------------
@pytest.mark.parametrize("sa,sb", [((3, 4), (3, 4)), ((3, 4), (4,)), ((3, 1), (1, 4))])
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_maximum_minimum(name, sa, sb):
    check_op([sa, sb], lambda x, y: getattr(x, name)(y))


def test_maximum_tie_splits_gradient_like_torch():
    x = np.array([1.0, 2.0, 3.0], np.float32)
    y = np.array([1.0, 5.0, 0.0], np.float32)
    # The finite difference of max at a tie is one-sided, so only torch is the reference.
    check_op(None, lambda a, b: a.maximum(b), inputs=[x, y], fd=False)
    check_op(None, lambda a, b: a.minimum(b), inputs=[x, y], fd=False)


COMPARISONS = [
    ("lt", lambda x, y: x < y), ("le", lambda x, y: x <= y), ("gt", lambda x, y: x > y),
    ("ge", lambda x, y: x >= y), ("eq", lambda x, y: x == y), ("ne", lambda x, y: x != y),
    ("method_lt", lambda x, y: x.lt(y)), ("method_eq", lambda x, y: x.eq(y)),
]


@pytest.mark.parametrize("sa,sb", [((4, 5), (4, 5)), ((4, 5), (5,)), ((4, 1), (1, 5))])
@pytest.mark.parametrize("name,fn", COMPARISONS, ids=[c[0] for c in COMPARISONS])
def test_comparison_bool_mask(name, fn, sa, sb):
    rng = np.random.default_rng(3)
    # Small integers as floats, so that equal elements (ties) really occur.
    x = rng.integers(-2, 3, sa).astype(np.float32)
    y = rng.integers(-2, 3, sb).astype(np.float32)
    out = check_op(None, fn, inputs=[x, y], forward_only=True)
    assert out.dtype == np.bool_
    assert 0 < out.sum() < out.size, "mask should mix zeros and ones for these inputs"


def test_comparison_with_scalar():
    check_op([(3, 4)], lambda x: x > 0.5, forward_only=True)


@pytest.mark.parametrize("sc,sa,sb", [((3, 4), (3, 4), (3, 4)), ((3, 4), (4,), (3, 1)),
                                      ((1, 4), (3, 4), ())])
def test_where(sc, sa, sb):
    c, a, b = rand_inputs([sc, sa, sb], seed=4)
    check_op(None, lambda m, x, y: torch.where(m > 0, x, y),
             lambda m, x, y: ad.where(m > 0, x, y), inputs=[c, a, b])


def test_where_with_scalar_branch():
    check_op([(3, 4)], lambda x: torch.where(x > 0, x, 0.0),
             lambda x: ad.where(x > 0, x, 0.0))


# -- matmul -----------------------------------------------------------------------------
@pytest.mark.parametrize("sa,sb", [
    ((3, 4), (4, 5)),            # 2-D
    ((2, 3, 4), (2, 4, 5)),      # batched
    ((2, 3, 4), (4, 5)),         # batch broadcast, right operand shared
    ((3, 4), (2, 4, 5)),         # batch broadcast, left operand shared
    ((2, 1, 3, 4), (3, 4, 2)),   # batch dims broadcast both ways
    ((4,), (4, 5)),              # 1-D @ 2-D
    ((3, 4), (4,)),              # 2-D @ 1-D
    ((4,), (4,)),                # dot product
    ((4,), (2, 4, 3)),           # 1-D @ batched
    ((2, 3, 4), (4,)),           # batched @ 1-D
    ((2, 3, 2, 4), (4, 5)),      # two batch dims against one matrix (folded into rows)
])
def test_matmul(sa, sb):
    check_op([sa, sb], lambda x, y: x @ y)


def _ancestors(node):
    seen, todo = {}, [node]
    while todo:
        n = todo.pop()
        if n.id not in seen:
            seen[n.id] = n
            todo.extend(n.srcs)
    return seen.values()


def test_batch_against_one_matrix_is_one_2d_product():
    # as torch.matmul: [B, T, K] @ [K, N] folds B*T into the rows, so the product and the
    # weight gradient are single 2-D DOTs (no batched product summed over the batch)
    rng = np.random.default_rng(0)
    x = ad.tensor(rng.standard_normal((2, 3, 4)).astype(np.float32))
    w = ad.Tensor(rng.standard_normal((4, 5)).astype(np.float32), requires_grad=True)
    y = x @ w
    assert y.shape == (2, 3, 5)
    y.sum().backward()
    dots = [n for n in _ancestors(w.grad.node) if n.op is Op.DOT]
    assert dots and all(len(n.shape) == 2 for n in dots)
    assert {n.shape for n in _ancestors(y.node) if n.op is Op.DOT} == {(6, 5)}
    ad.execute()
    np.testing.assert_allclose(w.grad.numpy(), np.einsum("btk,btn->kn", x.numpy(),
                               np.ones((2, 3, 5), np.float32)), rtol=1e-5, atol=1e-5)


def test_matmul_functions():
    check_op([(3, 4), (4, 2)], torch.matmul, ad.matmul)
    check_op([(3, 4), (4, 2)], lambda x, y: x.matmul(y))


# -- reductions -------------------------------------------------------------------------
DIMS = [None, 0, 1, -1, (0, 2)]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("name", ["sum", "mean", "amax"])
def test_reduce(name, dim, keepdim):
    if dim is None and name == "amax":
        check_op([(2, 3, 4)], lambda x: x.amax())
        return
    if dim is None:
        check_op([(2, 3, 4)], lambda x: getattr(x, name)())
        return
    check_op([(2, 3, 4)], lambda x: getattr(x, name)(dim, keepdim))


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_max_dim_values_and_indices(dim, keepdim):
    check_op([(3, 4, 5)], lambda x: x.max(dim, keepdim).values)
    ad.reset()
    x_np, = rand_inputs([(3, 4, 5)], seed=5)
    res = ad.Tensor(x_np).max(dim, keepdim)
    values, indices = res                    # unpacks like torch's (values, indices)
    ad.execute()
    ref = torch.from_numpy(x_np).max(dim, keepdim)
    np.testing.assert_allclose(values.numpy(), ref.values.numpy(), rtol=0, atol=0)
    assert indices.numpy().dtype == np.int64  # torch.max gives int64 indices
    np.testing.assert_array_equal(indices.numpy(), ref.indices.numpy())


def test_max_indices_ties_pick_first():
    x = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [0.0, 1.0, 5.0, 5.0]], np.float32)
    idx = ad.Tensor(x).max(dim=1).indices
    ad.execute()
    np.testing.assert_array_equal(idx.numpy(), np.argmax(x, axis=1))


TIES = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [0.0, 1.0, 5.0, 5.0]], np.float32)


@pytest.mark.parametrize("name,fn", [
    ("max_dim", lambda x: x.max(dim=1).values),        # torch: all to the returned index
    ("max_dim_keep", lambda x: x.max(0, keepdim=True).values),
    ("min_dim", lambda x: x.min(dim=1).values),
    ("amax", lambda x: x.amax(1)),                     # torch: split evenly among ties
    ("amin", lambda x: x.amin(1)),
    ("max_all", lambda x: x.max()),
])
def test_max_gradient_with_ties_like_torch(name, fn):
    # At ties max is not differentiable, so finite differences are no reference here.
    check_op(None, fn, inputs=[TIES], fd=False)


def test_min_dim_indices():
    x_np, = rand_inputs([(3, 5)], seed=8)
    values, indices = ad.Tensor(x_np).min(dim=0)
    ad.execute()
    np.testing.assert_array_equal(values.numpy(), x_np.min(0))
    np.testing.assert_array_equal(indices.numpy(), np.argmin(x_np, 0))


def test_max_all_and_argmax():
    check_op([(3, 4)], lambda x: x.max())
    ad.reset()
    x_np, = rand_inputs([(3, 4)], seed=6)
    am = ad.Tensor(x_np).argmax(1)
    ad.execute()
    np.testing.assert_array_equal(am.numpy(), np.argmax(x_np, axis=1))


def test_pytorch_keyword_spelling():
    check_op([(3, 4)], lambda x: x.sum(dim=1, keepdim=True))
    check_op([(3, 4)], lambda x: x.mean(dim=0, keepdim=False))
    check_op([(3, 4)], lambda x: x.max(dim=-1, keepdim=True).values)
    check_op([(2, 3, 4)], lambda x: x.reshape(4, -1))
    check_op([(2, 3, 4)], lambda x: x.sum(dim=(0, 2)))


@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), (0, True), ((0, 1), True)])
def test_var(dim, keepdim):
    if dim is None:
        check_op([(3, 4)], lambda x: x.var())
    else:
        check_op([(3, 4)], lambda x: x.var(dim, keepdim=keepdim))


# -- movement ---------------------------------------------------------------------------
@pytest.mark.parametrize("name,fn", [
    ("reshape", lambda x: x.reshape(4, 6)),
    ("reshape_tuple", lambda x: x.reshape((6, 4))),
    ("reshape_neg1", lambda x: x.reshape(2, -1)),
    ("view_neg1", lambda x: x.view(-1)),
    ("view_mid_neg1", lambda x: x.view(2, -1, 2)),
    ("permute", lambda x: x.permute(2, 0, 1)),
    ("transpose", lambda x: x.transpose(0, 2)),
    ("transpose_neg", lambda x: x.transpose(-1, -2)),
    ("flatten", lambda x: x.flatten(1)),
    ("unsqueeze", lambda x: x.unsqueeze(1)),
    ("slice_cols", lambda x: x[:, 1:3]),
    ("int_index", lambda x: x[1]),
    ("neg_int_index", lambda x: x[-1, :, 2]),
    ("new_axis", lambda x: x[..., None]),
    ("new_axis_mid", lambda x: x[:, None, 1:]),
    ("ellipsis_slice", lambda x: x[..., 1:3]),
    ("ellipsis_mid", lambda x: x[1, ..., 0]),
    ("negative_slices", lambda x: x[:, -2:, :-1]),
    ("mixed", lambda x: x[0:2, 1, None]),
    ("empty_tail_slice", lambda x: x[:, 1:100]),
])
def test_movement_3d(name, fn):
    check_op([(2, 3, 4)], fn)


def test_transpose_2d_T():
    check_op([(3, 5)], lambda x: x.T)
    check_op([(3, 5)], lambda x: x.t() @ x)


@pytest.mark.parametrize("dim,start,stop", [(0, 1, 3), (1, 0, 2), (-1, 2, 4)])
def test_index(dim, start, stop):
    check_op([(3, 3, 4)], lambda x: x.narrow(dim, start, stop - start),
             lambda x: x.index(dim, start, stop))


@pytest.mark.parametrize("src,target", [((3, 1), (2, 3, 4)), ((4,), (3, 4)), ((1, 1), (2, 5)),
                                        ((2, 1, 3), (2, 4, 3))])
def test_broadcast_to_expand(src, target):
    check_op([src], lambda x: x.broadcast_to(target))
    check_op([src], lambda x: x.expand(*target))


def test_squeeze():
    check_op([(3, 1, 4)], lambda x: x.squeeze(1))
    check_op([(3, 1, 4)], lambda x: x.squeeze())


# -- concat, stack, gather --------------------------------------------------------------
@pytest.mark.parametrize("shapes,dim", [(((2, 3), (4, 3)), 0), (((2, 3), (2, 1), (2, 2)), 1),
                                        (((2, 3, 4), (2, 3, 4)), -1)])
def test_concat(shapes, dim):
    check_op(list(shapes), lambda *xs: torch.cat(xs, dim), lambda *xs: ad.concat(xs, dim))
    check_op(list(shapes), lambda *xs: torch.cat(xs, dim), lambda *xs: ad.cat(list(xs), dim))


def test_concat_same_tensor_twice():
    check_op([(2, 3)], lambda x: torch.cat([x, x * 2], 0), lambda x: ad.concat([x, x * 2], 0))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_stack(dim):
    check_op([(2, 3), (2, 3), (2, 3)], lambda *xs: torch.stack(xs, dim),
             lambda *xs: ad.stack(list(xs), dim))


@pytest.mark.parametrize("idx", [
    np.array([0, 2, 2, 1, 0, 2]),
    np.array([[0, 1], [1, 1], [3, 3]]),
    np.array([3]),
])
def test_gather_repeated_indices_scatter_add_grad(idx):
    table, = rand_inputs([(4, 3)], seed=7)
    check_op(None, lambda t, i: t[i], inputs=[table, idx.astype(np.int32)])


def test_gather_gradient_counts_repeats():
    table = ad.Tensor(np.ones((3, 2), np.float32), requires_grad=True)
    idx = ad.Tensor(np.array([2, 2, 2, 0], np.int32))
    table[idx].sum().backward()
    g = table.grad
    ad.execute()
    np.testing.assert_array_equal(g.numpy(), [[1, 1], [0, 0], [3, 3]])


# -- softmax, clamp, detach -------------------------------------------------------------
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax(dim):
    """Weighted by a random constant: the plain sum of a softmax is 1 whatever ``x``, so
    the gradient of an unweighted sum is zero and only rounding noise would be compared."""
    w = np.random.default_rng(1).uniform(0.5, 1.5, (3, 4)).astype(np.float32)
    for f in (lambda x: x.softmax(dim), lambda x: x.log_softmax(dim)):
        check_op([(3, 4)], lambda x: f(x) * torch.from_numpy(w),
                 lambda x: f(x) * ad.Tensor(w))


def test_softmax_large_logits_stable():
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, 0.0, 5.0]], np.float32)
    check_op(None, lambda t: t.softmax(-1), inputs=[x], fd=False)
    check_op(None, lambda t: t.log_softmax(-1), inputs=[x], fd=False)


@pytest.mark.parametrize("lo,hi", [(-1.0, 1.0), (-0.5, None), (None, 0.5)])
def test_clamp(lo, hi):
    avoid = tuple(v for v in (lo, hi) if v is not None)
    check_op([(4, 5)], lambda x: x.clamp(lo, hi), avoid=avoid)
    check_op([(4, 5)], lambda x: x.clamp(min=lo, max=hi), avoid=avoid)


def test_detach_blocks_gradient():
    # Finite differences see the function, not the cut, so torch is the only reference.
    check_op([(3, 4)], lambda x: x * x.detach(), fd=False)
    check_op([(3, 4)], lambda x: (x.detach() * 3.0).exp() + x, fd=False)


def test_detached_output_has_no_grad():
    x = ad.Tensor(np.ones((2, 2), np.float32), requires_grad=True)
    d = x.detach()
    assert not d.requires_grad
    with pytest.raises(RuntimeError, match="does not require grad"):
        d.sum().backward()


def test_composite_mlp_expression():
    """Ops composed: a small network's loss, gradients of every input."""
    check_op([(5, 3), (4, 3), (4,), (2, 4)],
             lambda x, w1, b1, w2: ((x @ w1.T + b1).tanh() @ w2.T).sigmoid().mean())
