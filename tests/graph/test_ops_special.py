"""The special functions composed from existing ops (``lgamma``, ``digamma``, ``polygamma``,
``erfinv``, ``mvlgamma``, ``i0`` and ``autodiff.special``: ``gammaln``, ``psi``, ``i0e``,
``i1``, ``i1e``, ``ndtr``, ``ndtri``, ``log_ndtr``, ``entr``, ``xlogy``, ``xlog1py``,
``multigammaln``) against PyTorch: values and gradients (also float64 finite differences)
on random inputs on every device, PyTorch's special values (poles, ``±inf``, NaN), dtypes,
in-place forms, errors, and the accuracy against float64 PyTorch over wide grids (the
bounds are the measured maxima, rounded up; the docstrings state them)."""
import math

import numpy as np
import pytest
import torch

import autodiff as ad
from backends import device_params
from op_helper import check_op

NEG_INTS = (0.0, -1.0, -2.0, -3.0)          # poles of the gamma family, kept 0.1 away

CASES = [
    ("lgamma", lambda L, a: L.lgamma(a), {"low": 0.05, "high": 6.0}),
    ("lgamma_neg", lambda L, a: a.lgamma(), {"low": -3.9, "high": 0.5, "avoid": NEG_INTS}),
    ("digamma", lambda L, a: L.digamma(a), {"low": 0.2, "high": 9.0}),
    ("digamma_neg", lambda L, a: a.digamma(), {"low": -3.9, "high": 0.5, "avoid": NEG_INTS}),
    ("polygamma1", lambda L, a: L.polygamma(1, a), {"low": 0.2, "high": 9.0}),
    ("polygamma2_neg", lambda L, a: a.polygamma(2),
     {"low": -2.9, "high": 3.0, "avoid": NEG_INTS, "margin": 0.15}),
    ("polygamma3", lambda L, a: L.polygamma(3, a), {"low": 0.3, "high": 5.0}),
    ("polygamma0", lambda L, a: L.polygamma(0, a), {"low": 0.2, "high": 5.0}),
    ("erfinv", lambda L, a: L.erfinv(a), {"low": -0.95, "high": 0.95, "margin": 0.0}),
    ("mvlgamma", lambda L, a: L.mvlgamma(a, 3), {"low": 1.2, "high": 6.0}),
    ("i0", lambda L, a: L.i0(a), {"low": -10.0, "high": 10.0}),
    ("special_gammaln", lambda L, a: L.special.gammaln(a), {"low": 0.3, "high": 4.0}),
    ("special_psi", lambda L, a: L.special.psi(a), {"low": 0.3, "high": 4.0}),
    ("special_multigammaln", lambda L, a: L.special.multigammaln(a, 2),
     {"low": 0.8, "high": 4.0}),
    ("special_i0e", lambda L, a: L.special.i0e(a), {"low": -12.0, "high": 12.0}),
    ("special_i1", lambda L, a: L.special.i1(a), {"low": -10.0, "high": 10.0}),
    ("special_i1e", lambda L, a: L.special.i1e(a), {"low": -12.0, "high": 12.0}),
    ("special_ndtr", lambda L, a: L.special.ndtr(a), {"low": -5.0, "high": 5.0}),
    ("special_ndtri", lambda L, a: L.special.ndtri(a),
     {"low": 0.02, "high": 0.98, "margin": 0.0}),
    ("special_log_ndtr", lambda L, a: L.special.log_ndtr(a), {"low": -20.0, "high": 5.0}),
    ("special_entr", lambda L, a: L.special.entr(a), {"low": 0.05, "high": 3.0}),
]
BINARY_CASES = [
    ("xlogy", lambda L, a, b: L.xlogy(a, b.abs() + 0.1), {}),
    ("special_xlogy", lambda L, a, b: L.special.xlogy(a, b.abs() + 0.1), {}),
    ("special_xlog1py", lambda L, a, b: L.special.xlog1py(a, b.abs() * 2.0 - 0.9), {}),
]


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("name,fn,kw", CASES, ids=[c[0] for c in CASES])
def test_op_against_torch(name, fn, kw, device):
    check_op([(3, 5)], lambda a: fn(torch, a), lambda a: fn(ad, a), device=device, **kw)


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("name,fn,kw", BINARY_CASES, ids=[c[0] for c in BINARY_CASES])
def test_binary_op_against_torch(name, fn, kw, device):
    check_op([(3, 4), (4,)], lambda a, b: fn(torch, a, b), lambda a, b: fn(ad, a, b),
             device=device, **kw)


