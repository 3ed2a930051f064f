"""``torch.linalg``'s norms and composites, Cholesky, triangular solves, LU factorisation,
QR and eigh (autodiff/graph/linalg/norms.py, triangular.py, lu_factor.py, qr.py, eigh.py)
against PyTorch.

Values and gradients go through ``op_helper.check_op``: float32 values and gradients
against float32 PyTorch, and gradients against float64 central finite differences (on
PyTorch, no autograd), on random inputs (never zeros or constants) that keep every
factorisation well conditioned:

* ``general(batch, m, n)``: entries uniform in [-2, 2) redrawn until every matrix's
  condition number is at most 30, divided by ``sqrt(max(m, n))`` (pivoting happens
  wherever it happens; ``R``'s diagonal has either sign);
* ``spd``: ``X X^T / n + I``, ``X`` uniform in [-1, 1) (condition number below 2.3);
  functions of the Cholesky factor take ``X X^T / n + I`` of a random ``X`` inside the
  function, so that finite differences perturb a symmetric matrix (PyTorch's Cholesky reads
  one triangle, its gradient is symmetric);
* ``triangular``: off-diagonal entries uniform in [-1, 1) / n, diagonal of magnitude in
  [1, 2) with random signs (condition number below 2.1); the other triangle holds the same
  random entries and must be ignored;
* eigh: ``X + X^T`` or ``X X^T`` of ``X`` uniform in [-1, 1) (symmetric, so that finite
  differences agree with the symmetric gradient), checked through the eigenvalues and
  functions of the eigenvectors that do not depend on their signs.

Tolerances: check_op's defaults (values and gradients against float32 PyTorch: rtol 1e-4,
atol 1e-5; against float64 finite differences: rtol 1e-3, atol 1e-4). Measured on these
inputs (values up to ~65, gradients up to ~150 in magnitude), the largest difference of
our float32 values and gradients from float64 PyTorch, relative to each result's largest
magnitude, is 2.8e-6 for QR (PyTorch's float32: 9.4e-7), 8.7e-7 for eigh (PyTorch's
2.6e-6), 8.5e-7 for cond, and at most 5.5e-7 for the others (norms, Cholesky, solves, LU;
PyTorch's float32 within 2x of ours): 35x or more below rtol 1e-4, and the entries of
largest magnitude are where the absolute errors are largest. Float64 central differences
with step 1e-6 are accurate to ~1e-9. :func:`test_float32_accuracy_against_float64`
measures n = 32.
"""
import math
import warnings

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff.graph.linalg import lu
from backends import device_params
from op_helper import check_op


def general(batch, m, n=None, seed=0):
    """float32 ``[*batch, m, n]`` with condition numbers at most 30 (module docstring)."""
    n = m if n is None else n
    rng = np.random.default_rng(seed)
    shape = tuple(batch) + (m, n)
    a = rng.uniform(-2.0, 2.0, shape)
    for _ in range(1000):
        flat = a.reshape(-1, m, n)
        bad = np.linalg.cond(flat) > 30
        if not bad.any():
            break
        flat[bad] = rng.uniform(-2.0, 2.0, (int(bad.sum()), m, n))
        a = flat.reshape(shape)
    return (a / math.sqrt(max(m, n))).astype(np.float32)


def spd(batch, n, seed=0):
    x = np.random.default_rng(seed + 50).uniform(-1.0, 1.0, tuple(batch) + (n, n))
    return (x @ np.swapaxes(x, -1, -2) / n + np.eye(n)).astype(np.float32)


def triangular(batch, n, seed=0):
    rng = np.random.default_rng(seed + 70)
    a = rng.uniform(-1.0, 1.0, tuple(batch) + (n, n)) / n
    d = rng.uniform(1.0, 2.0, tuple(batch) + (n,)) * rng.choice([-1.0, 1.0], tuple(batch) + (n,))
    idx = np.arange(n)
    a[..., idx, idx] = d
    return a.astype(np.float32)


def rhs(shape, seed=1):
    return np.random.default_rng(seed + 100).uniform(-2.0, 2.0, shape).astype(np.float32)


def _spd_of(L, x):
    """``X X^T / n + I`` of a traced ``x`` (either library)."""
    n = x.shape[-1]
    return x @ x.mT / n + L.eye(n)


# -- norms and composites ----------------------------------------------------------------------
NORMS = [
    ("vector_norm", lambda L, x: L.linalg.vector_norm(x)),
    ("vector_norm_keepdim", lambda L, x: L.linalg.vector_norm(x, keepdim=True)),
    ("vector_norm_1_dim", lambda L, x: L.linalg.vector_norm(x, 1, dim=1)),
    ("vector_norm_inf_dims", lambda L, x: L.linalg.vector_norm(x, math.inf, dim=(0, 2))),
    ("vector_norm_-inf", lambda L, x: L.linalg.vector_norm(x, -math.inf, dim=-1)),
    ("vector_norm_3_keepdim", lambda L, x: L.linalg.vector_norm(x, 3, -1, True)),
    ("vector_norm_-1.5", lambda L, x: L.linalg.vector_norm(x, -1.5, dim=[0, 1])),
    ("vector_norm_0d", lambda L, x: L.linalg.vector_norm(x[0, 0, 0], 2.5)),
    ("matrix_norm_fro", lambda L, x: L.linalg.matrix_norm(x)),
    ("matrix_norm_1", lambda L, x: L.linalg.matrix_norm(x, 1)),
    ("matrix_norm_-1_dims_keepdim", lambda L, x: L.linalg.matrix_norm(x, -1, (0, 2), True)),
    ("matrix_norm_inf", lambda L, x: L.linalg.matrix_norm(x, math.inf)),
    ("matrix_norm_-inf_swapped", lambda L, x: L.linalg.matrix_norm(x, -math.inf, (2, 1))),
    ("norm", lambda L, x: L.linalg.norm(x)),
    ("norm_dim1", lambda L, x: L.linalg.norm(x, 3, dim=1)),
    ("norm_dim2", lambda L, x: L.linalg.norm(x, math.inf, dim=(0, 1), keepdim=True)),
    ("norm_2d_ord", lambda L, x: L.linalg.norm(x[0], -1)),
    ("norm_1d_ord", lambda L, x: L.linalg.norm(x[0, 1], 1)),
    ("norm_fro_str", lambda L, x: L.linalg.norm(x[1], "fro")),
    ("vecdot", lambda L, x: L.linalg.vecdot(x, x[0].flip(0))),
    ("vecdot_dim", lambda L, x: L.linalg.vecdot(x[..., :3], x[0, :, :3], dim=1)),
    ("diagonal", lambda L, x: L.linalg.diagonal(x)),
    ("diagonal_offset_dims", lambda L, x: L.linalg.diagonal(x, offset=-1, dim1=0, dim2=2)),
    ("matmul", lambda L, x: L.linalg.matmul(x, x[0].mT)),
    ("cross", lambda L, x: L.linalg.cross(x[..., :3], x[..., 1:])),
    ("cross_dim", lambda L, x: L.linalg.cross(x[..., :3].mT, x[..., 1:].mT, dim=1)),
    ("vander", lambda L, x: L.linalg.vander(x[0])),
    ("vander_N", lambda L, x: L.linalg.vander(x[:, 0], N=5)),
    ("multi_dot_2", lambda L, x: L.linalg.multi_dot([x[0], x[1].mT])),
    ("multi_dot_3_vectors", lambda L, x: L.linalg.multi_dot([x[0, 0], x[0].mT, x[1, :, 1]])),
    ("multi_dot_5", lambda L, x: L.linalg.multi_dot([x[0], x[0].mT, x[1], x[1].mT, x[0]])),
]


