"""W5 on PyTorch: ``examples/transformer.py``'s model written with ``torch.nn`` under the same
parameter names, loaded with the example's initial weights, trained by
``torch.optim.AdamW`` on the same windows (eager, or the loss under ``torch.compile``)."""
from __future__ import annotations

import os
import time

import numpy as np

from . import charlm
from .spec import Outcome


def model(vocab: int):
    """The example's ``CharTransformer`` in ``torch.nn`` (same ``state_dict`` keys)."""
    import torch
    from torch import nn

    class CharTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok_emb = nn.Embedding(vocab, charlm.D)
            self.pos_emb = nn.Embedding(charlm.SEQ, charlm.D)
            layer = nn.TransformerEncoderLayer(charlm.D, charlm.HEADS, 4 * charlm.D, 0.0,
                                               activation="gelu", batch_first=True,
                                               norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, charlm.LAYERS,
                                                 enable_nested_tensor=False)
            self.norm = nn.LayerNorm(charlm.D)
            self.head = nn.Linear(charlm.D, vocab)

        def forward(self, idx):
            t = idx.shape[1]
            x = self.tok_emb(idx) + self.pos_emb(torch.arange(t))
            mask = nn.Transformer.generate_square_subsequent_mask(t)
            return self.head(self.norm(self.encoder(x, mask=mask, is_causal=True)))

    return CharTransformer()


def run(s: "charlm.Setup", steps: int, mode: str) -> Outcome:
    """Train for ``steps`` steps; ``mode`` is ``"eager"`` or ``"compile"``.

    Raises:
        ValueError: an unknown ``mode``.
    """
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    t0 = time.perf_counter()
    net = model(s.vocab)
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
    opt = torch.optim.AdamW(net.parameters(), lr=charlm.LR, weight_decay=charlm.WD)
    windows = torch.from_numpy(s.train.astype(np.int64))
    stamps: list[float] = []
    cpu: list[float] = []
    for i in range(steps):
        opt.zero_grad(set_to_none=True)
        loss_fn(windows[i, :, :-1], windows[i, :, 1:]).backward()
        opt.step()
        stamps.append(time.perf_counter() - t0)
        cpu.append(time.process_time())
    net.eval()
    with torch.no_grad():
        val = torch.from_numpy(s.val.astype(np.int64))
        val_loss = float(np.mean([float(loss_fn(v[:, :-1], v[:, 1:])) for v in val]))
    final = {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}
    total = time.perf_counter() - t0
    return Outcome(stamps[0], total, stamps, None, final,
                   {"torch": torch.__version__, "threads": torch.get_num_threads(),
                    "val_loss": val_loss}, cpu=cpu)
