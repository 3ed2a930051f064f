"""MLP classifier for scikit-learn's bundled handwritten digits (8x8 images, no download).

Mini-batches of the training split (80%) are fed by Feeders inside one traced ``ir_for``
loop: Linear(64, 128) -> ReLU -> Linear(128, 10), cross-entropy, Adam. Accuracy is
measured on the held-out 20% by a second, forward-only program in eval mode.

    python examples/digits.py [--device numpy] [--epochs 30] [--batch 64] [--seed 0]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import autodiff as ad
from autodiff import nn
from autodiff.optim import Adam


def load(seed: int = 0, test_fraction: float = 0.2):
    """``(x_train, y_train, x_test, y_test)``: float32 pixels scaled to [0, 1], int32 labels,
    a shuffled split with ``test_fraction`` held out."""
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(test_fraction * len(x)))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def build(hidden: int = 128, seed: int = 0) -> nn.Module:
    ad.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def train(model, x, y, epochs: int, batch: int, lr: float, seed: int, device: str):
    """One ``ir_for`` over every mini-batch of every epoch (reshuffled each epoch; the last
    incomplete batch of an epoch is dropped). Returns ``(losses, report)``."""
    rng = np.random.default_rng(seed)
    per_epoch = len(x) // batch
    order = np.concatenate([rng.permutation(len(x))[:per_epoch * batch]
                            for _ in range(epochs)]).reshape(-1, batch)
    batches = iter(order)
    cur: dict = {}

    def images() -> np.ndarray:
        cur["idx"] = next(batches)
        return x[cur["idx"]]

    opt = Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    losses: list[float] = []

    def step() -> None:
        xb = ad.Feeder(images, [batch, 64], name="images")
        yb = ad.Feeder(lambda: y[cur["idx"]], [batch], "int32", name="labels")
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: losses.append(float(v)), [loss], name="loss")

    model.train()
    ad.ir_for(len(order), step)
    return losses, ad.execute(device=device)


def accuracy(model, x, y, device: str) -> float:
    """Fraction of ``x`` classified as ``y`` (one forward program, eval mode)."""
    model.eval()
    with ad.no_grad():
        pred = model(ad.Feeder(lambda: x, list(x.shape), name="test_images")).argmax(-1)
    ad.execute(device=device)
    model.train()
    return float((pred.numpy() == y).mean())


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None,
                   help="numpy, opencl or tvm (default: $AUTODIFF_DEVICE, else opencl)")
    p.add_argument("--epochs", type=int, default=30)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    x_tr, y_tr, x_te, y_te = load(args.seed)
    model = build(args.hidden, args.seed)
    t = time.perf_counter()
    losses, report = train(model, x_tr, y_tr, args.epochs, args.batch, args.lr, args.seed,
                           args.device)
    wall = time.perf_counter() - t
    acc = accuracy(model, x_te, y_te, args.device)
    steps = len(losses)
    print(f"digits: {len(x_tr)} train / {len(x_te)} held-out images, {steps} steps "
          f"of batch {args.batch} on {report.device}")
    print(f"compile {report.times.get('optimize', 0) + report.times.get('compile', 0):.2f} s, "
          f"run {report.times['run']:.2f} s, wall {wall:.2f} s")
    print(f"loss first {losses[0]:.3f}, last {np.mean(losses[-10:]):.3f}; "
          f"held-out accuracy {acc * 100:.1f}%")
    return dict(losses=losses, accuracy=acc, report=report)


if __name__ == "__main__":
    main()