def test_gradients_near_poles_and_in_the_tails_against_torch():
    """Gradients where they are large or tiny (near poles, tails), against float32 torch."""
    pts = {
        "lgamma": (np.float32([-2.99, -0.01, 0.01, 30.0, 1e4]), lambda L, t: L.lgamma(t)),
        "digamma": (np.float32([-1.02, -0.03, 0.03, 50.0, 1e3]), lambda L, t: L.digamma(t)),
        "polygamma2": (np.float32([-1.9, -0.05, 0.05, 40.0]),
                       lambda L, t: L.polygamma(2, t)),
        "erfinv": (np.float32([-0.999, 0.9999, 1e-6]), lambda L, t: L.erfinv(t)),
        "i0": (np.float32([-30.0, 1e-3, 8.0, 8.01, 60.0]), lambda L, t: L.i0(t)),
        "ndtri": (np.float32([1e-6, 0.999, 0.5]), lambda L, t: L.special.ndtri(t)),
        "log_ndtr": (np.float32([-30.0, -8.0, 6.0]), lambda L, t: L.special.log_ndtr(t)),
    }
    ours = {}
    for name, (x, f) in pts.items():
        t = ad.tensor(x, requires_grad=True)
        f(ad, t).sum().backward()
        ours[name] = t.grad
    ad.execute(device="numpy")
    for name, (x, f) in pts.items():
        t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        f(torch, t).sum().backward()
        np.testing.assert_allclose(ours[name].numpy(), t.grad.numpy(), rtol=2e-5, atol=1e-30,
                                   err_msg=name)


# -- special values ----------------------------------------------------------------------------
_X = np.float32([0.0, -0.0, -1.0, -2.0, 1.0, 2.0, -0.5, np.inf, -np.inf, np.nan, 1e-30,
                 -1e-30, 1e30, -3e7])
SPECIAL = [
    ("lgamma", _X, lambda L, t: L.lgamma(t)),
    ("digamma", _X, lambda L, t: L.digamma(t)),
    ("polygamma2", _X, lambda L, t: L.polygamma(2, t)),
    ("polygamma3", _X, lambda L, t: L.polygamma(3, t)),
    ("polygamma1", np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 1e30, 2.0]),
     lambda L, t: L.polygamma(1, t)),
    ("erfinv", np.float32([-1.0, 1.0, 0.0, -0.0, 1.5, -1.5, np.nan, 0.5, -np.inf]),
     lambda L, t: L.erfinv(t)),
    ("i0", _X, lambda L, t: L.i0(t)),
    ("i0e", _X, lambda L, t: L.special.i0e(t)),
    ("i1", _X, lambda L, t: L.special.i1(t)),
    ("i1e", _X, lambda L, t: L.special.i1e(t)),
    ("entr", _X, lambda L, t: L.special.entr(t)),
    ("ndtr", _X, lambda L, t: L.special.ndtr(t)),
    ("ndtri", np.float32([0.0, 1.0, 0.5, -0.1, 1.1, np.nan, 1e-40, np.inf]),
     lambda L, t: L.special.ndtri(t)),
    ("log_ndtr", _X, lambda L, t: L.special.log_ndtr(t)),
]


@pytest.mark.parametrize("device", device_params())
def test_special_values_like_torch(device):
    """Poles, ``±0``, ``±inf``, NaN, tiny and huge inputs: PyTorch's values (``inf`` where
    it gives ``inf``, with its sign; NaN where NaN)."""
    outs = [f(ad, ad.tensor(x)) for _, x, f in SPECIAL]
    ad.execute(device=device)
    for (name, x, f), o in zip(SPECIAL, outs):
        want = f(torch, torch.from_numpy(x)).numpy()
        got = o.numpy()
        assert got.dtype == np.float32, name
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=f"{name} {x}")
        np.testing.assert_array_equal(np.isinf(got), np.isinf(want), err_msg=f"{name} {x}")
        fin = np.isfinite(want)
        np.testing.assert_array_equal(np.sign(got[~fin & ~np.isnan(want)]),
                                      np.sign(want[~fin & ~np.isnan(want)]), err_msg=name)
        np.testing.assert_allclose(got[fin], want[fin], rtol=1e-5, atol=1e-6, err_msg=name)


