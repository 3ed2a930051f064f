"""Which devices run host callbacks (graph op ``CALLBACK``: ``host_callback`` and the
collectives of data-parallel training): numpy, OpenCL, TVM and CUDA all do. In one
process ``DistributedDataParallel`` traces no
collective, so it trains on every device."""
from __future__ import annotations

import numpy as np
import pytest

import autodiff as ad
import autodiff.distributed as dist
from autodiff import nn
from autodiff.device import unavailable
from autodiff.optim import SGD
from launch import needs_mpi



def _device(name):
    why = unavailable(name)
    return pytest.param(name, marks=pytest.mark.skipif(why is not None, reason=str(why)))


def _host_double(x):
    return ad.host_callback(lambda a: (2 * a).astype(np.float32), [x], x.shape,
                            name="host_double")


def _collective(x):
    y = x * 1.0
    dist.all_reduce(y)
    return y


KINDS = {"host_callback": (_host_double, "host_double", "autodiff.host_callback"),
         "all_reduce": (_collective, "all_reduce_sum", "a collective of autodiff.distributed")}


def _trace(make, calls):
    w = ad.Tensor(np.ones((2, 3), np.float32), requires_grad=False)

    def body():
        x = ad.Feeder(lambda: calls.append(1) or np.full((2, 3), 3, np.float32), (2, 3),
                      name="x")
        w.copy_(make(x) + w)
    ad.ir_for(3, body)
    return w


@pytest.mark.parametrize("kind", [pytest.param("host_callback"),
                                  pytest.param("all_reduce", marks=needs_mpi)])
def test_cuda_runs_them(kind, monkeypatch):
    """On the CUDA host loop, the generated program run on the CPU by the driver stand-in
    of tests/device/cuda_host.py: as on the numpy device."""
    pytest.importorskip("cuda.bindings.driver", reason="the cuda device needs the [cuda] extra")
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "device"))
    import cuda_host
    if cuda_host.gxx():
        pytest.skip(cuda_host.gxx())
    cuda_host.install(monkeypatch)
    try:
        make, _, _ = KINDS[kind]
        w = _trace(make, [])
        ad.execute(device="cuda")
    finally:
        cuda_host.uninstall()
    per = 6.0 if kind == "host_callback" else 3.0
    np.testing.assert_allclose(w.numpy(), np.full((2, 3), 1 + 3 * per, np.float32),
                               rtol=0, atol=0)


@pytest.mark.parametrize("kind", [pytest.param("host_callback"),
                                  pytest.param("all_reduce", marks=needs_mpi)])
@pytest.mark.parametrize("device", ["numpy", _device("opencl"), _device("tvm")])
def test_devices_run_them(device, kind):
    make, _, _ = KINDS[kind]
    w = _trace(make, [])
    ad.execute(device=device)
    # one process: the all-reduce sum is the value itself; host_double doubles it
    per = 6.0 if kind == "host_callback" else 3.0
    np.testing.assert_allclose(w.numpy(), np.full((2, 3), 1 + 3 * per, np.float32),
                               rtol=0, atol=0)


@needs_mpi
@pytest.mark.slow
@pytest.mark.parametrize("device", [_device("opencl"), _device("tvm")])
def test_one_process_ddp_trains_on_every_device(device):
    """World size 1: no collective is traced, the wrapper is the module."""
    finals = []
    for dev in ("numpy", device):
        ad.manual_seed(0)
        model = dist.DistributedDataParallel(nn.Linear(4, 2))
        opt = SGD(model.parameters(), lr=0.1)
        xs = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)

        def step():
            x = ad.Feeder(lambda: xs, [5, 4], name="x")
            opt.zero_grad()
            (model(x) ** 2).mean().backward()
            opt.step()
        ad.ir_for(3, step)
        ad.execute(device=dev)
        finals.append(model.module.weight.numpy())
    assert not np.allclose(finals[0], nn.Linear(4, 2).weight.numpy())
    np.testing.assert_allclose(finals[1], finals[0], rtol=1e-5, atol=1e-6)
