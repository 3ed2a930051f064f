"""``F.unfold``/``F.fold`` (im2col/col2im) and their modules, ``max_unpool1d/2d/3d`` and
``MaxUnpool*``, and the ``*_with_indices`` pooling functions, against PyTorch: forward,
gradients (float32 against torch and float64 finite differences, the tolerances of
``test_pooling.py``), unbatched inputs, every argument, errors with PyTorch's types."""
from __future__ import annotations

import pathlib
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as TF

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "graph"))

import autodiff as ad  # noqa: E402
from autodiff import nn  # noqa: E402
from autodiff.nn import functional as F  # noqa: E402
from op_helper import check_op, upstream  # noqa: E402

torch.set_num_threads(1)


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


UNFOLD = [  # input shape, kwargs
    ((2, 3, 7, 6), dict(kernel_size=(2, 3), dilation=(2, 1), padding=1, stride=(2, 1))),
    ((1, 2, 5, 5), dict(kernel_size=3)),
    ((2, 1, 6, 8), dict(kernel_size=(3, 2), stride=(3, 2))),            # disjoint blocks
    ((3, 5, 4), dict(kernel_size=2, padding=(0, 1), stride=(1, 2))),    # unbatched
]


@pytest.mark.parametrize("shape,kw", UNFOLD)
def test_unfold(shape, kw):
    check_op([shape], lambda x: TF.unfold(x, **kw), lambda x: F.unfold(x, **kw))


@pytest.mark.parametrize("shape,kw", UNFOLD)
def test_fold_is_the_adjoint_of_unfold(shape, kw):
    """``fold`` of ``unfold``'s shape back to the image size, vs torch (overlapping
    blocks add up; padding cropped)."""
    cols = tuple(TF.unfold(torch.zeros(shape), **kw).shape)
    size = shape[-2:]
    check_op([cols], lambda x: TF.fold(x, size, **kw), lambda x: F.fold(x, size, **kw))


def test_fold_unfold_modules_and_int_arguments():
    x = _rand((2, 3, 6, 5), 1)
    pairs = [(nn.Unfold(2, padding=1, stride=2), torch.nn.Unfold(2, padding=1, stride=2)),
             (nn.Unfold((3, 2), dilation=(1, 2)), torch.nn.Unfold((3, 2), dilation=(1, 2)))]
    outs = [m(ad.Tensor(x)) for m, _ in pairs]
    cols = _rand((2, 12, 42), 2)
    fold = nn.Fold((6, 5), 2, padding=1)
    tfold = torch.nn.Fold((6, 5), 2, padding=1)
    y = fold(ad.Tensor(cols))
    ad.execute()
    for o, (m, t) in zip(outs, pairs):
        np.testing.assert_array_equal(o.numpy(), t(torch.tensor(x)).numpy())
        assert repr(m) == repr(t)
    np.testing.assert_allclose(y.numpy(), tfold(torch.tensor(cols)).numpy(), rtol=1e-6,
                               atol=1e-6)
    assert repr(fold) == repr(tfold)


def test_fold_unfold_errors():
    x = ad.Tensor(_rand((1, 2, 3, 3), 0))
    with pytest.raises(RuntimeError, match="3D or 4D"):
        F.unfold(ad.Tensor(_rand((1, 2, 3, 3, 3), 0)), 2)
    with pytest.raises(RuntimeError, match="too small"):
        F.unfold(x, 4)
    with pytest.raises(RuntimeError, match="stride should be greater than zero"):
        F.unfold(x, 2, stride=0)
    with pytest.raises(RuntimeError, match="divisible by the product of kernel_size"):
        F.fold(ad.Tensor(_rand((1, 5, 4), 0)), (3, 3), 2)
    with pytest.raises(RuntimeError, match="sliding blocks"):
        F.fold(ad.Tensor(_rand((1, 8, 5), 0)), (3, 3), 2)
    with pytest.raises(RuntimeError, match="2D or 3D"):
        F.fold(ad.Tensor(_rand((1, 8, 4, 1), 0)), (3, 3), 2)


# -- max pooling indices and unpooling -----------------------------------------------------
@pytest.mark.parametrize("fn,shape,kw", [
    ("max_pool1d_with_indices", (2, 3, 10), dict(kernel_size=3, stride=2, padding=1)),
    ("max_pool2d_with_indices", (2, 2, 7, 6), dict(kernel_size=(3, 2), ceil_mode=True)),
    ("max_pool3d_with_indices", (1, 2, 5, 4, 6), dict(kernel_size=2, dilation=(1, 2, 1))),
    ("adaptive_max_pool1d_with_indices", (2, 3, 9), dict(output_size=4)),
    ("adaptive_max_pool2d_with_indices", (2, 7, 5), dict(output_size=(3, 2))),
    ("adaptive_max_pool3d_with_indices", (1, 2, 5, 4, 6), dict(output_size=(2, 3, 4)))])
def test_with_indices_functions_always_return_indices(fn, shape, kw):
    x = _rand(shape, 3)
    y, idx = getattr(F, fn)(ad.Tensor(x), **kw)
    ad.execute()
    ty, tidx = getattr(TF, fn)(torch.tensor(x), **kw)
    np.testing.assert_array_equal(y.numpy(), ty.numpy())
    assert idx.dtype == "int32"
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())