def test_documented_differences_from_torch():
    """``polygamma(1, x)`` is ``+inf`` at every pole (PyTorch gives a large finite value at
    the negative integers, from its rounded ``sin``); gradients at poles are 0 (PyTorch:
    ``±inf`` or NaN). ``mvlgamma`` below its domain is PyTorch's formula (PyTorch 2.13 no
    longer raises there)."""
    p1 = ad.polygamma(1, ad.tensor(np.float32([-1.0, -2.0, -3e7])))
    xm = np.float32([0.4, 0.5, 0.6, -0.3, -1.0, 2.0])
    mv = ad.mvlgamma(ad.tensor(xm), 2)
    x = ad.tensor(np.float32([0.0, -1.0, 2.5]), requires_grad=True)
    x.lgamma().sum().backward()
    g = x.grad
    ad.execute(device="numpy")
    assert np.all(p1.numpy() == np.inf)
    assert torch.all(torch.polygamma(1, torch.tensor([-1.0, -2.0])) > 1e13)
    np.testing.assert_allclose(mv.numpy(), torch.mvlgamma(torch.from_numpy(xm), 2), rtol=1e-5)
    np.testing.assert_allclose(g.numpy(), [0.0, 0.0, torch.digamma(torch.tensor(2.5))],
                               rtol=1e-5)
    t = torch.tensor([0.0, -1.0], requires_grad=True)
    torch.lgamma(t).sum().backward()
    assert torch.isinf(t.grad[0]) and torch.isnan(t.grad[1])


# -- dtypes, in-place forms, errors, names -----------------------------------------------------
def test_integer_bool_and_half_inputs():
    ints = np.array([1, 2, 3, 7], np.int64)
    outs = {
        "lgamma": ad.tensor(ints).lgamma(), "digamma": ad.digamma(ad.tensor(ints)),
        "polygamma": ad.polygamma(2, ad.tensor(ints)), "i0": ad.i0(ad.tensor(ints)),
        "mvlgamma": ad.tensor(ints + 1).mvlgamma(2), "entr": ad.special.entr(ad.tensor(ints)),
        "ndtr": ad.special.ndtr(ad.tensor(ints)), "erfinv": ad.tensor([True, False]).erfinv(),
        "xlog1py": ad.special.xlog1py(ad.tensor(ints), ad.tensor(ints)),
    }
    half = ad.tensor(np.float16([0.5, 2.5, 7.0])).lgamma()
    bf = ad.tensor(np.float32([0.3, -0.6]), dtype="bfloat16").erfinv()
    ad.execute(device="numpy")
    ti = torch.from_numpy(ints)
    want = {"lgamma": ti.lgamma(), "digamma": ti.digamma(), "polygamma": torch.polygamma(2, ti),
            "i0": torch.i0(ti), "mvlgamma": torch.mvlgamma(ti + 1, 2),
            "entr": torch.special.entr(ti), "ndtr": torch.special.ndtr(ti),
            "erfinv": torch.tensor([True, False]).erfinv(),
            "xlog1py": torch.special.xlog1py(ti, ti)}
    for k, o in outs.items():
        assert o.dtype == ad.float32 and want[k].dtype == torch.float32, k
        np.testing.assert_allclose(o.numpy(), want[k].numpy(), rtol=1e-5, atol=1e-6,
                                   err_msg=k)
    th = torch.tensor([0.5, 2.5, 7.0]).half().lgamma()
    assert half.dtype == ad.float16
    np.testing.assert_array_equal(half.numpy(), th.numpy())
    tb = torch.tensor([0.3, -0.6]).bfloat16().erfinv()
    assert bf.dtype == ad.bfloat16
    np.testing.assert_array_equal(bf.numpy().astype(np.float32), tb.float().numpy())


def test_inplace_forms_like_torch():
    x = np.float32([0.3, 1.7, 4.2])
    names = [("lgamma_", ()), ("digamma_", ()), ("polygamma_", (2,)), ("erfinv_", ()),
             ("mvlgamma_", (2,)), ("i0_", ()), ("xlogy_", (np.float32(2.5),))]
    ours = []
    for name, args in names:
        v = ad.tensor(x if name != "erfinv_" else x / 5)
        r = getattr(v, name)(*args)
        assert r is v
        ours.append(v)
    ad.execute(device="numpy")
    for (name, args), o in zip(names, ours):
        t = torch.from_numpy(x if name != "erfinv_" else x / 5).clone()
        getattr(t, name)(*args)
        np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
    with pytest.raises(RuntimeError):
        ad.tensor([1, 2]).lgamma_()           # float result into an int tensor
    with pytest.raises(RuntimeError):
        torch.tensor([1, 2]).lgamma_()


