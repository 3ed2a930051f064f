"""W5 on PyTorch: ``examples/transformer.py``'s model written with ``torch.nn`` under the same
parameter names, loaded with the example's initial weights, trained as the example trains
(``torch.optim.AdamW``, its warmup + cosine schedule from ``torch.optim.lr_scheduler``,
``clip_grad_norm_``, the validation loss every ``eval_every`` steps) on the same windows,
eager or with the loss under ``torch.compile``."""
from __future__ import annotations

import os
import time

import numpy as np

from . import charlm
from .spec import Outcome


def model(vocab: int, c=None):
    """The example's ``CharTransformer`` in ``torch.nn`` (same ``state_dict`` keys)."""
    import torch
    from torch import nn
    c = c or charlm.config()

    class CharTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_emb = nn.Embedding(vocab, c.d_model)
            self.pos_emb = nn.Embedding(c.seq, c.d_model)
            layer = nn.TransformerEncoderLayer(c.d_model, c.heads, 4 * c.d_model, c.dropout,
                                               activation="gelu", batch_first=True,
                                               norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, c.layers, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(c.d_model)
            self.head = nn.Linear(c.d_model, vocab)

        def forward(self, idx):
            t = idx.shape[1]
            x = self.tok_emb(idx) + self.pos_emb(torch.arange(t))
            mask = nn.Transformer.generate_square_subsequent_mask(t)
            return self.head(self.norm(self.encoder(x, mask=mask, is_causal=True)))

    return CharTransformer()


def schedule(opt, steps: int, c):
    """The example's schedule with PyTorch's own schedulers (None for ``constant``)."""
    import torch
    if c.schedule == "constant":
        return None
    warm = charlm.example().warmup_steps(steps, c.warmup)
    warm = max(1, min(warm, steps - 1))
    sch = torch.optim.lr_scheduler
    return sch.SequentialLR(opt, [sch.LinearLR(opt, start_factor=0.01, total_iters=warm),
                                  sch.CosineAnnealingLR(opt, T_max=steps - warm,
                                                        eta_min=c.lr * c.min_lr_ratio)],
                            [warm])


def run(s: "charlm.Setup", steps: int, mode: str) -> Outcome:
    """Train for ``steps`` steps; ``mode`` is ``"eager"`` or ``"compile"``.

    Raises:
        ValueError: an unknown ``mode``.
    """
    import torch
    import torch.nn.functional as F

    c = s.cfg
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    t0 = time.perf_counter()
    net = model(s.vocab, c)
    net.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in s.params.items()},
                        strict=True)
    net.train()

    def loss_fn(x, y):
        logits = net(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))

    if mode == "compile":
        loss_fn = torch.compile(loss_fn)
    elif mode != "eager":
        raise ValueError(f"torch mode must be 'eager' or 'compile', got {mode!r}")
    opt = torch.optim.AdamW(net.parameters(), lr=c.lr, weight_decay=charlm.WD)
    sched = schedule(opt, steps, c)
    windows = torch.from_numpy(s.train.astype(np.int64))
    val = torch.from_numpy(s.val.astype(np.int64))

    def validation() -> float:
        net.eval()
        with torch.no_grad():
            out = float(np.mean([float(loss_fn(v[:, :-1], v[:, 1:])) for v in val]))
        net.train()
        return out

    stamps: list[float] = []
    cpu: list[float] = []
    during = []
    for i in range(steps):
        opt.zero_grad(set_to_none=True)
        loss_fn(windows[i, :, :-1], windows[i, :, 1:]).backward()
        if c.clip:
            torch.nn.utils.clip_grad_norm_(net.parameters(), c.clip)
        opt.step()
        if sched is not None:
            sched.step()
        if c.eval_every and (i + 1) % c.eval_every == 0:
            during.append((i + 1, validation()))
        stamps.append(time.perf_counter() - t0)
        cpu.append(time.process_time())
    val_loss = validation()
    final = {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}
    total = time.perf_counter() - t0
    return Outcome(stamps[0], total, stamps, None, final,
                   {"torch": torch.__version__, "threads": torch.get_num_threads(),
                    "val_loss": val_loss, "val_during": during}, cpu=cpu)
