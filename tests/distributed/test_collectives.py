"""all_reduce / broadcast / reduce on 2 and 3 processes (mpiexec), on every device that runs
collectives: values against numpy on every rank's inputs, odd sizes, bit-identical results
on every rank, inside ir_for, and gradients against PyTorch and float64 finite differences
of the global loss."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from launch import devices, load, needs_mpi, run

pytestmark = needs_mpi

SIZES = [(), (7,), (13, 3), (1001,)]
OPS = {"float32": ("sum", "mean", "max", "min"), "float16": ("sum", "max"),
       "int32": ("sum", "max", "min"), "int64": ("sum", "min"), "bool": ("max", "min")}


@pytest.fixture(scope="module", params=devices((2, 3)))
def ranks(request, tmp_path_factory):
    n, device = request.param
    out = tmp_path_factory.mktemp(f"collectives{n}{device}")
    run("collectives", n, out, device, timeout=600)
    return [load(out, "collectives", r) for r in range(n)]


def _reduce(xs, op):
    x = np.stack([np.asarray(v, np.float64) if v.dtype.kind == "f" else v for v in xs])
    return {"sum": x.sum(0), "mean": x.mean(0), "max": x.max(0), "min": x.min(0)}[op]


def test_all_reduce_values_and_identical_bits(ranks):
    n = len(ranks)
    for dt, ops in OPS.items():
        for k, shape in enumerate(SIZES):
            xs = [r[f"in_{dt}_{k}"] for r in ranks]
            for op in ops:
                key = f"all_reduce_{op}_{dt}_{k}"
                got = [r[key] for r in ranks]
                assert got[0].shape == shape and got[0].dtype == np.dtype(dt), key
                for g in got[1:]:         # the same bits on every rank
                    assert g.tobytes() == got[0].tobytes(), key
                want = _reduce(xs, op)
                if dt == "float32":
                    np.testing.assert_allclose(got[0], want, rtol=1e-6, atol=1e-6 * n,
                                               err_msg=key)
                elif dt == "float16":
                    np.testing.assert_allclose(got[0], want, rtol=2e-3, atol=2e-3 * n,
                                               err_msg=key)
                else:
                    np.testing.assert_array_equal(got[0], want.astype(dt), err_msg=key)


def test_broadcast_and_reduce(ranks):
    n = len(ranks)
    src = n - 1
    for dt in OPS:
        for k, _ in enumerate(SIZES):
            x_src = ranks[src][f"in_{dt}_{k}"]
            for r in ranks:
                np.testing.assert_array_equal(r[f"broadcast_{dt}_{k}"], x_src)
            if dt == "bool":
                continue
            want = _reduce([r[f"in_{dt}_{k}"] for r in ranks], "sum")
            got = ranks[src][f"reduce_{dt}_{k}"]
            tol = 2e-3 if dt == "float16" else 1e-6
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol * n)
            for r in ranks[:-1]:
                assert not r[f"reduce_{dt}_{k}"].any()


def test_all_reduce_in_a_loop(ranks):
    want = np.mean([2.0 * r["loop_in"].astype(np.float64) for r in ranks], axis=0)
    for r in ranks:
        np.testing.assert_allclose(r["loop_out"], want, rtol=1e-6, atol=1e-6)
        assert r["loop_out"].tobytes() == ranks[0]["loop_out"].tobytes()


def _global_loss(name, xs, ws, cs, n):
    """``sum_r sum(c_r * sin(collective(x_r * w_r)))`` in torch (float64)."""
    y = torch.stack([x * w for x, w in zip(xs, ws)])
    if name in ("sum", "mean"):
        z = [y.sum(0) if name == "sum" else y.mean(0)] * n
    elif name in ("max", "min"):
        z = [y.amax(0) if name == "max" else y.amin(0)] * n
    elif name == "broadcast":
        z = [y[n - 1]] * n
    else:                                  # reduce to rank 0: zeros elsewhere
        z = [y.sum(0)] + [torch.zeros_like(y[0])] * (n - 1)
    return sum((c * torch.sin(zr)).sum() for c, zr in zip(cs, z))


@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "broadcast", "reduce"])
def test_gradients_against_torch_and_finite_differences(ranks, name):
    n = len(ranks)
    xs, ws, cs = ([torch.tensor(r[f"grad_{v}_{name}"], dtype=torch.float64) for r in ranks]
                  for v in ("x", "w", "c"))
    ws = [w.requires_grad_() for w in ws]
    _global_loss(name, xs, ws, cs, n).backward()
    for r, w in zip(ranks, ws):
        np.testing.assert_allclose(r[f"grad_{name}"], w.grad.numpy(), rtol=1e-5, atol=1e-5)
    # central differences of the global loss in float64, a few elements of every rank's w
    rng = np.random.default_rng(0)
    base = [w.detach().clone() for w in ws]
    eps = 1e-6
    for rk in range(n):
        for flat in rng.choice(12, 4, replace=False):
            i = np.unravel_index(flat, (4, 3))
            vals = []
            for s in (eps, -eps):
                wp = [b.clone() for b in base]
                wp[rk][i] += s
                vals.append(float(_global_loss(name, xs, wp, cs, n)))
            fd = (vals[0] - vals[1]) / (2 * eps)
            np.testing.assert_allclose(ranks[rk][f"grad_{name}"][i], fd, rtol=1e-4,
                                       atol=1e-5)


def test_unused_parameters_take_part_as_zeros(ranks):
    n = len(ranks)
    # d sum(W x + b) / dW = ones(2) outer sum of x's rows; ``extra`` is used on rank 0 only
    used = np.mean([np.outer(np.ones(2), r["unused_x"].sum(0)) for r in ranks], axis=0)
    extra = np.outer(np.ones(2), ranks[0]["unused_x"].sum(0)) / n
    for r in ranks:
        np.testing.assert_allclose(r["unused_grad_used.weight"], used, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(r["unused_grad_used.bias"], [4, 4], rtol=1e-6)
        np.testing.assert_allclose(r["unused_grad_extra.weight"], extra, rtol=1e-6,
                                   atol=1e-6)
        np.testing.assert_allclose(r["unused_grad_extra.bias"], [4 / n, 4 / n], rtol=1e-6)


def test_checkpoints_are_written_by_rank_0(ranks):
    assert [int(r["checkpoint_writes"]) for r in ranks] == [1] + [0] * (len(ranks) - 1)
    assert all(bool(r["checkpoint_seen"]) for r in ranks)
