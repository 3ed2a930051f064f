"""Creation ops against PyTorch: values, shapes and (for ``*_like`` and ``tril``/``triu``)
gradients through them."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
import autodiff.nn.functional as F
from op_helper import check_op

F64 = torch.float64


def _values(ours, theirs, exact: bool = False):
    ad.execute()
    got = ours.numpy()
    ref = theirs.numpy()
    assert got.shape == ref.shape, (got.shape, ref.shape)
    if exact or np.issubdtype(ref.dtype, np.integer):
        np.testing.assert_array_equal(got, ref)
    else:
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)
    return got


@pytest.mark.parametrize("args", [(5,), (2, 9), (1, 10, 3), (0,), (3, -4, -2), (4, 4),
                                  (0.0, 1.0, 0.1), (-1.5, 2.0, 0.5), (2.5,), (0, 1, 0.3)])
def test_arange(args):
    got = _values(ad.arange(*args), torch.arange(*args))
    int_args = all(isinstance(a, int) for a in args)
    assert np.issubdtype(got.dtype, np.integer) == int_args


def test_arange_bad_step():
    with pytest.raises(RuntimeError):
        ad.arange(0, 5, -1)
    with pytest.raises(RuntimeError):
        torch.arange(0, 5, -1)


@pytest.mark.parametrize("args", [(0.0, 1.0, 5), (-2.0, 3.0, 7), (1.0, 1.0, 1), (0.0, 2.0, 0),
                                  (3.0, -3.0, 4), (0, 10, 6)])
def test_linspace(args):
    _values(ad.linspace(*args), torch.linspace(*args))


@pytest.mark.parametrize("args", [(3,), (2, 4), (4, 1), (0,)])
def test_eye(args):
    _values(ad.eye(*args), torch.eye(*args), exact=True)


def test_full_empty_zeros_ones():
    _values(ad.full((2, 3), 1.5), torch.full((2, 3), 1.5), exact=True)
    _values(ad.full((2,), 7), torch.full((2,), 7), exact=True)
    _values(ad.full([], 2.0), torch.full([], 2.0), exact=True)
    assert ad.empty(2, 0, 3).shape == (2, 0, 3) == tuple(torch.empty(2, 0, 3).shape)
    _values(ad.zeros((3,)), torch.zeros((3,)), exact=True)
    _values(ad.ones(2, 1), torch.ones(2, 1), exact=True)


@pytest.mark.parametrize("name", ["zeros_like", "ones_like", "empty_like"])
def test_like_shapes(name):
    x = ad.randn(2, 3)
    y = getattr(ad, name)(x)
    ref = getattr(torch, name)(torch.zeros(2, 3))
    ad.execute()
    assert y.numpy().shape == tuple(ref.shape)
    if name != "empty_like":
        np.testing.assert_array_equal(y.numpy(), ref.numpy())


def test_full_like_and_like_in_an_expression():
    check_op([(2, 3)], lambda x: x * torch.full_like(x, 2.5) + torch.ones_like(x),
             lambda x: x * ad.full_like(x, 2.5) + ad.ones_like(x), torch_dtype=F64)
    check_op([(2, 3)], lambda x: x + torch.zeros_like(x), lambda x: x + x.zeros_like(),
             torch_dtype=F64)


def test_rand_like_and_randn_like_draw_new_values_every_iteration():
    x = ad.zeros(2000)
    seen = []

    def step():
        u = ad.rand_like(x)
        z = ad.randn_like(x)
        ad.Receiver(lambda a, b: seen.append((a.copy(), b.copy())), [u, z])
    ad.ir_for(range(2), step)
    ad.execute()
    (u0, z0), (u1, z1) = seen
    assert not np.array_equal(u0, u1) and not np.array_equal(z0, z1)
    for u in (u0, u1):
        assert 0.0 <= u.min() and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.05
    for z in (z0, z1):
        assert abs(z.mean()) < 0.1 and abs(z.std() - 1.0) < 0.1


@pytest.mark.parametrize("diagonal", [0, 1, -1, 5, -5])
def test_tril_triu(diagonal):
    check_op([(3, 4)], lambda x: x.tril(diagonal), torch_dtype=F64)
    check_op([(2, 4, 3)], lambda x: x.triu(diagonal), torch_dtype=F64)
    check_op([(3, 4)], lambda x: torch.tril(x, diagonal), lambda x: ad.tril(x, diagonal),
             torch_dtype=F64)


def test_tril_as_mask_creation():
    _values(ad.ones(4, 4).tril(), torch.ones(4, 4).tril(), exact=True)
    _values(ad.ones(3, 5).triu(1), torch.ones(3, 5).triu(1), exact=True)


def test_tril_mask_is_no_n_by_m_constant():
    """The mask is a comparison of two index vectors, not an [n, m] array of data."""
    x = ad.randn(64, 64)
    before = len(ad.graph.trace.TRACER.root.graph.nodes)
    x.tril()
    loads = [n for n in ad.graph.trace.TRACER.root.graph.nodes[before:] if n.op.name == "LOAD"
             and n.arg is not x._var]
    assert loads and all(n.size <= 64 for n in loads)


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid(indexing):
    a, b, c = ad.arange(3.0), ad.arange(2.0), ad.arange(4.0)
    got = ad.meshgrid(a, b, c, indexing=indexing)
    ref = torch.meshgrid(torch.arange(3.0), torch.arange(2.0), torch.arange(4.0),
                         indexing=indexing)
    ad.execute()
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g.numpy(), r.numpy())


def test_one_hot():
    idx = np.array([[0, 3], [2, 2]], np.int32)
    got = F.one_hot(ad.Tensor(idx), 5)
    got_auto = F.one_hot(ad.Tensor(idx))
    ref = torch.nn.functional.one_hot(torch.from_numpy(idx).long(), 5)
    ad.execute()
    assert got.dtype == ad.int64 and got.numpy().dtype == np.int64     # torch's dtype
    assert F.one_hot(ad.Tensor(idx) * 1, 5).dtype == ad.int64        # traced: checked gather
    np.testing.assert_array_equal(got.numpy(), ref.numpy())
    np.testing.assert_array_equal(got_auto.numpy(), ref.numpy()[..., :4])
    with pytest.raises(RuntimeError, match="num_classes"):
        F.one_hot(ad.Tensor(idx).float().int())
