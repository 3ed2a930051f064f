"""Random fills on a tensor (``uniform_``, ``normal_``, ``bernoulli``/``bernoulli_``,
``exponential_``, ``log_normal_``, ``cauchy_``, ``geometric_``, ``random_``): the
distributions (moments within a few standard errors and a Kolmogorov-Smirnov test over
20000 draws, frequencies for the discrete ones), new values in every loop iteration, the
same values on every device, parameters written in place under ``no_grad``, and PyTorch's
errors for bad arguments and dtypes."""
import math
import warnings

import numpy as np
import pytest
import torch
from scipy import stats

import autodiff as ad
from backends import device_params

N = 20000


def _draw(fill, dtype="float32", n=N, device="numpy"):
    """The values ``fill(x)`` writes into a fresh tensor ``x`` of ``n`` elements."""
    x = ad.tensor(np.zeros(n), dtype=dtype)
    out = fill(x)
    assert out is x
    ad.execute(device=device)
    return x.numpy()


def _moments(v, mean, var, sigmas=5.0):
    """Sample mean and variance within ``sigmas`` standard errors of ``mean`` and ``var``
    (the variance's standard error from the fourth moment of the sample)."""
    v = v.astype(np.float64)
    n = v.size
    assert abs(v.mean() - mean) < sigmas * math.sqrt(var / n), (v.mean(), mean)
    m4 = ((v - v.mean()) ** 4).mean()
    assert abs(v.var() - var) < sigmas * math.sqrt(max(m4 - var * var, 1e-12) / n), \
        (v.var(), var)


CONTINUOUS = [
    ("uniform", lambda x: x.uniform_(-2.0, 3.0, seed=1), stats.uniform(-2.0, 5.0)),
    ("uniform_from_kw", lambda x: x.uniform_(**{"from": 1.0, "to": 1.5}, seed=2),
     stats.uniform(1.0, 0.5)),
    ("normal", lambda x: x.normal_(1.5, 0.5, seed=3), stats.norm(1.5, 0.5)),
    ("normal_default", lambda x: x.normal_(seed=4), stats.norm()),
    ("exponential", lambda x: x.exponential_(2.0, seed=5), stats.expon(scale=0.5)),
    ("log_normal", lambda x: x.log_normal_(0.5, 0.3, seed=6), stats.lognorm(0.3, scale=
                                                                             math.exp(0.5))),
    ("cauchy", lambda x: x.cauchy_(1.0, 2.0, seed=7), stats.cauchy(1.0, 2.0)),
]


@pytest.mark.parametrize("name,fill,dist", CONTINUOUS, ids=[c[0] for c in CONTINUOUS])
def test_continuous_fills_follow_their_distribution(name, fill, dist):
    v = _draw(fill)
    assert v.dtype == np.float32
    assert stats.kstest(v.astype(np.float64), dist.cdf).pvalue > 1e-3
    if name != "cauchy":                          # no moments
        _moments(v, dist.mean(), dist.var())
    if name.startswith("uniform"):
        lo, hi = dist.support()
        assert v.min() >= lo and v.max() < hi


def test_defaults_match_torch_defaults():
    """``log_normal_()`` is exp(N(1, 2^2)); ``uniform_()`` U[0, 1); ``exponential_()``
    rate 1 (moments of the logs, where the log-normal's own are too heavy-tailed)."""
    v = _draw(lambda x: x.log_normal_(seed=11))
    _moments(np.log(v), 1.0, 4.0)
    u = _draw(lambda x: x.uniform_(seed=12))
    assert u.min() >= 0 and u.max() < 1
    _moments(u, 0.5, 1 / 12)
    _moments(_draw(lambda x: x.exponential_(seed=13)), 1.0, 1.0)


DISCRETE = [
    ("bernoulli_", lambda x: x.bernoulli_(0.3, seed=21), "float32", {0: 0.7, 1: 0.3}),
    ("bernoulli_int", lambda x: x.bernoulli_(0.8, seed=22), "int64", {0: 0.2, 1: 0.8}),
    ("bernoulli_bool", lambda x: x.bernoulli_(seed=23), "bool", {False: 0.5, True: 0.5}),
    ("random_to", lambda x: x.random_(5, seed=24), "float32", {k: 0.2 for k in range(5)}),
    ("random_from_to", lambda x: x.random_(-3, 2, seed=25), "int32",
     {k: 0.2 for k in range(-3, 2)}),
    ("random_kw", lambda x: x.random_(**{"from": 7, "to": 10}), "int64",
     {k: 1 / 3 for k in range(7, 10)}),
    ("random_bool", lambda x: x.random_(seed=26), "bool", {False: 0.5, True: 0.5}),
    ("geometric", lambda x: x.geometric_(0.4, seed=27), "int64",
     {k: 0.4 * 0.6 ** (k - 1) for k in range(1, 9)}),
    ("geometric_float", lambda x: x.geometric_(0.9, seed=28), "float32",
     {1: 0.9, 2: 0.09, 3: 0.009}),
]


