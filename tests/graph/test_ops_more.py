"""``kron``, ``cross``, ``index_fill``, ``masked_scatter``, ``median``/``nanmedian``,
``kthvalue``, ``quantile``/``nanquantile``, ``cdist``, the in-place shape changes (``t_``,
``transpose_``, ``squeeze_``, ``unsqueeze_``) and ``clamp``'s gradient at NaN against PyTorch:
values and gradients (also float64 finite differences) on random inputs, on every device;
NaN, ties and zero distances against PyTorch's own conventions; bad arguments raise
PyTorch's exception type before anything runs."""
import warnings

import numpy as np
import pytest
import torch

import autodiff as ad
from backends import device_params
from op_helper import check_op, check_program

_MASK = np.random.default_rng(1).uniform(size=(3, 4)) > 0.5           # 7 true


def _q(L, a, values):
    """A q tensor of ``a``'s dtype (PyTorch requires it; the finite differences are float64)."""
    return L.tensor(values, dtype=a.dtype)


CASES = [
    ("kron", lambda L, a, b: L.kron(a, b), [(2, 3), (4, 2)], {}),
    ("kron_ranks", lambda L, a, b: a.kron(b), [(3,), (2, 2, 2)], {}),
    ("kron_0d", lambda L, a, b: L.kron(a, b), [(), (2, 3)], {}),
    ("cross", lambda L, a, b: L.cross(a, b, dim=1), [(4, 3), (4, 3)], {}),
    ("cross_broadcast", lambda L, a, b: a.cross(b, dim=0), [(3, 5), (3, 1)], {}),
    ("cross_last", lambda L, a, b: a.cross(b, dim=-1), [(2, 4, 3), (1, 4, 3)], {}),
    ("index_fill", lambda L, a: a.index_fill(1, L.tensor([0, 2, -1]), -1.5), [(3, 4)], {}),
    ("index_fill_value_grad", lambda L, a, v: L.index_fill(a, 0, L.tensor([1, 1]), v),
     [(3, 4), ()], {}),
    ("index_fill_0d_index", lambda L, a: a.index_fill(-1, L.tensor(2), 0.25), [(2, 3, 4)], {}),
    ("masked_scatter", lambda L, a, s: a.masked_scatter(L.tensor(_MASK), s), [(3, 4), (9,)],
     {}),
    ("masked_scatter_broadcast", lambda L, a, s: L.masked_scatter(a, L.tensor(_MASK[0]), s),
     [(3, 4), (2, 7)], {}),
    ("median", lambda L, a: a.median(), [(3, 5)], {}),
    ("median_dim", lambda L, a: a.median(1).values, [(3, 5)], {}),
    ("median_dim_keepdim", lambda L, a: L.median(a, 0, keepdim=True)[0], [(4, 3)], {}),
    ("median_indices", lambda L, a: a.median(1).indices, [(3, 6)], {"forward_only": True}),
    ("nanmedian", lambda L, a: L.nanmedian(a), [(4, 4)], {}),
    ("nanmedian_dim", lambda L, a: a.nanmedian(-1).values, [(3, 6)], {}),
    ("kthvalue", lambda L, a: a.kthvalue(2, 0).values, [(4, 3)], {}),
    ("kthvalue_keepdim", lambda L, a: L.kthvalue(a, 5, keepdim=True).values, [(2, 3, 5)], {}),
    ("kthvalue_indices", lambda L, a: L.kthvalue(a, 3).indices, [(2, 5)],
     {"forward_only": True}),
    ("quantile", lambda L, a: a.quantile(0.3, dim=1), [(3, 6)], {}),
    ("quantile_all", lambda L, a: L.quantile(a, 0.7), [(3, 6)], {}),
    ("quantile_all_keepdim", lambda L, a: a.quantile(0.45, keepdim=True), [(2, 3, 2)], {}),
    ("quantile_tensor_q", lambda L, a: a.quantile(_q(L, a, [0.1, 0.5, 0.95]), dim=0,
                                                  keepdim=True), [(5, 3)], {}),
    ("nanquantile", lambda L, a: L.nanquantile(a, _q(L, a, [0.2, 0.9]), dim=1), [(2, 5)], {}),
    # ranks 0.5, 1.5, 2.5, 3.5: "nearest" rounds halves to even (0, 2, 2, 4), as PyTorch
    ("quantile_nearest_halves", lambda L, a: a.quantile(
        _q(L, a, [0.125, 0.375, 0.625, 0.875]), dim=1, interpolation="nearest"), [(2, 5)], {}),
] + [
    (f"quantile_{mode}", (lambda mode: lambda L, a: a.quantile(
        _q(L, a, [0.1, 0.3, 0.5, 0.85]), dim=1, interpolation=mode))(mode), [(3, 7)], {})
    for mode in ("linear", "lower", "higher", "midpoint", "nearest")
] + [
    (f"cdist_p{p}", (lambda p: lambda L, a, b: L.cdist(a, b, p=p))(p), [(2, 4, 3), (2, 5, 3)],
     {}) for p in (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, float("inf"))
] + [
    ("cdist_2d", lambda L, a, b: L.cdist(a, b), [(4, 3), (5, 3)], {}),
    ("cdist_batch_broadcast", lambda L, a, b: L.cdist(a, b, 1.0), [(2, 1, 4, 3), (3, 5, 3)],
     {}),
    # more than 25 rows: PyTorch (and autodiff) switch to the matmul form
    ("cdist_matmul_form", lambda L, a, b: L.cdist(a, b), [(30, 3), (5, 3)], {"fd": False}),
    ("cdist_matmul_forced", lambda L, a, b: L.cdist(a, b, compute_mode="use_mm_for_euclid_dist"),
     [(4, 3), (5, 3)], {}),
    ("cdist_direct_forced", lambda L, a, b: L.cdist(
        a, b, compute_mode="donot_use_mm_for_euclid_dist"), [(27, 2), (3, 2)], {"fd": False}),
]


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("name,fn,shapes,kw", CASES, ids=[c[0] for c in CASES])
def test_op_against_torch(name, fn, shapes, kw, device):
    check_op(shapes, lambda *xs: fn(torch, *xs), lambda *xs: fn(ad, *xs), device=device, **kw)


