"""Character-level transformer language model on Python's own help text.

The corpus is ``pydoc_data.topics`` (the text of ``help("topics")``, shipped with every
CPython: 79 topics, ~465 thousand characters, 103 distinct). The whole training loop --
random [B, T] windows fed by int32 Feeders, token + learned position embeddings, N
pre-norm ``TransformerEncoderLayer``s with a causal mask, a final ``LayerNorm`` and a
``Linear`` to logits, cross-entropy, AdamW with a linear warmup then cosine decay of the
learning rate (``SequentialLR``: the rate is a device value the loop updates) and
gradient-norm clipping -- is traced once with ``ir_for`` and compiled. Every
``--eval-every`` steps the loop also computes the validation loss, inside the compiled
program: one ``ir_if`` on the step index, whose branch (taken on the device every N-th step
only) scans the validation windows kept on the device. Validation loss before and after
training and greedy generation are two more small traced programs (eval mode).

    python examples/transformer.py [--device numpy] [--steps 300] [--layers 2]
        [--d-model 128] [--batch 16] [--seq 64] [--seed 0] [--plot transformer_loss.png]
        [--warmup 10] [--clip 1.0] [--schedule cosine|constant] [--eval-every 100]

Data-parallel on N processes (``mpiexec -n N python examples/transformer.py
--data-parallel``): every process reads its shard of each global batch of ``--batch``
windows, ``DistributedDataParallel`` averages the gradients inside the compiled loop, and
rank 0 prints, plots and samples.
"""
from __future__ import annotations

import argparse
import math
import sys
import time

import numpy as np

import autodiff as ad
import autodiff.distributed as dist
from autodiff import nn
from autodiff.nn.utils import clip_grad_norm_
from autodiff.optim import AdamW
from autodiff.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR


# -- data -----------------------------------------------------------------------------------
def load_text() -> str:
    """All help topics of ``pydoc_data.topics``, in sorted topic order."""
    from pydoc_data.topics import topics
    return "".join(topics[k] for k in sorted(topics))


class Vocab:
    """Characters of a text, sorted; ids are int32 positions in that list."""

    def __init__(self, text: str):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    def __len__(self) -> int:
        return len(self.chars)

    def encode(self, s: str) -> np.ndarray:
        return np.array([self.index[c] for c in s], np.int32)

    def decode(self, ids) -> str:
        return "".join(self.chars[int(i)] for i in ids)


class WindowSampler:
    """Random ``[B, T]`` windows of ``ids`` and their next-token targets.

    ``tokens()`` and ``targets()`` are two Feeder callbacks; call ``k`` of either returns
    batch ``k``, drawn from a generator seeded by ``(seed, k)``, so the pair agrees whatever
    order a device calls them in. With ``part`` (a slice of ``range(batch)``, a process's
    shard: ``DistributedSampler.shard``) they return those rows of the global batch
    (``rows`` of them).
    """

    def __init__(self, ids: np.ndarray, batch: int, seq: int, seed: int,
                 part: slice | None = None):
        self.ids, self.batch, self.seq, self.seed = ids, batch, seq, seed
        self.part = part or slice(0, batch)
        self.rows = len(range(batch)[self.part])
        self._calls = {"tokens": 0, "targets": 0}
        self._cache: dict[int, np.ndarray] = {}

    def _window(self, k: int) -> np.ndarray:
        if k not in self._cache:
            rng = np.random.default_rng((self.seed, k))
            starts = rng.integers(0, len(self.ids) - self.seq - 1, self.batch)[self.part]
            self._cache[k] = self.ids[starts[:, None] + np.arange(self.seq + 1)]
            for old in [j for j in self._cache if j < k - 4]:
                del self._cache[old]
        return self._cache[k]

    def _next(self, which: str) -> np.ndarray:
        k = self._calls[which]
        self._calls[which] += 1
        return self._window(k)

    def tokens(self) -> np.ndarray:
        return np.ascontiguousarray(self._next("tokens")[:, :-1])

    def targets(self) -> np.ndarray:
        return np.ascontiguousarray(self._next("targets")[:, 1:])


