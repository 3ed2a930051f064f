"""Matrix inverse, determinants and linear solves (``torch.linalg.inv``/``inv_ex``,
``inverse``, ``det``, ``slogdet``, ``logdet``, ``solve``/``solve_ex``, ``matrix_power``
with ``n < 0``; autodiff/graph/linalg/lu.py) against PyTorch.

Values and gradients go through ``op_helper.check_op``: float32 values and gradients
against float32 PyTorch, and gradients against float64 central finite differences (on
PyTorch, no autograd), on three kinds of random matrices (never zeros or constants):

* ``shifted``: ``I + R / n``, ``R`` uniform in [-1, 1) (condition number below ~3; no
  pivoting needed);
* ``pivot``: the same with its rows rotated by one, and the leading entry set to exactly 0
  (even seeds) or 1e-7 (odd): every step must pick another row;
* ``random``: entries uniform in [-2, 2), redrawn until every matrix's condition number is
  at most 30 (pivoting happens wherever it happens), divided by ``sqrt(n)``.

Tolerances: check_op's defaults (values and gradients against float32 PyTorch: rtol 1e-4,
atol 1e-5; against float64 finite differences: rtol 1e-3, atol 1e-4; another device
against the numpy device: rtol 1e-5 of the largest magnitude). On these inputs (condition
numbers at most 30; inverses, determinants and their gradients of magnitude at most ~20)
the float32 errors of values and gradients measured against float64 PyTorch are at most
5e-7 relative to each result's largest entry (PyTorch's float32 results are as far off),
~20x below atol 1e-5 and rtol 1e-4; float64 central differences with step 1e-6 are
accurate to ~1e-9.
"""
import math

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff.graph.linalg import lu
from backends import device_params
from op_helper import check_op

NS_BATCH = [(1, ()), (2, (3,)), (3, (2, 2)), (5, (2,)), (8, ())]
#: (n, batch, kind) for every n and kind (a 1x1 matrix has nothing to pivot)
SIZES = [(n, b, k) for n, b in NS_BATCH for k in ("shifted", "pivot", "random")
         if not (n == 1 and k == "pivot")]
SIZE_IDS = [f"n{n}-{k}" for n, _, k in SIZES]


def matrices(batch, n, kind, seed=0, positive=False):
    """float32 ``[*batch, n, n]`` of ``kind`` (module docstring); ``positive``: the first
    row negated where the determinant is negative."""
    rng = np.random.default_rng(seed)
    shape = tuple(batch) + (n, n)
    if kind == "random":
        a = rng.uniform(-2.0, 2.0, shape)
        for _ in range(1000):
            bad = np.linalg.cond(a.reshape(-1, n, n)) > 30
            if not bad.any():
                break
            flat = a.reshape(-1, n, n)
            flat[bad] = rng.uniform(-2.0, 2.0, (int(bad.sum()), n, n))
            a = flat.reshape(shape)
        a = a / math.sqrt(n)                  # determinants of size ~1 for every n
    else:
        a = np.eye(n) + rng.uniform(-1.0, 1.0, shape) / n
        if kind == "pivot":
            a = np.roll(a, 1, axis=-2)
            a[..., 0, 0] = 0.0 if seed % 2 == 0 else 1e-7
    if positive:
        a[..., 0, :] *= np.sign(np.linalg.det(a))[..., None]
    return a.astype(np.float32)


def rhs(shape, seed=1):
    return np.random.default_rng(seed + 100).uniform(-2.0, 2.0, shape).astype(np.float32)