@pytest.mark.parametrize("device", device_params())
def test_quantile_gradient_reaches_q(device):
    """PyTorch's ``q`` gets a gradient through the linear weights (ranks away from
    integers, so that the finite differences see no jump)."""
    x = np.random.default_rng(3).uniform(-2, 2, (3, 6)).astype(np.float32)
    q = np.float32([0.13, 0.47, 0.81])                          # ranks 0.65, 2.35, 4.05
    check_op(None, lambda a, b: a.quantile(b, dim=1), inputs=[x, q], device=device)
    check_op(None, lambda a, b: a.nanquantile(b), inputs=[x, q], device=device)


def _both(fn, x, grad_of=None):
    """``fn`` on ``ad`` and on ``torch`` for input ``x``: (ours, theirs) as numpy, values
    then (with ``grad_of``: the output selected by it, backward with ones) the gradient."""
    a = ad.tensor(x, requires_grad=grad_of is not None)
    out = fn(ad, a)
    outs = list(out) if isinstance(out, tuple) else [out]
    if grad_of is not None:
        grad_of(out).sum().backward()
    g = a.grad
    ad.execute(device="numpy")
    t = torch.tensor(x, requires_grad=grad_of is not None)
    ref = fn(torch, t)
    refs = list(ref) if isinstance(ref, tuple) else [ref]
    if grad_of is not None:
        grad_of(ref).sum().backward()
    ours = [o.numpy() for o in outs] + ([g.numpy()] if grad_of is not None else [])
    theirs = [r.detach().numpy() for r in refs] + ([t.grad.numpy()] if grad_of is not None
                                                   else [])
    return ours, theirs


