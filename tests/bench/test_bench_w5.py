"""W5's PyTorch and JAX versions compute the example's loss and AdamW step, the thread
modes of the command line, the measured ceilings and the two-table report (no timing is
asserted anywhere)."""
from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

from bench import report
from bench.run import thread_counts
from bench.workloads import charlm

torch_missing = importlib.util.find_spec("torch") is None
jax_missing = importlib.util.find_spec("jax") is None


@pytest.fixture(scope="module")
def start():
    """The example's initial weights and first windows, and its loss on window 0 from
    autodiff's numpy device."""
    import autodiff as ad
    s = charlm.setup(2)
    mod = charlm.example()
    ad.reset()
    c = charlm.config()
    ad.manual_seed(c.seed)
    model = mod.CharTransformer(s.vocab, c.d_model, c.heads, c.layers, c.seq, c.dropout)
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, s.params[k])          # setup() = the example's init
    w = s.train[0]
    loss = mod._lm_loss(model, ad.Tensor(w[:, :-1].copy(), dtype="int32"),
                        ad.Tensor(w[:, 1:].copy(), dtype="int32"))
    ad.execute(device="numpy")
    return s, float(loss.numpy())


def test_setup_matches_the_example_sampler(start):
    s, ref = start
    c = charlm.config()
    assert s.train.shape == (2, c.batch, c.seq + 1) and s.train.dtype == np.int32
    assert s.val.shape[1:] == (c.batch, c.seq + 1) and s.vocab == 103
    assert 4.0 < ref < 5.5                                     # about ln(103) at the start
    assert charlm.flops() > 2e9


@pytest.mark.skipif(torch_missing, reason="torch not installed")
def test_torch_version_has_the_example_loss(start):
    import torch
    from bench.workloads.charlm_torch import model
    s, ref = start
    net = model(s.vocab)
    net.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in s.params.items()})
    w = torch.from_numpy(s.train[0].astype(np.int64))
    logits = net(w[:, :-1])
    got = torch.nn.functional.cross_entropy(logits.reshape(-1, s.vocab), w[:, 1:].reshape(-1))
    np.testing.assert_allclose(got.item(), ref, rtol=1e-5)


@pytest.mark.skipif(jax_missing, reason="jax not installed")
def test_jax_version_has_the_example_loss_and_torch_adamw(start):
    import jax.numpy as jnp
    from bench.workloads.charlm_jax import adamw, clip, loss
    s, ref = start
    P = {k: jnp.asarray(v) for k, v in s.params.items()}
    w = jnp.asarray(s.train[0])
    np.testing.assert_allclose(float(loss(P, w[:, :-1], w[:, 1:])), ref, rtol=1e-5)
    if torch_missing:
        return
    import torch                       # clipping, AdamW and the schedule against PyTorch's
    from bench.workloads.charlm_torch import schedule
    c = charlm.config()
    rng = np.random.default_rng(1)
    p0 = rng.standard_normal(5).astype(np.float32)
    t = torch.tensor(p0.copy(), requires_grad=True)
    opt = torch.optim.AdamW([t], lr=c.lr, weight_decay=charlm.WD)
    steps = 12
    sched = schedule(opt, steps, c)
    zero = {"a": jnp.zeros(5)}
    P1, M1, V1 = {"a": jnp.asarray(p0)}, zero, dict(zero)
    for step in range(steps):
        g = rng.standard_normal(5).astype(np.float32) * (3.0 if step % 2 else 0.1)
        t.grad = torch.tensor(g)
        torch.nn.utils.clip_grad_norm_([t], c.clip)
        np.testing.assert_allclose(opt.param_groups[0]["lr"], charlm.lr_at(step, steps),
                                   rtol=1e-6)
        opt.step()
        sched.step()
        P1, M1, V1 = adamw(P1, M1, V1, clip({"a": jnp.asarray(g)}, c.clip),
                           jnp.int32(step + 1), charlm.lr_at(step, steps))
    np.testing.assert_allclose(np.asarray(P1["a"]), t.detach().numpy(), rtol=2e-6)


def test_thread_counts():
    n = len(os.sched_getaffinity(0))
    assert thread_counts("1") == [1] and thread_counts("1,all") == ([1, n] if n > 1 else [1])
    assert thread_counts("2, 2") == [2]
    with pytest.raises(ValueError):
        thread_counts("0")


def test_report_has_one_section_per_thread_count():
    row = {"system": "jax-fori", "peer": True, "status": "ok", "first_step_s": 1.0,
           "step_ms": 2.0, "total_s": 3.0, "rss_mb": 100, "gflops": 10.0, "peak_pct": 50.0,
           "val_loss": 1.98771}
    meta = {"command": "python -m bench", "quick": True, "threads": [1, 2],
            "env": {"1": {"OMP_NUM_THREADS": "1"}, "2": {"OMP_NUM_THREADS": "2"}},
            "peak": {"1": {"fma_gflops": 80.0, "sgemm_gflops": 70.0},
                     "2": {"fma_gflops": 160.0, "sgemm_gflops": 130.0}},
            "machine": {"cpu": "x", "cores": 2, "avx512": False, "memory_gib": 1, "os": "o",
                        "python": "3", "versions": {}, "loadavg": [0, 0, 0],
                        "opencl": ["none"], "date": "today"}}
    wl = {"key": "W5", "name": "charlm", "title": "t", "steps": 3, "flops_per_step": 1e9}
    results = {"meta": meta, "workloads": [dict(wl, threads=1, rows=[row]),
                                           dict(wl, threads=2, rows=[row])]}
    md = report.markdown_report(results)
    assert "## One thread per system" in md and "## All cores: 2 threads per system" in md
    assert "SGEMM 70 GFLOP/s" in md and "SGEMM 130 GFLOP/s" in md
    assert md.count("### W5 charlm") == 2 and "1.9877" in md and "50%" in md
    assert "== All cores: 2 threads per system ==" in report.text_report(results)
