"""NaN and infinities through reductions and scans, as PyTorch gives them (found by a
differential fuzz against torch: each case used to come out silently different)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from backends import device_params

NAN, INF = np.nan, np.inf


def _same(got, want):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))   # NaN == NaN here


@pytest.mark.parametrize("device", device_params())
def test_argmax_argmin_and_max_min_of_a_nan(device):
    """A NaN is the extreme: its index (the first NaN's), and NaN as the value (argmax of
    ``[1, nan, 2, 5]`` was 4, past the end)."""
    x = np.float32([[1.0, NAN, 2.0, 5.0], [3.0, 1.0, 2.0, 0.0], [NAN, 2.0, NAN, 1.0]])
    a, t = ad.tensor(x), torch.tensor(x)
    got = [a.argmax(), a.argmin(), a.argmax(1), a.argmin(1), a.argmax(0, keepdim=True),
           *a.max(1), *a.min(1)]
    ad.execute(device=device)
    want = [t.argmax(), t.argmin(), t.argmax(1), t.argmin(1), t.argmax(0, keepdim=True),
            *t.max(1), *t.min(1)]
    for g, w in zip(got, want):
        _same(g.numpy(), w.numpy())


@pytest.mark.parametrize("device", device_params())
def test_cummax_cummin_from_a_nan_on(device):
    """From a NaN on the running extreme is NaN at the last NaN's index (PyTorch)."""
    rows = [[1.0, NAN, 2.0, NAN, 5.0, 0.5, 7.0], [NAN, NAN, 1.0, 2.0, 0.0, 3.0, 1.0],
            [1.0, 1.0, NAN, 4.0, 4.0, -1.0, 2.0]]
    x = np.float32(rows)
    a, t = ad.tensor(x), torch.tensor(x)
    got = [*a.cummax(1), *a.cummin(1)]
    ad.execute(device=device)
    for g, w in zip(got, [*t.cummax(1), *t.cummin(1)]):
        _same(g.numpy(), w.numpy())


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("n", [6, 700])            # one doubling scan, and past 512
def test_cumsum_keeps_what_precedes_an_inf_or_nan(device, n):
    """``cumsum([1, inf, 2])`` is ``[1, inf, inf]`` (it was ``[nan, inf, inf]``: a product
    with a triangular ones matrix multiplied the inf by zeros)."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (3, n)).astype(np.float32)
    x[0, 1], x[1, n // 2], x[1, n - 2], x[2, 2] = INF, -INF, INF, NAN
    a = ad.tensor(x)
    c = a.cumsum(1)
    ad.execute(device=device)
    want = torch.tensor(x, dtype=torch.float64).cumsum(1).numpy()
    np.testing.assert_array_equal(np.isnan(c.numpy()), np.isnan(want))
    np.testing.assert_allclose(c.numpy(), want, rtol=1e-5, atol=1e-4)


def _both(fn, xs, device, grad=False):
    """``fn(lib, *tensors)`` on autodiff (``device``) and torch: values, and the inputs'
    gradients of the result's sum with ``grad``."""
    ts = [ad.tensor(x, requires_grad=grad) for x in xs]
    r = fn(ad, *ts)
    if grad:
        r.sum().backward()
        gs = [t.grad for t in ts]
    ad.execute(device=device)
    tt = [torch.tensor(x, requires_grad=grad) for x in xs]
    rt = fn(torch, *tt)
    if grad:
        rt.sum().backward()
    got = [r.numpy()] + ([g.numpy() for g in gs] if grad else [])
    want = [rt.detach().numpy()] + ([t.grad.numpy() for t in tt] if grad else [])
    return got, want


def _close(got, want):
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)      # NaN where NaN


@pytest.mark.parametrize("device", device_params())
def test_isclose_with_infinities(device):
    """An infinity is close only to itself (``isclose(0.5, inf)`` was True)."""
    a = np.float32([0.5, -INF, INF, 1.0, 1.0, NAN, 2.0])
    b = np.float32([INF, INF, INF, NAN, 1.0 + 1e-7, NAN, 2.1])
    got, want = _both(lambda L, x, y: x.isclose(y), [a, b], device)
    _same(got[0], want[0])


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("kw", ["min", "max"])
def test_clamp_with_a_nan_bound(device, kw):
    """A NaN bound gives NaN and no gradient to either side (it was ignored)."""
    x, b = np.float32([1.0, 2.0, 3.0, 0.5]), np.float32([NAN, 0.0, 5.0, 0.5])
    _close(*_both(lambda L, t, u: t.clamp(**{kw: u}), [x, b], device, grad=True))


@pytest.mark.parametrize("device", device_params())
def test_atan2_of_infinities_and_its_gradient(device):
    """``atan2(+-inf, +-inf)`` is the diagonal's angle (it was NaN)."""
    y = np.float32([-INF, INF, INF, -INF, 1.0, -2.0, 0.0, 3.0, 1.0])
    x = np.float32([-INF, INF, -INF, INF, INF, -INF, -1.0, 0.0, 2.0])
    _close(*_both(lambda L, a, b: a.atan2(b), [y, x], device))
    rng = np.random.default_rng(1)
    y, x = rng.uniform(-2, 2, (2, 5)).astype(np.float32)
    _close(*_both(lambda L, a, b: a.atan2(b), [y, x], device, grad=True))


@pytest.mark.parametrize("device", device_params())
def test_std_gradient_where_the_std_is_zero(device):
    """0 where the std is 0 (a constant row, one element without correction), as torch;
    it was NaN (``sqrt'(0) * 0``)."""
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, (3, 4)).astype(np.float32)
    x[1] = 0.75
    _close(*_both(lambda L, t: t.std(1), [x], device, grad=True))
    _close(*_both(lambda L, t: t.std(1, correction=0), [x[:, :1].copy()], device, grad=True))


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("op", ["fmax", "fmin"])
def test_fmax_fmin_ties_and_nans(device, op):
    """At a tie the gradient goes to ``self`` (torch; it was split in halves); a NaN
    operand is ignored."""
    a = np.float32([1.0, 2.0, NAN, 4.0, NAN, -1.5])
    b = np.float32([1.0, 3.0, 1.0, NAN, NAN, -1.5])
    _close(*_both(lambda L, x, y: getattr(x, op)(y), [a, b], device, grad=True))


def test_clamp_with_number_bounds_adds_no_nan_guard():
    """The NaN-bound guard is decided at trace time for a number: ``clamp(0.5, 2.5)`` is
    two selections, as before the guard (it runs every iteration in gradient clipping)."""
    ad.reset()
    x = ad.tensor(np.float32([1.0, 2.0, 3.0])) * 1.0
    x.clamp(0.5, 2.5)
    ops = [n.op.name for n in ad.graph.trace.TRACER.root.graph.nodes]
    assert ops.count("WHERE") == 2, ops