@pytest.mark.parametrize("call,exc", [
    (lambda x: x.polygamma(-1), RuntimeError),
    (lambda x: ad.polygamma(-2, x), RuntimeError),
    (lambda x: x.polygamma(1.5), TypeError),
    (lambda x: x.mvlgamma(0), RuntimeError),
    (lambda x: ad.special.multigammaln(x, -1), RuntimeError),
    (lambda x: x.mvlgamma(2.0), TypeError),
], ids=["polygamma_negative", "polygamma_fn_negative", "polygamma_float", "mvlgamma_p0",
        "multigammaln_negative", "mvlgamma_float"])
def test_bad_arguments_raise_like_torch(call, exc):
    x = ad.tensor(np.float32([1.5, 2.5]))
    with pytest.raises(exc):
        call(x)
    t = torch.tensor([1.5, 2.5])
    tcall = {"polygamma_negative": lambda: t.polygamma(-1),
             "mvlgamma_p0": lambda: t.mvlgamma(0)}
    for f in tcall.values():
        with pytest.raises(RuntimeError):
            f()


FUNCTIONS = ["lgamma", "digamma", "polygamma", "erfinv", "mvlgamma", "i0", "xlogy"]
METHODS = ["lgamma", "digamma", "polygamma", "erfinv", "mvlgamma", "i0", "lgamma_",
           "digamma_", "polygamma_", "erfinv_", "mvlgamma_", "i0_", "xlogy", "xlogy_"]
SPECIAL_NAMES = ["gammaln", "digamma", "psi", "polygamma", "multigammaln", "erfinv", "i0",
                 "i0e", "i1", "i1e", "ndtr", "ndtri", "log_ndtr", "entr", "xlogy", "xlog1py"]


def test_names_exist_as_in_torch():
    for name in FUNCTIONS:
        assert hasattr(torch, name), name
        assert callable(getattr(ad, name, None)) and name in ad.__all__, name
    for name in METHODS:
        assert hasattr(torch.Tensor, name), name
        assert callable(getattr(ad.Tensor, name, None)), name
        assert getattr(ad.Tensor, name).__doc__, name
    assert "special" in ad.__all__
    for name in SPECIAL_NAMES:
        assert hasattr(torch.special, name), name
        f = getattr(ad.special, name, None)
        assert callable(f) and f.__doc__ and name in ad.special.__all__, name


# -- accuracy against float64 ------------------------------------------------------------------
def _away_from_integers(a, margin=1e-3):
    return a[np.abs(a - np.round(a)) > margin]


