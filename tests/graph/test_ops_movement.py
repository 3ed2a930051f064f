"""Shape ops (views: strided slices, flips, repeats, splits, diagonals, einsum) against
PyTorch (float64 reference) and float64 finite differences, forward and backward."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from op_helper import assert_like_torch, check_op

F64 = torch.float64


def both(fn):
    """``fn(lib, *xs)`` as a torch function and an autodiff function."""
    return (lambda *xs: fn(torch, *xs)), (lambda *xs: fn(ad, *xs))


def cat_all(lib, parts):
    """One output from several: flattened and concatenated (tuples from split & co)."""
    return lib.cat([p.reshape(-1) for p in parts], 0)


# name, fn(x) for both libraries, input shapes
MOVEMENT = [
    ("step", lambda x: x[:, ::2], [(3, 5), (2, 1), (0, 4)]),
    ("step3_offset", lambda x: x[..., 1::3], [(2, 3, 7), (1,), (4, 0)]),
    ("step_bounds", lambda x: x[4:0:2] if x.shape[0] > 4 else x[1:100:2], [(7, 2), (3,)]),
    ("step_int_none", lambda x: x[1, None, ::2], [(3, 5)]),
    ("flip", lambda x: x.flip(-1), [(3, 5), (1,), (), (0, 2)]),
    ("flip2", lambda x: x.flip(0, 2), [(2, 3, 4)]),
    ("flip_strided", lambda x: x.flip(1)[:, 1::2], [(2, 7)]),
    ("fliplr", lambda x: x.fliplr(), [(3, 4)]),
    ("flipud", lambda x: x.flipud(), [(3, 4)]),
    ("roll", lambda x: x.roll(2, 1), [(3, 5), (2, 1)]),
    ("roll_neg_multi", lambda x: x.roll((-1, 3), (0, -1)), [(3, 4)]),
    ("roll_flat", lambda x: x.roll(4), [(3, 5), ()]),
    ("repeat", lambda x: x.repeat(2, 1, 3), [(2, 3), (1, 1), (0, 2)]),
    ("repeat_0d", lambda x: x.repeat(3), [()]),
    ("tile", lambda x: x.tile((2,)), [(2, 3), (3,)]),
    ("repeat_interleave", lambda x: x.repeat_interleave(3, 0), [(2, 3), (1,)]),
    ("repeat_interleave_flat", lambda x: x.repeat_interleave(2), [(2, 3), ()]),
    ("expand_as", lambda x: x.expand_as(torch.zeros(2, 3, 4) if isinstance(x, torch.Tensor)
                                        else ad.zeros(2, 3, 4)), [(3, 1), (4,)]),
    ("unflatten", lambda x: x.unflatten(1, (2, -1)), [(3, 6), (1, 4)]),
    ("flatten_range", lambda x: x.flatten(1, 2), [(2, 3, 4, 5), (1, 1, 1)]),
    ("flatten_0d", lambda x: x.flatten(), [()]),
    ("movedim", lambda x: x.movedim(0, -1), [(2, 3, 4), (1, 5)]),
    ("movedim_multi", lambda x: x.movedim((0, 1), (2, 0)), [(2, 3, 4)]),
    ("moveaxis", lambda x: x.moveaxis(-1, 0), [(2, 3, 4)]),
    ("swapaxes", lambda x: x.swapaxes(0, 2), [(2, 3, 4)]),
    ("swapdims", lambda x: x.swapdims(-1, 1), [(2, 3, 4)]),
    ("diagonal", lambda x: x.diagonal(), [(3, 3), (2, 4), (5, 2), (0, 3)]),
    ("diagonal_offset", lambda x: x.diagonal(1), [(3, 4), (1, 1)]),
    ("diagonal_neg", lambda x: x.diagonal(-2, 0, 2), [(4, 2, 3)]),
    ("diag_matrix", lambda x: x.diag(), [(4, 3)]),
    ("diag_vector", lambda x: x.diag(), [(3,), (1,)]),
    ("diag_vector_offset", lambda x: x.diag(-1), [(3,)]),
    ("diag_embed", lambda x: x.diag_embed(), [(2, 3), (1,)]),
    ("diag_embed_offset_dims", lambda x: x.diag_embed(1, 0, 2), [(2, 3)]),
    ("narrow", lambda x: x.narrow(1, 1, 2), [(3, 4)]),
    ("narrow_neg", lambda x: x.narrow(-1, -3, 2), [(2, 5)]),
    ("squeeze_noop", lambda x: x.squeeze(0), [(3, 4)]),
    ("squeeze_tuple", lambda x: x.squeeze((0, 2)), [(1, 3, 1, 2)]),
    ("squeeze_0d", lambda x: x.squeeze(), [()]),
    ("unsqueeze_neg", lambda x: x.unsqueeze(-1), [(3, 4), ()]),
    ("unsqueeze_end", lambda x: x.unsqueeze(2), [(3, 4)]),
    ("t_1d", lambda x: x.t(), [(3,)]),
    ("T_0d", lambda x: x.T, [()]),
    ("view_as", lambda x: x.view_as(x.reshape(-1)), [(2, 3)]),
    ("tril", lambda x: x.tril(), [(3, 4), (2, 3, 3)]),
    ("triu_offset", lambda x: x.triu(1), [(4, 3)]),
    ("tril_neg", lambda x: x.tril(-1), [(3, 3)]),
]


@pytest.mark.parametrize("name,fn,shapes", MOVEMENT, ids=[m[0] for m in MOVEMENT])
def test_movement(name, fn, shapes):
    for shape in shapes:
        ad.reset()
        check_op([shape], fn, torch_dtype=F64)


SPLITS = [
    ("split", lambda lib, x: cat_all(lib, x.split(2, 1)), (3, 5)),
    ("split_sizes", lambda lib, x: cat_all(lib, x.split([1, 3, 1], -1)), (2, 5)),
    ("chunk", lambda lib, x: cat_all(lib, x.chunk(3, 0)), (7, 2)),
    ("chunk_more_than_size", lambda lib, x: cat_all(lib, x.chunk(4, 1)), (2, 3)),
    ("unbind", lambda lib, x: cat_all(lib, [p * (i + 1) for i, p in enumerate(x.unbind(1))]),
     (2, 3, 2)),
    ("stack_neg", lambda lib, x: lib.stack([x, x * 2], -1), (2, 3)),
    ("cat_empty", lambda lib, x: lib.cat([x, x[:0], x * 2], 0), (2, 3)),
    ("meshgrid_ij", lambda lib, x: cat_all(lib, lib.meshgrid(x[0], x[1, :2], indexing="ij")),
     (2, 3)),
    ("meshgrid_xy", lambda lib, x: cat_all(lib, lib.meshgrid(x[0], x[1, :2], x[0, :1],
                                                            indexing="xy")), (2, 3)),
]


@pytest.mark.parametrize("name,fn,shape", SPLITS, ids=[s[0] for s in SPLITS])
def test_split_stack(name, fn, shape):
    t, a = both(fn)
    check_op([shape], t, a, torch_dtype=F64)


EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ij,ij->", [(3, 4), (3, 4)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(4, 4)]),
    ("ij->ji", [(2, 3)]),
    ("ij", [(2, 3)]),
    ("i,j->ij", [(3,), (4,)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("ijk,jl,kl->il", [(2, 3, 4), (3, 5), (4, 5)]),
    ("i,i,i->", [(4,), (4,), (4,)]),
    ("ab,cb->", [(2, 3), (4, 3)]),
    ("iij->j", [(3, 3, 2)]),
    ("ij,kj->ikj", [(2, 1), (3, 4)]),
]


@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[e[0] for e in EINSUM])
def test_einsum(eq, shapes):
    check_op(shapes, lambda *xs: torch.einsum(eq, *xs), lambda *xs: ad.einsum(eq, *xs),
             torch_dtype=F64)


def test_einsum_is_dot_permute_reduce():
    """No op beyond the existing dot/permute/reshape/expand/sum/slice kinds is traced."""
    a, b = ad.randn(2, 3, 4), ad.randn(4, 5)
    ad.einsum("bij,jk->bki", a, b)
    ops = {n.op.name for n in ad.graph.trace.TRACER.root.graph.nodes}
    assert ops <= {"LOAD", "DOT", "PERMUTE", "RESHAPE", "EXPAND", "SUM"}, ops
    assert "DOT" in ops


def test_strided_slice_is_one_view_node():
    x = ad.randn(4, 9)
    y = x[1:, ::3]
    node = y.node
    assert node.op.name == "SLICE" and node.arg == ((1, 4, 1), (0, 9, 3))


def test_negative_step_raises_value_error_like_torch():
    x = ad.randn(4)
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[::-1]
    with pytest.raises(ValueError):
        x[::0]


@pytest.mark.parametrize("fn,exc", [
    (lambda x: x.sum(5), IndexError), (lambda x: x.transpose(0, 3), IndexError),
    (lambda x: x.unsqueeze(-5), IndexError), (lambda x: x.cumsum(3), IndexError),
    (lambda x: x.flip(3), IndexError), (lambda x: x.movedim(3, 0), IndexError),
    (lambda x: x.softmax(-4), IndexError), (lambda x: x.diagonal(0, 0, 3), IndexError),
    (lambda x: x.amax((0, 5)), IndexError), (lambda x: x.squeeze(3), IndexError),
    (lambda x: x + ad.randn(4, 2), RuntimeError), (lambda x: x @ ad.randn(5, 2), RuntimeError),
    (lambda x: x.reshape(5, 5), RuntimeError), (lambda x: x.split([1, 2], 0), RuntimeError),
    (lambda x: ad.stack([x, ad.randn(3, 3)]), RuntimeError),
])
def test_exception_types_match_torch(fn, exc):
    """IndexError for a bad dim, RuntimeError (ShapeError is one) for shapes that do not fit,
    as torch raises for the same calls."""
    with pytest.raises(exc):
        fn(ad.randn(2, 3, 4))
    with pytest.raises(exc):
        _torch_equivalent(fn)


def _torch_equivalent(fn):
    """Run ``fn`` with torch standing in for autodiff (``ad.randn`` -> ``torch.randn``)."""
    import types
    g = dict(fn.__globals__)
    g["ad"] = types.SimpleNamespace(randn=torch.randn, stack=torch.stack)
    return types.FunctionType(fn.__code__, g)(torch.randn(2, 3, 4))


def test_shape_error_is_value_and_runtime_error_with_site():
    with pytest.raises(RuntimeError) as info:
        ad.randn(2, 3) + ad.randn(4, 5)
    assert isinstance(info.value, ValueError) and isinstance(info.value, ad.ShapeError)
    assert "test_ops_movement.py" in str(info.value)


@pytest.mark.parametrize("dims", [-1, 0, (0,)])
def test_roll_of_a_0d_tensor_along_a_dim_is_an_index_error_like_torch(dims):
    """A 0-d tensor has no dim to roll along (torch: IndexError, "tensor has no
    dimensions"); rolled without dims it is itself, in both."""
    with pytest.raises(IndexError, match="no dimensions") as info:
        ad.tensor(2.0).roll(1, dims)
    assert isinstance(info.value, ad.ShapeError) and "test_ops_movement.py" in str(info.value)
    with pytest.raises(IndexError, match="no dimensions"):
        torch.tensor(2.0).roll(1, dims)
    assert tuple(ad.tensor(2.0).roll(1).shape) == tuple(torch.tensor(2.0).roll(1).shape) == ()


ZERO_D = {
    "narrow": lambda x: x.narrow(0, 0, 1), "chunk": lambda x: x.chunk(2, 0),
    "split": lambda x: x.split(1, -1), "diff": lambda x: x.diff(),
    "unflatten": lambda x: x.unflatten(0, (1,)), "movedim": lambda x: x.movedim(0, -1),
    "movedim_back": lambda x: x.movedim(-1, 0), "movedim_bad": lambda x: x.movedim(1, 0),
    "unfold": lambda x: x.unfold(0, 1, 1), "unfold_step": lambda x: x.unfold(-1, 1, 3),
    "unfold_long": lambda x: x.unfold(0, 2, 1), "unfold_bad_dim": lambda x: x.unfold(1, 1, 1),
    "tensor_split": lambda x: x.tensor_split(2, 0), "unbind": lambda x: x.unbind(0),
    "select": lambda x: x.select(0, 0), "roll": lambda x: x.roll(1, 0),
    "roll_flat": lambda x: x.roll(1), "flip": lambda x: x.flip(-1),
}


@pytest.mark.parametrize("name", sorted(ZERO_D))
def test_0d_tensors_along_a_dim_like_torch(name):
    """Ops along a dim of a 0-d tensor: PyTorch's exception type (ours a subclass, a shape
    error naming the user's line), or PyTorch's result shape."""
    assert_like_torch(ZERO_D[name], torch.tensor(2.0), ad.tensor(2.0), "test_ops_movement.py")


EMPTY = {
    "split": lambda x: x.split(1, -1), "chunk": lambda x: x.chunk(2, -1),
    "narrow": lambda x: x.narrow(-1, 0, 0), "tensor_split": lambda x: x.tensor_split(2, -1),
    "expand_new_dim": lambda x: x.expand(2, -1, -1), "expand_kept": lambda x: x.expand(2, -1),
    "unbind": lambda x: x.unbind(-1), "flip": lambda x: x.flip(-1), "roll": lambda x: x.roll(1, -1),
}


@pytest.mark.parametrize("shape", [(3, 0), (0,)])
@pytest.mark.parametrize("name", sorted(EMPTY))
def test_empty_dims_like_torch(name, shape):
    """A dim of size 0: the pieces, shapes and errors PyTorch gives (``split`` of an empty
    dim is one empty piece; ``expand`` takes -1 only for a dim the tensor has)."""
    assert_like_torch(EMPTY[name], torch.zeros(shape), ad.tensor(np.zeros(shape, np.float32)))


def test_expand_rejects_minus_one_for_a_new_dim_of_a_full_tensor():
    """-1 in a leading (new) dim was read as 1: [4] -> [2, 1, 4] where PyTorch refuses."""
    with pytest.raises(RuntimeError, match="leading, non-existing dimension 1") as info:
        ad.randn(4).expand(2, -1, -1)
    assert "test_ops_movement.py" in str(info.value)
    with pytest.raises(RuntimeError, match="non-existing dimension"):
        torch.randn(4).expand(2, -1, -1)
    assert tuple(ad.randn(4).expand(2, 3, -1).shape) == (2, 3, 4)


def test_permute_with_a_repeated_dim_is_torchs_error():
    for m in (ad, torch):
        with pytest.raises(RuntimeError, match="duplicate dims"):
            m.zeros(2, 3).permute(0, 0)
