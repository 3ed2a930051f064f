"""W5 char-LM: the default configuration of ``examples/transformer.py``, on autodiff devices
and, with identical math, data and initial weights, on PyTorch and JAX.

* autodiff: the example's ``main(argv)`` runs unchanged in the benchmark's child process
  (with ``--no-progress --plot '' --sample-len 0``: no progress bar, no plot, no greedy
  sample; nothing about the model or its training changes). Timing hooks are put around it
  without touching its code: while its ``train()`` runs, ``autodiff.ir_for`` and
  ``autodiff.Receiver`` are wrapped so that the loss Receiver of the innermost loop's body
  also timestamps each iteration, and ``autodiff.execute`` is wrapped to keep
  the Report. Times count from the start of ``train()`` (tracing, compiling, running), as
  the peers' count from building their model; the validation after training counts in
  the total, as it does for the peers.
* PyTorch (:mod:`.charlm_torch`) and JAX (:mod:`.charlm_jax`): the same model (token +
  position embeddings, pre-norm encoder layers with a causal mask and exact GELU, final
  LayerNorm, Linear head, mean cross-entropy) and training step as the example's defaults
  (read from its argument parser, :func:`config`): AdamW (weight decay 0.01, betas
  0.9/0.999, eps 1e-8) with the learning rate warmed up linearly from 1% and decayed
  along a cosine, the gradient norm clipped, the validation loss computed inside the
  training loop every ``eval_every`` steps; the same training windows, starting from the
  example model's own initial weights (:func:`setup`), and the example's validation loss
  after training on the same windows.

Every system reports its final parameters (under the example model's ``state_dict`` names)
and the validation loss after training (``val loss``).
"""
from __future__ import annotations

import contextlib
import functools
import io
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .layers import matmul_flops
from .spec import Outcome

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "transformer.py"
KEY, NAME = "W5", "charlm"
TITLE = ("examples/transformer.py, default configuration: pre-LN 2x(d128,h4,ff512), "
         "[16,64] characters, causal, cross-entropy, AdamW")
QUICK_STEPS = 60
WD = 0.01                              # the example's AdamW weight decay


def unavailable() -> str | None:
    """Why W5 cannot run here, or None."""
    return None if EXAMPLE.exists() else "examples/transformer.py does not exist"