def _assert_same(ours, theirs):
    for o, r in zip(ours, theirs):
        assert o.shape == r.shape
        np.testing.assert_allclose(o.astype(np.float64), r.astype(np.float64), rtol=1e-6,
                                   atol=1e-6)


_NAN = np.float32([[0.7, np.nan, -1.3, 2.1, np.nan, 0.2],
                   [1.1, -0.4, 0.9, -2.2, 1.7, 0.3],
                   [np.nan, np.nan, np.nan, np.nan, np.nan, np.nan],
                   [-0.6, 1.4, np.inf, np.nan, -1.9, np.inf]])


@pytest.mark.parametrize("fn,rows", [
    (lambda L, x: x.median(1), [0, 1, 2, 3]),
    (lambda L, x: x.nanmedian(1), [0, 1, 3]),
    (lambda L, x: L.kthvalue(x, 4, 1), [0, 1, 3]),
    (lambda L, x: x.kthvalue(6, -1, True), [1, 3]),
    (lambda L, x: x.nanmedian(1, keepdim=True), [0, 1, 3]),
], ids=["median", "nanmedian", "kthvalue", "kthvalue_last", "nanmedian_keepdim"])
def test_nan_rows_like_torch(fn, rows):
    """NaN sorts after +inf: ``median`` gives NaN at the first NaN, ``nanmedian`` skips them,
    ``kthvalue`` counts them largest; the gradient goes to the element at the index. (Which
    NaN's index PyTorch returns when a NaN among several is picked, an all-NaN row for
    ``nanmedian`` or ``kthvalue``'s k-th of two NaNs, is unspecified: its selection's
    comparator is inconsistent for NaN pairs. Autodiff's is the stable order's: index 0 for
    an all-NaN ``nanmedian`` row.)"""
    ours, theirs = _both(fn, _NAN[rows], grad_of=lambda r: r[0].nan_to_num())
    _assert_same(ours, theirs)
    if 2 not in rows:                                           # the all-NaN row: NaN
        got = fn(ad, ad.tensor(_NAN))
        ad.execute(device="numpy")
        assert np.isnan(got.values.numpy()[2]).all()


@pytest.mark.parametrize("fn", [
    lambda L, x: x.quantile(0.4, dim=1),
    lambda L, x: x.nanquantile(0.4, dim=1, interpolation="nearest"),
    lambda L, x: L.nanquantile(x, L.tensor([0.1, 0.75]), dim=1, interpolation="midpoint"),
], ids=["quantile", "nanquantile_nearest", "nanquantile_midpoint"])
def test_quantile_nan_like_torch(fn):
    ours, theirs = _both(fn, _NAN[[0, 1, 3]], grad_of=lambda r: r.nan_to_num())
    _assert_same(ours, theirs)


@pytest.mark.parametrize("x", [
    np.float32([0.5, -1.25, 0.5, 3.0, 0.5, -2.0]),           # median 0.5 three times
    np.float32([2.0, -np.inf, -np.inf, 5.0]),                  # median -inf twice
    np.float32([1.5, np.nan, 0.25, np.nan]),                   # NaN: shared by the NaNs
], ids=["finite", "minus_inf", "nan"])
def test_whole_median_shares_the_gradient_among_ties(x):
    """``median()`` of every element is PyTorch's ``evenly_distribute_backward``."""
    ours, theirs = _both(lambda L, t: t.median(), x, grad_of=lambda r: r)
    _assert_same(ours, theirs)
    ours, theirs = _both(lambda L, t: t.nanmedian(), x, grad_of=lambda r: r)
    _assert_same(ours, theirs)


def test_median_kthvalue_of_integers_and_empty():
    x = np.array([[7, -3, 5, 5, 0], [2, 9, -4, 1, 8]], np.int64)
    for fn in (lambda L, t: t.median(1), lambda L, t: t.kthvalue(2, 1),
               lambda L, t: t.median(), lambda L, t: t.nanmedian(0)):
        ours, theirs = _both(fn, x)
        for o, r in zip(ours, theirs):
            np.testing.assert_array_equal(o, r)
    ours, theirs = _both(lambda L, t: t.median(), np.zeros((0, 3), np.float32))
    assert np.isnan(ours[0]) and np.isnan(theirs[0])