# -- model ----------------------------------------------------------------------------------
class CharTransformer(nn.Module):
    """Token + position embeddings, pre-norm causal encoder layers, LayerNorm, Linear.

    ``forward(idx int32 [B, T]) -> logits float32 [B, T, vocab]``, ``T <= seq``.
    """

    def __init__(self, vocab: int, d_model: int = 128, nhead: int = 4, num_layers: int = 2,
                 seq: int = 64, dropout: float = 0.0):
        super().__init__()
        self.seq = seq
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(seq, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, 4 * d_model, dropout,
                                           activation="gelu", norm_first=True,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, idx: ad.Tensor) -> ad.Tensor:
        t = idx.shape[1]
        x = self.tok_emb(idx) + self.pos_emb(ad.Tensor(np.arange(t, dtype=np.int32)))
        return self.head(self.norm(self.encoder(x, is_causal=True)))


def _lm_loss(model: CharTransformer, x: ad.Tensor, y: ad.Tensor) -> ad.Tensor:
    b, t = x.shape
    logits = model(x)
    return nn.functional.cross_entropy(logits.reshape(b * t, logits.shape[-1]),
                                       y.reshape(b * t))


# -- programs ---------------------------------------------------------------------------------
def corpus(say=print):
    """The corpus as ``(vocab, train ids, validation ids)``: the first 90% of the encoded
    text trains, the rest validates; ``say`` prints the sizes."""
    text = load_text()
    vocab = Vocab(text)
    ids = vocab.encode(text)
    split = int(0.9 * len(ids))
    train_ids, val_ids = ids[:split], ids[split:]
    say(f"corpus: {len(text):,} characters, vocabulary {len(vocab)}, "
        f"train {len(train_ids):,} / validation {len(val_ids):,}; "
        f"ln(vocab) = {math.log(len(vocab)):.3f}")
    return vocab, train_ids, val_ids


def val_windows(ids: np.ndarray, batch: int, seq: int, max_batches: int = 16):
    """Consecutive ``[n, batch, seq]`` token windows of ``ids`` and their next-token
    targets (the validation set)."""
    starts = np.arange(0, len(ids) - seq - 1, seq)[:batch * max_batches]
    n = len(starts) // batch
    if n == 0:
        raise ValueError(f"validation text of {len(ids)} characters is shorter than "
                         f"{batch} windows of {seq + 1}")
    w = ids[starts[:n * batch, None] + np.arange(seq + 1)].reshape(n, batch, seq + 1)
    return np.ascontiguousarray(w[:, :, :-1]), np.ascontiguousarray(w[:, :, 1:])


def in_loop_validation(model, windows, loss=None):
    """The mean loss over the validation ``windows`` (token and target arrays of
    ``[n, batch, seq]``, placed on the device once), traced in eval mode without gradients:
    one ``scan`` over the ``n`` batches."""
    loss = loss or _lm_loss
    xs, ys = ad.tensor(windows[0]), ad.tensor(windows[1])

    def mean_loss():
        model.eval()
        with ad.no_grad():
            total, _ = ad.scan(lambda acc, xy: (acc + loss(model, xy[0], xy[1]), None),
                               ad.zeros(()), (xs, ys))
        model.train()
        return total / xs.shape[0]
    return mean_loss


def schedule(opt, steps: int, warmup: int, kind: str = "cosine", min_ratio: float = 0.7):
    """The learning-rate schedule: ``"cosine"`` warms up linearly from 1% of the rate over
    ``warmup`` steps, then decays it along a cosine to ``min_ratio`` of it at ``steps``;
    ``"constant"`` keeps it (returns None)."""
    if kind == "constant":
        return None
    if kind != "cosine":
        raise ValueError(f"schedule must be 'cosine' or 'constant', got {kind!r}")
    warmup = max(1, min(warmup, steps - 1))
    lr = opt.param_groups[0]["lr"]
    return SequentialLR(opt, [LinearLR(opt, start_factor=0.01, total_iters=warmup),
                              CosineAnnealingLR(opt, T_max=steps - warmup,
                                                eta_min=lr * min_ratio)], [warmup])


