"""Data-parallel training vs one process with the global batch: W1 (mlp255), the 6-layer
tiny transformer (W2) and the char-LM of examples/transformer.py (small settings), 20
steps. Every rank trains its shard with DistributedDataParallel and saves its final
parameters (``ddp_*``); rank 0 then trains the same model without DDP on the whole global
batch (``ref_*``). Saved to ``<out>/parity.<rank>.npz``.

    mpiexec -n N python parity.py OUT DEVICE GLOBAL_BATCH STEPS
"""
import pathlib
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

import autodiff as ad  # noqa: E402
import autodiff.distributed as dist  # noqa: E402
from autodiff import nn  # noqa: E402
from autodiff.graph.ir import Op  # noqa: E402
from autodiff.graph.trace import TRACER  # noqa: E402
from autodiff.optim import SGD  # noqa: E402
from bench.workloads import mlp255, tiny_transformer  # noqa: E402
from bench.workloads.frameworks import TENSOR  # noqa: E402
from tests.example_loader import load_example  # noqa: E402

out, device, B, STEPS = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rank, world = dist.get_rank(), dist.get_world_size()
shards = dist.DistributedSampler(B, shuffle=False)
part = shards.shard(B)
saved = {}


class Workload(nn.Module):
    """A bench workload's parameters (``{name: array}``) and loss as a module."""

    def __init__(self, w, params):
        super().__init__()
        self.w, self.names = w, list(params)
        self.p = nn.ParameterDict({k.replace(".", "_"): nn.Parameter(v)
                                   for k, v in params.items()})

    def forward(self, x):
        return self.w.loss(TENSOR, {k: self.p[k.replace(".", "_")] for k in self.names},
                           {"x": x})


def collectives() -> int:
    return sum(1 for n in TRACER.last.graph.walk()
               if n.op is Op.CALLBACK and n.arg.collective == "all_reduce")


def train_workload(w, shape, net, rows, weight):
    if w is mlp255.WORKLOAD:       # W1's own data: rows of 0.2 (on random rows its
        data = np.full((STEPS, B) + shape, 0.2, np.float32)   # sum loss is chaotic)
    else:
        data = np.random.default_rng(5).standard_normal((STEPS, B) + shape).astype(
            np.float32)
    feed = iter(data[:, rows])
    opt = SGD(net.parameters(), lr=w.lr)

    def step():
        opt.zero_grad()
        x = ad.Feeder(lambda: next(feed), (rows.stop - rows.start,) + shape, name="x")
        loss = net(x)
        (loss if weight is None else loss * weight).backward()
        opt.step()

    ad.ir_for(STEPS, step)
    ad.execute(device=device)


for key, w, shape, cap in (("w1", mlp255.WORKLOAD, (255,), None),
                           ("w2", tiny_transformer.WORKLOAD, (2, 64), 0.25)):
    params = w.init(0)
    ddp = dist.DistributedDataParallel(Workload(w, params), bucket_cap_mb=cap)
    train_workload(w, shape, ddp, part, shards.loss_weight(B, "sum"))   # sum losses
    saved[f"{key}_buckets"] = np.array(len(ddp.buckets))
    saved[f"{key}_collectives"] = np.array(collectives())
    for name, p in ddp.module.named_parameters():
        saved[f"ddp_{key}_{name}"] = p.numpy()
    if rank == 0:
        ref = Workload(w, params)
        train_workload(w, shape, ref, slice(0, B), None)
        for name, p in ref.named_parameters():
            saved[f"ref_{key}_{name}"] = p.numpy()

# the char-LM of examples/transformer.py: AdamW, warmup + cosine schedule, clipping
ex = load_example("transformer")
text = ex.load_text()[:20000]
vocab = ex.Vocab(text)
ids = vocab.encode(text)


def charlm(part_, weight, ddp: bool):
    ad.manual_seed(0)
    model = ex.CharTransformer(len(vocab), d_model=32, nhead=2, num_layers=2, seq=16)
    net = dist.DistributedDataParallel(model) if ddp else model
    sampler = ex.WindowSampler(ids, B, 16, 0, part_)
    losses, *_ = ex.train(net, sampler, STEPS, 3e-3, device, progress=False, warmup=5,
                          clip=1.0, weight=weight)
    return model, losses


model, losses = charlm(part, shards.loss_weight(B), True)
saved["lm_collectives"] = np.array(collectives())
saved["lm_losses"] = np.array(losses)
for name, p in model.named_parameters():
    saved[f"ddp_lm_{name}"] = p.numpy()
if rank == 0:
    model, losses = charlm(None, None, False)
    saved["lm_ref_losses"] = np.array(losses)
    for name, p in model.named_parameters():
        saved[f"ref_lm_{name}"] = p.numpy()
np.savez(f"{out}/parity.{rank}.npz", **saved)
