"""N processes training with DistributedDataParallel match one process training with the
global batch (20 steps): W1 (mlp255), the 6-layer tiny transformer (W2, random batches of
sequences) and the char-LM of examples/transformer.py (AdamW, schedule, clipping); 2
processes with equal shards on numpy and OpenCL, 3 with uneven ones (global batch 8: 3, 3, 2
rows) on numpy. Parameters are bit-identical on every process; one
all-reduce per bucket."""
from __future__ import annotations

import numpy as np
import pytest

from launch import devices, load, needs_mpi, run

pytestmark = [needs_mpi, pytest.mark.slow]

BATCH, STEPS = 8, 20


# numpy with equal (2 processes) and uneven (3) shards, OpenCL with equal ones (the shards'
# sizes are the host's arithmetic, the same on every device; 3 OpenCL processes on 2 cores
# cost 35 s); TVM's collectives and failures are tested in test_collectives.py and
# test_failure.py (its three-model parity run alone takes over two minutes of compiling)
@pytest.fixture(scope="module", params=[p for p in devices((2, 3))
                                        if p.values[0] in ((2, "opencl"), (2, "numpy"),
                                                           (3, "numpy"))])
def ranks(request, tmp_path_factory):
    n, device = request.param
    out = tmp_path_factory.mktemp(f"parity{n}{device}")
    run("parity", n, out, device, BATCH, STEPS, timeout=900)
    return [load(out, "parity", r) for r in range(n)]


def _params(saved: dict, prefix: str) -> dict:
    return {k[len(prefix):]: v for k, v in saved.items() if k.startswith(prefix)}


def test_parameters_identical_on_every_rank(ranks):
    for key in (k for k in ranks[0] if k.startswith("ddp_")):
        for r in ranks[1:]:
            assert r[key].tobytes() == ranks[0][key].tobytes(), key


@pytest.mark.parametrize("workload", ["w1", "w2", "lm"])
def test_matches_one_process_with_the_global_batch(ranks, workload):
    ddp, ref = (_params(ranks[0], f"{p}_{workload}_") for p in ("ddp", "ref"))
    assert ddp.keys() == ref.keys() and ddp
    for name, want in ref.items():
        got = ddp[name]
        if name.endswith("self_attn.in_proj_bias"):
            # The key projection's bias has a gradient of exactly zero (softmax ignores a
            # constant added to every score of a row): both runs' values there are float32
            # rounding noise that AdamW scales up to steps of ~lr. Left out of the 1e-5
            # check; bounded by the optimizer's step size instead.
            d = got.shape[0] // 3
            assert np.abs(got[d:2 * d] - want[d:2 * d]).max() < 3e-3 * STEPS
            got, want = np.delete(got, np.s_[d:2 * d]), np.delete(want, np.s_[d:2 * d])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max(),
                                   err_msg=f"{workload} {name}")


def test_one_all_reduce_per_bucket(ranks):
    r = ranks[0]
    assert int(r["w1_buckets"]) == 1 and int(r["w1_collectives"]) == 1
    # W2's 0.6 MB of gradients in buckets of 0.25 MiB
    assert int(r["w2_buckets"]) == 4 and int(r["w2_collectives"]) == 4
    # the char-LM: one bucket, and the all-reduce of the loss for the log
    assert int(r["lm_collectives"]) == 2


def test_logged_loss_is_the_global_batch_loss(ranks):
    np.testing.assert_allclose(ranks[0]["lm_losses"], ranks[0]["lm_ref_losses"], rtol=1e-5)
    for r in ranks[1:]:
        assert r["lm_losses"].tobytes() == ranks[0]["lm_losses"].tobytes()