def warmup_steps(steps: int, warmup: int | None = None) -> int:
    """The warmup length of a ``steps``-step run: ``warmup`` when given, else a 30th of
    the run (at least 1)."""
    return warmup if warmup is not None else max(1, steps // 30)


def train(model, sampler: WindowSampler, steps: int, lr: float, device: str,
          progress: bool = True, warmup: int = 30, clip: float | None = 1.0,
          kind: str = "cosine", min_ratio: float = 0.7, validation=None,
          eval_every: int = 100, weight: float | None = None):
    """Trace ``steps`` AdamW steps in one ``ir_for`` (schedule and gradient clipping on the
    device) and run them.

    With ``validation`` (:func:`in_loop_validation`), every ``eval_every``-th step also
    computes the validation loss on the device (an ``ir_if`` on the step index) and hands
    it to a Receiver.

    Data-parallel (``model`` a ``DistributedDataParallel``, ``sampler`` this process's
    shard): the loss is scaled by ``weight`` (``DistributedSampler.loss_weight``) before
    ``backward()``, and the loss handed to the Receiver is the global batch's (an
    all-reduce of the weighted losses).

    Returns ``(losses, report, trace_seconds, [(step, validation loss), ...])``.
    """
    opt = AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = schedule(opt, steps, warmup, kind, min_ratio)
    losses: list[float] = []
    val_losses: list[tuple[int, float]] = []
    tokens_per_step = sampler.batch * sampler.seq
    bar = _progress(steps, progress)
    clock = {}

    def on_loss(v) -> None:
        now = time.perf_counter()
        clock.setdefault("start", now)
        losses.append(float(v))
        n = len(losses)
        rate = (n - 1) * tokens_per_step / (now - clock["start"]) if n > 1 else 0.0
        if bar is not None:
            bar.set_postfix(loss=f"{losses[-1]:.3f}", tok_s=f"{rate:,.0f}", refresh=False)
            bar.update(1)

    def on_val(v, i) -> None:
        val_losses.append((int(i) + 1, float(v)))
        if bar is not None:
            bar.write(f"step {int(i) + 1}: validation loss {float(v):.3f}")

    def step(i) -> None:
        x = ad.Feeder(sampler.tokens, [sampler.rows, sampler.seq], "int32", name="tokens")
        y = ad.Feeder(sampler.targets, [sampler.rows, sampler.seq], "int32", name="targets")
        opt.zero_grad()
        loss = _lm_loss(model, x, y)
        if weight is not None:                  # data-parallel: this process's shard
            loss = loss * weight
            loss.backward()
            dist.all_reduce(loss, dist.ReduceOp.AVG)     # the global batch's loss
        else:
            loss.backward()
        if clip:
            clip_grad_norm_(model.parameters(), clip)
        opt.step()
        if sched is not None:
            sched.step()
        ad.Receiver(on_loss, [loss], name="loss")
        if validation is not None:                  # decided on the device, every N steps
            ad.ir_if((i + 1) % eval_every == 0,
                     lambda: ad.Receiver(on_val, [validation(), i], name="val_loss"))

    t0 = time.perf_counter()
    model.train()
    ad.ir_for(steps, step)
    t_trace = time.perf_counter() - t0
    try:
        report = ad.execute(device=device)
    finally:
        if bar is not None:
            bar.close()
    return losses, report, t_trace, val_losses


def evaluate(model, ids: np.ndarray, batch: int, seq: int, device: str,
             max_batches: int = 16, loss=None) -> float:
    """Mean next-character loss over consecutive windows of ``ids`` (forward only, eval);
    ``loss(model, x, y)`` defaults to this model's."""
    loss = loss or _lm_loss
    xs, ys = val_windows(ids, batch, seq, max_batches)
    n = len(xs)
    feed = {"x": iter(xs), "y": iter(ys)}
    losses: list[float] = []

    def body() -> None:
        x = ad.Feeder(lambda: next(feed["x"]), [batch, seq], "int32", name="val_tokens")
        y = ad.Feeder(lambda: next(feed["y"]), [batch, seq], "int32", name="val_targets")
        ad.Receiver(lambda v: losses.append(float(v)), [loss(model, x, y)], name="val")

    model.eval()
    with ad.no_grad():
        ad.ir_for(n, body)
    ad.execute(device=device)
    model.train()
    return float(np.mean(losses))


def generate(model, vocab: Vocab, prompt: str, length: int, device: str = "numpy") -> str:
    """Greedy continuation of ``prompt`` by ``length`` characters, in one ``ir_for`` loop.

    Each iteration a Feeder reads the growing context from Python (the last ``seq``
    characters, left-aligned and zero-padded: the causal mask keeps the padding invisible)
    and a Receiver appends the argmax of the logits at the last real position.
    """
    seq = model.seq
    ctx = list(vocab.encode(prompt))
    start, calls = len(ctx), [0]

    def window() -> np.ndarray:
        if len(ctx) - start != calls[0]:
            raise RuntimeError("generation needs each Receiver to run before the next "
                               "iteration's Feeder")
        calls[0] += 1
        w = np.zeros((1, seq), np.int32)
        tail = ctx[-seq:]
        w[0, :len(tail)] = tail
        return w

    def receive(logits: np.ndarray) -> None:
        ctx.append(int(logits[0, min(len(ctx), seq) - 1].argmax()))

    def body() -> None:
        x = ad.Feeder(window, [1, seq], "int32", name="context")
        ad.Receiver(receive, [model(x)], name="next_char")

    model.eval()
    with ad.no_grad():
        ad.ir_for(length, body)
    ad.execute(device=device, prefetch=0)   # each Feeder needs the previous Receiver's char
    model.train()
    return prompt + vocab.decode(ctx[start:])


# -- reporting --------------------------------------------------------------------------------
def _progress(total: int, enabled: bool):
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="train", unit="step", file=sys.stderr)


