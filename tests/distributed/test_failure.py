"""A failure on one process stops every process (mpiexec -n 2, every device): the error names the failing
rank and iteration on every rank, the variables (parameters and optimizer state) are those
after the last iteration every rank completed, bit for bit, and the process group still
works afterwards. A process that dies outright or of an uncaught exception ends the job."""
from __future__ import annotations

import numpy as np
import pytest

from launch import devices, load, needs_mpi, run

pytestmark = needs_mpi

#: scenario -> (failing rank, iteration, its error's type, words of its message)
SCENARIOS = {
    "feeder_rank1_it5": (1, 5, "FeederError", "FeederError: Feeder 'batch' in iteration 5: "
                                              "callback raised ValueError: injected feeder "
                                              "fault"),
    "receiver_rank0_it3": (0, 3, "ReceiverError", "Receiver 'log' in iteration 3"),
    "receiver_rank1_last": (1, 9, "ReceiverError", "Receiver 'log' in iteration 9"),
    "bad_shape_rank1_it2": (1, 2, "FeederError", "expected shape [3, 6] float32, got shape "
                                                 "[4, 6]"),
}


@pytest.fixture(scope="module", params=devices())
def ranks(request, tmp_path_factory):
    n, device = request.param
    out = tmp_path_factory.mktemp(f"failure{device}")
    run("failure", n, out, device, timeout=300)
    return [load(out, "failure", r) for r in range(n)]


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_rank_stops_naming_the_failing_rank(ranks, name):
    rank, it, kind, words = SCENARIOS[name]
    for r, saved in enumerate(ranks):
        msg = str(saved[f"{name}_message"])
        assert msg.startswith(f"rank {rank} of 2 failed in iteration {it}: "), msg
        assert words in msg, msg
        assert f"variables after {it} completed iteration" in msg, msg
        assert int(saved[f"{name}_rank"]) == rank
        assert list(saved[f"{name}_iteration"]) == [it]
        assert int(saved[f"{name}_completed"]) == it
        # the failing process's own error is chained; the others learnt it from it
        assert str(saved[f"{name}_cause"]) == (kind if r == rank else "NoneType")


@pytest.mark.parametrize("name", SCENARIOS)
def test_variables_are_those_of_the_completed_iterations(ranks, name):
    keys = sorted(k for k in ranks[0] if k.startswith(f"{name}_after_"))
    assert len(keys) == 8                       # 4 parameters, 4 momentum buffers
    for saved in ranks:
        for k in keys:
            clean = saved[k.replace("_after_", "_clean_")]
            assert saved[k].tobytes() == clean.tobytes(), k
            assert saved[k].tobytes() == ranks[0][k].tobytes(), k


def test_the_group_still_works_after_failures(ranks):
    assert ranks[0]["final"].tobytes() == ranks[1]["final"].tobytes()


@pytest.mark.parametrize("mode", ["kill", "uncaught"])
def test_a_process_that_dies_ends_the_job(mode):
    res = run("abort", 2, mode, "numpy", timeout=90, expect_rc=None)
    assert res.returncode != 0, res.stdout
    assert "rank 0 finished" not in res.stdout
    if mode == "uncaught":
        assert "ShapeError" in res.stdout and "aborting the job" in res.stdout
