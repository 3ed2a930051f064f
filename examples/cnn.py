"""Small CNN for scikit-learn's bundled handwritten digits (8x8 images, no download).

Two Conv2d-BatchNorm2d-ReLU-MaxPool2d blocks, then Flatten and Linear, trained with AdamW,
a OneCycleLR schedule and gradient-norm clipping. The whole training loop -- mini-batches
from Feeders, the forward and backward convolutions, the BatchNorm running statistics, the
clipping, the optimizer and the schedule (a device value) -- is traced once with
``ir_for`` and compiled; a Receiver returns each step's loss and batch accuracy. The
held-out accuracy comes from a second, forward-only program in eval mode (BatchNorm then
normalises with the running statistics the loop accumulated).

    python examples/cnn.py [--device numpy] [--epochs 20] [--batch 64] [--seed 0]
        [--plot cnn_digits.png]

Data-parallel on N processes: ``mpiexec -n N python examples/cnn.py --data-parallel``
(each process reads its shard of every global batch of ``--batch`` images; gradients are
averaged, BatchNorm's running statistics are rank 0's as in PyTorch's DDP; rank 0 prints,
plots and evaluates).
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import autodiff as ad
import autodiff.distributed as dist
from autodiff import nn
from autodiff.nn.utils import clip_grad_norm_
from autodiff.optim import AdamW
from autodiff.optim.lr_scheduler import OneCycleLR


def load(seed: int = 0, test_fraction: float = 0.2):
    """``(x_train, y_train, x_test, y_test)``: float32 images ``[N, 1, 8, 8]`` scaled to
    [0, 1], int32 labels, a shuffled split with ``test_fraction`` held out."""
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.images / 16.0).astype(np.float32)[:, None]
    y = d.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(test_fraction * len(x)))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def block(c_in: int, c_out: int) -> nn.Sequential:
    """Conv 3x3 (same padding, no bias: BatchNorm has one) -> BatchNorm -> ReLU -> max 2x2."""
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1, bias=False),
                         nn.BatchNorm2d(c_out), nn.ReLU(), nn.MaxPool2d(2))


def build(channels: int = 16, seed: int = 0) -> nn.Module:
    """``[N, 1, 8, 8] -> [N, 10]`` logits: two blocks (8x8 -> 4x4 -> 2x2), Linear."""
    ad.manual_seed(seed)
    return nn.Sequential(block(1, channels), block(channels, 2 * channels), nn.Flatten(),
                         nn.Linear(2 * channels * 4, 10))


def train(model, x, y, epochs: int, batch: int, max_lr: float, clip: float, seed: int,
          device: str | None, progress: bool = True, data_parallel: bool = False):
    """One ``ir_for`` over every mini-batch of every epoch (reshuffled each epoch, the last
    incomplete batch dropped). Returns ``(losses, accuracies, grad_norms, report)``.

    ``data_parallel``: ``model`` is a ``DistributedDataParallel``; this process feeds its
    shard of each global batch of ``batch`` images, its loss weighted so that the averaged
    gradient is the global batch's; the metrics received are the global batch's."""
    rng = np.random.default_rng(seed)
    per_epoch = len(x) // batch
    order = np.concatenate([rng.permutation(len(x))[:per_epoch * batch]
                            for _ in range(epochs)]).reshape(-1, batch)
    steps = len(order)
    weight = None
    if data_parallel:                     # this process's columns of every global batch
        shards = dist.DistributedSampler(batch, shuffle=False)
        order, weight = order[:, shards.shard(batch)], shards.loss_weight(batch)
        batch = order.shape[1]
    batches, cur = iter(order), {}

    def images() -> np.ndarray:
        cur["idx"] = next(batches)
        return x[cur["idx"]]

    opt = AdamW(model.parameters(), lr=max_lr, weight_decay=1e-4)
    sched = OneCycleLR(opt, max_lr=max_lr, total_steps=steps)
    loss_fn = nn.CrossEntropyLoss()
    losses, accs, norms = [], [], []
    bar = _progress(steps, progress)

    def on_step(loss, acc, norm) -> None:
        losses.append(float(loss))
        accs.append(float(acc))
        norms.append(float(norm))
        if bar is not None:
            bar.set_postfix(loss=f"{losses[-1]:.3f}", acc=f"{accs[-1]:.2f}", refresh=False)
            bar.update(1)

    def step() -> None:
        xb = ad.Feeder(images, [batch, 1, 8, 8], name="images")
        yb = ad.Feeder(lambda: y[cur["idx"]], [batch], "int32", name="labels")
        opt.zero_grad()
        logits = model(xb)
        loss = loss_fn(logits, yb)
        (loss if weight is None else loss * weight).backward()
        norm = clip_grad_norm_(model.parameters(), clip)
        opt.step()
        sched.step()
        with ad.no_grad():
            acc = (logits.argmax(-1).float() == yb.float()).float().mean()
            if weight is not None:          # the global batch's loss and accuracy
                both = ad.stack([loss, acc]) * weight
                dist.all_reduce(both, dist.ReduceOp.AVG)
                loss, acc = both[0], both[1]
        ad.Receiver(on_step, [loss, acc, norm], name="metrics")

    model.train()
    ad.ir_for(steps, step)
    try:
        report = ad.execute(device=device)
    finally:
        if bar is not None:
            bar.close()
    return losses, accs, norms, report


def accuracy(model, x, y, device: str | None) -> float:
    """Fraction of ``x`` classified as ``y`` (one forward program, eval mode)."""
    model.eval()
    with ad.no_grad():
        pred = model(ad.Feeder(lambda: x, list(x.shape), name="test_images")).argmax(-1)
    ad.execute(device=device)
    model.train()
    return float((pred.numpy() == y).mean())


def _progress(total: int, enabled: bool):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, desc="train", unit="step", file=sys.stderr)


def plot(losses, accs, test_acc: float, path: str) -> None:
    """Training loss and batch accuracy per step, the held-out accuracy at the end."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    steps = np.arange(1, len(losses) + 1)
    k = max(1, len(losses) // 25)
    mean = lambda v: np.convolve(v, np.ones(k) / k, mode="valid")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    a1.plot(steps, losses, lw=0.6, alpha=0.5, label="batch loss")
    a1.plot(steps[k - 1:], mean(losses), lw=1.5, label=f"mean of {k}")
    a1.set_yscale("log")
    a1.set_xlabel("step")
    a1.set_ylabel("cross-entropy")
    a1.legend()
    a2.plot(steps, accs, lw=0.6, alpha=0.5, label="batch accuracy")
    a2.plot(steps[k - 1:], mean(accs), lw=1.5, label=f"mean of {k}")
    a2.axhline(test_acc, color="k", ls="--", label=f"held-out {test_acc * 100:.1f}%")
    a2.set_xlabel("step")
    a2.set_ylabel("accuracy")
    a2.set_ylim(0, 1.01)
    a2.legend(loc="lower right")
    fig.suptitle("CNN on the 8x8 digits (AdamW, OneCycleLR, clipping)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None,
                   help="numpy, opencl or tvm (default: $AUTODIFF_DEVICE, else opencl)")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--channels", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-2, help="OneCycleLR's max_lr")
    p.add_argument("--clip", type=float, default=1.0, help="gradient-norm bound")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", default="cnn_digits.png", help="PNG path ('' to skip)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--data-parallel", action="store_true",
                   help="one of the processes of `mpiexec -n N`: a shard of each global "
                        "batch, gradients averaged")
    args = p.parse_args(argv)

    x_tr, y_tr, x_te, y_te = load(args.seed)
    model = build(args.channels, args.seed)
    net, rank, procs = model, 0, ""
    if args.data_parallel:
        net, rank = dist.DistributedDataParallel(model), dist.get_rank()
        procs = f" ({dist.get_world_size()} processes)"
    n_params = sum(q.numel() for q in model.parameters())
    t = time.perf_counter()
    losses, accs, norms, report = train(net, x_tr, y_tr, args.epochs, args.batch, args.lr,
                                        args.clip, args.seed, args.device,
                                        progress=not args.no_progress and rank == 0,
                                        data_parallel=args.data_parallel)
    wall = time.perf_counter() - t
    if rank:                                # rank 0 evaluates, prints and plots
        return dict(losses=losses, accuracies=accs, norms=norms, report=report, wall=wall)
    acc = accuracy(model, x_te, y_te, args.device)
    steps = len(losses)
    print(f"cnn: {len(x_tr)} train / {len(x_te)} held-out images, {n_params:,} parameters, "
          f"{steps} steps of batch {args.batch}{procs} on {report.device}")
    print(f"compile {report.times.get('optimize', 0) + report.times.get('compile', 0):.2f} s, "
          f"run {report.times['run']:.2f} s ({report.times['run'] / steps * 1e3:.1f} ms/step), "
          f"wall {wall:.2f} s")
    print(f"loss first {losses[0]:.3f}, last {np.mean(losses[-10:]):.3f}; gradient norm "
          f"first {norms[0]:.2f}, last {np.mean(norms[-10:]):.2f}; "
          f"held-out accuracy {acc * 100:.1f}%")
    if args.plot:
        plot(losses, accs, acc, args.plot)
        print(f"plot: {args.plot}")
    return dict(losses=losses, accuracies=accs, norms=norms, accuracy=acc, report=report,
                wall=wall)


if __name__ == "__main__":
    main()
