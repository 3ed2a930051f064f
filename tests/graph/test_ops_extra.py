"""The small ops composed from existing ones (``deg2rad``, ``sinc``, ``erfc``, ``trace``,
``rot90``, ``take``, ``select``, ``tensor_split``, ``dist``, ``renorm``, ``matrix_power``,
...), the index updates (``index_copy``, ``index_put``, ``select_scatter``,
``slice_scatter``, ``diagonal_scatter``, ``fill_diagonal_``) and the metadata methods
(``is_leaf``, ``data``, ``detach_``, ``new_*``, ``type_as``, ``cpu``) against PyTorch:
values and gradients (also float64 finite differences) on random inputs on every device;
bad arguments raise PyTorch's exception type before anything runs."""
import numpy as np
import pytest
import torch

import autodiff as ad
from backends import device_params
from op_helper import check_op, check_program

CASES = [
    ("deg2rad", lambda L, a: L.deg2rad(a), [(3, 4)], {}),
    ("rad2deg", lambda L, a: a.rad2deg(), [(3, 4)], {}),
    ("sinc", lambda L, a: L.sinc(a), [(3, 4)], {}),
    ("erfc", lambda L, a: L.erfc(a), [(3, 4)], {"low": -3.0, "high": 3.0}),
    ("erfc_method", lambda L, a: (a * 2.0).erfc(), [(5,)], {}),
    ("trace", lambda L, a: L.trace(a), [(3, 4)], {}),
    ("trace_tall", lambda L, a: a.trace(), [(5, 2)], {}),
    ("rot90", lambda L, a: L.rot90(a, 1, (0, 2)), [(2, 3, 4)], {}),
    ("rot90_k3", lambda L, a: a.rot90(3, (1, 0)), [(2, 3)], {}),
    ("rot90_k-2", lambda L, a: a.rot90(-2), [(2, 3)], {}),
    ("rot90_k4", lambda L, a: L.rot90(a, 4, [-1, -2]) * 2.0, [(2, 3)], {}),
    ("take", lambda L, a: L.take(a, L.tensor([[0, -1], [5, 3]])), [(2, 3)], {}),
    ("take_0d_index", lambda L, a: a.take(L.tensor(-2)), [(2, 3)], {}),
    ("select", lambda L, a: L.select(a, 1, -1), [(2, 3, 4)], {}),
    ("select_first", lambda L, a: a.select(0, 1) * 3.0, [(2, 3)], {}),
    ("ravel", lambda L, a: L.ravel(a.t()), [(3, 4)], {}),
    ("tensor_split_sections", lambda L, a: L.tensor_split(a, 3, 1)[1] * 2.0, [(2, 7)], {}),
    ("tensor_split_indices", lambda L, a: L.cat(a.tensor_split([1, 5, 10, 3]), 0), [(7,)],
     {}),
    ("tensor_split_negative", lambda L, a: a.tensor_split((-2,), dim=-1)[0], [(3, 4)], {}),
    ("dist", lambda L, a, b: L.dist(a, b), [(3, 4), (4,)], {}),
    ("dist_p1", lambda L, a, b: a.dist(b, 1), [(3, 4), (3, 4)], {}),
    ("dist_p3", lambda L, a, b: a.dist(b, 3), [(3, 4), (3, 4)], {}),
    ("dist_inf", lambda L, a, b: L.dist(a, b, float("inf")), [(3, 4), (3, 4)], {}),
    ("renorm", lambda L, a: L.renorm(a, 2, 0, 1.5), [(3, 4)], {}),
    ("renorm_p1_dim1", lambda L, a: a.renorm(1, 1, 2.0), [(3, 4, 2)], {}),
    ("renorm_inf", lambda L, a: a.renorm(float("inf"), -1, 1.0), [(3, 4)], {}),
    ("matrix_power", lambda L, a: L.matrix_power(a, 5), [(2, 3, 3)],
     {"low": -0.8, "high": 0.8, "margin": 0.0}),
    ("matrix_power_1", lambda L, a: a.matrix_power(1) * 2.0, [(3, 3)], {}),
    ("matrix_power_0", lambda L, a: L.matrix_power(a, 0) + a, [(2, 3, 3)], {}),
    ("matrix_power_6", lambda L, a: a.matrix_power(6), [(4, 4)],
     {"low": -0.6, "high": 0.6, "margin": 0.0}),
    ("index_copy", lambda L, a, s: L.index_copy(a, 1, L.tensor([2, 0]), s),
     [(3, 4), (3, 2)], {}),
    ("index_copy_dim0", lambda L, a, s: a.index_copy(0, L.tensor([1]), s), [(3, 4), (1, 4)],
     {}),
    ("index_put", lambda L, a, v: L.index_put(a, (L.tensor([0, 2]), L.tensor([1, -1])), v),
     [(3, 4), (2,)], {}),
    ("index_put_rows", lambda L, a, v: a.index_put([L.tensor([2, 0])], v), [(3, 4), (4,)],
     {}),
    ("index_put_accumulate", lambda L, a, v: a.index_put((L.tensor([0, 2, 0]),), v,
                                                         accumulate=True),
     [(3, 4), (3, 4)], {}),
    ("index_put_accumulate_2d", lambda L, a, v: L.index_put(
        a, (L.tensor([1, 1, 0]), L.tensor([3, 3, -4])), v, True), [(2, 4), ()], {}),
    ("index_put_known_mask", lambda L, a, v: a.index_put(
        (L.tensor([True, False, True]),), v), [(3, 2), (2,)], {}),
    ("select_scatter", lambda L, a, s: L.select_scatter(a, s, 1, 2), [(3, 4), (3,)], {}),
    ("select_scatter_neg", lambda L, a, s: a.select_scatter(s, 0, -1), [(3, 4), (4,)], {}),
    ("slice_scatter", lambda L, a, s: L.slice_scatter(a, s, 1, 0, None, 2), [(3, 4), (3, 2)],
     {}),
    ("slice_scatter_default", lambda L, a, s: a.slice_scatter(s, start=1), [(3, 4), (2, 4)],
     {}),
    ("diagonal_scatter", lambda L, a, s: L.diagonal_scatter(a, s, 1), [(3, 4), (3,)], {}),
    ("diagonal_scatter_neg", lambda L, a, s: a.diagonal_scatter(s, -1, 2, 0),
     [(4, 2, 3), (2, 2)], {}),
    ("diagonal_scatter_wide", lambda L, a, s: a.diagonal_scatter(s), [(2, 5), (2,)], {}),
]


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("name,fn,shapes,kw", CASES, ids=[c[0] for c in CASES])
def test_op_against_torch(name, fn, shapes, kw, device):
    check_op(shapes, lambda *xs: fn(torch, *xs), lambda *xs: fn(ad, *xs), device=device, **kw)


