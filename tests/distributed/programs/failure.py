"""Failures on one rank stop every rank: each scenario injects a fault into a 10-step
DistributedDataParallel run, catches the DistributedError every rank raises, and checks
the variables against a clean run of the completed iterations (bit for bit). Results and
messages are saved to ``<out>/failure.<rank>.npz``.

    mpiexec -n 2 python failure.py OUT DEVICE
"""
import sys

import numpy as np

import autodiff as ad
import autodiff.distributed as dist
from autodiff import nn
from autodiff.optim import SGD

out, device = sys.argv[1], sys.argv[2]
rank, world = dist.get_rank(), dist.get_world_size()
ad.manual_seed(0)
model = dist.DistributedDataParallel(nn.Sequential(nn.Linear(6, 5), nn.Tanh(),
                                                   nn.Linear(5, 2)))
opt = SGD(model.parameters(), lr=0.1, momentum=0.9)
params = list(model.parameters())
STEPS = 10


def state() -> list[np.ndarray]:
    return [p.numpy() for p in params] + [s["momentum_buffer"]
                                          for s in opt.state_dict()["state"].values()]


def run(steps: int, fault=None) -> None:
    """``steps`` steps; ``fault(where, k)`` may raise or return a bad value; where is
    "feeder" or "receiver", k the iteration."""
    calls = {"feeder": 0, "receiver": 0}

    def feed():
        k = calls["feeder"]
        calls["feeder"] += 1
        x = np.random.default_rng((k, rank)).standard_normal((3, 6)).astype(np.float32)
        return fault("feeder", k, x) if fault else x

    def receive(loss):
        k = calls["receiver"]
        calls["receiver"] += 1
        if fault:
            fault("receiver", k, loss)

    def step():
        opt.zero_grad()
        loss = model(ad.Feeder(feed, [3, 6], name="batch")).square().mean()
        loss.backward()
        opt.step()
        ad.Receiver(receive, [loss], name="log")

    ad.ir_for(steps, step)
    ad.execute(device=device)


def raise_on(where, r, at, bad=False):
    def fault(w, k, value):
        if w == where and rank == r and k == at:
            if bad:
                return np.zeros((4, 6), np.float32)            # wrong shape
            raise ValueError(f"injected {where} fault")
        return value
    return fault


saved = {}
run(1)                                  # momentum buffers exist from here on
SCENARIOS = {"feeder_rank1_it5": raise_on("feeder", 1, 5),
             "receiver_rank0_it3": raise_on("receiver", 0, 3),
             "receiver_rank1_last": raise_on("receiver", 1, STEPS - 1),
             "bad_shape_rank1_it2": raise_on("feeder", 1, 2, bad=True)}
for name, fault in SCENARIOS.items():
    start = state()
    try:
        run(STEPS, fault)
        saved[f"{name}_message"] = np.array("no error")
        continue
    except ad.DistributedError as e:
        saved[f"{name}_message"] = np.array(str(e))
        saved[f"{name}_rank"] = np.array(e.rank)
        saved[f"{name}_iteration"] = np.array(e.iteration)
        saved[f"{name}_completed"] = np.array(e.completed)
        saved[f"{name}_cause"] = np.array(type(e.__cause__).__name__)
        completed = e.completed
    after = state()
    for i, a in enumerate(after):
        saved[f"{name}_after_{i}"] = a
    # a clean run of the completed iterations from the same start, for comparison
    for p, a in zip(params, start):
        p._var.value = a.copy()
    sd = opt.state_dict()
    for (k, s), a in zip(sd["state"].items(), start[len(params):]):
        s["momentum_buffer"] = a.copy()
    opt.load_state_dict(sd)
    if completed:
        run(completed)
    for i, a in enumerate(state()):
        saved[f"{name}_clean_{i}"] = a
run(3)                                  # the group still works
saved["final"] = state()[0]
np.savez(f"{out}/failure.{rank}.npz", **saved)
