"""The dtype tables of tests/graph/test_dtypes.py on another device, each table one
compiled program, compared with PyTorch (and so with the numpy reference, which passes
the same tables)."""
from __future__ import annotations

import pathlib
import sys

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "graph"))

import autodiff as ad  # noqa: E402
from dtype_cases import (DTYPES, GRADS, NUMPY, PAIRS, binary_cases, bitwise_cases,  # noqa: E402
                         cast_cases, check_cases, int_division_cases, int_pow_cases,
                         reduction_cases, sample, scalar_cases, unary_cases, where_cases,
                         zero_size_cases)
import torch  # noqa: E402


#: cases per program on TVM: LLVM's time grows faster than the size of one fused function
#: (the 420 unary cases: 44 s of CPU as one program, 20-26 s in programs of 20-60 cases)
TVM_CHUNK = 30


def _check(cases, device: str, **kw) -> int:
    """:func:`check_cases` over ``cases``, on TVM in programs of :data:`TVM_CHUNK` cases."""
    n = TVM_CHUNK if device == "tvm" else len(cases)
    return sum(check_cases(cases[i:i + n], device, **kw) for i in range(0, len(cases), n))


#: the dtype tables, one compiled program each (chunks of them on TVM): elementwise results
#: packed into one fused kernel per result dtype (:func:`check_cases`), casts and reductions
#: as kernels of their own (through buffers of every dtype)
TABLES = {
    "binary": lambda d: _check(binary_cases(PAIRS), d, pack=True) > 150,
    "unary": lambda d: _check(unary_cases() + scalar_cases() + where_cases(), d,
                              pack=True) > 350,
    "integer": lambda d: _check(int_division_cases() + bitwise_cases() + int_pow_cases(), d,
                                exact=True, pack=True) > 0,
    "cast": lambda d: _check(cast_cases(), d, exact=True) > 0,
    "reduction": lambda d: _check(reduction_cases() + [c for c in zero_size_cases()
                                                       if "()" in c[0]], d) > 0,
}


def check_tables(device: str, table: str | None = None) -> None:
    """Every table of :data:`TABLES` (or only ``table``) on ``device``; a table's cases
    are checked against PyTorch inside :func:`check_cases`, which raises on a mismatch."""
    for name in [table] if table else TABLES:
        assert TABLES[name](device), f"{name}: fewer cases than the table must hold"


def check_division_by_zero(device: str) -> None:
    """Integer // and % by a zero computed on the device give 0 (never a trap), as on the
    numpy device (a zero known while tracing raises, as PyTorch's ZeroDivisionError)."""
    x = ad.tensor(np.array([5, -5, 0, -2**31], np.int32))
    z = ad.tensor(np.zeros(4, np.int32)) * 1
    m = ad.tensor(np.full(4, -1, np.int32))
    outs = [x // z, x % z, x // m, x % m, x.long() // z.long()]
    ad.execute(device=device)
    got = [o.numpy().tolist() for o in outs]
    assert got == [[0] * 4, [0] * 4, [-5, 5, 0, -2**31], [0] * 4, [0] * 4]


def check_int_min_constant(device: str) -> None:
    """The int32 minimum as a constant (C reads ``-2147483648`` as a 64-bit literal)."""
    x = ad.tensor(np.array([5, -5, 3, 7], np.int32))
    outs = [x.where(x > 1, -2**31), x.clamp(min=-2**31) * 1, x.long().where(x < 0, -2**31)]
    ad.execute(device=device)
    assert [o.numpy().tolist() for o in outs] == [[5, -2**31, 3, 7], [5, -5, 3, 7],
                                                   [-2**31, -5, -2**31, -2**31]]


def check_feeders(device: str) -> None:
    """A Feeder and a Receiver of every dtype in one loop."""
    rng = np.random.default_rng(9)
    data = {d: [sample(d, (2, 3), rng) for _ in range(3)] for d in DTYPES}
    its = {d: iter(v) for d, v in data.items()}
    got = []

    def body():
        xs = [ad.Feeder(lambda d=d: next(its[d]), (2, 3), getattr(ad, d), name=f"x_{d}")
              for d in DTYPES]
        ad.Receiver(lambda *a: got.append(a), xs + [xs[0] == xs[1], xs[2].sum()])
    ad.ir_for(3, body)
    ad.execute(device=device)
    for k, arrays in enumerate(got):
        for d, a in zip(DTYPES, arrays):
            assert a.dtype == NUMPY[d]
            np.testing.assert_array_equal(a, data[d][k])
        assert arrays[-1].dtype == np.int64 and arrays[-1] == data["int64"][k].sum()


def check_gradients(device: str) -> None:
    """Gradients through casts, every case of GRADS in one program."""
    x_np = np.array([0.3, -1.7, 2.2, 0.9], np.float32)
    xs = {k: ad.tensor(x_np, requires_grad=True) for k in GRADS}
    for k, fn in GRADS.items():
        fn(xs[k]).sum().backward()
    grads = {k: x.grad for k, x in xs.items()}
    ad.execute(device=device)
    for k, fn in GRADS.items():
        xt = torch.tensor(x_np, requires_grad=True)
        fn(xt).sum().backward()
        np.testing.assert_allclose(grads[k].numpy(), xt.grad.numpy(), rtol=1e-3, atol=1e-4,
                                   err_msg=k)
