"""DistributedDataParallel in one process (MPI's singleton world of size 1): what it checks
while tracing, how it buckets, and that one process trains as without it."""
from __future__ import annotations

import numpy as np
import pytest

import autodiff as ad
import autodiff.distributed as dist
from autodiff import nn
from autodiff.distributed.ddp import plan_buckets
from autodiff.optim import SGD
from launch import needs_mpi

pytestmark = needs_mpi


def _model(seed=0):
    ad.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))


def test_rank_and_world_of_one_process():
    assert dist.get_rank() == 0 and dist.get_world_size() == 1 and dist.is_initialized()
    assert dist.is_available()


def test_buckets_in_reverse_order_under_the_cap():
    m = _model()
    ps = list(m.parameters())           # 24 + 6 + 18 + 3 floats (4 bytes each)
    assert [[p.shape for p in b] for b in plan_buckets(ps, 120)] == \
        [[(3,), (3, 6), (6,)], [(6, 4)]]
    assert len(plan_buckets(ps, 10 ** 9)) == 1
    assert [len(b) for b in plan_buckets(ps, 1)] == [1, 1, 1, 1]      # one each
    ddp = dist.DistributedDataParallel(m, bucket_cap_mb=120 / 2 ** 20)
    assert ddp.buckets == [["2.bias", "2.weight", "0.bias"], ["0.weight"]]
    # PyTorch's small first bucket (under the default cap): then buckets of the cap
    assert [[p.shape for p in b] for b in plan_buckets(ps, 120, 20)] == \
        [[(3,)], [(3, 6), (6,)], [(6, 4)]]


def test_the_default_cap_has_a_1mib_first_bucket():
    m = nn.Sequential(nn.Linear(512, 512), nn.Linear(512, 256))   # weights 1 and 0.5 MiB
    names = dist.DistributedDataParallel(m).buckets
    assert names == [["1.bias", "1.weight", "0.bias"], ["0.weight"]]
    assert dist.DistributedDataParallel(m, bucket_cap_mb=25).buckets == \
        [["1.bias", "1.weight", "0.bias", "0.weight"]]


def test_state_dict_keys_are_module_prefixed():
    ddp = dist.DistributedDataParallel(_model())
    assert list(ddp.state_dict()) == ["module.0.weight", "module.0.bias", "module.2.weight",
                                      "module.2.bias"]


def test_one_process_trains_as_without_the_wrapper():
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    finals = []
    for wrap in (False, True):
        m = _model()
        net = dist.DistributedDataParallel(m) if wrap else m
        opt = SGD(net.parameters(), lr=0.1)

        def step():
            opt.zero_grad()
            net(ad.Feeder(lambda: x, [5, 4])).square().sum().backward()
            opt.step()
        ad.ir_for(4, step)
        ad.execute(device="numpy")
        finals.append([p.numpy() for p in m.parameters()])
    for a, b in zip(*finals):
        assert a.tobytes() == b.tobytes()


class _PartlyUsed(nn.Module):
    def __init__(self):
        super().__init__()
        self.used, self.extra = nn.Linear(4, 3), nn.Linear(2, 2)

    def forward(self, x):
        return self.used(x)


def test_unused_parameters_are_named():
    x = ad.tensor(np.ones((1, 4), np.float32))
    ddp = dist.DistributedDataParallel(_PartlyUsed())
    with pytest.raises(RuntimeError, match=r"parameter\(s\) extra.weight, extra.bias "
                                           r"received no gradient.*find_unused_parameters"):
        ddp(x).sum().backward()
    ad.reset()
    with ddp.no_sync():                   # gradients only accumulate: nothing checked
        ddp(x).sum().backward()
    assert ddp.require_backward_grad_sync
    ad.reset()
    ddp = dist.DistributedDataParallel(_PartlyUsed(), find_unused_parameters=True)
    ddp(x).sum().backward()


def test_bad_arguments():
    with pytest.raises(ValueError, match="device_ids"):
        dist.DistributedDataParallel(_model(), device_ids=[0])
    with pytest.raises(ValueError, match="backend 'nccl'"):
        dist.init_process_group("nccl")
    with pytest.raises(ValueError, match="unsupported reduction op"):
        dist.all_reduce(ad.tensor(np.ones(2, np.float32)) * 1, "prod")
    with pytest.raises(TypeError, match="op 'mean' needs a floating tensor"):
        dist.all_reduce(ad.tensor(np.ones(2, np.int32)) * 1, dist.ReduceOp.AVG)
    with pytest.raises(ValueError, match="src=1 is not a rank of this group of 1"):
        dist.broadcast(ad.tensor(np.ones(2, np.float32)) * 1, src=1)
    with pytest.raises(NotImplementedError, match="async_op"):
        dist.all_reduce(ad.tensor(np.ones(2, np.float32)) * 1, async_op=True)


def test_a_single_process_never_loads_mpi():
    import subprocess
    import sys
    code = ("import sys, numpy as np, autodiff as ad; x = ad.Tensor(np.ones(2, np.float32));"
            "y = x * 2; ad.execute(device='numpy'); print('mpi4py' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