# -- values and gradients against torch, every function -------------------------------------
FUNCS = [
    ("linalg.inv", lambda L, a: L.linalg.inv(a)),
    ("Tensor.inverse", lambda L, a: a.inverse()),
    ("inverse", lambda L, a: L.inverse(a)),
    ("inv_ex", lambda L, a: L.linalg.inv_ex(a).inverse),
    ("linalg.det", lambda L, a: L.linalg.det(a)),
    ("Tensor.det", lambda L, a: a.det()),
    ("det", lambda L, a: L.det(a)),
    ("linalg.slogdet", lambda L, a: L.linalg.slogdet(a).logabsdet),
    ("Tensor.slogdet", lambda L, a: a.slogdet()[1]),
    ("slogdet", lambda L, a: L.slogdet(a).logabsdet),
    ("logdet", lambda L, a: L.logdet(a)),
    ("Tensor.logdet", lambda L, a: a.logdet()),
    ("matrix_power_-1", lambda L, a: L.matrix_power(a, -1)),
    ("linalg.matrix_power_-3", lambda L, a: L.linalg.matrix_power(a, -3)),
    ("Tensor.matrix_power_-2", lambda L, a: a.matrix_power(-2)),
]


@pytest.mark.parametrize("n,batch,kind", SIZES, ids=SIZE_IDS)
@pytest.mark.parametrize("name,fn", FUNCS, ids=[f[0] for f in FUNCS])
def test_against_torch(name, fn, n, batch, kind):
    a = matrices(batch, n, kind, seed=n, positive="logdet" in name)
    check_op(None, lambda t: fn(torch, t), lambda t: fn(ad, t), inputs=[a])


@pytest.mark.parametrize("n,batch,kind", SIZES, ids=SIZE_IDS)
def test_signs_and_info_against_torch(n, batch, kind):
    """slogdet's sign (both signs occur: the rotated rows of ``pivot`` flip it for even n,
    ``random`` has either), and inv_ex's/solve_ex's info (0 here), exactly."""
    a = matrices(batch, n, kind, seed=n + 1)
    for fn in (lambda L, t: L.linalg.slogdet(t).sign, lambda L, t: L.slogdet(t)[0],
               lambda L, t: L.linalg.inv_ex(t).info,
               lambda L, t: L.linalg.solve_ex(t, t[..., 0]).info):
        check_op(None, lambda t: fn(torch, t), lambda t: fn(ad, t), inputs=[a],
                 forward_only=True)


SOLVES = [
    # name, fn, A's batch and n, B's shape
    ("vector", lambda L, a, b: L.linalg.solve(a, b), (), 4, (4,)),
    ("matrix", lambda L, a, b: L.linalg.solve(a, b), (), 3, (3, 5)),
    ("batched_vector", lambda L, a, b: L.linalg.solve(a, b), (2,), 3, (2, 3)),
    ("vector_broadcast", lambda L, a, b: L.linalg.solve(a, b), (2,), 3, (3,)),
    ("B_batch_folded", lambda L, a, b: L.linalg.solve(a, b), (), 3, (4, 3, 2)),
    ("both_broadcast", lambda L, a, b: L.linalg.solve(a, b), (2, 1), 3, (5, 3, 2)),
    ("A_batch_only", lambda L, a, b: L.linalg.solve(a, b), (3, 2), 2, (2, 4)),
    ("n1", lambda L, a, b: L.linalg.solve(a, b), (2,), 1, (2, 1, 3)),
    ("n8", lambda L, a, b: L.linalg.solve(a, b), (), 8, (8, 2)),
    ("right", lambda L, a, b: L.linalg.solve(a, b, left=False), (2,), 3, (2, 4, 3)),
    ("right_broadcast", lambda L, a, b: L.linalg.solve(a, b, left=False), (), 5, (2, 2, 5)),
    ("solve_ex", lambda L, a, b: L.linalg.solve_ex(a, b).result, (2,), 5, (2, 5, 2)),
]


@pytest.mark.parametrize("kind", ["shifted", "pivot", "random"])
@pytest.mark.parametrize("name,fn,abatch,n,bshape", SOLVES, ids=[s[0] for s in SOLVES])
def test_solve_against_torch(name, fn, abatch, n, bshape, kind):
    kind = "shifted" if n == 1 and kind == "pivot" else kind
    a = matrices(abatch, n, kind, seed=n + len(bshape))
    check_op(None, lambda x, y: fn(torch, x, y), lambda x, y: fn(ad, x, y),
             inputs=[a, rhs(bshape)])