# -- elementwise details ---------------------------------------------------------------------
@pytest.mark.parametrize("device", device_params())
def test_erfc_accuracy_against_float64(device):
    """``erfc`` stays within 1e-4 relative of the exact value where ``1 - erf`` in float32
    loses every digit (the docstring's claim: below 3e-6 up to 5, 3e-5 up to 9.5)."""
    x = np.concatenate([np.linspace(-5, 9.5, 2001), [0.0, 1e-8, -1e-8, 12.0, -12.0]])
    x = x.astype(np.float32)
    got = ad.tensor(x).erfc()
    ad.execute(device=device)
    exact = torch.special.erfc(torch.from_numpy(x).double()).numpy()
    ours = got.numpy().astype(np.float64)
    small = np.abs(x) <= 5
    rel = np.abs(ours - exact) / exact
    assert rel[small].max() < 3e-6
    assert rel[(x > 5) & (x <= 9.5)].max() < 3e-5
    np.testing.assert_allclose(ours, exact, rtol=1e-4, atol=1e-44)
    one_minus = (1 - torch.erf(torch.from_numpy(x))).double().numpy()   # what it replaces
    at3 = np.argmin(np.abs(x - 3.0))
    assert abs(one_minus[at3] - exact[at3]) / exact[at3] > 1e-4