def plot_losses(losses, val_before: float, val_after: float, path: str,
                title: str = "char-level transformer on pydoc_data.topics",
                val_during=()) -> None:
    """Training loss per step (and a running mean), validation loss before, during
    (``(step, loss)`` pairs) and after."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    steps = np.arange(1, len(losses) + 1)
    k = max(1, len(losses) // 20)
    smooth = np.convolve(losses, np.ones(k) / k, mode="valid")
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, losses, lw=0.6, alpha=0.5, label="train loss")
    ax.plot(steps[k - 1:], smooth, lw=1.5, label=f"train loss, mean of {k}")
    during = [(s, v) for s, v in val_during if s != len(losses)]
    ax.scatter([0] + [s for s, _ in during] + [len(losses)],
               [val_before] + [v for _, v in during] + [val_after], color="k", zorder=3,
               label="validation loss")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats / character)")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default=None,
                   help="numpy, opencl or tvm (default: $AUTODIFF_DEVICE, else opencl)")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--lr", type=float, default=5e-3, help="peak learning rate")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--schedule", default="cosine", choices=["cosine", "constant"],
                   help="learning rate: warmup then cosine decay, or constant")
    p.add_argument("--warmup", type=int, default=None,
                   help="warmup steps of the cosine schedule (default: --steps / 30)")
    p.add_argument("--min-lr-ratio", type=float, default=0.7,
                   help="the cosine schedule's final rate, as a fraction of --lr")
    p.add_argument("--clip", type=float, default=1.0, help="gradient-norm bound (0: off)")
    p.add_argument("--eval-every", type=int, default=100,
                   help="validation loss inside the training loop every N steps (0: off)")
    p.add_argument("--eval-batches", type=int, default=16)
    p.add_argument("--prompt", default="The ")
    p.add_argument("--sample-len", type=int, default=120)
    p.add_argument("--plot", default="transformer_loss.png",
                   help="loss-curve PNG path ('' to skip)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--data-parallel", action="store_true",
                   help="one of the processes of `mpiexec -n N`: train on a shard of each "
                        "global batch of --batch windows, gradients averaged")
    return p.parse_args(argv)


def main(argv=None) -> dict:
    """Train, evaluate, sample; print the figures. Returns them as a dict."""
    args = parse_args(argv)
    rank, world = (dist.get_rank(), dist.get_world_size()) if args.data_parallel else (0, 1)
    say = print if rank == 0 else (lambda *a, **k: None)
    ad.manual_seed(args.seed)
    vocab, train_ids, val_ids = corpus(say)

    model = CharTransformer(len(vocab), args.d_model, args.heads, args.layers, args.seq,
                            args.dropout)
    n_params = sum(p.numel() for p in model.parameters())
    say(f"model: {args.layers} layers, d_model {args.d_model}, {args.heads} heads, "
        f"seq {args.seq}, batch {args.batch}: {n_params:,} parameters")

    val_before = evaluate(model, val_ids, args.batch, args.seq, args.device, args.eval_batches)
    sampler = WindowSampler(train_ids, args.batch, args.seq, args.seed)
    net, weight = model, None
    if args.data_parallel:                  # this process's shard, gradients averaged
        shards = dist.DistributedSampler(args.batch, shuffle=False)
        sampler = WindowSampler(train_ids, args.batch, args.seq, args.seed,
                                shards.shard(args.batch))
        net, weight = dist.DistributedDataParallel(model), shards.loss_weight(args.batch)
        say(f"data-parallel: {world} processes, {sampler.rows} of the {args.batch} windows "
            f"of each step on rank 0")
    validation = in_loop_validation(model, val_windows(val_ids, args.batch, args.seq,
                                                       args.eval_batches)) \
        if args.eval_every else None
    losses, report, t_trace, val_during = train(
        net, sampler, args.steps, args.lr, args.device,
        progress=not args.no_progress and rank == 0,
        warmup=warmup_steps(args.steps, args.warmup),
        clip=args.clip, kind=args.schedule, min_ratio=args.min_lr_ratio,
        validation=validation, eval_every=args.eval_every or 1, weight=weight)
    val_after = evaluate(model, val_ids, args.batch, args.seq, args.device, args.eval_batches)

    t_compile = report.times.get("optimize", 0.0) + report.times.get("compile", 0.0)
    t_run = report.times["run"]
    tok_s = args.steps * args.batch * args.seq / t_run
    say(f"device {report.device}: trace {t_trace:.2f} s, compile {t_compile:.2f} s, "
        f"run {t_run:.2f} s ({t_run / args.steps * 1e3:.1f} ms/step, {tok_s:,.0f} tokens/s"
        + (f" on {world} processes)" if args.data_parallel else ")"))
    say("graph IR nodes: " + " -> ".join(f"{k} {v}" for k, v in report.nodes.items()))
    mem = report.stats.get("memory")
    say(f"memory plan: {mem}" if mem else
        "memory plan: none (this device runs without an arena; try --device opencl)")
    dev = report.stats.get(report.device)
    if isinstance(dev, dict):
        say(f"{report.device}: " + ", ".join(
            f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in dev.items()
            if k not in ("source_path", "kernel_us")))
    say(f"train loss: first {losses[0]:.3f}, mean of last 20 {np.mean(losses[-20:]):.3f}")
    say(f"validation loss: before {val_before:.3f}, after {val_after:.3f} "
        f"(ln(vocab) = {math.log(len(vocab)):.3f})")
    if val_during:
        say("validation loss in the training loop: " + ", ".join(
            f"step {s} {v:.3f}" for s, v in val_during))
    if args.plot and rank == 0:
        plot_losses(losses, val_before, val_after, args.plot, val_during=val_during)
        say(f"loss curve: {args.plot}")
    sample = generate(model, vocab, args.prompt, args.sample_len) \
        if args.sample_len and rank == 0 else ""
    if sample:
        say(f"greedy sample: {sample!r}")
    return dict(losses=losses, val_before=val_before, val_after=val_after, report=report,
                sample=sample, vocab=len(vocab), tokens_per_s=tok_s, val_during=val_during)


if __name__ == "__main__":
    main()
