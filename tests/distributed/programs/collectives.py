"""Every collective on odd sizes and several dtypes, in one program and inside ir_for, and
the gradients of a program through all_reduce / broadcast / reduce. Each rank saves its
inputs and results to ``<out>/collectives.<rank>.npz``; the test checks them against numpy
(every rank's inputs) and PyTorch.

    mpiexec -n N python collectives.py OUT DEVICE
"""
import sys

import numpy as np

import autodiff as ad
import autodiff.distributed as dist
from autodiff import nn
from autodiff.distributed.nn import functional as DF

out, device = sys.argv[1], sys.argv[2]
rank, world = dist.get_rank(), dist.get_world_size()
saved = {}

# -- forward: odd sizes, every op, float32 / float16 / int32 / int64 / bool --------------------
SIZES = [(), (7,), (13, 3), (1001,)]
results = {}
for dt in ("float32", "float16", "int32", "int64", "bool"):
    for k, shape in enumerate(SIZES):
        rng = np.random.default_rng((rank, k, len(dt)))
        if dt == "bool":
            x = rng.random(shape) < 0.5
        elif dt.startswith("int"):
            x = rng.integers(-1000, 1000, shape).astype(dt)
        else:
            x = rng.standard_normal(shape).astype(dt)
        saved[f"in_{dt}_{k}"] = x
        ops = {"float32": ("sum", "mean", "max", "min"), "float16": ("sum", "max"),
               "int32": ("sum", "max", "min"), "int64": ("sum", "min"),
               "bool": ("max", "min")}[dt]
        for op in ops:
            t = ad.tensor(x) * 1 if dt != "bool" else ad.tensor(x) & True
            dist.all_reduce(t, op)
            results[f"all_reduce_{op}_{dt}_{k}"] = t
        t = ad.tensor(x) * 1 if dt != "bool" else ad.tensor(x) & True
        dist.broadcast(t, src=world - 1)
        results[f"broadcast_{dt}_{k}"] = t
        if dt != "bool":
            results[f"reduce_{dt}_{k}"] = DF.reduce(ad.tensor(x) * 1, dst=world - 1)
ad.execute(device=device)
for key, t in results.items():
    saved[key] = t.numpy()

# -- inside ir_for: a Feeder's value summed over the processes each iteration ----------------
got = []
feed = iter(np.random.default_rng((rank, 99)).standard_normal((5, 3, 5)).astype(np.float32))
saved["loop_in"] = np.random.default_rng((rank, 99)).standard_normal((5, 3, 5)).astype(
    np.float32)


def body():
    v = ad.Feeder(lambda: next(feed), [3, 5], name="v")
    m = DF.all_reduce(v * 2.0, dist.ReduceOp.AVG)
    ad.Receiver(lambda a: got.append(a), [m], name="got")


ad.ir_for(5, body)
ad.execute(device=device)
saved["loop_out"] = np.stack(got)

# -- gradients: L_r = sum(c_r * sin(collective(x_r * w_r))), d/dw_r on each rank -------------
for name in ("sum", "mean", "max", "min", "broadcast", "reduce"):
    rng = np.random.default_rng((rank, 7, len(name)))
    x, w0, c = (rng.standard_normal((4, 3)).astype(np.float32) for _ in range(3))
    w = ad.Tensor(w0, requires_grad=True)
    y = ad.tensor(x) * w
    if name == "broadcast":
        z = DF.broadcast(y, src=world - 1)
    elif name == "reduce":
        z = DF.reduce(y, dst=0)
    else:
        z = DF.all_reduce(y, name)
    loss = (ad.tensor(c) * z.sin()).sum()
    loss.backward()
    g = w.grad
    ad.execute(device=device)
    saved.update({f"grad_x_{name}": x, f"grad_w_{name}": w0, f"grad_c_{name}": c,
                  f"grad_{name}": g.numpy()})

# -- DistributedDataParallel(find_unused_parameters=True): a layer only rank 0 uses --------
class PartlyUsed(nn.Module):
    def __init__(self):
        super().__init__()
        self.used, self.extra = nn.Linear(3, 2), nn.Linear(3, 2)

    def forward(self, x):
        y = self.used(x)
        return y + self.extra(x) if rank == 0 else y


x = np.random.default_rng((rank, 5)).standard_normal((4, 3)).astype(np.float32)
ddp = dist.DistributedDataParallel(PartlyUsed(), find_unused_parameters=True)
ddp(ad.tensor(x)).sum().backward()
grads = {n: p.grad for n, p in ddp.module.named_parameters()}
ad.execute(device=device)
saved["unused_x"] = x
for n, g in grads.items():
    saved[f"unused_grad_{n}"] = g.numpy()

# -- checkpoints: written by rank 0, every rank returns once the file exists -------------------
writes = []
real_savez = np.savez
np.savez = lambda *a, **k: writes.append(1) or real_savez(*a, **k)
ddp.save(f"{out}/checkpoint.npz")
np.savez = real_savez
saved["checkpoint_writes"] = np.array(len(writes))
saved["checkpoint_seen"] = np.array(__import__("os").path.exists(f"{out}/checkpoint.npz"))

np.savez(f"{out}/collectives.{rank}.npz", **saved)
