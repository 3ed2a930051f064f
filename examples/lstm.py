"""Character-level LSTM language model on Python's own help text, its time loop a ``scan``.

Same corpus, vocabulary and random windows as ``examples/transformer.py``. The model is an
embedding, a stacked ``nn.LSTM`` and a ``Linear`` to logits. ``nn.LSTM`` runs the time
loop of a long sequence as one :func:`autodiff.scan` (``nn.rnn.SCAN_MIN_STEPS``): the
graph holds one rolled loop per layer, never ``seq`` copies of the cell, and
``backward()`` adds one rolled loop per layer running backwards over the per-step values
the forward saved (placed in the memory arena with everything else). The whole training
loop is then traced once with ``ir_for``, as in the transformer example.

    python examples/lstm.py [--device numpy] [--steps 300] [--layers 1] [--hidden 128]
        [--batch 16] [--seq 64] [--seed 0] [--plot lstm_loss.png]
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import os
import time

import numpy as np

import autodiff as ad
from autodiff import nn
from autodiff.graph.ir import Op
from autodiff.optim import AdamW


def _transformer_example():
    """The corpus, vocabulary, sampler and plotting of ``examples/transformer.py``."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "transformer.py")
    spec = importlib.util.spec_from_file_location("_transformer_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_tx = _transformer_example()
load_text, Vocab, WindowSampler = _tx.load_text, _tx.Vocab, _tx.WindowSampler


class CharLSTM(nn.Module):
    """Embedding, ``nn.LSTM`` (batch first), Linear: ``idx int32 [B, T] -> logits [B, T, V]``."""

    def __init__(self, vocab: int, d_embed: int = 64, hidden: int = 128, layers: int = 1):
        super().__init__()
        self.emb = nn.Embedding(vocab, d_embed)
        self.lstm = nn.LSTM(d_embed, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, idx: ad.Tensor) -> ad.Tensor:
        out, _ = self.lstm(self.emb(idx))
        return self.head(out)


def _lm_loss(model, x, y):
    b, t = x.shape
    logits = model(x)
    return nn.functional.cross_entropy(logits.reshape(b * t, logits.shape[-1]),
                                       y.reshape(b * t))


def train(model, sampler, steps: int, lr: float, device: str, progress: bool = True):
    """Trace ``steps`` AdamW steps in one ``ir_for`` and run them.

    Returns ``(losses, report, trace seconds, scans in the traced program)``.
    """
    opt = AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    losses: list[float] = []
    bar = _tx._progress(steps, progress)

    def on_loss(v) -> None:
        losses.append(float(v))
        if bar is not None:
            bar.set_postfix(loss=f"{losses[-1]:.3f}", refresh=False)
            bar.update(1)

    def step() -> None:
        x = ad.Feeder(sampler.tokens, [sampler.batch, sampler.seq], "int32", name="tokens")
        y = ad.Feeder(sampler.targets, [sampler.batch, sampler.seq], "int32", name="targets")
        opt.zero_grad()
        loss = _lm_loss(model, x, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        ad.Receiver(on_loss, [loss], name="loss")

    t0 = time.perf_counter()
    model.train()
    ad.ir_for(steps, step)
    t_trace = time.perf_counter() - t0
    scans = sum(n.op is Op.SCAN for n in ad.graph.trace.TRACER.root.graph.walk())
    try:
        report = ad.execute(device=device)
    finally:
        if bar is not None:
            bar.close()
    return losses, report, t_trace, scans


def evaluate(model, ids, batch: int, seq: int, device: str, max_batches: int = 16) -> float:
    """Mean next-character loss over consecutive windows of ``ids`` (forward only)."""
    return _tx.evaluate(model, ids, batch, seq, device, max_batches, loss=_lm_loss)


def generate(model, vocab, prompt: str, length: int, seq: int, device: str = "numpy") -> str:
    """Greedy continuation of ``prompt`` (the model reads the last ``seq`` characters)."""
    model.seq = seq
    return _tx.generate(model, vocab, prompt, length, device)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None,
                   help="numpy, opencl or tvm (default: $AUTODIFF_DEVICE, else opencl)")
    p.add_argument("--layers", type=int, default=1)
    p.add_argument("--embed", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--eval-batches", type=int, default=16)
    p.add_argument("--prompt", default="The ")
    p.add_argument("--sample-len", type=int, default=120)
    p.add_argument("--plot", default="lstm_loss.png", help="loss-curve PNG path ('' to skip)")
    p.add_argument("--no-progress", action="store_true")
    return p.parse_args(argv)


def main(argv=None) -> dict:
    """Train, evaluate, sample; print the figures. Returns them as a dict."""
    args = parse_args(argv)
    ad.manual_seed(args.seed)
    vocab, train_ids, val_ids = _tx.corpus()
    model = CharLSTM(len(vocab), args.embed, args.hidden, args.layers)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: embedding {args.embed}, {args.layers}-layer LSTM {args.hidden}, seq "
          f"{args.seq}, batch {args.batch}: {n_params:,} parameters")

    val_before = evaluate(model, val_ids, args.batch, args.seq, args.device, args.eval_batches)
    sampler = WindowSampler(train_ids, args.batch, args.seq, args.seed)
    losses, report, t_trace, scans = train(model, sampler, args.steps, args.lr, args.device,
                                           progress=not args.no_progress)
    val_after = evaluate(model, val_ids, args.batch, args.seq, args.device, args.eval_batches)

    t_compile = report.times.get("optimize", 0.0) + report.times.get("compile", 0.0)
    t_run = report.times["run"]
    tok_s = args.steps * args.batch * args.seq / t_run
    print(f"traced program: {scans} scans (rolled time loops: forward and backward per "
          f"layer), graph IR nodes " + " -> ".join(f"{k} {v}" for k, v in report.nodes.items()))
    print(f"device {report.device}: trace {t_trace:.2f} s, compile {t_compile:.2f} s, "
          f"run {t_run:.2f} s ({t_run / args.steps * 1e3:.1f} ms/step, {tok_s:,.0f} tokens/s)")
    mem = report.stats.get("memory")
    print(f"memory plan: {mem}" if mem else
          "memory plan: none (this device runs without an arena; try --device opencl)")
    print(f"train loss: first {losses[0]:.3f}, mean of last 20 {np.mean(losses[-20:]):.3f}")
    print(f"validation loss: before {val_before:.3f}, after {val_after:.3f} "
          f"(ln(vocab) = {math.log(len(vocab)):.3f})")
    if args.plot:
        _tx.plot_losses(losses, val_before, val_after, args.plot,
                        title="char-level LSTM on pydoc_data.topics")
        print(f"loss curve: {args.plot}")
    sample = generate(model, vocab, args.prompt, args.sample_len, args.seq) \
        if args.sample_len else ""
    if sample:
        print(f"greedy sample: {sample!r}")
    return dict(losses=losses, val_before=val_before, val_after=val_after, report=report,
                sample=sample, vocab=len(vocab), tokens_per_s=tok_s, scans=scans)


if __name__ == "__main__":
    main()
