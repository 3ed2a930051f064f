"""Ops whose result shape depends on values (``nonzero``, ``argwhere``, ``masked_select``,
``unique``, ``unique_consecutive``, ``bincount``) against PyTorch on tensors made from data
(computed while tracing), and the ``RuntimeError`` for traced inputs (op, shape, the user's
line, why); ``histc`` on the device against PyTorch, with given and data ranges."""
import numpy as np
import pytest
import torch

import autodiff as ad
from backends import device_params
from op_helper import check_op

_RNG = np.random.default_rng(5)
_INTS = _RNG.integers(-2, 3, (4, 5)).astype(np.int64)
_FLOATS = np.float32([[0.0, 1.5, -0.0, 2.0], [np.nan, 0.0, 3.0, 1.5], [2.0, 2.0, -1.0, 0.0]])


def _same(ours, theirs):
    ours = ours if isinstance(ours, tuple) else (ours,)
    theirs = theirs if isinstance(theirs, tuple) else (theirs,)
    assert len(ours) == len(theirs)
    for o, t in zip(ours, theirs):
        want = t.numpy()
        assert o._var is not None, "a value known while tracing gives data"
        assert o.shape == tuple(t.shape), (o.shape, t.shape)
        assert o.dtype.name == str(t.dtype).replace("torch.", ""), (o.dtype, t.dtype)
        np.testing.assert_array_equal(o.numpy(), want)


HOST = [
    ("nonzero", lambda L, x: L.nonzero(x), _INTS),
    ("nonzero_float", lambda L, x: x.nonzero(), _FLOATS),
    ("nonzero_tuple", lambda L, x: x.nonzero(as_tuple=True), _INTS),
    ("nonzero_0d", lambda L, x: x.nonzero(), np.array(3, np.int64)),
    ("nonzero_0d_tuple", lambda L, x: L.nonzero(x, as_tuple=True), np.array(0, np.float32)),
    ("nonzero_bool", lambda L, x: x.nonzero(), _INTS > 0),
    ("nonzero_empty", lambda L, x: x.nonzero(), np.zeros((2, 0, 3), np.float32)),
    ("nonzero_none", lambda L, x: x.nonzero(as_tuple=True), np.zeros((2, 3), np.float32)),
    ("argwhere", lambda L, x: L.argwhere(x), _INTS),
    ("argwhere_0d_zero", lambda L, x: x.argwhere(), np.array(0, np.int64)),
    ("unique", lambda L, x: L.unique(x), _INTS),
    ("unique_all", lambda L, x: x.unique(return_inverse=True, return_counts=True), _INTS),
    ("unique_unsorted", lambda L, x: L.unique(x, sorted=False, return_counts=True), _INTS),
    ("unique_nan", lambda L, x: x.unique(return_inverse=True, return_counts=True), _FLOATS),
    ("unique_dim0", lambda L, x: L.unique(x, dim=0, return_inverse=True,
                                          return_counts=True), np.ascontiguousarray(
                                              _INTS[:, :2])),
    ("unique_dim1", lambda L, x: x.unique(dim=1, return_inverse=True), _INTS[:2]),
    ("unique_bool", lambda L, x: x.unique(), _INTS > 0),
    ("unique_consecutive", lambda L, x: L.unique_consecutive(x), _INTS),
    ("unique_consecutive_all", lambda L, x: x.unique_consecutive(
        return_inverse=True, return_counts=True),
     np.array([1, 1, 2, 2, 3, 1, 1, 2], np.int64)),
    ("unique_consecutive_dim", lambda L, x: x.unique_consecutive(
        return_inverse=True, return_counts=True, dim=0),
     np.array([[1, 2], [1, 2], [3, 4], [1, 2]], np.int64)),
    ("unique_consecutive_float", lambda L, x: x.unique_consecutive(return_counts=True),
     _FLOATS.reshape(-1)),
    ("bincount", lambda L, x: L.bincount(x), np.array([4, 1, 1, 0, 7], np.int64)),
    ("bincount_minlength", lambda L, x: x.bincount(minlength=12),
     np.array([4, 1, 1, 0, 7], np.int64)),
    ("bincount_small_minlength", lambda L, x: x.bincount(minlength=2),
     np.array([4, 1, 1], np.int64)),
    ("bincount_empty", lambda L, x: L.bincount(x, minlength=3), np.zeros(0, np.int64)),
    ("bincount_weights", lambda L, x: x.bincount(L.tensor(np.float32([0.5, 1, 2, -1, 3]))),
     np.array([4, 1, 1, 0, 7], np.int64)),
    ("bincount_int32", lambda L, x: L.bincount(x), np.array([2, 0, 2], np.int32)),
    ("masked_select", lambda L, x: L.masked_select(x, L.tensor(_INTS > 0)), _INTS),
    ("masked_select_broadcast", lambda L, x: x.masked_select(L.tensor(
        [True, False, False, True, True])), _INTS),
    ("masked_select_float", lambda L, x: x.masked_select(L.tensor(_FLOATS == _FLOATS)),
     _FLOATS),
    ("masked_select_0d", lambda L, x: x.masked_select(L.tensor(True)), np.array(2.5, np.float32)),
]