@pytest.mark.parametrize("name,fill,dtype,probs", DISCRETE, ids=[c[0] for c in DISCRETE])
def test_discrete_fills_follow_their_distribution(name, fill, dtype, probs):
    v = _draw(fill, dtype)
    assert v.dtype == ad.tensor(np.zeros(1), dtype=dtype).numpy().dtype
    if dtype != "bool":
        assert set(np.unique(v).tolist()) <= set(range(-10, 200))
    for k, p in probs.items():
        freq = float(np.mean(v == k))
        assert abs(freq - p) < 5 * math.sqrt(p * (1 - p) / N) + 1e-12, (k, freq, p)
    if name.startswith("geometric"):
        assert v.min() >= 1
        p = 0.4 if name == "geometric" else 0.9
        _moments(v, 1 / p, (1 - p) / p ** 2)
    if name.startswith("random") and dtype != "bool":
        assert set(np.unique(v).tolist()) == set(probs)


@pytest.mark.parametrize("dtype,top", [("float32", 2 ** 24), ("float16", 2 ** 11),
                                       ("int32", 2 ** 31 - 1), ("int64", 2 ** 31 - 1)])
def test_random_without_bounds_spans_the_dtype(dtype, top):
    v = _draw(lambda x: x.random_(seed=31), dtype).astype(np.float64)
    assert v.min() >= 0 and v.max() <= top
    _moments(v, top / 2, (top + 1) ** 2 / 12, sigmas=6)
    assert np.all(v == np.round(v))


def test_random_to_none_and_large_ranges():
    v = _draw(lambda x: x.random_(**{"from": 2 ** 31 - 4}, seed=32), "int32")
    assert set(np.unique(v).tolist()) == {2 ** 31 - 4, 2 ** 31 - 3, 2 ** 31 - 2, 2 ** 31 - 1}
    w = _draw(lambda x: x.random_(-2 ** 31, 0, seed=33), "int32").astype(np.float64)
    assert w.min() >= -2 ** 31 and w.max() < 0
    _moments(w, -2 ** 30, 2 ** 62 / 12, sigmas=6)


def test_bernoulli_out_of_place():
    p = np.random.default_rng(0).uniform(0, 1, N).astype(np.float32)
    p[:10] = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    x = ad.tensor(p)
    b, c = x.bernoulli(seed=41), ad.bernoulli(x, 0.25, seed=42)
    h = ad.tensor(p.astype(np.float16)).bernoulli(seed=43)
    ad.execute(device="numpy")
    bv = b.numpy()
    assert b.dtype == ad.float32 and h.dtype == ad.float16
    np.testing.assert_array_equal(bv[:10], p[:10])          # probabilities 0 and 1
    # sum of independent Bernoulli(p_i): mean sum p, variance sum p (1 - p)
    assert abs(bv.sum() - p.sum()) < 5 * math.sqrt((p * (1 - p)).sum())
    assert abs(c.numpy().mean() - 0.25) < 5 * math.sqrt(0.25 * 0.75 / N)
    assert set(np.unique(c.numpy()).tolist()) == {0.0, 1.0} and x.numpy() is not None


def test_bernoulli_inplace_with_a_tensor_of_probabilities():
    p = np.float32([0.0, 1.0, 0.5])
    x = ad.tensor(np.zeros((N, 3), np.float32))
    x.bernoulli_(ad.tensor(p), seed=44)
    ad.execute(device="numpy")
    m = x.numpy().mean(0)
    assert m[0] == 0 and m[1] == 1 and abs(m[2] - 0.5) < 5 * math.sqrt(0.25 / N)


def _fills():
    return [lambda x: x.uniform_(), lambda x: x.normal_(), lambda x: x.exponential_(),
            lambda x: x.log_normal_(), lambda x: x.cauchy_(), lambda x: x.geometric_(0.5),
            lambda x: x.bernoulli_(), lambda x: x.random_(100), lambda x: x.bernoulli()]


def test_every_loop_iteration_draws_new_values():
    x = ad.tensor(np.zeros(1000, np.float32))
    seen = []

    def body():
        outs = []
        for fill in _fills():
            y = x + 0.5
            r = fill(y)
            outs.append(r)
        ad.Receiver(lambda *vs: seen.append([v.copy() for v in vs]), outs)
    ad.ir_for(range(2), body)
    ad.execute(device="numpy")
    first, second = seen
    for a, b in zip(first, second):
        assert not np.array_equal(a, b)
    for k, a in enumerate(first):                      # and different calls, different keys
        for b in first[k + 1:]:
            assert not np.array_equal(a, b)


def test_a_parameter_is_filled_in_place_under_no_grad():
    w = ad.tensor(np.zeros((50, 40), np.float32), requires_grad=True)
    with ad.no_grad():
        w.normal_(0.0, 0.02, seed=51)
    y = (w * 2.0).sum()
    y.backward()
    g = w.grad
    ad.execute(device="numpy")
    v = w.numpy()
    assert v.std() > 0.015 and abs(v.mean()) < 0.002
    np.testing.assert_array_equal(g.numpy(), 2.0)       # still a parameter
    with pytest.raises(RuntimeError, match="no_grad"):
        w.uniform_()