@functools.lru_cache(maxsize=1)
def example():
    """The example module, imported from its file."""
    import importlib.util
    if not EXAMPLE.exists():
        raise FileNotFoundError(EXAMPLE)
    spec = importlib.util.spec_from_file_location("charlm_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@functools.lru_cache(maxsize=1)
def config():
    """The example's default arguments (``argparse.Namespace``): model size, steps, lr,
    schedule, warmup, clipping, validation cadence."""
    return example().parse_args([])


def lr_at(step: int, steps: int, cfg=None) -> float:
    """The learning rate of optimizer step ``step`` (0-based) of a ``steps``-step run:
    what the example's schedule (``torch.optim.lr_scheduler`` semantics, closed form)
    gives: ``"cosine"`` rises linearly from 1% over ``warmup`` steps, then follows a cosine
    down to ``min_lr_ratio`` of the rate at ``steps``; ``"constant"`` keeps it."""
    import math
    cfg = cfg or config()
    lr = cfg.lr
    if cfg.schedule == "constant":
        return lr
    warm = example().warmup_steps(steps, cfg.warmup)
    warm = max(1, min(warm, steps - 1))
    if step < warm:
        return lr * (0.01 + 0.99 * step / warm)
    low = lr * cfg.min_lr_ratio
    return low + (lr - low) * (1 + math.cos(math.pi * (step - warm) / (steps - warm))) / 2


@dataclass
class Setup:
    """What the peers need to repeat the example exactly.

    Attributes:
        params: the example model's initial ``state_dict`` (name -> float32 array).
        train: int32 windows ``[steps, B, T + 1]``: step ``i`` trains on ``[:, :-1]`` ->
            ``[:, 1:]`` (the example's WindowSampler batches).
        val: int32 windows ``[n, B, T + 1]`` of the example's validation.
        vocab: vocabulary size.
    """
    params: dict
    train: np.ndarray
    val: np.ndarray
    vocab: int

    @property
    def cfg(self):
        return config()


def setup(steps: int) -> Setup:
    """Initial weights and data exactly as ``examples/transformer.py`` makes them at its
    defaults (seed 0): the model built after ``autodiff.manual_seed(0)``, the training
    windows of its WindowSampler, the validation windows of its ``evaluate``."""
    import autodiff as ad
    mod, c = example(), config()
    ad.manual_seed(c.seed)
    text = mod.load_text()
    vocab = mod.Vocab(text)
    ids = vocab.encode(text)
    split = int(0.9 * len(ids))
    train_ids, val_ids = ids[:split], ids[split:]
    model = mod.CharTransformer(len(vocab), c.d_model, c.heads, c.layers, c.seq, c.dropout)
    params = {k: np.asarray(v, np.float32) for k, v in model.state_dict().items()}
    sampler = mod.WindowSampler(train_ids, c.batch, c.seq, c.seed)
    train = np.stack([sampler._window(k) for k in range(steps)]).astype(np.int32)
    starts = np.arange(0, len(val_ids) - c.seq - 1, c.seq)[:c.batch * c.eval_batches]
    n = len(starts) // c.batch
    val = val_ids[starts[:n * c.batch, None] + np.arange(c.seq + 1)].reshape(
        n, c.batch, c.seq + 1)
    return Setup(params, train, val.astype(np.int32), len(vocab))


def flops(vocab: int = 103) -> int:
    """Matmul FLOPs of one training step: per layer the three input projections, the two
    attention products per head (the causal mask hides half the scores but they are
    computed), the output projection and the two feed-forward layers, then the head; the
    embeddings are parameters, so every layer's input gradient is needed (the validation
    inside the loop, every ``eval_every`` steps, is not counted)."""
    c = config()
    tokens, d, dh, total = c.batch * c.seq, c.d_model, c.d_model // c.heads, 0
    for _ in range(c.layers):
        total += 4 * matmul_flops(tokens, d, d)
        total += matmul_flops(c.seq, dh, c.seq, batch=c.batch * c.heads)
        total += matmul_flops(c.seq, c.seq, dh, batch=c.batch * c.heads)
        total += matmul_flops(tokens, d, 4 * d) + matmul_flops(tokens, 4 * d, d)
    return total + matmul_flops(tokens, d, vocab)


def run(device: str, steps: int | None) -> Outcome:
    """Run the example's ``main`` on autodiff's ``device`` (``--steps steps`` when not None).

    Raises:
        FileNotFoundError: the example does not exist.
        RuntimeError: its ``train()`` traced no loop (nothing to time).
    """
    import autodiff
    import autodiff.graph as graph

    mod = example()
    stamps: list[float] = []
    cpu: list[float] = []
    reports: list = []
    models: list = []
    made: list = []                   # Receivers created by the body being traced
    training = [False]
    opened = [0]                      # loops traced inside the body being traced
    t0 = [0.0]
    from autodiff.graph.control import wants_index
    orig_for, orig_exec, orig_train = autodiff.ir_for, autodiff.execute, mod.train
    orig_recv = autodiff.Receiver

    def receiver(fn, tensors, name=None):
        mark = {"stamp": False, "name": name}

        def timed(*arrays):
            out = fn(*arrays)
            if mark["stamp"]:
                stamps.append(time.perf_counter() - t0[0])
                cpu.append(time.process_time())
            return out
        made.append(mark)
        return orig_recv(timed, tensors, name)

    def ir_for(rng, body):
        if not training[0]:
            return orig_for(rng, body)

        def timed_body(*index):        # the loop index, when the example's body takes it
            outer, opened[0] = opened[0], 0
            del made[:]
            body(*index)
            if opened[0] == 0:        # innermost loop: its loss Receiver stamps each
                if not made:          # iteration when its callback has run
                    raise RuntimeError("examples/transformer.py: the training loop has "
                                       "no Receiver to time it by")
                named = [m for m in made if m["name"] == "loss"]
                (named or made)[0]["stamp"] = True
            opened[0] = outer + 1
        return orig_for(rng, timed_body if wants_index(body) else lambda: timed_body())

    def execute(*a, **k):
        report = orig_exec(*a, **k)
        if training[0]:
            reports.append(report)
        return report

    def train(*a, **k):
        training[0] = True
        models.append(a[0])
        t0[0] = time.perf_counter()   # the training program: trace, compile, run
        try:
            return orig_train(*a, **k)
        finally:
            training[0] = False

    argv = ["--device", device, "--no-progress", "--plot", "", "--sample-len", "0"]
    argv += ["--steps", str(steps)] if steps else []
    out = io.StringIO()
    autodiff.ir_for = graph.ir_for = ir_for
    autodiff.execute, autodiff.Receiver, mod.train = execute, receiver, train
    try:
        with contextlib.redirect_stdout(out):
            figures = mod.main(argv)
        total = time.perf_counter() - t0[0]
    finally:
        autodiff.ir_for, graph.ir_for, autodiff.execute = orig_for, orig_for, orig_exec
        autodiff.Receiver, mod.train = orig_recv, orig_train
    if not stamps:
        raise RuntimeError("examples/transformer.py: train() traced no ir_for loop")
    from .run_autodiff import jsonable
    stats = {"argv": argv, "output_tail": out.getvalue().splitlines()[-8:],
             "val_loss": figures["val_after"]}
    if reports:
        r = reports[-1]
        stats.update(times=dict(r.times), nodes=dict(r.nodes), device_stats=jsonable(r.stats))
    params = {k: np.asarray(v, np.float32) for k, v in models[-1].state_dict().items()} \
        if models else {}
    return Outcome(stamps[0], total, stamps, None, params, stats, cpu=cpu)


def run_peer(framework: str, mode: str, steps: int | None) -> Outcome:
    """The PyTorch (``mode`` eager/compile) or JAX (jit/fori) version for ``steps`` steps
    (the example's default when None)."""
    steps = steps or config().steps
    s = setup(steps)
    if framework == "torch":
        from .charlm_torch import run as peer
    else:
        from .charlm_jax import run as peer
    return peer(s, steps, mode)