def test_erfc_dtypes_nan_and_gradient_at_large_x():
    x16 = ad.tensor(np.float16([0.5, 2.0]))
    xi = ad.tensor([0, 1, 3])
    xn = ad.tensor(np.float32([np.nan, np.inf, -np.inf]))
    a = ad.tensor(np.float32([4.0, -6.0]), requires_grad=True)
    outs = [x16.erfc(), xi.erfc(), xn.erfc()]
    a.erfc().sum().backward()
    g = a.grad
    ad.execute(device="numpy")
    assert outs[0].dtype == ad.float16 and outs[1].dtype == ad.float32
    np.testing.assert_allclose(outs[0].numpy(), torch.tensor([0.5, 2.0]).half().erfc(),
                               rtol=1e-3)
    np.testing.assert_allclose(outs[1].numpy(), torch.erfc(torch.tensor([0, 1, 3])),
                               rtol=1e-5)
    got = outs[2].numpy()
    assert np.isnan(got[0]) and got[1] == 0 and got[2] == 2
    t = torch.tensor([4.0, -6.0], requires_grad=True)
    torch.erfc(t).sum().backward()
    np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-30)


def test_sinc_at_zero_and_integer_inputs():
    x = ad.tensor(np.float32([0.0, 0.5, -2.0]), requires_grad=True)
    y = x.sinc()
    y.sum().backward()
    g = x.grad
    i = ad.sinc(ad.tensor([0, 1, 2]))
    ad.execute(device="numpy")
    t = torch.tensor([0.0, 0.5, -2.0], requires_grad=True)
    torch.sinc(t).sum().backward()
    np.testing.assert_allclose(y.numpy(), torch.sinc(t).detach().numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert g.numpy()[0] == 0
    assert i.dtype == ad.float32
    np.testing.assert_allclose(i.numpy(), torch.sinc(torch.tensor([0, 1, 2])), atol=1e-6)


def test_signbit_and_heaviside_like_torch():
    f = np.float32([-1.5, -0.0, 0.0, 2.0, -np.inf, np.inf])
    ints = np.array([-3, 0, 4], np.int64)
    vals = np.float32([0.25])
    outs = [ad.signbit(ad.tensor(f)), ad.tensor(ints).signbit(),
            ad.tensor([True, False]).signbit(),
            ad.heaviside(ad.tensor(f), ad.tensor(vals)),
            ad.tensor(ints).heaviside(ad.tensor(7)),
            ad.tensor(np.float32([[-1.0], [0.0]])).heaviside(ad.tensor(np.float32([1, 2, 3])))]
    ad.execute(device="numpy")
    want = [torch.signbit(torch.from_numpy(f)), torch.from_numpy(ints).signbit(),
            torch.tensor([True, False]).signbit(),
            torch.heaviside(torch.from_numpy(f), torch.from_numpy(vals)),
            torch.from_numpy(ints).heaviside(torch.tensor(7)),
            torch.tensor([[-1.0], [0.0]]).heaviside(torch.tensor([1.0, 2, 3]))]
    for o, w in zip(outs, want):
        assert o.numpy().dtype == w.numpy().dtype or (o.dtype == ad.int64 and
                                                      w.dtype == torch.int64)
        np.testing.assert_array_equal(o.numpy(), w.numpy())
    with pytest.raises(TypeError):
        ad.tensor(f).heaviside(0.5)
    with pytest.raises(RuntimeError, match="different dtypes"):
        ad.tensor(ints).heaviside(ad.tensor(np.float32(1)))


def test_angle_conversions_of_integers_and_inplace_forms():
    x = ad.tensor([180, 90])
    r, d = ad.deg2rad(x), ad.rad2deg(ad.tensor([True]))
    v = ad.tensor(np.float32([30.0, 45.0]))
    v.deg2rad_()
    ad.execute(device="numpy")
    np.testing.assert_allclose(r.numpy(), torch.deg2rad(torch.tensor([180, 90])), rtol=1e-6)
    np.testing.assert_allclose(d.numpy(), torch.rad2deg(torch.tensor([True])), rtol=1e-6)
    np.testing.assert_allclose(v.numpy(), np.deg2rad([30.0, 45.0]), rtol=1e-6)
    with pytest.raises(RuntimeError):
        ad.tensor([1, 2]).deg2rad_()          # float result into an int tensor


# -- shapes, products --------------------------------------------------------------------------
def test_tensor_split_like_torch():
    x = np.arange(2 * 7, dtype=np.float32).reshape(2, 7)
    args = [(3, 1), (7, 1), (9, -1), ([1, 5, 10, 3], 1), ((0,), 0), ([], 1), ([-3, 6], 1)]
    ours = [ad.tensor(x).tensor_split(a, dim=d) for a, d in args]
    ours.append(ad.tensor_split(ad.tensor(x), ad.tensor(4), 1))
    ours.append(ad.tensor(x).tensor_split(ad.tensor([2, 4]), dim=1))
    ad.execute(device="numpy")
    t = torch.from_numpy(x)
    theirs = [t.tensor_split(a, dim=d) for a, d in args]
    theirs.append(torch.tensor_split(t, torch.tensor(4), 1))
    theirs.append(t.tensor_split(torch.tensor([2, 4]), dim=1))
    for o, w in zip(ours, theirs):
        assert len(o) == len(w)
        for a, b in zip(o, w):
            assert a.shape == tuple(b.shape)
            np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_tensor_split_pieces_are_views():
    x = ad.tensor(np.zeros((2, 5), np.float32))
    y = x * 1.0
    a, b = y.tensor_split(2, dim=1)
    b.add_(1.0)
    ad.execute(device="numpy")
    np.testing.assert_array_equal(y.numpy(), [[0, 0, 0, 1, 1], [0, 0, 0, 1, 1]])


def test_integer_trace_and_matrix_power_keep_exact_integers():
    m = np.array([[1, 2], [3, 4]], np.int64)
    tr, p = ad.tensor(m).trace(), ad.matrix_power(ad.tensor(m), 7)
    tb = ad.tensor(np.ones((3, 3), bool)).trace()
    ad.execute(device="numpy")
    assert tr.dtype == ad.int64 and tb.dtype == ad.int64 and p.dtype == ad.int64
    assert int(tr.numpy()) == 5 and int(tb.numpy()) == 3
    np.testing.assert_array_equal(p.numpy(), torch.matrix_power(torch.from_numpy(m), 7))


@pytest.mark.parametrize("call,exc", [
    (lambda x: x.matrix_power(-1), RuntimeError),        # singular: torch's LinAlgError
    (lambda x: x[0].matrix_power(2), RuntimeError),
    (lambda x: x[:, :2].matrix_power(2), RuntimeError),
    (lambda x: x[0].trace(), RuntimeError),
    (lambda x: x.rot90(1, (0,)), RuntimeError),
    (lambda x: x.rot90(1, (1, 1)), RuntimeError),
    (lambda x: x[0].rot90(), RuntimeError),
    (lambda x: x.select(1, 3), IndexError),
    (lambda x: x.sum().select(0, 0), IndexError),
    (lambda x: x.take(ad.tensor([9])), IndexError),
    (lambda x: x.take(ad.tensor([-10])), IndexError),
    (lambda x: x.take(ad.tensor([0.5])), RuntimeError),
    (lambda x: x.tensor_split(0), RuntimeError),
    (lambda x: x.sum().tensor_split(2), RuntimeError),
    (lambda x: x.tensor_split(ad.tensor([1.0])), RuntimeError),
    (lambda x: x.tensor_split(ad.tensor([1]) * 2), RuntimeError),
    (lambda x: x.renorm(2, 0, -1.0), RuntimeError),
    (lambda x: x.renorm(0, 0, 1.0), RuntimeError),
    (lambda x: x[0].renorm(2, 0, 1.0), RuntimeError),
    (lambda x: x.int().dist(x.int()), RuntimeError),
], ids=["mpow_negative_singular", "mpow_1d", "mpow_not_square", "trace_1d", "rot90_one_dim",
        "rot90_same_dims", "rot90_1d", "select_range", "select_0d", "take_range",
        "take_negative_range", "take_float", "split_zero", "split_0d", "split_float_tensor",
        "split_traced", "renorm_maxnorm", "renorm_p", "renorm_1d", "dist_int"])
def test_bad_arguments_raise_like_torch(call, exc):
    x = ad.tensor(np.ones((3, 3), np.float32))
    with pytest.raises(exc):
        call(x)


# -- index updates -----------------------------------------------------------------------------
@pytest.mark.parametrize("device", device_params())
def test_index_updates_on_integers(device):
    x = np.arange(12).reshape(3, 4)
    ix = ad.tensor([2, 0])
    outs = [ad.tensor(x).index_copy(1, ix, ad.tensor([[7, 8]] * 3)),
            ad.tensor(x).index_put((ix, ad.tensor([1, 3])), ad.tensor([-5, -6])),
            ad.tensor(x).index_put((ix,), ad.tensor(100), accumulate=True),
            ad.tensor(x).select_scatter(ad.tensor([9, 9, 9, 9]), 0, 1),
            ad.tensor(x).diagonal_scatter(ad.tensor([0, 0, 0]))]
    ad.execute(device=device)
    t, tix = torch.from_numpy(x), torch.tensor([2, 0])
    want = [t.index_copy(1, tix, torch.tensor([[7, 8]] * 3)),
            t.index_put((tix, torch.tensor([1, 3])), torch.tensor([-5, -6])),
            t.index_put((tix,), torch.tensor(100), accumulate=True),
            t.select_scatter(torch.tensor([9, 9, 9, 9]), 0, 1),
            t.diagonal_scatter(torch.tensor([0, 0, 0]))]
    for o, w in zip(outs, want):
        assert o.dtype == ad.int64
        np.testing.assert_array_equal(o.numpy(), w.numpy())


def _inplace_index_program(L, x0):
    w = L.tensor(x0, requires_grad=True)
    a = w * 2.0
    a.index_copy_(0, L.tensor([1]), L.tensor([[5.0, 6.0, 7.0]]))
    b = w * 1.0
    b.index_put_((L.tensor([0, 0, 2]), L.tensor([1, 1, 0])), L.tensor(3.0), accumulate=True)
    c = w * 3.0
    c[1:].fill_diagonal_(-1.0)                   # through a view, as in PyTorch
    d = w * 1.5 + 0.5
    d.renorm_(2, 0, 1.0)
    (a.sum() + (b * b).sum() + (c * w).sum() + d.sum()).backward()
    return [a, b, c, d], w


def test_inplace_index_updates_against_torch():
    x0 = np.random.default_rng(2).uniform(-1, 1, (3, 3)).astype(np.float32)
    check_program(_inplace_index_program, x0, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,wrap", [((3, 3), False), ((4, 6), False), ((6, 4), False),
                                        ((7, 3), True), ((8, 3), True), ((4, 3), True),
                                        ((3, 5), True), ((3, 3, 3), False),
                                        ((2, 2, 2, 2), True)])