@pytest.mark.parametrize("name,fn,data", HOST, ids=[c[0] for c in HOST])
def test_values_known_while_tracing_give_data_like_torch(name, fn, data):
    ours = fn(ad, ad.tensor(data))            # no execute(): the result is data already
    theirs = fn(torch, torch.from_numpy(data))
    _same(ours, theirs)


@pytest.mark.parametrize("device", device_params())
def test_masked_select_of_a_traced_input_with_a_known_mask(device):
    mask = _RNG.uniform(size=(3, 4)) > 0.4
    check_op([(3, 4)], lambda x: torch.masked_select(x * 2.0, torch.from_numpy(mask)),
             lambda x: ad.masked_select(x * 2.0, ad.tensor(mask)), device=device)
    check_op([(2, 3, 4)], lambda x: x.masked_select(torch.from_numpy(mask[0])),
             lambda x: x.masked_select(mask[0]), device=device)


@pytest.mark.parametrize("device", device_params())
def test_bincount_with_traced_weights(device):
    idx = np.array([3, 0, 3, 1, 3], np.int64)
    w = ad.tensor(np.float32([0.5, 1.0, 2.0, -1.0, 3.0]))
    out = ad.bincount(ad.tensor(idx), w * 2.0, minlength=6)
    ad.execute(device=device)
    want = torch.bincount(torch.from_numpy(idx), torch.tensor([0.5, 1.0, 2.0, -1.0, 3.0]) * 2,
                          minlength=6)
    assert out.dtype == ad.float32
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-6)


TRACED = [
    ("nonzero", lambda x: x.nonzero(), "[2, 3]"),
    ("nonzero", lambda x: ad.nonzero(x, as_tuple=True), "[2, 3]"),
    ("nonzero", lambda x: (x > 0).nonzero(), "[2, 3]"),
    ("argwhere", lambda x: x.argwhere(), "[2, 3]"),
    ("masked_select", lambda x: ad.tensor(np.ones((2, 3), np.float32)).masked_select(x > 0),
     "[2, 3]"),
    ("unique", lambda x: ad.unique(x), "[2, 3]"),
    ("unique_consecutive", lambda x: x.unique_consecutive(), "[2, 3]"),
    ("bincount", lambda x: x.reshape(-1).int().bincount(), "[6]"),
]


@pytest.mark.parametrize("name,fn,shape", TRACED,
                         ids=[f"{c[0]}_{i}" for i, c in enumerate(TRACED)])
def test_traced_inputs_raise_a_clear_error(name, fn, shape):
    x = ad.tensor(np.ones((2, 3), np.float32)) * 2.0            # traced
    with pytest.raises(RuntimeError) as e:
        fn(x)
    msg = str(e.value)
    assert msg.startswith(f"{name}(): ")
    assert shape in msg and "static shapes" in msg and "traced tensor" in msg
    assert "test_ops_extra_dynamic.py:" in msg                  # the user's line


def test_variables_assigned_or_read_in_a_loop_are_not_known():
    v = ad.tensor(np.array([1, 0, 2], np.int64))
    v.add_(1)                                                    # assigned by this program
    with pytest.raises(RuntimeError, match="nonzero.*assigned by the program"):
        v.nonzero()
    ad.reset()
    w = ad.tensor(np.array([1, 0, 2], np.int64))
    errors = []

    def body():
        try:
            w.unique()
        except RuntimeError as e:
            errors.append(str(e))
    ad.ir_for(range(1), body)
    assert len(errors) == 1 and "loop or branch body" in errors[0]