def test_cross_without_dim_warns_and_takes_the_first_dim_of_size_3():
    rng = np.random.default_rng(5)
    a, b = rng.uniform(-2, 2, (2, 3, 3)).astype(np.float32), \
        rng.uniform(-2, 2, (2, 3, 3)).astype(np.float32)
    with pytest.warns(UserWarning, match="without specifying the dim"):
        out = ad.cross(ad.tensor(a), ad.tensor(b))
    ad.execute(device="numpy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = torch.cross(torch.tensor(a), torch.tensor(b))
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("p", [0.5, 1.0, 2.0, 3.0, float("inf")])
@pytest.mark.parametrize("rows", [4, 30], ids=["direct", "matmul"])
def test_cdist_zero_distance_gradient_like_torch(p, rows):
    """``cdist(x, x)``: distances of 0 on the diagonal, where PyTorch's gradient is 0
    (``sqrt``'s and ``pow``'s would be inf or NaN)."""
    x = np.random.default_rng(6).uniform(-2, 2, (rows, 3)).astype(np.float32)
    ours, theirs = _both(lambda L, t: L.cdist(t, t, p=p), x, grad_of=lambda r: r * r)
    assert np.isfinite(ours[1]).all()
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-4, atol=1e-4)


def test_cdist_inf_ties_each_get_the_whole_gradient():
    """p=inf: PyTorch gives every feature tied for the largest difference the full
    gradient (``amax`` would share it)."""
    x1 = np.float32([[0.0, 1.0, 3.0], [2.0, -1.0, 0.5]])
    x2 = np.float32([[2.0, 3.0, 1.0], [0.5, 2.5, -1.0]])
    a, b = ad.tensor(x1, requires_grad=True), ad.tensor(x2, requires_grad=True)
    ad.cdist(a, b, p=float("inf")).sum().backward()
    ga, gb = a.grad, b.grad
    ad.execute(device="numpy")
    ta, tb = torch.tensor(x1, requires_grad=True), torch.tensor(x2, requires_grad=True)
    torch.cdist(ta, tb, p=float("inf")).sum().backward()
    np.testing.assert_allclose(ga.numpy(), ta.grad.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(gb.numpy(), tb.grad.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("fn", [
    lambda x: x.clamp(-0.5, 0.5),
    lambda x: x.clamp(min=0.1),
    lambda x: x.clip(max=0.2),
    lambda x: x.clamp(x * 0.0 - 0.5, x * 0.0 + 0.5),
], ids=["both", "min", "max", "tensor_bounds"])
def test_clamp_gradient_at_nan_input_is_zero_like_torch(fn):
    x = np.float32([np.nan, -0.9, 0.3, np.nan, 0.7])
    ours, theirs = _both(lambda L, t: fn(t), x, grad_of=lambda r: r.nan_to_num())
    np.testing.assert_array_equal(ours[1], theirs[1])
    np.testing.assert_array_equal(ours[0], theirs[0])


def _inplace_program(L, x, s):
    t = L.tensor(x, requires_grad=True)
    y = t * 1.0
    y.index_fill_(1, L.tensor([3, 0]), 0.75)
    y[1].masked_scatter_(L.tensor(_MASK[0]), L.tensor(s, dtype=y.dtype) * t[2, :3].sum())
    w = L.tensor(x.copy())                                  # a variable: ASSIGN
    w.index_fill_(0, L.tensor([-1]), -2.5)
    w.masked_scatter_(L.tensor(_MASK), L.tensor(s[:7].copy()))
    loss = (y * y).sum()
    loss.backward()
    return [y, w, loss], t


@pytest.mark.parametrize("device", device_params())
def test_index_fill_and_masked_scatter_in_place(device):
    rng = np.random.default_rng(7)
    x = rng.uniform(-2, 2, (3, 4)).astype(np.float32)
    s = rng.uniform(-2, 2, (8,)).astype(np.float32)
    check_program(_inplace_program, x, s, device=device, rtol=1e-5, atol=1e-5)


def _relayout_program(L, x):
    t = L.tensor(x, requires_grad=True)
    y = t * 1.0
    v = y[0]                      # a view taken before y's shape changes
    y.t_()
    v.add_(10.0)                  # still reaches y (transposed now)
    y.mul_(L.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)))
    z = t * 2.0
    w = z[1]
    w.unsqueeze_(0)               # a view whose shape changes stays a view
    w.mul_(3.0)
    w.squeeze_()
    w.sub_(1.0)
    u = z.transpose(0, 1)
    u.transpose_(0, 1)
    u[0].add_(100.0)
    q = (t * 3.0).unsqueeze(0).unsqueeze(2)
    q.squeeze_(0)
    q.swapdims_(0, 1)
    q.swapaxes_(1, 2)
    loss = (y * y).sum() + (z * z).sum() + (q * q).sum()
    loss.backward()
    return [y, z, w, u, q, loss], t