def test_fill_diagonal_like_torch(shape, wrap):
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    ours = ad.tensor(x) * 1.0
    ours.fill_diagonal_(-1.0, wrap=wrap)
    v = ad.tensor(x.astype(np.int64))              # a variable, written in place
    v.fill_diagonal_(2.7, wrap)
    ad.execute(device="numpy")
    want = torch.from_numpy(x.copy()).fill_diagonal_(-1.0, wrap=wrap)
    np.testing.assert_array_equal(ours.numpy(), want.numpy())
    wi = torch.from_numpy(x.astype(np.int64)).fill_diagonal_(2.7, wrap)
    np.testing.assert_array_equal(v.numpy(), wi.numpy())


def test_fill_diagonal_errors():
    with pytest.raises(RuntimeError, match="larger than 1"):
        ad.tensor(np.ones(3, np.float32)).fill_diagonal_(0.0)
    with pytest.raises(RuntimeError, match="equal length"):
        ad.tensor(np.ones((2, 3, 3), np.float32)).fill_diagonal_(0.0)


def test_index_copy_and_index_put_errors():
    x = ad.tensor(np.ones((3, 4), np.float32))
    with pytest.raises(IndexError):
        x.index_copy(0, ad.tensor([3]), ad.tensor(np.ones((1, 4), np.float32)))
    with pytest.raises(IndexError):
        x.index_copy(0, ad.tensor([-1]), ad.tensor(np.ones((1, 4), np.float32)))
    with pytest.raises(RuntimeError, match="same dtype"):
        x.index_copy(0, ad.tensor([0]), ad.tensor(np.ones((1, 4), np.int64)))
    with pytest.raises(RuntimeError):
        x.index_copy(0, ad.tensor([0]), ad.tensor(np.ones((2, 4), np.float32)))
    with pytest.raises(RuntimeError, match="dtypes match"):
        x.index_put((ad.tensor([0]),), ad.tensor(2))
    with pytest.raises(TypeError):
        x.index_put(ad.tensor([0]), ad.tensor(np.float32(2)))
    with pytest.raises(RuntimeError, match="src size"):
        x.select_scatter(ad.tensor(np.ones(3, np.float32)), 0, 0)
    with pytest.raises(RuntimeError, match="src size"):
        x.slice_scatter(ad.tensor(np.ones((3, 1), np.float32)), 1, 0, 2)
    with pytest.raises(RuntimeError, match="src size"):
        x.diagonal_scatter(ad.tensor(np.ones(4, np.float32)))