def test_a_parameter_redrawn_in_every_iteration():
    w = ad.tensor(np.zeros(500, np.float32))
    seen = []

    def body():
        w.uniform_(seed=52)
        ad.Receiver(lambda v: seen.append(v.copy()), [w])
    ad.ir_for(range(3), body)
    ad.execute(device="numpy")
    assert len(seen) == 3 and not np.array_equal(seen[0], seen[1])
    np.testing.assert_array_equal(w.numpy(), seen[-1])       # the last draw is kept


@pytest.mark.parametrize("device", device_params())
def test_the_same_draws_on_every_device(device):
    def fills():
        xs = [ad.tensor(np.zeros(4096, np.float32)) for _ in range(6)]
        xs[0].uniform_(-1, 1, seed=61)
        xs[1].normal_(seed=62)
        xs[2].exponential_(seed=63)
        xs[3].cauchy_(seed=64)
        xs[4].geometric_(0.3, seed=65)
        xs[5].random_(-50, 50, seed=66)
        return xs
    ours = fills()
    ad.execute(device=device)
    ref = fills()
    ad.execute(device="numpy")
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_seed_and_generator_make_draws_reproducible():
    a = _draw(lambda x: x.normal_(seed=7), n=100)
    b = _draw(lambda x: x.normal_(seed=7), n=100)
    c = _draw(lambda x: x.normal_(generator=np.random.default_rng(3)), n=100)
    d = _draw(lambda x: x.normal_(generator=np.random.default_rng(3)), n=100)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(c, d)
    assert not np.array_equal(a, c)
    ad.manual_seed(5)
    e = _draw(lambda x: x.uniform_(), n=100)
    ad.manual_seed(5)
    f = _draw(lambda x: x.uniform_(), n=100)
    np.testing.assert_array_equal(e, f)
    with pytest.raises(TypeError):
        ad.tensor(np.zeros(2, np.float32)).normal_(generator=torch.Generator())


@pytest.mark.parametrize("call,dtype,exc", [
    (lambda x: x.uniform_(), "int64", NotImplementedError),
    (lambda x: x.uniform_(1.0, 0.0), "float32", RuntimeError),
    (lambda x: x.normal_(), "int32", NotImplementedError),
    (lambda x: x.normal_(0.0, -1.0), "float32", RuntimeError),
    (lambda x: x.log_normal_(), "int64", NotImplementedError),
    (lambda x: x.log_normal_(0.0, 0.0), "float32", RuntimeError),
    (lambda x: x.exponential_(), "int64", RuntimeError),
    (lambda x: x.exponential_(-1.0), "float32", RuntimeError),
    (lambda x: x.cauchy_(), "int64", RuntimeError),
    (lambda x: x.cauchy_(0.0, -1.0), "float32", RuntimeError),
    (lambda x: x.geometric_(0.0), "float32", RuntimeError),
    (lambda x: x.geometric_(1.0), "int64", RuntimeError),
    (lambda x: x.geometric_(0.5), "bool", NotImplementedError),
    (lambda x: x.bernoulli_(1.5), "float32", RuntimeError),
    (lambda x: x.bernoulli(), "int64", NotImplementedError),
    (lambda x: x.bernoulli(-0.1), "float32", RuntimeError),
    (lambda x: (x + 1.5).bernoulli(), "float32", None),      # traced: not checked
    (lambda x: ad.tensor(np.float32([1.5])).bernoulli(), "float32", RuntimeError),
    (lambda x: x.random_(3, 3), "float32", RuntimeError),
    (lambda x: x.random_(2.5), "float32", TypeError),
    (lambda x: x.random_(0, 2 ** 32), "int32", RuntimeError),
    (lambda x: x.random_(0, 2 ** 31 + 1), "int64", RuntimeError),
    (lambda x: x.random_(0, 2 ** 24 + 2), "float32", RuntimeError),
    (lambda x: x.random_(1, 2, 3), "float32", TypeError),
], ids=lambda v: "" if callable(v) else str(v))
def test_bad_arguments_and_dtypes_raise_like_torch(call, dtype, exc):
    x = ad.tensor(np.zeros(4), dtype=dtype)
    if exc is None:
        call(x)
        return
    with pytest.raises(exc):
        call(x)
    # where PyTorch raises too (not for ranges its int64 and float have), the same type
    t = torch.zeros(4, dtype=getattr(torch, dtype))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call(_TorchLike(t))
    except exc:
        pass
    except Exception as e:                                          # pragma: no cover
        pytest.fail(f"torch raised {type(e).__name__}, not {exc.__name__}")


class _TorchLike:
    """``x`` for the calls above on a torch tensor (drops autodiff's ``seed=``; the
    calls that name ``ad.tensor`` build their own autodiff tensor)."""

    def __init__(self, t):
        self.t = t

    def __getattr__(self, name):
        attr = getattr(self.t, name)

        def call(*a, **k):
            k.pop("seed", None)
            return attr(*a, **k)
        return call

    def __add__(self, o):
        return _TorchLike(self.t + o)