#: (name, function on either library, grid, floor): the maximum of ``|ours - exact| /
#: max(|exact|, floor)`` over the grid (float32 inputs, exact = float64 torch of them) must
#: stay below ``bound``; the measured maximum is in the comment
ACCURACY = [
    # lgamma: 8.2e-7 on (0, 60]; 2.1e-5 on [-30, 0) measured with floor 0.1 (the reflection's
    # float32 cancellation near its negative roots: absolute 2e-6 there)
    ("lgamma", lambda L, t: L.lgamma(t), np.linspace(1e-3, 60, 6001), 1.0, 1e-6),
    ("lgamma_neg", lambda L, t: L.lgamma(t), _away_from_integers(np.linspace(-30, 0, 6001)),
     0.1, 3e-5),
    ("lgamma_big", lambda L, t: L.lgamma(t), np.geomspace(3, 1e36, 600), 0.0, 1e-6),
    # digamma: 7e-6 with floor 0.1 on [-30, 60] (both signs)
    ("digamma", lambda L, t: L.digamma(t), _away_from_integers(np.linspace(-30, 60, 9001)),
     0.1, 1e-5),
    # polygamma 1..4: 5.9e-7 on (0, 60], 3.6e-6 on [-10, 0)
    *[(f"polygamma{n}", lambda L, t, n=n: L.polygamma(n, t),
       np.linspace(1e-3, 60, 3001), 0.0, 1e-6) for n in (1, 2, 3, 4)],
    *[(f"polygamma{n}_neg", lambda L, t, n=n: L.polygamma(n, t),
       _away_from_integers(np.linspace(-10, -1e-3, 3001)), 0.0, 5e-6) for n in (1, 2, 3, 4)],
    # erfinv: 2.6e-7 on (-1, 1), tails to 1 - 6e-8 included
    ("erfinv", lambda L, t: L.erfinv(t),
     np.concatenate([np.linspace(-1, 1, 8001)[1:-1], 1 - np.geomspace(6e-8, 1e-2, 500)]),
     1e-30, 5e-7),
    # mvlgamma(p = 3): 5.1e-7 on (1.01, 40)
    ("mvlgamma", lambda L, t: L.mvlgamma(t, 3), np.linspace(1.01, 40, 4001), 0.1, 1e-6),
    # i0 3.7e-7 on [-85, 85]; i0e 2.6e-7 on [-100, 100]; i1 1.3e-6; i1e 1.2e-6
    ("i0", lambda L, t: L.i0(t), np.linspace(-85, 85, 4001), 0.0, 1e-6),
    ("i0e", lambda L, t: L.special.i0e(t), np.linspace(-100, 100, 4001), 0.0, 1e-6),
    ("i1", lambda L, t: L.special.i1(t), np.linspace(-85, 85, 4001), 1e-30, 2e-6),
    ("i1e", lambda L, t: L.special.i1e(t), np.linspace(-100, 100, 4001), 1e-30, 2e-6),
    # ndtr: 1.9e-5 on [-13, 8] (NR erfcc's 3e-5 far in the tail), 3e-6 on [-5, 8]
    ("ndtr", lambda L, t: L.special.ndtr(t), np.linspace(-13, 8, 4001), 0.0, 3e-5),
    ("ndtr_core", lambda L, t: L.special.ndtr(t), np.linspace(-5, 8, 4001), 0.0, 5e-6),
    # ndtri: 2.6e-7 for p in [1e-44, 1 - 6e-8]
    ("ndtri", lambda L, t: L.special.ndtri(t),
     np.concatenate([np.geomspace(1e-44, 0.5, 3000), 1 - np.geomspace(6e-8, 0.5, 3000)]),
     1e-30, 5e-7),
    # log_ndtr: 2.7e-7 on [-1000, 0]; 3.5e-7 absolute on [0, 10]
    ("log_ndtr", lambda L, t: L.special.log_ndtr(t), np.linspace(-1000, 0, 4001), 0.0, 5e-7),
    ("log_ndtr_pos", lambda L, t: L.special.log_ndtr(t), np.linspace(0, 10, 4001), 1.0, 5e-7),
    # entr: 1.7e-7 on (0, 50]
    ("entr", lambda L, t: L.special.entr(t), np.linspace(1e-3, 50, 4001), 1e-3, 5e-7),
]


@pytest.mark.parametrize("device", device_params())
def test_accuracy_against_float64(device):
    xs = [np.asarray(g, np.float32) for _, _, g, _, _ in ACCURACY]
    outs = [f(ad, ad.tensor(x)) for (_, f, _, _, _), x in zip(ACCURACY, xs)]
    ad.execute(device=device)
    for (name, f, _, floor, bound), x, o in zip(ACCURACY, xs, outs):
        exact = f(torch, torch.from_numpy(x).double()).numpy()
        if name in ("ndtr", "ndtr_core"):    # torch's ndtr, (1 + erf)/2, flushes to 0
            exact = (torch.special.erfc(-torch.from_numpy(x).double() / math.sqrt(2)) /
                     2).numpy()
        got = o.numpy().astype(np.float64)
        assert np.isfinite(got).all() and np.isfinite(exact).all(), name
        err = np.abs(got - exact) / np.maximum(np.abs(exact), floor)
        assert err.max() < bound, f"{name}: max relative error {err.max():.3g} at " \
                                  f"x = {x[np.argmax(err)]!r}"


def test_python_number_operands_of_xlogy_and_xlog1py():
    x = np.float32([0.5, 2.0, 0.0])
    t, tt = ad.tensor(x), torch.from_numpy(x)
    ours = [ad.special.xlog1py(2.0, t), ad.special.xlogy(2.0, t), ad.special.xlogy(t, 3.0),
            ad.special.xlog1py(t, 3.0)]
    ad.execute(device="numpy")
    want = [torch.special.xlog1py(2.0, tt), torch.special.xlogy(2.0, tt),
            torch.special.xlogy(tt, 3.0), torch.special.xlog1py(tt, 3.0)]
    for o, w in zip(ours, want):
        np.testing.assert_allclose(o.numpy(), w.numpy(), rtol=1e-6)