def test_traced_index_out_of_range_stops_the_run():
    x = ad.tensor(np.ones((3, 4), np.float32))
    i = ad.tensor([1]) * 3                          # traced: 3, out of range
    y = x.index_copy(0, i, ad.tensor(np.ones((1, 4), np.float32)))
    with pytest.raises(IndexError):
        ad.execute(device="numpy")
    del y


def test_index_put_with_a_traced_mask_and_one_value():
    x0 = np.float32([[1, -2], [-3, 4], [5, -6]])
    x = ad.tensor(x0)
    rows = (x.sum(1) > 0)                                    # traced bool [3]
    a = x.index_put((rows,), ad.tensor(np.float32(0)))
    b = x.index_put((x < 0,), ad.tensor(np.float32(9)), accumulate=True)
    ad.execute(device="numpy")
    t = torch.from_numpy(x0)
    np.testing.assert_array_equal(a.numpy(), t.index_put((t.sum(1) > 0,), torch.tensor(0.0)))
    np.testing.assert_array_equal(b.numpy(), t.index_put((t < 0,), torch.tensor(9.0), True))
    with pytest.raises(RuntimeError, match="index_put.*traced bool mask"):
        x.index_put((x < 0,), ad.tensor(np.float32([1, 2, 3])))


# -- metadata ----------------------------------------------------------------------------------
def test_counts_and_leaves_like_torch():
    w = ad.tensor(np.ones((2, 3), np.float32), requires_grad=True)
    c = ad.tensor(np.ones(2, np.float32))
    assert w.nelement() == 6 and w.ndimension() == 2 and ad.tensor(1.0).ndimension() == 0
    assert w.is_leaf and c.is_leaf
    assert not (w * 2).is_leaf and (c * 2).is_leaf and (w * 2).detach().is_leaf
    assert (w * 2).data.is_leaf and not (w * 2).data.requires_grad
    with ad.no_grad():
        assert (w * 2).is_leaf