@pytest.mark.parametrize("device", device_params())
def test_shape_changing_in_place_ops_like_torch(device):
    x = np.random.default_rng(8).uniform(-1, 1, (3, 4)).astype(np.float32)
    check_program(_relayout_program, x, device=device, rtol=1e-5, atol=1e-4)   # shapes too


def test_shape_changing_in_place_on_a_variable_raises():
    """A variable's shape is fixed (PyTorch allows ``t_()`` on a leaf without grad)."""
    w = ad.tensor(np.float32([[1.0, 2.0, 3.0]]))
    with pytest.raises(RuntimeError, match=r"t_\(\).*\[1, 3\]"):
        w.t_()
    with pytest.raises(RuntimeError, match="unsqueeze_"):
        w.unsqueeze_(0)
    assert w.shape == (1, 3)


_X = np.random.default_rng(9).uniform(-2, 2, (3, 4)).astype(np.float32)


def _t(L, a=_X):
    return L.tensor(a)


# (name, call on torch or ad, exception type, words the message must name)
ERRORS = [
    ("kthvalue_k", lambda L: _t(L).kthvalue(5, 1), RuntimeError, r"kthvalue.*\[3, 4\]"),
    ("kthvalue_k0", lambda L: _t(L).kthvalue(0), RuntimeError, "kthvalue"),
    ("kthvalue_dim", lambda L: _t(L).kthvalue(1, 2), IndexError, "range"),
    ("median_empty_dim", lambda L: _t(L, np.zeros((2, 0), np.float32)).median(1), IndexError,
     r"median.*\[2, 0\]"),
    ("nanmedian_empty_dim", lambda L: L.nanmedian(_t(L, np.zeros((0, 2), np.float32)), 0),
     IndexError, "nanmedian"),
    ("quantile_q_range", lambda L: _t(L).quantile(1.5), RuntimeError, r"quantile.*\[0, 1\]"),
    ("quantile_q_tensor_range", lambda L: _t(L).quantile(L.tensor([0.5, -0.1])), RuntimeError,
     "quantile"),
    ("quantile_q_rank", lambda L: _t(L).quantile(L.tensor([[0.5]])), RuntimeError, "1D"),
    ("quantile_q_dtype", lambda L: _t(L).quantile(L.tensor([0.5], dtype=L.float16)),
     RuntimeError, "dtype"),
    ("quantile_interpolation", lambda L: _t(L).quantile(0.5, interpolation="cubic"),
     RuntimeError, "interpolation"),
    ("quantile_empty", lambda L: L.quantile(_t(L, np.zeros(0, np.float32)), 0.5), RuntimeError,
     "non-empty"),
    ("quantile_int", lambda L: L.tensor([1, 2, 3]).quantile(0.5), RuntimeError, "float"),
    ("quantile_list", lambda L: _t(L).quantile([0.5]), TypeError, "quantile"),
    ("nanquantile_q_range", lambda L: _t(L).nanquantile(-0.5), RuntimeError, "nanquantile"),
    ("cross_no_size_3", lambda L: L.cross(_t(L, _X[:2]), _t(L, _X[:2])), RuntimeError,
     "size 3"),
    ("cross_dim_size", lambda L: _t(L).cross(_t(L), dim=1), RuntimeError,
     r"cross.*length 3.*4 and 4"),
    ("cross_ranks", lambda L: L.cross(_t(L, _X[:, :3]), _t(L, _X[0, :3]), dim=-1),
     RuntimeError, "same number of dimensions"),
    ("cross_broadcast", lambda L: L.cross(_t(L, _X[:, :3]), _t(L, _X[:2, :3]), dim=1),
     RuntimeError, "cross"),
    ("cdist_rank", lambda L: L.cdist(_t(L, _X[0]), _t(L, _X[1])), RuntimeError, "2D"),
    ("cdist_columns", lambda L: L.cdist(_t(L), _t(L, _X[:, :3])), RuntimeError,
     r"columns.*X1: 4 X2: 3"),
    ("cdist_p", lambda L: L.cdist(_t(L), _t(L), p=-1.0), RuntimeError, "non-negative"),
    ("cdist_int", lambda L: L.cdist(L.tensor([[1, 2]]), L.tensor([[1, 2]])), RuntimeError,
     "floating"),
    ("cdist_batch", lambda L: L.cdist(_t(L, np.ones((2, 2, 3), np.float32) * _X[0, :3]),
                                      _t(L, np.ones((3, 2, 3), np.float32) * _X[1, :3])),
     RuntimeError, "cdist"),
    ("cdist_mode", lambda L: L.cdist(_t(L), _t(L), compute_mode="fast"), ValueError, "fast"),
    ("index_fill_float_index", lambda L: _t(L).index_fill(1, L.tensor([0.0]), 1.0),
     IndexError, "index_fill"),
    ("index_fill_index_rank", lambda L: _t(L).index_fill(1, L.tensor([[0]]), 1.0),
     RuntimeError, r"index_fill.*\[1, 1\]"),
    ("index_fill_value_rank", lambda L: _t(L).index_fill(1, L.tensor([0]), L.tensor([1.0])),
     RuntimeError, "0-dimensional"),
    ("index_fill_out_of_range", lambda L: _t(L).index_fill(1, L.tensor([4]), 1.0),
     IndexError, "4"),
    ("index_fill_negative_out_of_range", lambda L: _t(L).index_fill(0, L.tensor([-4]), 1.0),
     IndexError, "-4"),
    ("index_fill_dim", lambda L: _t(L).index_fill(2, L.tensor([0]), 1.0), IndexError, "range"),
    ("index_fill_list", lambda L: _t(L).index_fill(0, [0], 1.0), TypeError, "index"),
    ("masked_scatter_float_mask", lambda L: _t(L).masked_scatter((_t(L) > 0).float(), _t(L)),
     RuntimeError, "boolean"),
    ("masked_scatter_dtype", lambda L: _t(L).masked_scatter(L.tensor(_MASK),
                                                            L.tensor(np.arange(12))),
     RuntimeError, "same dtypes"),
    ("masked_scatter_small_source", lambda L: _t(L).masked_scatter(L.tensor(_MASK), _t(L)[0]),
     RuntimeError, "Number of elements of source"),
    ("masked_scatter_shapes", lambda L: _t(L).masked_scatter(L.tensor(_MASK[:2, :3]), _t(L)),
     RuntimeError, "masked_scatter"),
]


@pytest.mark.parametrize("name,call,exc,words", ERRORS, ids=[e[0] for e in ERRORS])
def test_bad_arguments_raise_torchs_exception_type(name, call, exc, words):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(exc):
            call(torch)
        with pytest.raises(exc, match=words):
            call(ad)
