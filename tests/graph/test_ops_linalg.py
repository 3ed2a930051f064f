"""Fixed-rank products (``mm``, ``bmm``, ``mv``, ``dot``, ``inner``, ``outer``), the
``add*`` forms, and ``clone``, ``nansum``/``nanmean``, ``aminmax``, ``logit``, ``diff``
against PyTorch: values and gradients (also float64 finite differences), as module
functions and methods; wrong ranks and sizes raise before anything runs."""
import numpy as np
import pytest
import torch

import autodiff as ad
from op_helper import check_op

CASES = [
    ("mm", lambda L, a, b: L.mm(a, b), [(3, 4), (4, 5)]),
    ("bmm", lambda L, a, b: a.bmm(b), [(2, 3, 4), (2, 4, 5)]),
    ("mv", lambda L, a, b: L.mv(a, b), [(3, 4), (4,)]),
    ("dot", lambda L, a, b: a.dot(b), [(7,), (7,)]),
    ("vdot", lambda L, a, b: L.vdot(a, b), [(5,), (5,)]),
    ("inner", lambda L, a, b: L.inner(a, b), [(2, 3, 4), (5, 4)]),
    ("inner_1d", lambda L, a, b: a.inner(b), [(4,), (4,)]),
    ("outer", lambda L, a, b: L.outer(a, b), [(3,), (4,)]),
    ("ger", lambda L, a, b: a.ger(b), [(3,), (2,)]),
    ("addmm", lambda L, c, a, b: L.addmm(c, a, b, beta=0.5, alpha=2.0), [(4,), (3, 5), (5, 4)]),
    ("addmv", lambda L, c, a, b: c.addmv(a, b, alpha=-1.5), [(3,), (3, 5), (5,)]),
    ("baddbmm", lambda L, c, a, b: L.baddbmm(c, a, b, beta=2.0), [(2, 3, 4), (2, 3, 5),
                                                                    (2, 5, 4)]),
    ("addbmm", lambda L, c, a, b: c.addbmm(a, b), [(3, 4), (2, 3, 5), (2, 5, 4)]),
    ("clone", lambda L, a: L.clone(a) * 2.0, [(3, 4)]),
    ("nansum", lambda L, a: L.nansum(a, 1), [(3, 4)]),
    ("nanmean", lambda L, a: a.nanmean(0, keepdim=True), [(3, 4)]),
    ("aminmax_min", lambda L, a: L.aminmax(a, dim=1).min, [(3, 4)]),
    ("aminmax_max", lambda L, a: a.aminmax(dim=0, keepdim=True).max, [(3, 4)]),
    ("logit", lambda L, a: L.logit(a.sigmoid()), [(3, 4)]),
    ("logit_eps", lambda L, a: a.sigmoid().logit(eps=0.2), [(3, 4)]),
    ("diff", lambda L, a: L.diff(a), [(3, 5)]),
    ("diff_n2_dim0", lambda L, a: a.diff(n=2, dim=0), [(4, 3)]),
    ("diff_prepend_append", lambda L, a, p, q: L.diff(a, dim=1, prepend=p, append=q),
     [(3, 4), (3, 1), (3, 2)]),
]


@pytest.mark.parametrize("name,fn,shapes", CASES, ids=[c[0] for c in CASES])
def test_op_against_torch(name, fn, shapes):
    margin = 0.3 if name.startswith("logit") else 0.1
    check_op(shapes, lambda *xs: fn(torch, *xs), lambda *xs: fn(ad, *xs), margin=margin)


def test_nan_aware_reductions_skip_nan():
    x = np.float32([[1.0, np.nan, 2.0], [np.nan, np.nan, np.nan]])
    a = ad.tensor(x, requires_grad=True)
    s, m = a.nansum(1), a.nanmean(1)
    (s.sum() + m.nan_to_num().sum()).backward()
    g = a.grad
    ad.execute(device="numpy")
    t = torch.tensor(x, requires_grad=True)
    (t.nansum(1).sum() + t.nanmean(1).nan_to_num().sum()).backward()
    np.testing.assert_allclose(s.numpy(), t.nansum(1).detach().numpy())
    np.testing.assert_allclose(m.numpy(), t.nanmean(1).detach().numpy())   # NaN where all
    np.testing.assert_allclose(g.numpy()[0], t.grad.numpy()[0])
    np.testing.assert_array_equal(g.numpy()[1], 0.0)    # an all-NaN row: torch's is NaN


def test_addmm_beta_zero_ignores_input_nan():
    c = ad.tensor(np.full((2, 2), np.nan, np.float32))
    out = ad.addmm(c, ad.tensor(np.eye(2, dtype=np.float32)), np.ones((2, 2), np.float32),
                   beta=0)
    ad.execute(device="numpy")
    np.testing.assert_array_equal(out.numpy(), np.ones((2, 2)))


@pytest.mark.parametrize("call", [
    lambda: ad.mm(ad.randn(2, 3, 4), ad.randn(4, 5)),
    lambda: ad.mm(ad.randn(2, 3), ad.randn(4, 5)),
    lambda: ad.bmm(ad.randn(2, 3, 4), ad.randn(3, 4, 5)),
    lambda: ad.mv(ad.randn(2, 3), ad.randn(3, 1)),
    lambda: ad.dot(ad.randn(3), ad.randn(4)),
    lambda: ad.outer(ad.randn(3, 1), ad.randn(4)),
])
def test_wrong_ranks_and_sizes_raise_at_trace_time(call):
    with pytest.raises(RuntimeError):
        call()