def test_data_updates_without_a_gradient_like_torch():
    """``p.data.add_()`` outside ``no_grad`` updates the parameter (the old optimizer
    idiom); ``x.data = v`` too; a computed tensor's ``.data`` update keeps its gradient
    path."""
    def program(L, x0):
        p = L.tensor(x0, requires_grad=True)
        p.data.mul_(2.0)
        p.data.add_(L.tensor(np.float32([1.0, 1.0, 1.0])))
        q = p * p
        q.data.add_(10.0)                       # value changes, gradient still 2p
        d = p.data
        r = (q * p).sum() + (d * p).sum()       # d: a constant copy of p
        r.backward()
        return [q, r], p
    x0 = np.float32([0.5, -1.0, 2.0])
    check_program(program, x0)
    p = ad.tensor(x0, requires_grad=True)
    p.data = ad.tensor(np.float32([4.0, 5.0, 6.0]))
    ad.execute(device="numpy")
    np.testing.assert_array_equal(p.numpy(), [4.0, 5.0, 6.0])
    assert p.requires_grad
    with pytest.raises(RuntimeError, match="shape or dtype"):
        p.data = ad.tensor(np.float32([1.0]))


def test_detach_inplace():
    w = ad.tensor(np.float32([1.0, 2.0]), requires_grad=True)
    y = w * 3.0
    y.detach_()
    assert not y.requires_grad and y.is_leaf
    z = (y * w).sum()
    z.backward()
    g = w.grad
    v = ad.tensor(np.float32([1.0]), requires_grad=True)
    assert v.detach_() is v and not v.requires_grad
    ad.execute(device="numpy")
    np.testing.assert_array_equal(y.numpy(), [3.0, 6.0])
    np.testing.assert_array_equal(g.numpy(), [3.0, 6.0])       # y is a constant now
    with pytest.raises(RuntimeError, match="views in-place"):
        (w * 2.0)[0:1].detach_()