@pytest.mark.parametrize("name,fn", NORMS, ids=[f[0] for f in NORMS])
def test_norms_and_composites_against_torch(name, fn):
    x = rhs((2, 3, 4), seed=len(name))
    check_op(None, lambda t: fn(torch, t), lambda t: fn(ad, t), inputs=[x])


def test_norm_ord_0_counts_nonzeros():
    x = rhs((2, 3, 4))
    x[0, 1, 2] = 0.0
    for fn in (lambda L, t: L.linalg.vector_norm(t, 0), lambda L, t: L.linalg.norm(t, 0, 2)):
        check_op(None, lambda t: fn(torch, t), lambda t: fn(ad, t), inputs=[x],
                 forward_only=True)


def test_norm_dtype_argument_and_half_inputs():
    x = rhs((3, 4))
    outs = [ad.linalg.vector_norm(ad.tensor(x).half()),
            ad.linalg.vector_norm(ad.tensor(x).half(), dtype=ad.float32),
            ad.linalg.matrix_norm(ad.tensor(x).bfloat16(), 1)]
    ad.execute(device="numpy")
    t = torch.from_numpy(x)
    want = [torch.linalg.vector_norm(t.half()), torch.linalg.vector_norm(t.half(),
                                                                           dtype=torch.float32),
            torch.linalg.matrix_norm(t.bfloat16(), 1)]
    for o, w in zip(outs, want):
        assert str(o.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
        np.testing.assert_allclose(o.numpy().astype(np.float32), w.float().numpy(), rtol=1e-2)


def test_torch_vander():
    """Values against ``torch.vander``; gradients (PyTorch's ``vander`` writes in place and
    has none here) against the same matrix from ``torch.linalg.vander``, and float64
    finite differences."""
    x = rhs((4,))
    for n, inc in ((None, False), (3, True), (6, False)):
        check_op(None, lambda t: torch.vander(t, n, inc), lambda t: ad.vander(t, n, inc),
                 inputs=[x], forward_only=True)
        check_op(None, lambda t: (lambda v: v if inc else v.flip(-1))(
            torch.linalg.vander(t, N=n)), lambda t: ad.vander(t, n, inc), inputs=[x])
    xi = np.arange(1, 5, dtype=np.int32)
    v = ad.vander(ad.tensor(xi), 3)
    ad.execute(device="numpy")
    assert v.dtype == ad.int64
    np.testing.assert_array_equal(v.numpy(), torch.vander(torch.arange(1, 5), 3).numpy())


COND = [1, -1, math.inf, -math.inf, "fro"]


@pytest.mark.parametrize("p", COND, ids=[str(p) for p in COND])
def test_cond_against_torch(p):
    """Values against PyTorch's ``cond``; gradients (PyTorch's ``cond`` has none: it fills
    the inverse in place) against PyTorch's ``matrix_norm(A) * matrix_norm(inv(A))`` and
    float64 finite differences."""
    a = general((2,), 4, seed=3)
    check_op(None, lambda t: torch.linalg.cond(t, p), lambda t: ad.linalg.cond(t, p),
             inputs=[a], forward_only=True)
    check_op(None, lambda t: torch.linalg.matrix_norm(t, p) * torch.linalg.matrix_norm(
        torch.linalg.inv(t), p), lambda t: ad.linalg.cond(t, p), inputs=[a])


def test_cond_of_singular_and_empty_matrices():
    s = np.float32([[[1, 2], [2, 4]], [[2, 1], [1, 3]]])
    outs = [ad.linalg.cond(ad.tensor(s) * 1.0, 1), ad.linalg.cond(ad.tensor(s) * 1.0, "fro"),
            ad.linalg.cond(ad.zeros(2, 0, 0), 1)]
    ad.execute(device="numpy")
    want = [torch.linalg.cond(torch.from_numpy(s), 1), torch.linalg.cond(torch.from_numpy(s),
                                                                         "fro"),
            torch.linalg.cond(torch.zeros(2, 0, 0), 1)]
    for o, w in zip(outs, want):
        np.testing.assert_allclose(o.numpy(), w.numpy(), rtol=1e-5)


TENSOR_SOLVES = [
    ("tensorinv_ind1", lambda L, a: L.linalg.tensorinv(a.reshape(4, 2, 2), ind=1), (4, 4)),
    ("tensorinv_ind2", lambda L, a: L.linalg.tensorinv(a.reshape(2, 3, 3, 2)), (6, 6)),
    ("tensorsolve", lambda L, a: L.linalg.tensorsolve(a.reshape(2, 3, 6), a[0, :].reshape(2, 3)),
     (6, 6)),
    ("tensorsolve_dims", lambda L, a: L.linalg.tensorsolve(a.reshape(6, 2, 3),
                                                           (a[1] * a[2]).reshape(2, 3), dims=(0,)),
     (6, 6)),
]


@pytest.mark.parametrize("name,fn,shape", TENSOR_SOLVES, ids=[t[0] for t in TENSOR_SOLVES])
def test_tensorinv_tensorsolve_against_torch(name, fn, shape):
    a = general((), *shape, seed=4)
    check_op(None, lambda t: fn(torch, t), lambda t: fn(ad, t), inputs=[a])


# -- Cholesky and triangular solves ------------------------------------------------------------
NS_BATCH = [(1, ()), (2, (3,)), (3, (2, 2)), (5, (2,)), (8, ())]
NB_IDS = [f"n{n}" for n, _ in NS_BATCH]

CHOLESKY = [
    ("linalg.cholesky", lambda L, x: L.linalg.cholesky(_spd_of(L, x))),
    ("linalg.cholesky_upper", lambda L, x: L.linalg.cholesky(_spd_of(L, x), upper=True)),
    ("cholesky_ex", lambda L, x: L.linalg.cholesky_ex(_spd_of(L, x)).L),
    ("Tensor.cholesky_upper", lambda L, x: _spd_of(L, x).cholesky(upper=True)),
    ("cholesky_inverse", lambda L, x: L.cholesky_inverse(L.linalg.cholesky(_spd_of(L, x)))),
    ("cholesky_inverse_upper", lambda L, x: _spd_of(L, x).cholesky(True).cholesky_inverse(True)),
]


@pytest.mark.filterwarnings("ignore:torch.cholesky is deprecated")
@pytest.mark.parametrize("n,batch", NS_BATCH, ids=NB_IDS)
@pytest.mark.parametrize("name,fn", CHOLESKY, ids=[c[0] for c in CHOLESKY])
def test_cholesky_against_torch(name, fn, n, batch):
    x = rhs(tuple(batch) + (n, n), seed=n) / 2
    check_op(None, lambda t: fn(torch, t), lambda t: fn(ad, t), inputs=[x])


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_reads_one_triangle_and_has_torchs_symmetric_gradient(upper):
    """The triangle not read holds garbage; the gradient (symmetric) is PyTorch's."""
    a = spd((2,), 5, seed=2)
    junk = rhs((2, 5, 5), seed=3) * 10
    a = np.where(np.tril(np.ones((5, 5), bool), -1 if upper else 0)[None] != upper, a, junk)
    a = np.where(np.eye(5, dtype=bool), spd((2,), 5, seed=2), a).astype(np.float32)
    check_op(None, lambda t: torch.linalg.cholesky(t, upper=upper),
             lambda t: ad.linalg.cholesky(t, upper=upper), inputs=[a], fd=False)


CHOLESKY_SOLVES = [
    # name, fn(L, X, B), X's batch and n, B's shape
    ("matrix", lambda L, x, b: L.cholesky_solve(b, x.tril()), (), 4, (4, 3)),
    ("upper", lambda L, x, b: L.cholesky_solve(b, x.triu(), upper=True), (2,), 3, (2, 3, 2)),
    ("B_batch_folded", lambda L, x, b: b.cholesky_solve(x.tril()), (), 3, (4, 3, 2)),
    ("both_broadcast", lambda L, x, b: L.cholesky_solve(b, x.tril()), (2, 1), 3, (5, 3, 1)),
    ("n1", lambda L, x, b: L.cholesky_solve(b, x.tril()), (2,), 1, (2, 1, 3)),
    ("n8", lambda L, x, b: L.cholesky_solve(b, x.triu(), True), (), 8, (8, 2)),
]


def _factor_like(batch, n, seed):
    """A lower/upper Cholesky-like factor: ``triangular`` with a positive diagonal."""
    x = triangular(batch, n, seed)
    idx = np.arange(n)
    x[..., idx, idx] = np.abs(x[..., idx, idx])
    return x


@pytest.mark.parametrize("name,fn,xbatch,n,bshape", CHOLESKY_SOLVES,
                         ids=[c[0] for c in CHOLESKY_SOLVES])
def test_cholesky_solve_against_torch(name, fn, xbatch, n, bshape):
    x = _factor_like(xbatch, n, seed=n)
    check_op(None, lambda s, b: fn(torch, s, b), lambda s, b: fn(ad, s, b),
             inputs=[x, rhs(bshape)])


def test_cholesky_solve_and_inverse_gradient_uses_the_whole_factor():
    """PyTorch's gradient of the factor is a full matrix (not restricted to the triangle
    read): so is ours."""
    x, b = _factor_like((2,), 4, seed=1), rhs((2, 4, 3))
    check_op(None, lambda s, c: torch.cholesky_solve(c, s), lambda s, c: ad.cholesky_solve(c, s),
             inputs=[x, b], fd=False)
    check_op(None, lambda s: torch.cholesky_inverse(s, upper=True),
             lambda s: ad.cholesky_inverse(s, upper=True), inputs=[np.swapaxes(x, -1, -2)
                                                                   .copy()], fd=False)


TRIANGULAR = [
    # name, kwargs, A's batch and n, B's shape
    ("lower", dict(upper=False), (), 4, (4, 3)),
    ("upper", dict(upper=True), (2,), 3, (2, 3, 2)),
    ("unit_lower", dict(upper=False, unitriangular=True), (2,), 5, (2, 5, 2)),
    ("unit_upper", dict(upper=True, unitriangular=True), (), 5, (5, 1)),
    ("right_lower", dict(upper=False, left=False), (2,), 3, (2, 4, 3)),
    ("right_unit_upper", dict(upper=True, left=False, unitriangular=True), (), 4, (2, 4)),
    ("B_batch_folded", dict(upper=True), (), 3, (4, 3, 2)),
    ("both_broadcast", dict(upper=False), (2, 1), 3, (5, 3, 2)),
    ("A_batch_only", dict(upper=True, left=False), (3, 2), 2, (4, 2)),
    ("n1", dict(upper=False), (2,), 1, (2, 1, 3)),
    ("n8", dict(upper=True), (), 8, (8, 2)),
]


@pytest.mark.parametrize("name,kw,abatch,n,bshape", TRIANGULAR, ids=[t[0] for t in TRIANGULAR])
def test_solve_triangular_against_torch(name, kw, abatch, n, bshape):
    a = triangular(abatch, n, seed=n)
    check_op(None, lambda x, y: torch.linalg.solve_triangular(x, y, **kw),
             lambda x, y: ad.linalg.solve_triangular(x, y, **kw), inputs=[a, rhs(bshape)])


def test_gradient_of_one_operand_only():
    a, b = triangular((2,), 4, seed=3), rhs((2, 4, 3))
    A, B = ad.tensor(a, requires_grad=True), ad.tensor(b)
    A2, B2 = ad.tensor(a), ad.tensor(b, requires_grad=True)
    ad.linalg.solve_triangular(A, B, upper=True).sum().backward()
    ad.linalg.solve_triangular(A2, B2, upper=True).sum().backward()
    ga, gb = A.grad, B2.grad
    ad.execute(device="numpy")
    ta, tb = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    torch.linalg.solve_triangular(ta, tb, upper=True).sum().backward()
    np.testing.assert_allclose(ga.numpy(), ta.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gb.numpy(), tb.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_cholesky_info_like_potrf():
    """Not positive definite at step 2 and 1, positive definite, NaN: ``info`` is LAPACK's;
    the columns before the failing one are PyTorch's."""
    s = np.float32([[[4, 2, 1], [2, 1, 3], [1, 3, 5]], [[-1, 0, 0], [0, 1, 0], [0, 0, 1]],
                    [[4, 2, 1], [2, 5, 3], [1, 3, 6]], [[1, 0, 0], [np.nan, 1, 0], [0, 0, 1]]])
    got = [ad.linalg.cholesky_ex(ad.tensor(s) * 1.0), ad.linalg.cholesky_ex(ad.tensor(s) * 1.0,
                                                                            upper=True)]
    ad.execute(device="numpy")
    for upper, r in zip((False, True), got):
        want = torch.linalg.cholesky_ex(torch.from_numpy(s), upper=upper)
        np.testing.assert_array_equal(r.info.numpy(), want.info.numpy())
        assert r.info.dtype == ad.int32
        np.testing.assert_allclose(r.L.numpy()[2], want.L.numpy()[2], rtol=1e-6)
        first = r.L.numpy()[0] if not upper else r.L.numpy()[0].T
        np.testing.assert_allclose(first[:, 0], [2, 1, 0.5], rtol=1e-6)


def test_known_non_positive_definite_matrix_raises_torchs_error():
    s = np.float32([[[2, 1], [1, 3]], [[1, 2], [2, 1]]])
    cases = [(lambda L, x: L.linalg.cholesky(x), s), (lambda L, x: L.linalg.cholesky(x), s[1]),
             (lambda L, x: L.linalg.cholesky_ex(x, check_errors=True), s),
             (lambda L, x: L.linalg.cholesky(x, upper=True), s)]
    for fn, v in cases:
        with pytest.raises(RuntimeError) as theirs:
            fn(torch, torch.from_numpy(v))
        with pytest.raises(ad.linalg.LinAlgError) as ours:
            fn(ad, ad.tensor(v))
        assert str(ours.value).startswith(str(theirs.value)), (ours.value, theirs.value)
        assert __file__.split("/")[-1] in str(ours.value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError) as theirs:
            torch.cholesky(torch.from_numpy(s))
        with pytest.raises(ad.linalg.LinAlgError) as ours:
            ad.cholesky(ad.tensor(s))
    assert str(ours.value).startswith(str(theirs.value))
    r = ad.linalg.cholesky_ex(ad.tensor(s))                  # unchecked: info reports it
    ad.execute(device="numpy")
    np.testing.assert_array_equal(r.info.numpy(), [0, 2])


# -- LU ----------------------------------------------------------------------------------------
LU_SHAPES = [((), 1, 1), ((3,), 2, 2), ((2,), 4, 4), ((), 8, 8), ((2,), 5, 3), ((), 3, 6),
             ((2, 1), 6, 2), ((), 1, 4)]
LU_IDS = [f"{m}x{n}" + (f"_b{len(b)}" if b else "") for b, m, n in LU_SHAPES]

LU_FUNCS = [
    ("lu_factor.LU", lambda L, a: L.linalg.lu_factor(a).LU),
    ("lu_factor_ex.LU", lambda L, a: L.linalg.lu_factor_ex(a)[0]),
    ("lu.L", lambda L, a: L.linalg.lu(a).L),
    ("lu.U", lambda L, a: L.linalg.lu(a).U),
]


@pytest.mark.parametrize("batch,m,n", LU_SHAPES, ids=LU_IDS)
@pytest.mark.parametrize("name,fn", LU_FUNCS, ids=[f[0] for f in LU_FUNCS])
def test_lu_against_torch(name, fn, batch, m, n):
    a = general(batch, m, n, seed=m + n)
    check_op(None, lambda t: fn(torch, t), lambda t: fn(ad, t), inputs=[a])


@pytest.mark.parametrize("batch,m,n", LU_SHAPES, ids=LU_IDS)
def test_lu_pivots_permutation_and_info_exactly(batch, m, n):
    a = general(batch, m, n, seed=m + n)
    for fn in (lambda L, t: L.linalg.lu_factor(t).pivots, lambda L, t: L.linalg.lu(t).P,
               lambda L, t: L.linalg.lu_factor_ex(t).info,
               lambda L, t: L.linalg.lu_factor_ex(t).pivots):
        check_op(None, lambda t: fn(torch, t), lambda t: fn(ad, t), inputs=[a],
                 forward_only=True)


def test_lu_of_singular_matrices_like_getrf():
    s = np.float32([[[1, 2, 3], [2, 4, 6], [1, 1, 1]], [[0, 0, 0], [0, 0, 0], [0, 0, 1]],
                    [[2, 1, 0], [1, 3, 0], [0, 0, 0]]])
    r = ad.linalg.lu_factor_ex(ad.tensor(s) * 1.0)
    p = ad.linalg.lu(ad.tensor(s) * 1.0)
    ad.execute(device="numpy")
    w = torch.linalg.lu_factor_ex(torch.from_numpy(s))
    wp = torch.linalg.lu(torch.from_numpy(s))
    np.testing.assert_array_equal(r.info.numpy(), w.info.numpy())
    np.testing.assert_array_equal(r.pivots.numpy(), w.pivots.numpy())
    np.testing.assert_allclose(r.LU.numpy(), w.LU.numpy(), atol=1e-6)
    for got, want in zip(p, wp):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6)


def test_known_singular_matrix_raises_in_lu_factor():
    s = np.float32([[[2, 1], [1, 3]], [[1, 2], [2, 4]]])
    for fn, v in [(lambda L, x: L.linalg.lu_factor(x), s),
                  (lambda L, x: L.linalg.lu_factor(x), s[1]),
                  (lambda L, x: L.linalg.lu_factor_ex(x, check_errors=True), s)]:
        with pytest.raises(RuntimeError) as theirs:
            fn(torch, torch.from_numpy(v))
        with pytest.raises(ad.linalg.LinAlgError) as ours:
            fn(ad, ad.tensor(v))
        assert str(ours.value).startswith(str(theirs.value)), (ours.value, theirs.value)
    ad.linalg.lu(ad.tensor(s))                               # lu does not check


LU_SOLVES = [
    # name, kwargs, A's batch and n, B's shape
    ("left", dict(), (), 4, (4, 3)),
    ("adjoint", dict(adjoint=True), (2,), 3, (2, 3, 2)),
    ("right", dict(left=False), (2,), 3, (2, 4, 3)),
    ("right_adjoint", dict(left=False, adjoint=True), (), 5, (2, 5)),
    ("B_batch_folded", dict(), (), 3, (4, 3, 2)),
    ("both_broadcast", dict(adjoint=True), (2, 1), 3, (5, 3, 2)),
    ("n1", dict(), (2,), 1, (2, 1, 3)),
    ("n8", dict(), (), 8, (8, 2)),
]


@pytest.mark.parametrize("name,kw,abatch,n,bshape", LU_SOLVES, ids=[s[0] for s in LU_SOLVES])
def test_lu_solve_against_torch(name, kw, abatch, n, bshape):
    """``LU`` and ``B`` as free inputs (every entry of ``LU`` is read), the pivots of a
    well-conditioned matrix; then ``lu_factor`` and ``lu_solve`` chained."""
    a = general(abatch, n, seed=n + 1)
    lu_t, piv = torch.linalg.lu_factor(torch.from_numpy(a))
    pv = piv.numpy().astype(np.int32)
    check_op(None, lambda x, p, y: torch.linalg.lu_solve(x, p.int(), y, **kw),
             lambda x, p, y: ad.linalg.lu_solve(x, p, y, **kw),
             inputs=[np.ascontiguousarray(lu_t.numpy()), pv, rhs(bshape)])
    check_op(None, lambda x, y: torch.linalg.lu_solve(*torch.linalg.lu_factor(x), y, **kw),
             lambda x, y: ad.linalg.lu_solve(*ad.linalg.lu_factor(x), y, **kw),
             inputs=[a, rhs(bshape)])


# -- QR ----------------------------------------------------------------------------------------
QR_SHAPES = [((), 1, 1), ((3,), 2, 2), ((2,), 4, 4), ((), 8, 8), ((2,), 5, 3), ((), 3, 6),
             ((2, 1), 6, 2), ((), 1, 4), ((), 4, 1)]
QR_IDS = [f"{m}x{n}" + (f"_b{len(b)}" if b else "") for b, m, n in QR_SHAPES]


def _qr_both(L, a, mode):
    q, r = L.linalg.qr(a, mode)
    return L.cat([q.flatten(-2), r.flatten(-2)], -1)


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("batch,m,n", QR_SHAPES, ids=QR_IDS)
def test_qr_against_torch(batch, m, n, mode):
    """``Q`` and ``R`` (signs as LAPACK's), gradients where PyTorch has them."""
    a = general(batch, m, n, seed=m * n)
    differentiable = mode == "reduced" or (mode == "complete" and m <= n)
    if mode == "r":
        check_op(None, lambda t: torch.linalg.qr(t, "r").R, lambda t: ad.linalg.qr(t, "r").R,
                 inputs=[a], forward_only=True)
        return
    check_op(None, lambda t: _qr_both(torch, t, mode), lambda t: _qr_both(ad, t, mode),
             inputs=[a], forward_only=not differentiable)


def test_qr_signs_follow_lapack():
    """A zero column below the diagonal keeps its sign (``dlarfg``: ``H = I``), a zero
    column, a rank-deficient matrix."""
    mats = [np.float32([[-1, 2], [0, 4]]), np.float32([[1, 2], [0, -4]]),
            np.float32([[0, 2], [0, -4], [0, 1]]), np.float32([[1, 1], [1, 1]])]
    outs = [ad.linalg.qr(ad.tensor(m) * 1.0) for m in mats]
    ad.execute(device="numpy")
    for m, (q, r) in zip(mats, outs):
        tq, tr = torch.linalg.qr(torch.from_numpy(m))
        np.testing.assert_allclose(q.numpy(), tq.numpy(), atol=1e-6)
        np.testing.assert_allclose(r.numpy(), tr.numpy(), atol=1e-6)


@pytest.mark.filterwarnings("ignore:torch.qr is deprecated")
def test_torch_qr_and_tensor_qr():
    a = general((2,), 5, 3, seed=1)
    for fn in (lambda L, t: L.qr(t).R, lambda L, t: t.qr(some=False).Q):
        check_op(None, lambda t: fn(torch, t), lambda t: fn(ad, t), inputs=[a],
                 forward_only=True)
    with pytest.warns(UserWarning, match="torch.qr is deprecated"):
        ad.qr(ad.tensor(a))


@pytest.mark.parametrize("mode,shape", [("r", (3, 2)), ("complete", (4, 2))])
def test_qr_backward_raises_where_torch_does(mode, shape):
    a = general((), *shape, seed=2)
    t = torch.tensor(a, requires_grad=True)
    with pytest.raises(RuntimeError) as theirs:
        torch.linalg.qr(t, mode).R.sum().backward()
    x = ad.tensor(a, requires_grad=True)
    r = ad.linalg.qr(x, mode).R
    with pytest.raises(RuntimeError) as ours:
        r.sum().backward()
    assert str(ours.value) == str(theirs.value)


# -- eigh --------------------------------------------------------------------------------------
EIGH_NB = [(1, ()), (2, (3,)), (3, (2,)), (5, ()), (8, ())]


def _eig_fn(L, w, v):
    """``V exp(diag(w)) V^T``: independent of the eigenvectors' signs."""
    return v @ (w.exp().unsqueeze(-1) * v.mT)


EIGH = [
    ("eigenvalues", lambda L, x: L.linalg.eigh(x + x.mT).eigenvalues),
    ("eigenvalues_upper", lambda L, x: L.linalg.eigh(x + x.mT, UPLO="U")[0]),
    ("eigvalsh", lambda L, x: L.linalg.eigvalsh(x @ x.mT, "U")),
    ("eigenvectors_squared", lambda L, x: L.linalg.eigh(x + x.mT).eigenvectors ** 2),
    ("matrix_function", lambda L, x: _eig_fn(L, *L.linalg.eigh(x + x.mT))),
]


@pytest.mark.parametrize("n,batch", EIGH_NB, ids=[f"n{n}" for n, _ in EIGH_NB])
@pytest.mark.parametrize("name,fn", EIGH, ids=[e[0] for e in EIGH])
def test_eigh_against_torch(name, fn, n, batch):
    """Eigenvalues, and functions of the eigenvectors that do not depend on their signs
    (random symmetric matrices: eigenvalue gaps above ~1e-2 of the norm)."""
    x = rhs(tuple(batch) + (n, n), seed=n) / 2
    check_op(None, lambda t: fn(torch, t), lambda t: fn(ad, t), inputs=[x])


@pytest.mark.parametrize("upper", [False, True])
def test_eigh_reads_one_triangle(upper):
    a = spd((2,), 5, seed=4)
    junk = rhs((2, 5, 5), seed=5) * 10
    keep = np.triu(np.ones((5, 5), bool)) if upper else np.tril(np.ones((5, 5), bool))
    a = np.where(keep, a, junk).astype(np.float32)
    uplo = "U" if upper else "L"
    check_op(None, lambda t: torch.linalg.eigvalsh(t, uplo), lambda t: ad.linalg.eigvalsh(t, uplo),
             inputs=[a], fd=False)


def test_eigh_vectors_orthonormal_and_accurate_at_n32():
    """n = 32, random symmetric: eigenvalues within 1e-6 of ``||A||_2`` from float64
    LAPACK (measured 2.4e-7; PyTorch's float32 6.8e-7), ``V^T V = I`` within 2e-6
    (7.4e-7), residual ``A V - V diag(w)`` within 2e-6 of ``||A||_2`` (4.3e-7)."""
    x = np.random.default_rng(0).uniform(-1.0, 1.0, (2, 32, 32))
    a = ((x + np.swapaxes(x, -1, -2)) / 2).astype(np.float32)
    w, v = ad.linalg.eigh(ad.tensor(a))
    ad.execute(device="numpy")
    w64 = np.linalg.eigvalsh(a.astype(np.float64))
    norm = np.abs(w64).max()
    w, v = w.numpy(), v.numpy()
    assert np.abs(w - w64).max() / norm < 1e-6
    assert np.abs(np.swapaxes(v, -1, -2) @ v - np.eye(32)).max() < 2e-6
    assert np.abs(a @ v - v * w[:, None, :]).max() / norm < 2e-6


def test_eigh_of_diagonal_and_repeated_eigenvalues():
    """Already diagonal (no rotation: every ``a_pq`` is 0), and a repeated eigenvalue
    (values exact; the gradient of a sign- and basis-independent function is PyTorch's)."""
    d = np.float32([[3, 0, 0], [0, -1, 0], [0, 0, 2]])
    r = np.float32([[2, 1, 1], [1, 2, 1], [1, 1, 2]])            # eigenvalues 1, 1, 4
    outs = [ad.linalg.eigh(ad.tensor(d) * 1.0), ad.linalg.eigvalsh(ad.tensor(r) * 1.0)]
    ad.execute(device="numpy")
    np.testing.assert_array_equal(outs[0].eigenvalues.numpy(), [-1, 2, 3])
    np.testing.assert_array_equal(np.abs(outs[0].eigenvectors.numpy()),
                                  [[0, 0, 1], [1, 0, 0], [0, 1, 0]])
    np.testing.assert_allclose(outs[1].numpy(), [1, 1, 4], atol=1e-6)
    check_op(None, lambda t: torch.linalg.eigvalsh(t).sum(), lambda t: ad.linalg.eigvalsh(t).sum(),
             inputs=[r], fd=False)


# -- shared: devices, empties, named tuples ----------------------------------------------------
DEVICE_FUNCS = [
    ("cholesky", lambda L, x: L.linalg.cholesky(_spd_of(L, x))),
    ("solve_triangular", lambda L, x: L.linalg.solve_triangular(x, x[..., :2], upper=True)),
    ("cholesky_solve", lambda L, x: L.cholesky_solve(x[..., :2], x.tril())),
    ("lu_factor", lambda L, x: L.linalg.lu_factor(x).LU),
    ("lu_solve", lambda L, x: L.linalg.lu_solve(*L.linalg.lu_factor(x), x.mT[..., 1:])),
    ("qr", lambda L, x: _qr_both(L, x, "reduced")),
    ("matrix_norm_1", lambda L, x: L.linalg.matrix_norm(x, 1)),
    ("eigh", lambda L, x: _eig_fn(L, *L.linalg.eigh(x + x.mT))),
]


@pytest.mark.parametrize("device", device_params())
@pytest.mark.parametrize("name,fn", DEVICE_FUNCS, ids=[f[0] for f in DEVICE_FUNCS])
def test_on_every_device(name, fn, device):
    x = triangular((2,), 3, seed=5) + np.float32(0.3) * np.tril(rhs((2, 3, 3)), -1)
    check_op(None, lambda t: fn(torch, t), lambda t: fn(ad, t), inputs=[x], device=device)


def test_empty_matrices_like_torch():
    z, zr = np.zeros((2, 0, 0), np.float32), np.zeros((2, 0, 3), np.float32)
    fns = [(lambda L, t: L.linalg.cholesky(t), z), (lambda L, t: L.linalg.cholesky_ex(t).info, z),
           (lambda L, t: L.linalg.solve_triangular(t, t, upper=True), z),
           (lambda L, t: L.cholesky_inverse(t), z),
           (lambda L, t: L.linalg.lu_factor(t).LU, zr),
           (lambda L, t: L.linalg.lu_factor(t).pivots, zr),
           (lambda L, t: L.linalg.lu_factor_ex(t).info, z), (lambda L, t: L.linalg.lu(t).P, zr),
           (lambda L, t: L.linalg.lu(t).U, zr), (lambda L, t: L.linalg.qr(t).Q, zr),
           (lambda L, t: L.linalg.qr(t, "complete").R, zr),
           (lambda L, t: L.linalg.qr(t, "r").Q, zr), (lambda L, t: L.linalg.eigh(t)[0], z),
           (lambda L, t: L.linalg.eigh(t)[1], z), (lambda L, t: L.linalg.eigvalsh(t), z)]
    outs = [f(ad, ad.tensor(v)) for f, v in fns]
    ad.execute(device="numpy")
    for (f, v), o in zip(fns, outs):
        w = f(torch, torch.from_numpy(v))
        assert o.numpy().shape == tuple(w.shape), (o.numpy().shape, w.shape)
        assert o.numpy().dtype == w.numpy().dtype
        np.testing.assert_array_equal(o.numpy(), w.numpy())


def test_results_are_named_tuples():
    a = ad.tensor(general((2,), 3))
    c, f, fe = ad.linalg.cholesky_ex(ad.tensor(spd((2,), 3))), ad.linalg.lu_factor(a), \
        ad.linalg.lu_factor_ex(a)
    p, q, e = ad.linalg.lu(a), ad.linalg.qr(a), ad.linalg.eigh(a)
    assert (e.eigenvalues, e.eigenvectors) == tuple(e)
    assert (c.L, c.info) == tuple(c) and (f.LU, f.pivots) == tuple(f)
    assert (fe.LU, fe.pivots, fe.info) == tuple(fe) and (p.P, p.L, p.U) == tuple(p)
    assert (q.Q, q.R) == tuple(q)
    assert f.pivots.dtype == ad.int32 and fe.info.dtype == ad.int32 and c.info.shape == (2,)


# -- errors before anything runs ---------------------------------------------------------------
def _f32(*shape):
    return np.ones(shape, np.float32)


def _i32(*shape):
    return np.ones(shape, np.int32)


def _eye(*shape):
    return np.broadcast_to(np.eye(shape[-1], dtype=np.float32), shape).copy()


ERRORS = [
    ("vector_norm_int", lambda L, T: L.linalg.vector_norm(T(np.ones(3, np.int64)))),
    ("vector_norm_str_ord", lambda L, T: L.linalg.vector_norm(T(_f32(3)), ord="fro")),
    ("vector_norm_empty_-1", lambda L, T: L.linalg.vector_norm(T(_f32(0)), ord=-1)),
    ("vector_norm_empty_inf", lambda L, T: L.linalg.vector_norm(T(_f32(0)), ord=math.inf)),
    ("vector_norm_empty_-1.5", lambda L, T: L.linalg.vector_norm(T(_f32(0)), ord=-1.5)),
    ("vector_norm_empty_dim", lambda L, T: L.linalg.vector_norm(T(_f32(2, 0)), math.inf, 1)),
    ("vector_norm_dim", lambda L, T: L.linalg.vector_norm(T(_f32(3)), dim=2)),
    ("vector_norm_dtype_int", lambda L, T: L.linalg.vector_norm(T(_f32(3)), dtype=L.int64)),
    ("vector_norm_dtype_narrow", lambda L, T: L.linalg.vector_norm(T(_f32(3)),
                                                                    dtype=L.float16)),
    ("matrix_norm_1d", lambda L, T: L.linalg.matrix_norm(T(_f32(3)))),
    ("matrix_norm_ord", lambda L, T: L.linalg.matrix_norm(T(_f32(3, 3)), ord=3)),
    ("matrix_norm_ord_str", lambda L, T: L.linalg.matrix_norm(T(_f32(3, 3)), ord="abc")),
    ("matrix_norm_same_dims", lambda L, T: L.linalg.matrix_norm(T(_f32(3, 3)), dim=(0, 0))),
    ("matrix_norm_one_dim", lambda L, T: L.linalg.matrix_norm(T(_f32(3, 3)), dim=(0,))),
    ("matrix_norm_int", lambda L, T: L.linalg.matrix_norm(T(np.ones((3, 3), np.int64)))),
    ("matrix_norm_dtype", lambda L, T: L.linalg.matrix_norm(T(_f32(2, 2)), dtype=L.int64)),
    ("norm_3d_ord", lambda L, T: L.linalg.norm(T(_f32(2, 3, 3)), ord=1)),
    ("norm_3d_fro", lambda L, T: L.linalg.norm(T(_f32(2, 2, 2)), ord="fro")),
    ("norm_1d_fro", lambda L, T: L.linalg.norm(T(_f32(3)), ord="fro")),
    ("norm_3_dims", lambda L, T: L.linalg.norm(T(_f32(2, 3, 3)), dim=(0, 1, 2))),
    ("norm_str_one_dim", lambda L, T: L.linalg.norm(T(_f32(3, 3)), ord="fro", dim=1)),
    ("norm_int", lambda L, T: L.linalg.norm(T(np.ones(3, np.int64)))),
    ("vecdot_int", lambda L, T: L.linalg.vecdot(T(np.ones(3, np.int64)), T(_f32(3)))),
    ("vecdot_dtypes", lambda L, T: L.linalg.vecdot(T(_f32(3)), T(np.ones(3, np.int64)))),
    ("multi_dot_one", lambda L, T: L.linalg.multi_dot([T(_f32(3, 3))])),
    ("multi_dot_last_3d", lambda L, T: L.linalg.multi_dot([T(_f32(3, 3)), T(_f32(2, 3, 3))])),
    ("multi_dot_first_3d", lambda L, T: L.linalg.multi_dot([T(_f32(2, 3, 3)), T(_f32(3, 3))])),
    ("multi_dot_last_0d", lambda L, T: L.linalg.multi_dot([T(_f32(3)), T(np.float32(1))])),
    ("multi_dot_middle_1d", lambda L, T: L.linalg.multi_dot([T(_f32(3, 3)), T(_f32(3)),
                                                             T(_f32(3, 3))])),
    ("multi_dot_sizes", lambda L, T: L.linalg.multi_dot([T(_f32(3, 3)), T(_f32(4, 3))])),
    ("multi_dot_vector_sizes", lambda L, T: L.linalg.multi_dot([T(_f32(4)), T(_f32(3, 3))])),
    ("multi_dot_dtypes", lambda L, T: L.linalg.multi_dot([T(_f32(3, 3)),
                                                          T(np.ones((4, 3), np.int64))])),
    ("cross_size", lambda L, T: L.linalg.cross(T(_f32(4)), T(_f32(4)))),
    ("cross_ranks", lambda L, T: L.linalg.cross(T(_f32(2, 3)), T(_f32(3)))),
    ("cross_dim", lambda L, T: L.linalg.cross(T(_f32(3)), T(_f32(3)), dim=1)),
    ("vander_0d", lambda L, T: L.linalg.vander(T(np.float32(1)))),
    ("vander_N1", lambda L, T: L.linalg.vander(T(_f32(3)), N=1)),
    ("vander_bool", lambda L, T: L.linalg.vander(T(np.ones(3, bool)))),
    ("vander_half", lambda L, T: L.linalg.vander(T(_f32(3)).half())),
    ("torch_vander_2d", lambda L, T: L.vander(T(_f32(2, 3)))),
    ("torch_vander_N", lambda L, T: L.vander(T(_f32(3)), N=-1)),
    ("cond_p", lambda L, T: L.linalg.cond(T(_f32(3, 3)), p=3)),
    ("cond_p_str", lambda L, T: L.linalg.cond(T(_f32(3, 3)), p="abc")),
    ("cond_1d", lambda L, T: L.linalg.cond(T(_f32(3)), p=1)),
    ("cond_rect_1", lambda L, T: L.linalg.cond(T(_f32(2, 3)), p=1)),
    ("cond_rect_1.0", lambda L, T: L.linalg.cond(T(_f32(2, 3)), p=1.0)),
    ("cond_rect_-inf", lambda L, T: L.linalg.cond(T(_f32(2, 3)), p=-math.inf)),
    ("cond_rect_fro", lambda L, T: L.linalg.cond(T(_f32(2, 3)), p="fro")),
    ("cond_int", lambda L, T: L.linalg.cond(T(np.ones((3, 3), np.int64)), p=1)),
    ("cond_half", lambda L, T: L.linalg.cond(T(_eye(2, 2)).half(), p=1)),
    ("tensorinv_ind", lambda L, T: L.linalg.tensorinv(T(_f32(4, 2, 2)), ind=0)),
    ("tensorinv_shape", lambda L, T: L.linalg.tensorinv(T(_f32(4, 2, 3)), ind=1)),
    ("tensorinv_int", lambda L, T: L.linalg.tensorinv(T(np.ones((2, 2), np.int64)), ind=1)),
    ("tensorsolve_shape", lambda L, T: L.linalg.tensorsolve(T(_f32(2, 3, 6)), T(_f32(2, 2)))),
    ("tensorsolve_dims", lambda L, T: L.linalg.tensorsolve(T(_f32(2, 3, 6)), T(_f32(2, 3)),
                                                           dims=(5,))),
    ("cholesky_1d", lambda L, T: L.linalg.cholesky(T(_f32(3)))),
    ("cholesky_rect", lambda L, T: L.linalg.cholesky(T(_f32(2, 3)))),
    ("cholesky_int", lambda L, T: L.linalg.cholesky(T(np.ones((2, 2), np.int64)))),
    ("cholesky_half", lambda L, T: L.linalg.cholesky(T(_eye(2, 2)).half())),
    ("cholesky_ex_rect", lambda L, T: L.linalg.cholesky_ex(T(_f32(2, 3)))),
    ("cholesky_ex_int", lambda L, T: L.linalg.cholesky_ex(T(np.ones((2, 2), np.int64)))),
    ("torch_cholesky_rect", lambda L, T: L.cholesky(T(_f32(2, 3)))),
    ("torch_cholesky_int", lambda L, T: L.cholesky(T(np.ones((2, 2), np.int64)))),
    ("solve_triangular_1d", lambda L, T: L.linalg.solve_triangular(T(_f32(3)), T(_f32(3, 1)),
                                                                   upper=True)),
    ("solve_triangular_B_1d", lambda L, T: L.linalg.solve_triangular(T(_f32(3, 3)),
                                                                     T(_f32(3)), upper=True)),
    ("solve_triangular_rect", lambda L, T: L.linalg.solve_triangular(T(_f32(2, 3)),
                                                                     T(_f32(2, 1)), upper=True)),
    ("solve_triangular_sizes", lambda L, T: L.linalg.solve_triangular(T(_f32(3, 3)),
                                                                      T(_f32(2, 1)), upper=True)),
    ("solve_triangular_sizes_right", lambda L, T: L.linalg.solve_triangular(
        T(_f32(3, 3)), T(_f32(3, 2)), upper=True, left=False)),
    ("solve_triangular_int", lambda L, T: L.linalg.solve_triangular(
        T(np.ones((3, 3), np.int32)), T(_f32(3, 1)), upper=True)),
    ("solve_triangular_half", lambda L, T: L.linalg.solve_triangular(
        T(_eye(2, 2)).half(), T(_f32(2, 1)).half(), upper=True)),
    ("solve_triangular_no_upper", lambda L, T: L.linalg.solve_triangular(T(_f32(3, 3)),
                                                                         T(_f32(3, 1)))),
    ("solve_triangular_batches", lambda L, T: L.linalg.solve_triangular(
        T(_f32(2, 3, 3)), T(_f32(4, 3, 1)), upper=True)),
    ("cholesky_solve_B_1d", lambda L, T: L.cholesky_solve(T(_f32(3)), T(_f32(3, 3)))),
    ("cholesky_solve_L_1d", lambda L, T: L.cholesky_solve(T(_f32(3, 1)), T(_f32(3)))),
    ("cholesky_solve_sizes", lambda L, T: L.cholesky_solve(T(_f32(2, 1)), T(_f32(3, 3)))),
    ("cholesky_solve_rect", lambda L, T: L.cholesky_solve(T(_f32(3, 1)), T(_f32(3, 2)))),
    ("cholesky_solve_dtypes", lambda L, T: L.cholesky_solve(T(_f32(3, 1)),
                                                            T(np.ones((3, 3), np.int64)))),
    ("cholesky_solve_int", lambda L, T: L.cholesky_solve(T(np.ones((2, 1), np.int64)),
                                                         T(np.ones((2, 2), np.int64)))),
    ("cholesky_solve_batches", lambda L, T: L.cholesky_solve(T(_f32(2, 3, 1)),
                                                             T(_f32(4, 3, 3)))),
    ("cholesky_inverse_1d", lambda L, T: L.cholesky_inverse(T(_f32(3)))),
    ("cholesky_inverse_rect", lambda L, T: L.cholesky_inverse(T(_f32(2, 3)))),
    ("cholesky_inverse_int", lambda L, T: L.cholesky_inverse(T(np.ones((2, 2), np.int64)))),
    ("lu_factor_1d", lambda L, T: L.linalg.lu_factor(T(_f32(3)))),
    ("lu_factor_int", lambda L, T: L.linalg.lu_factor(T(np.ones((2, 2), np.int64)))),
    ("lu_factor_half", lambda L, T: L.linalg.lu_factor(T(_eye(2, 2)).half())),
    ("lu_factor_no_pivot", lambda L, T: L.linalg.lu_factor(T(_f32(2, 2)), pivot=False)),
    ("lu_factor_ex_no_pivot", lambda L, T: L.linalg.lu_factor_ex(T(_f32(2, 2)), pivot=False)),
    ("lu_1d", lambda L, T: L.linalg.lu(T(_f32(3)))),
    ("lu_int", lambda L, T: L.linalg.lu(T(np.ones((2, 2), np.int64)))),
    ("lu_no_pivot", lambda L, T: L.linalg.lu(T(_f32(2, 2)), pivot=False)),
    ("lu_solve_pivot_dtype", lambda L, T: L.linalg.lu_solve(T(_f32(3, 3)),
                                                            T(np.ones(3, np.int64)),
                                                            T(_f32(3, 1)))),
    ("lu_solve_B_1d", lambda L, T: L.linalg.lu_solve(T(_f32(3, 3)), T(_i32(3)), T(_f32(3)))),
    ("lu_solve_sizes", lambda L, T: L.linalg.lu_solve(T(_f32(3, 3)), T(_i32(3)),
                                                      T(_f32(2, 1)))),
    ("lu_solve_sizes_right", lambda L, T: L.linalg.lu_solve(T(_f32(3, 3)), T(_i32(3)),
                                                            T(_f32(3, 2)), left=False)),
    ("lu_solve_rect", lambda L, T: L.linalg.lu_solve(T(_f32(2, 3)), T(_i32(2)), T(_f32(2, 1)))),
    ("lu_solve_1d", lambda L, T: L.linalg.lu_solve(T(_f32(3)), T(_i32(3)), T(_f32(3, 1)))),
    ("lu_solve_pivot_size", lambda L, T: L.linalg.lu_solve(T(_f32(3, 3)), T(_i32(2)),
                                                           T(_f32(3, 1)))),
    ("lu_solve_pivot_batch", lambda L, T: L.linalg.lu_solve(T(_f32(2, 3, 3)), T(_i32(3)),
                                                            T(_f32(2, 3, 1)))),
    ("lu_solve_int", lambda L, T: L.linalg.lu_solve(T(np.ones((3, 3), np.int64)), T(_i32(3)),
                                                    T(np.ones((3, 1), np.int64)))),
    ("lu_solve_dtypes", lambda L, T: L.linalg.lu_solve(T(_f32(3, 3)), T(_i32(3)),
                                                       T(np.ones((3, 1), np.int64)))),
    ("lu_solve_half", lambda L, T: L.linalg.lu_solve(T(_eye(3, 3)).half(), T(_i32(3)),
                                                     T(_f32(3, 1)).half())),
    ("lu_solve_batches", lambda L, T: L.linalg.lu_solve(T(_f32(2, 3, 3)), T(_i32(2, 3)),
                                                        T(_f32(4, 3, 1)))),
    ("qr_mode", lambda L, T: L.linalg.qr(T(_f32(3, 3)), mode="foo")),
    ("qr_1d", lambda L, T: L.linalg.qr(T(_f32(3)))),
    ("qr_int", lambda L, T: L.linalg.qr(T(np.ones((3, 3), np.int64)))),
    ("qr_bool", lambda L, T: L.linalg.qr(T(np.ones((3, 3), bool)))),
    ("qr_half", lambda L, T: L.linalg.qr(T(_eye(3, 3)).half())),
    ("eigh_uplo", lambda L, T: L.linalg.eigh(T(_f32(3, 3)), UPLO="X")),
    ("eigh_1d", lambda L, T: L.linalg.eigh(T(_f32(3)))),
    ("eigh_rect", lambda L, T: L.linalg.eigh(T(_f32(2, 3)))),
    ("eigh_int", lambda L, T: L.linalg.eigh(T(np.ones((3, 3), np.int64)))),
    ("eigh_half", lambda L, T: L.linalg.eigh(T(_eye(3, 3)).half())),
    ("eigvalsh_rect", lambda L, T: L.linalg.eigvalsh(T(_f32(2, 3)))),
    ("eigvalsh_uplo", lambda L, T: L.linalg.eigvalsh(T(_f32(3, 3)), "x")),
]


@pytest.mark.filterwarnings("ignore:torch.cholesky is deprecated")
@pytest.mark.parametrize("name,call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_like_torch(name, call):
    """PyTorch's exception type and message (ours adds where it was traced)."""
    with pytest.raises(Exception) as theirs:
        call(torch, torch.tensor)
    with pytest.raises(type(theirs.value)) as ours:
        call(ad, ad.tensor)
    if isinstance(theirs.value, TypeError) or "must match the size" in str(theirs.value):
        return                                   # Python's argument errors, broadcasting
    if isinstance(theirs.value, IndexError):     # autodiff's DimError names the op first
        assert str(theirs.value) in str(ours.value), (str(ours.value), str(theirs.value))
    else:
        assert str(ours.value).startswith(str(theirs.value)), (str(ours.value),
                                                               str(theirs.value))
    assert f"{__file__.split('/')[-1]}:" in str(ours.value)


NOT_IMPLEMENTED = [
    lambda: ad.linalg.matrix_norm(ad.ones(3, 3), 2),
    lambda: ad.linalg.matrix_norm(ad.ones(3, 3), "nuc"),
    lambda: ad.linalg.norm(ad.ones(3, 3), -2),
    lambda: ad.linalg.cond(ad.ones(3, 3)),
    lambda: ad.linalg.cond(ad.ones(3, 3), "nuc"),
]


@pytest.mark.parametrize("call", NOT_IMPLEMENTED)
def test_norms_of_singular_values_are_not_implemented(call):
    with pytest.raises(NotImplementedError, match="no SVD"):
        call()


def test_too_large_matrices_are_refused():
    from autodiff.graph.linalg import eigh
    with pytest.raises(NotImplementedError, match=f"up to {eigh.MAX_N} rows"):
        ad.linalg.eigh(ad.zeros(eigh.MAX_N + 1, eigh.MAX_N + 1))
    n = lu.MAX_N + 1
    big = ad.zeros(n, n)
    for fn in (ad.linalg.cholesky, lambda t: ad.linalg.solve_triangular(t, t, upper=True),
               ad.linalg.lu_factor, ad.linalg.qr, ad.cholesky_inverse,
               lambda t: ad.cholesky_solve(t, t),
               lambda t: ad.linalg.lu_solve(t, ad.zeros(n).int(), t)):
        with pytest.raises(NotImplementedError, match=f"up to {lu.MAX_N} rows"):
            fn(big)


# -- graph sizes and accuracy ------------------------------------------------------------------
def _qr_sum(a):
    q, r = ad.linalg.qr(a)
    return q.sum() + r.sum()


GRAPHS = [
    # name, fn(A) with gradient, traced nodes per row allowed (measured: 19, 7, 63, 88, 59,
    # 410 for eigh: its sweeps grow with log n)
    ("cholesky", lambda a: ad.linalg.cholesky(a).sum(), 22),
    ("solve_triangular", lambda a: ad.linalg.solve_triangular(a, a, upper=False).sum(), 9),
    ("lu_factor", lambda a: ad.linalg.lu_factor(a).LU.sum(), 70),
    ("lu_solve", lambda a: ad.linalg.lu_solve(*ad.linalg.lu_factor(a), a).sum(), 100),
    ("qr", _qr_sum, 66),
    ("eigh", lambda a: _eig_fn(ad, *ad.linalg.eigh(a)).sum(), 560),
]


@pytest.mark.parametrize("name,fn,per_row_max", GRAPHS, ids=[g[0] for g in GRAPHS])
def test_graph_grows_linearly_with_n(name, fn, per_row_max):
    """The unrolled algorithms add a fixed number of traced nodes per row (value and
    gradient; n = 8 and 32: cholesky 223 / 679, solve_triangular 127 / 295, lu_factor
    644 / 2,156, lu_factor + lu_solve 966 / 3,078, qr 523 / 1,939)."""
    counts = {}
    for n in (8, 32):
        a = ad.tensor(spd((), n), requires_grad=True)
        fn(a).backward()
        counts[n] = ad.execute(device="numpy").nodes["traced"]
    per_row = (counts[32] - counts[8]) / 24
    assert per_row < per_row_max, counts


def test_float32_accuracy_against_float64():
    """n = 32: every result within 3e-6 of float64 PyTorch relative to its largest entry
    (measured: cholesky 1.9e-7, solve_triangular 2.0e-7, lu_factor 5.4e-7, lu_solve 7.9e-7,
    Q 6.5e-7, R 2.0e-7; PyTorch's float32: 6.8e-8, 2.6e-7, 6.3e-7, 5.8e-7, 7.9e-7, 2.8e-7),
    and within 3x PyTorch's own float32 error or 1e-6."""
    a = general((2,), 32, seed=7)
    s = spd((2,), 32, seed=7)
    t = triangular((2,), 32, seed=7)
    b = rhs((2, 32, 3))
    A, S, T, B = (ad.tensor(x) for x in (a, s, t, b))
    ours = [ad.linalg.cholesky(S), ad.linalg.solve_triangular(T, B, upper=False),
            ad.linalg.lu_factor(A).LU, ad.linalg.lu_solve(*ad.linalg.lu_factor(A), B),
            *ad.linalg.qr(A)]
    ad.execute(device="numpy")

    def ref(L, a, s, t, b):
        return [L.linalg.cholesky(s), L.linalg.solve_triangular(t, b, upper=False),
                L.linalg.lu_factor(a).LU, L.linalg.lu_solve(*L.linalg.lu_factor(a), b),
                *L.linalg.qr(a)]
    exact = ref(torch, *(torch.from_numpy(x).double() for x in (a, s, t, b)))
    theirs = ref(torch, *(torch.from_numpy(x) for x in (a, s, t, b)))
    for o, e, th in zip(ours, exact, theirs):
        e = e.numpy()
        scale = np.abs(e).max()
        err = np.abs(o.numpy() - e).max() / scale
        their = np.abs(th.numpy() - e).max() / scale
        assert err < 3e-6 and err < max(3 * their, 1e-6), (err, their)


def test_names_exist_as_in_torch():
    names = ["vector_norm", "matrix_norm", "norm", "vecdot", "multi_dot", "matmul", "diagonal",
             "cross", "vander", "cond", "tensorinv", "tensorsolve", "cholesky", "cholesky_ex",
             "solve_triangular", "lu_factor", "lu_factor_ex", "lu", "lu_solve", "qr", "eigh",
             "eigvalsh"]
    for name in names:
        assert hasattr(torch.linalg, name), name
        f = getattr(ad.linalg, name, None)
        assert callable(f) and f.__doc__ and name in ad.linalg.__all__, name
    for name in ("cholesky", "cholesky_solve", "cholesky_inverse", "qr"):
        assert hasattr(torch, name) and hasattr(torch.Tensor, name), name
        assert callable(getattr(ad, name, None)) and name in ad.__all__, name
        assert getattr(ad.Tensor, name).__doc__, name
    assert callable(ad.vander) and "vander" in ad.__all__