@pytest.mark.parametrize("call,exc", [
    (lambda: ad.tensor(np.float32([1.0])).bincount(), NotImplementedError),
    (lambda: ad.tensor(np.ones((2, 2), np.int64)).bincount(), RuntimeError),
    (lambda: ad.tensor(np.array([-1, 2], np.int64)).bincount(), RuntimeError),
    (lambda: ad.tensor(np.array([1, 2], np.int64)).bincount(minlength=-1), RuntimeError),
    (lambda: ad.tensor(np.array([1, 2], np.int64)).bincount(
        ad.tensor(np.float32([1.0]))), RuntimeError),
    (lambda: ad.tensor(np.float32([1.0])).masked_select(ad.tensor([1])), RuntimeError),
    (lambda: ad.tensor(np.array([1, 2], np.int64)).histc(), NotImplementedError),
    (lambda: ad.tensor(np.float32([1.0])).histc(bins=0), RuntimeError),
    (lambda: ad.tensor(np.float32([1.0])).histc(4, 3, 1), RuntimeError),
    (lambda: ad.tensor(np.float32([1.0, np.inf])).histc(4), RuntimeError),
    (lambda: ad.tensor(np.float32([1.0, np.nan])).histc(4), RuntimeError),
    (lambda: ad.tensor(np.float32([1.0])).histc(4, 0, np.inf), RuntimeError),
], ids=["bincount_float", "bincount_2d", "bincount_negative", "bincount_minlength",
        "bincount_weights_shape", "masked_select_int_mask", "histc_int", "histc_bins",
        "histc_min_above_max", "histc_inf_data", "histc_nan_data", "histc_inf_max"])
def test_bad_arguments_raise_like_torch(call, exc):
    with pytest.raises(exc):
        call()


# -- histc: on the device ----------------------------------------------------------------------
_HIST_DATA = np.concatenate([_RNG.normal(0, 1.5, 500), [-1.0, 1.0, 0.0, 2.5, -2.5, 1e-3]])
_HIST_DATA = _HIST_DATA.astype(np.float32)

HIST = [
    ("given_range", dict(bins=10, min=-1, max=1)),
    ("given_range_float_edges", dict(bins=7, min=-0.3, max=2.2)),
    ("data_range", dict(bins=13)),
    ("data_range_default_bins", dict()),
    ("min_equals_max_nonzero", dict(bins=5, min=2, max=2)),
    ("one_bin", dict(bins=1, min=-2, max=0)),
]


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("traced", [False, True], ids=["data", "traced"])
@pytest.mark.parametrize("name,kw", HIST, ids=[c[0] for c in HIST])
def test_histc_like_torch(name, kw, traced, device):
    x = ad.tensor(_HIST_DATA)
    x = x * 1.0 if traced else x
    out = ad.histc(x, **kw)
    ad.execute(device=device)
    want = torch.histc(torch.from_numpy(_HIST_DATA), **kw)
    assert out.dtype == ad.float32 and out.shape == tuple(want.shape)
    np.testing.assert_array_equal(out.numpy(), want.numpy())


@pytest.mark.parametrize("device", device_params())
def test_histc_edge_cases_like_torch(device):
    cases = [(np.float32([3.0, 3.0, 3.0]), dict(bins=4)),                # one value: +-1
             (np.float32([1.0, np.nan, 5.0, np.inf, -np.inf]), dict(bins=4, min=0, max=6)),
             (np.zeros(0, np.float32), dict(bins=3)),
             (np.float32([[1.0, 2.0], [2.0, 9.0]]), dict(bins=4))]
    outs = [(ad.tensor(a) * 1.0).histc(**kw) for a, kw in cases]
    data = [ad.tensor(a).histc(**kw) for a, kw in cases]
    half = ad.tensor(_HIST_DATA.astype(np.float16)).histc(6, -2, 2)
    ad.execute(device=device)
    for (a, kw), o, d in zip(cases, outs, data):
        want = torch.histc(torch.from_numpy(a), **kw).numpy()
        np.testing.assert_array_equal(o.numpy(), want)
        np.testing.assert_array_equal(d.numpy(), want)
    assert half.dtype == ad.float16
    np.testing.assert_array_equal(half.numpy(), torch.histc(
        torch.from_numpy(_HIST_DATA.astype(np.float16)), 6, -2, 2).numpy())


def test_histc_has_no_gradient():
    x = ad.tensor(np.float32([0.5, 1.5]), requires_grad=True)
    assert not x.histc(4).requires_grad
