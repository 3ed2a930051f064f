"""bench.profile's report: a body shared by launches of different sizes (one kernel name,
several flop counts) gets the GFLOP/s of its launches together, not of its last one."""
from types import SimpleNamespace

from autodiff.device.opencl.runtime import Launch
from bench.profile import report


def test_gflops_of_a_shared_body_sum_each_launch():
    big = Launch("k7_dp", (4, 8, 1), (1, 1, 1), flops=4_000_000)
    small = Launch("k7_dp", (1, 8, 1), (1, 1, 1), flops=1_000_000)
    other = Launch("k9_elw", (16, 1, 1), (16, 1, 1))
    timed = [(big, 40e-6), (small, 20e-6), (other, 5e-6)]
    text = report(SimpleNamespace(stats={}), timed, top=5, launches=3)
    line = next(x for x in text.splitlines() if x.strip().startswith("k7_dp") and " x2 " in x)
    # 5 MFLOP in 60 us: 83.3 GFLOP/s (the last launch's flops alone would say 33.3)
    assert "83.3 GFLOP/s" in line, line
    launches = text.split("slowest launches")[1].splitlines()[1:]
    assert launches[0].split()[0] == "k7_dp" and "100.0 GFLOP/s" in launches[0]
    assert "50.0 GFLOP/s" in launches[1]
    assert "GFLOP/s" not in launches[2]