def test_gradient_of_one_operand_only():
    """``solve`` with only ``A`` or only ``B`` requiring grad; ``inv`` under no_grad."""
    a, b = matrices((2,), 4, "pivot", seed=3), rhs((2, 4, 3))
    A, B = ad.tensor(a, requires_grad=True), ad.tensor(b)
    A2, B2 = ad.tensor(a), ad.tensor(b, requires_grad=True)
    ad.linalg.solve(A, B).sum().backward()
    ad.linalg.solve(A2, B2).sum().backward()
    with ad.no_grad():
        y = ad.linalg.inv(A)
    assert not y.requires_grad
    ga, gb = A.grad, B2.grad
    ad.execute(device="numpy")
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    torch.linalg.solve(ta, tb).sum().backward()
    np.testing.assert_allclose(ga.numpy(), ta.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gb.numpy(), tb.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(y.numpy(), np.linalg.inv(a), rtol=1e-4, atol=1e-5)


def test_logdet_of_a_negative_determinant_is_nan():
    """NaN where det < 0, as PyTorch (gradient 0 there, as PyTorch's)."""
    a = matrices((3,), 4, "pivot", seed=2)              # rotated rows: det < 0 for n = 4
    assert (np.linalg.det(a) < 0).all()
    check_op(None, torch.logdet, ad.logdet, inputs=[a], fd=False)


# -- other devices ---------------------------------------------------------------------------
DEVICE_FUNCS = [
    ("inv", lambda L, a: L.linalg.inv(a)),
    ("det", lambda L, a: L.det(a)),
    ("slogdet", lambda L, a: L.linalg.slogdet(a).logabsdet),
    ("solve", lambda L, a: L.linalg.solve(a, a[..., 1:, :].sum(-2))),
    ("matrix_power_-2", lambda L, a: L.matrix_power(a, -2)),
]


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("name,fn", DEVICE_FUNCS, ids=[f[0] for f in DEVICE_FUNCS])
def test_on_every_device(name, fn, device):
    """The same program on each device (OpenCL against the numpy device too)."""
    check_op(None, lambda t: fn(torch, t), lambda t: fn(ad, t),
             inputs=[matrices((2,), 3, "pivot", seed=5)], device=device)


@pytest.mark.parametrize("device", device_params())
def test_singular_matrices_give_torchs_values(device):
    """A traced singular matrix: ``info`` of getrf, ``det`` 0, ``slogdet`` (0, -inf),
    ``logdet`` -inf, inverse and solution not finite (PyTorch: ±inf/NaN too)."""
    s = np.float32([[[1, 2], [2, 4]], [[0, 0], [0, 1]], [[1, 0], [0, 1]], [[2, 4], [1, 2]]])
    s3 = np.float32([[1, 1, 1], [1, 1, 1], [0, 2, 1]])      # the zero pivot at step 3
    a, a3 = ad.tensor(s) * 1.0, ad.tensor(s3) * 1.0          # traced: values unknown
    inv_ex, solve_ex = ad.linalg.inv_ex(a), ad.linalg.solve_ex(a, ad.tensor(np.ones(2)))
    outs = [inv_ex.info, solve_ex.info, ad.det(a), *ad.slogdet(a), ad.logdet(a),
            ad.linalg.inv_ex(a3).info, ad.det(a3), ad.slogdet(a3).sign]
    ad.execute(device=device)
    t, t3 = torch.from_numpy(s), torch.from_numpy(s3)
    want = [torch.linalg.inv_ex(t).info, torch.linalg.solve_ex(t, torch.ones(2)).info,
            torch.det(t), *torch.slogdet(t), torch.logdet(t), torch.linalg.inv_ex(t3).info,
            torch.det(t3), torch.slogdet(t3).sign]
    for o, w in zip(outs, want):
        np.testing.assert_array_equal(o.numpy(), w.numpy())
    for got in (inv_ex.inverse.numpy(), solve_ex.result.numpy()):
        assert not np.isfinite(got[[0, 1, 3]]).all(axis=tuple(range(1, got.ndim))).any()
        np.testing.assert_array_equal(got[2], np.eye(2) if got.ndim == 3 else [1.0, 1.0])


def test_gradients_at_singular_matrices_are_zero():
    """The gradient of a matrix whose inverse is not finite is 0 (PyTorch: 0 from det,
    inf/NaN from inv/slogdet/solve); the other matrices of the batch keep theirs, and the
    values stay those without gradient (the attached term is exactly 0)."""
    s = np.float32([[[1, 2], [2, 4]], [[2, 1], [1, 3]]])
    b = np.float32([[1, 2], [3, 4]])
    outs, grads = [], []
    fns = [lambda L, t: L.linalg.inv_ex(t).inverse.sum((-2, -1)), lambda L, t: L.det(t),
           lambda L, t: L.slogdet(t).logabsdet,
           lambda L, t: L.linalg.solve_ex(t, L.tensor(b)).result.sum(-1)]
    for fn in fns:
        a = ad.tensor(s, requires_grad=True)
        out = fn(ad, a * 1.0)
        out.sum().backward()
        outs.append(out)
        grads.append(a.grad)
    ad.execute(device="numpy")
    for fn, out, g in zip(fns, outs, grads):
        t = torch.tensor(s, requires_grad=True)
        want = fn(torch, t)
        want.sum().backward()
        np.testing.assert_array_equal(g.numpy()[0], 0.0)
        np.testing.assert_allclose(g.numpy()[1], t.grad.numpy()[1], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out.numpy()[1], want.detach().numpy()[1], rtol=1e-6)
    assert outs[1].numpy()[0] == 0 and outs[2].numpy()[0] == -np.inf


def test_known_singular_matrix_raises_torchs_error():
    """Values known while tracing (data): ``inv``, ``solve``, ``matrix_power(-n)`` and the
    ``_ex`` forms with ``check_errors=True`` raise PyTorch's LinAlgError text."""
    s = np.float32([[[2, 1], [1, 3]], [[1, 2], [2, 4]]])
    cases = [
        (lambda L, x: L.linalg.inv(x), s),
        (lambda L, x: L.inverse(x), s[1]),
        (lambda L, x: L.linalg.solve(x, x[..., 0]), s),
        (lambda L, x: L.linalg.matrix_power(x, -2), s[1]),
        (lambda L, x: L.linalg.inv_ex(x, check_errors=True), s),
        (lambda L, x: L.linalg.solve_ex(x, x[0], check_errors=True), s[1]),
    ]
    for fn, v in cases:
        with pytest.raises(RuntimeError) as theirs:
            fn(torch, torch.from_numpy(v))
        with pytest.raises(ad.linalg.LinAlgError) as ours:
            fn(ad, ad.tensor(v))
        assert str(ours.value).startswith(str(theirs.value)), (ours.value, theirs.value)
        assert "traced at" in str(ours.value) and __file__.split("/")[-1] in str(ours.value)
    # unchecked forms run: info reports it
    r = ad.linalg.inv_ex(ad.tensor(s))
    ad.execute(device="numpy")
    np.testing.assert_array_equal(r.info.numpy(), [0, 2])


def test_empty_matrices_like_torch():
    z = np.zeros((2, 0, 0), np.float32)
    fns = [lambda L, t: L.linalg.inv(t), lambda L, t: L.linalg.inv_ex(t).info,
           lambda L, t: L.det(t), lambda L, t: L.slogdet(t).sign,
           lambda L, t: L.slogdet(t).logabsdet, lambda L, t: L.logdet(t),
           lambda L, t: L.linalg.solve(t, t.sum(-1)),
           lambda L, t: L.linalg.solve_ex(t, t[..., :3].sum(-1, keepdim=True)).info]
    outs = [f(ad, ad.tensor(z)) for f in fns]
    ad.execute(device="numpy")
    for f, o in zip(fns, outs):
        w = f(torch, torch.from_numpy(z))
        assert o.numpy().shape == tuple(w.shape) and o.numpy().dtype == w.numpy().dtype
        np.testing.assert_array_equal(o.numpy(), w.numpy())


def test_results_are_named_tuples():
    a = ad.tensor(matrices((2,), 3, "shifted"))
    s, i, x = ad.linalg.slogdet(a), ad.linalg.inv_ex(a), ad.linalg.solve_ex(a, a[..., 0])
    assert (s.sign, s.logabsdet) == tuple(s) and (i.inverse, i.info) == tuple(i)
    assert (x.result, x.info) == tuple(x)
    assert i.info.dtype == ad.int32 and x.info.shape == (2,) and s.sign.dtype == ad.float32
    assert ad.linalg.solve_ex(a[0], ad.tensor(rhs((4, 3, 2)))).info.shape == ()


# -- errors before anything runs -------------------------------------------------------------
def _f32(*shape):
    return np.ones(shape, np.float32)


ERRORS = [
    ("inv_1d", lambda L, T: L.linalg.inv(T(_f32(3)))),
    ("inv_rect", lambda L, T: L.linalg.inv(T(_f32(2, 3)))),
    ("inverse_rect", lambda L, T: T(_f32(4, 2, 3)).inverse()),
    ("inv_ex_rect", lambda L, T: L.linalg.inv_ex(T(_f32(2, 3)))),
    ("inv_int", lambda L, T: L.linalg.inv(T(np.ones((2, 2), np.int64)))),
    ("inv_half", lambda L, T: L.linalg.inv(T(_f32(2, 2)).half())),
    ("inv_bf16", lambda L, T: L.inverse(T(_f32(2, 2)).bfloat16())),
    ("det_1d", lambda L, T: L.linalg.det(T(_f32(3)))),
    ("det_rect", lambda L, T: L.det(T(_f32(2, 3)))),
    ("det_bool", lambda L, T: L.det(T(np.ones((2, 2), bool)))),
    ("det_half", lambda L, T: T(_f32(2, 2)).half().det()),
    ("slogdet_rect", lambda L, T: L.linalg.slogdet(T(_f32(2, 3)))),
    ("slogdet_int", lambda L, T: L.slogdet(T(np.ones((2, 2), np.int32)))),
    ("slogdet_half", lambda L, T: L.slogdet(T(_f32(2, 2)).half())),
    ("logdet_1d", lambda L, T: L.logdet(T(_f32(3)))),
    ("logdet_rect", lambda L, T: T(_f32(2, 3)).logdet()),
    ("logdet_int", lambda L, T: L.logdet(T(np.ones((2, 2), np.int64)))),
    ("solve_A_1d", lambda L, T: L.linalg.solve(T(_f32(3)), T(_f32(3)))),
    ("solve_A_rect", lambda L, T: L.linalg.solve(T(_f32(2, 3)), T(_f32(2)))),
    ("solve_B_size", lambda L, T: L.linalg.solve(T(_f32(3, 3)), T(_f32(2)))),
    ("solve_B_rows", lambda L, T: L.linalg.solve(T(_f32(3, 3)), T(_f32(2, 4)))),
    ("solve_B_cols_right", lambda L, T: L.linalg.solve(T(_f32(3, 3)), T(_f32(4, 2)),
                                                       left=False)),
    ("solve_vector_right", lambda L, T: L.linalg.solve(T(_f32(3, 3)), T(_f32(3)), left=False)),
    ("solve_B_0d", lambda L, T: L.linalg.solve(T(_f32(3, 3)), T(np.float32(1.0)))),
    ("solve_B_not_vector", lambda L, T: L.linalg.solve(T(_f32(1, 3, 3)), T(_f32(2, 3)))),
    ("solve_int", lambda L, T: L.linalg.solve(T(np.ones((3, 3), np.int64)), T(_f32(3)))),
    ("solve_dtypes", lambda L, T: L.linalg.solve(T(_f32(3, 3)), T(np.ones(3, np.int64)))),
    ("solve_half", lambda L, T: L.linalg.solve(T(_f32(2, 2)).half(), T(_f32(2)).half())),
    ("solve_ex_rect", lambda L, T: L.linalg.solve_ex(T(_f32(2, 3)), T(_f32(2)))),
    ("matrix_power_neg_1d", lambda L, T: L.linalg.matrix_power(T(_f32(3)), -1)),
    ("matrix_power_neg_rect", lambda L, T: L.matrix_power(T(_f32(2, 3)), -1)),
    ("matrix_power_neg_int", lambda L, T: T(np.ones((2, 2), np.int64)).matrix_power(-1)),
]


@pytest.mark.parametrize("name,call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_like_torch(name, call):
    """PyTorch's exception type and message (ours adds where it was traced)."""
    with pytest.raises(Exception) as theirs:
        call(torch, torch.tensor)
    with pytest.raises(type(theirs.value)) as ours:
        call(ad, ad.tensor)
    assert str(ours.value).startswith(str(theirs.value)), (str(ours.value), str(theirs.value))
    assert f"{__file__.split('/')[-1]}:" in str(ours.value)


def test_batches_that_do_not_broadcast_raise():
    with pytest.raises(RuntimeError):
        torch.linalg.solve(torch.ones(2, 3, 3), torch.ones(4, 3, 1))
    with pytest.raises(RuntimeError, match="linalg.solve"):
        ad.linalg.solve(ad.tensor(_f32(2, 3, 3)), ad.tensor(_f32(4, 3, 1)))


def test_too_large_matrices_are_refused():
    n = lu.MAX_N + 1
    for fn in (ad.linalg.inv, ad.det, ad.logdet, lambda t: ad.linalg.solve(t, t[0])):
        with pytest.raises(NotImplementedError, match=f"up to {lu.MAX_N} rows"):
            fn(ad.zeros(n, n))


def test_graph_grows_linearly_with_n():
    """The unrolled elimination: about 40 traced nodes per row (the inverse with its
    gradient), so n = 32 stays below 1,500 nodes."""
    counts = {}
    for n in (8, 32):
        a = ad.tensor(matrices((), n, "shifted"), requires_grad=True)
        ad.linalg.inv(a).sum().backward()
        counts[n] = ad.execute(device="numpy").nodes["traced"]
    per_row = (counts[32] - counts[8]) / 24
    assert per_row < 45 and counts[32] < 1500, counts


def test_float32_accuracy_against_float64():
    """n = 32 (condition numbers 1.3 for ``shifted``/``pivot``, 29 for ``random``): the
    inverse within 2e-6 of float64 relative to its largest entry (measured 3.8e-7, 3.7e-7,
    5.3e-7) and within 3x PyTorch's float32 error (2.8e-7, 3.6e-7, 8.2e-7); log|det|
    within 1e-5 (measured 6.6e-7, 3.6e-7, 1.3e-6, on values up to ~10)."""
    for kind in ("shifted", "pivot", "random"):
        a = matrices((2,), 32, kind, seed=7)
        y, d = ad.linalg.inv(ad.tensor(a)), ad.linalg.slogdet(ad.tensor(a))
        ad.execute(device="numpy")
        a64 = a.astype(np.float64)
        ref = np.linalg.inv(a64)
        err = np.abs(y.numpy() - ref).max() / np.abs(ref).max()
        theirs = np.abs(torch.linalg.inv(torch.from_numpy(a)).numpy() - ref).max()
        assert math.isfinite(err) and err < 2e-6, (kind, err)
        assert err < 3 * theirs / np.abs(ref).max(), (kind, err, theirs)
        np.testing.assert_allclose(d.logabsdet.numpy(), np.linalg.slogdet(a64)[1],
                                   rtol=0, atol=1e-5)


def test_names_exist_as_in_torch():
    for name in ("inverse", "det", "logdet", "slogdet", "matrix_power"):
        assert hasattr(torch, name) and hasattr(torch.Tensor, name), name
        assert callable(getattr(ad, name, None)) and name in ad.__all__, name
        assert getattr(ad.Tensor, name).__doc__, name
    assert "linalg" in ad.__all__
    for name in ("inv", "inv_ex", "det", "slogdet", "solve", "solve_ex", "matrix_power"):
        assert hasattr(torch.linalg, name), name
        f = getattr(ad.linalg, name, None)
        assert callable(f) and f.__doc__ and name in ad.linalg.__all__, name
    assert issubclass(ad.linalg.LinAlgError, RuntimeError)