UNPOOL = [  # function rank, input shape, pooling kwargs
    (1, (2, 3, 10), dict(kernel_size=2)),
    (1, (3, 9), dict(kernel_size=3, stride=2)),                         # unbatched
    (2, (2, 2, 6, 8), dict(kernel_size=2)),
    (2, (1, 3, 7, 6), dict(kernel_size=(3, 2), stride=(2, 2), padding=(1, 0))),
    (2, (2, 6, 4), dict(kernel_size=2, stride=1)),                      # overlapping windows
    (3, (1, 2, 4, 6, 4), dict(kernel_size=2)),
    (3, (2, 4, 5, 4), dict(kernel_size=(2, 3, 2), stride=(2, 1, 2), padding=(1, 1, 0))),
]


@pytest.mark.parametrize("nsp,shape,kw", UNPOOL)
def test_max_unpool_of_max_pool(nsp, shape, kw):
    """Pool with indices, unpool to the input's size: values at the maxima, zeros
    elsewhere; the gradient of the unpooled values is the upstream gradient gathered at the
    indices (torch's), and flows through max pooling back to the input."""
    pool, unpool = getattr(F, f"max_pool{nsp}d"), getattr(F, f"max_unpool{nsp}d")
    tpool, tunpool = getattr(TF, f"max_pool{nsp}d"), getattr(TF, f"max_unpool{nsp}d")
    size = shape[-nsp:]
    x = _rand(shape, 4)
    xa = ad.Tensor(x, requires_grad=True)
    y, idx = pool(xa, return_indices=True, **kw)
    u = unpool(y, idx, output_size=size, **kw)
    g = upstream(u.shape, 0)
    u.backward(ad.Tensor(g))
    gx = xa.grad
    ad.execute()
    xt = torch.tensor(x, requires_grad=True)
    ty, tidx = tpool(xt, return_indices=True, **kw)
    tu = tunpool(ty, tidx, output_size=size, **kw)
    tu.backward(torch.tensor(g))
    # an element picked by several overlapping windows: the mean of equal values
    np.testing.assert_allclose(u.numpy(), tu.detach().numpy(), rtol=3e-7, atol=0)
    if kw.get("stride", kw["kernel_size"]) == kw["kernel_size"]:
        np.testing.assert_array_equal(u.numpy(), tu.detach().numpy())
    np.testing.assert_allclose(gx.numpy(), xt.grad.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("nsp,shape", [(1, (2, 3, 4)), (2, (2, 3, 3, 2)), (3, (1, 2, 2, 3, 2))])
def test_max_unpool_of_data_indices_gradient_and_default_size(nsp, shape):
    """Indices given as data (no duplicates), the default output size, the gradient with
    respect to the values: a gather (also against float64 finite differences)."""
    k = 2
    out = tuple(s * k for s in shape[-nsp:])
    rng = np.random.default_rng(5)
    plane = int(np.prod(out))
    lead, n_in = shape[:-nsp], int(np.prod(shape[-nsp:]))
    idx = np.stack([rng.permutation(plane)[:n_in] for _ in range(int(np.prod(lead)))])
    idx = idx.reshape(shape)
    check_op([shape], lambda x, i: getattr(TF, f"max_unpool{nsp}d")(x, i, k),
             lambda x, i: getattr(F, f"max_unpool{nsp}d")(x, i, k),
             inputs=[_rand(shape, 6), idx])


@pytest.mark.parametrize("nsp", [1, 2, 3])
def test_max_unpool_modules(nsp):
    shape = (2, 3) + (4, 6, 4)[:nsp]
    x = _rand(shape, 7)
    pool = getattr(nn, f"MaxPool{nsp}d")(2, return_indices=True)
    unpool = getattr(nn, f"MaxUnpool{nsp}d")(2)
    tpool = getattr(torch.nn, f"MaxPool{nsp}d")(2, return_indices=True)
    tunpool = getattr(torch.nn, f"MaxUnpool{nsp}d")(2)
    y, idx = pool(ad.Tensor(x))
    u = unpool(y, idx)
    u2 = unpool(y, idx, output_size=(2, 3) + tuple(s + 1 for s in shape[2:]))
    ad.execute()
    ty, tidx = tpool(torch.tensor(x))
    np.testing.assert_array_equal(u.numpy(), tunpool(ty, tidx).numpy())
    np.testing.assert_array_equal(
        u2.numpy(), tunpool(ty, tidx, output_size=(2, 3) + tuple(s + 1 for s in shape[2:]))
        .numpy())
    assert repr(unpool) == repr(tunpool)


def test_max_unpool_errors():
    x = ad.Tensor(_rand((1, 1, 2, 2), 0))
    i = ad.Tensor(np.zeros((1, 1, 2, 2), np.int64))
    with pytest.raises(ValueError, match="must be between 2 and 6"):
        F.max_unpool2d(x, i, 2, output_size=(8, 8))
    with pytest.raises(ValueError, match="2 or 4 elements"):
        F.max_unpool2d(x, i, 2, output_size=(4, 4, 4))
    with pytest.raises(RuntimeError, match="invalid max index: 100"):
        F.max_unpool2d(x, ad.Tensor(np.full((1, 1, 2, 2), 100, np.int64)), 2)
    with pytest.raises(RuntimeError, match="same as that of the input"):
        F.max_unpool2d(x, ad.Tensor(np.zeros((1, 1, 2, 3), np.int64)), 2)
    with pytest.raises(RuntimeError, match="should be type int64"):
        F.max_unpool2d(x, ad.Tensor(np.zeros((1, 1, 2, 2), np.float32)), 2)
    with pytest.raises(RuntimeError, match="3-D .unbatched. or 4-D"):
        F.max_unpool2d(ad.Tensor(_rand((2, 2), 0)), ad.Tensor(np.zeros((2, 2), np.int64)), 2)