def test_type_as_cpu_cuda_and_new_tensors_like_torch():
    xi = ad.tensor(np.array([1, 2], np.int64))
    xf = ad.tensor(np.float32([1.5, 2.0]), requires_grad=True)
    ti, tf = torch.tensor([1, 2]), torch.tensor([1.5, 2.0])
    assert xf.cpu() is xf and xf.cuda() is xf and xf.cuda(0) is xf
    pairs = [(xf.type_as(xi), tf.type_as(ti)), (xi.type_as(xf), ti.type_as(tf)),
             (xi.new_tensor([1.5, -2.7]), ti.new_tensor([1.5, -2.7])),
             (xf.new_tensor([1, 2]), tf.new_tensor([1, 2])),
             (xf.new_tensor([1, 2], dtype=ad.int32), tf.new_tensor([1, 2], dtype=torch.int32)),
             (xi.new_full((2, 3), 2.5), ti.new_full((2, 3), 2.5)),
             (xf.new_full([2], 7, dtype=ad.int64), tf.new_full([2], 7, dtype=torch.int64)),
             (xf.new_zeros(2, 3), tf.new_zeros(2, 3)), (xi.new_ones((3,)), ti.new_ones((3,))),
             (xf.new_empty(0, 2), tf.new_empty(0, 2)),
             (xf.new_zeros((1, 2), dtype=ad.bool), tf.new_zeros((1, 2), dtype=torch.bool))]
    grad_new = xf.new_ones(2, requires_grad=True)
    assert grad_new.requires_grad and grad_new.is_leaf
    assert not xf.new_zeros(2).requires_grad
    ad.execute(device="numpy")
    for o, w in pairs:
        assert o.dtype.name == str(w.dtype).replace("torch.", "") and o.shape == tuple(w.shape)
        np.testing.assert_array_equal(o.numpy(), w.numpy())


def test_new_tensors_inside_a_loop_are_fresh_every_iteration():
    x = ad.tensor(np.float32([1.0, 2.0]))
    seen = []

    def body():
        buf = x.new_zeros(2)
        buf.add_(x)                        # PyTorch: a new buffer in every iteration
        ad.Receiver(lambda v: seen.append(v.copy()), [buf])
    ad.ir_for(range(3), body)
    ad.execute(device="numpy")
    for v in seen:
        np.testing.assert_array_equal(v, [1.0, 2.0])


def test_new_tensor_of_a_traced_tensor_is_its_detached_value():
    w = ad.tensor(np.float32([1.0, 2.0]), requires_grad=True)
    y = w.new_tensor(w * 2.0)
    assert not y.requires_grad
    ad.execute(device="numpy")
    np.testing.assert_array_equal(y.numpy(), [2.0, 4.0])


NEW_FUNCTIONS = ["deg2rad", "rad2deg", "sinc", "signbit", "heaviside", "erfc", "ravel",
                 "select", "rot90", "tensor_split", "take", "trace", "dist", "renorm",
                 "matrix_power", "index_copy", "index_put", "select_scatter", "slice_scatter",
                 "diagonal_scatter", "bernoulli", "nonzero", "argwhere", "masked_select",
                 "unique", "unique_consecutive", "bincount", "histc"]
NEW_METHODS = NEW_FUNCTIONS + [
    "nelement", "ndimension", "detach_", "type_as", "cpu", "cuda", "new_zeros", "new_ones",
    "new_full", "new_empty", "new_tensor", "index_copy_", "index_put_", "fill_diagonal_",
    "renorm_", "erfc_", "sinc_", "deg2rad_", "rad2deg_", "heaviside_", "uniform_", "normal_",
    "bernoulli_", "exponential_", "log_normal_", "cauchy_", "geometric_", "random_"]


def test_names_exist_as_in_torch():
    for name in NEW_FUNCTIONS:
        assert hasattr(torch, name), name
        assert callable(getattr(ad, name, None)) and name in ad.__all__, name
    for name in NEW_METHODS:
        assert hasattr(torch.Tensor, name), name
        assert callable(getattr(ad.Tensor, name, None)), name
        assert getattr(ad.Tensor, name).__doc__, name
    for name in ("is_leaf", "data"):
        assert isinstance(getattr(ad.Tensor, name), property) and \
            getattr(ad.Tensor, name).__doc__
