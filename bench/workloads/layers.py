"""Framework-neutral model math shared by the workloads.

Every function takes ``F``, a small namespace of the ops whose spelling differs between
frameworks (see :mod:`bench.workloads.frameworks`), and arrays of that framework; the
rest (``@``, ``+``, ``*``, ``.T``, ``.reshape``, ``.sum()``) is spelled the same in
autodiff, PyTorch and JAX. One function therefore gives identical math everywhere.

Parameter layouts follow ``torch.nn``: a linear layer is ``weight [out, in]`` and
``bias [out]``; initial values come from :func:`init_linear` with one numpy generator.
"""
from __future__ import annotations

import math

import numpy as np

LN_EPS = 1e-5


def init_linear(rng: np.random.Generator, params: dict, name: str, fan_in: int,
                fan_out: int) -> None:
    """Add ``{name}.weight [fan_out, fan_in]`` and ``{name}.bias [fan_out]`` (float32) to
    ``params``, drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) like ``torch.nn.Linear``."""
    bound = 1.0 / math.sqrt(fan_in)
    params[f"{name}.weight"] = rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32)
    params[f"{name}.bias"] = rng.uniform(-bound, bound, (fan_out,)).astype(np.float32)


def init_layer_norm(params: dict, name: str, d: int) -> None:
    """Add ``{name}.weight`` (ones) and ``{name}.bias`` (zeros), both ``[d]`` float32."""
    params[f"{name}.weight"] = np.ones(d, np.float32)
    params[f"{name}.bias"] = np.zeros(d, np.float32)


def init_encoder(rng: np.random.Generator, layers: int, d: int, ff: int) -> dict:
    """Parameters of a post-LN encoder stack, ``layer{i}.{q,k,v,out,ff1,ff2,ln1,ln2}``."""
    params: dict = {}
    for i in range(layers):
        for proj in ("q", "k", "v", "out"):
            init_linear(rng, params, f"layer{i}.{proj}", d, d)
        init_linear(rng, params, f"layer{i}.ff1", d, ff)
        init_linear(rng, params, f"layer{i}.ff2", ff, d)
        init_layer_norm(params, f"layer{i}.ln1", d)
        init_layer_norm(params, f"layer{i}.ln2", d)
    return params


def linear(P: dict, name: str, x):
    """``x [..., in] @ weight.T + bias`` -> ``[..., out]``."""
    return x @ P[f"{name}.weight"].T + P[f"{name}.bias"]


def layer_norm(F, P: dict, name: str, x):
    """Layer norm over the last dim from mean/variance math (biased variance, eps 1e-5)."""
    mu = F.mean(x)
    d = x - mu
    return d * F.rsqrt(F.mean(d * d) + LN_EPS) * P[f"{name}.weight"] + P[f"{name}.bias"]


def attention(F, P: dict, name: str, x, heads: int):
    """Multi-head self-attention of ``x [*lead, S, D]`` (no mask, no dropout).

    Heads are split by reshape ``[*lead, S, H, D/H]`` and permute ``[*lead, H, S, D/H]``;
    scores are a batched matmul scaled by ``1/sqrt(D/H)`` and a softmax over keys.
    """
    *lead, s, d = x.shape
    dh = d // heads
    n = len(lead)
    split = tuple(range(n)) + (n + 1, n, n + 2)      # [*lead, S, H, Dh] -> [*lead, H, S, Dh]
    swap = tuple(range(n + 1)) + (n + 2, n + 1)      # last two dims swapped

    def heads_of(proj):
        return F.permute(linear(P, f"{name}.{proj}", x).reshape(tuple(lead) + (s, heads, dh)),
                         split)

    q, k, v = heads_of("q"), heads_of("k"), heads_of("v")
    a = F.softmax((q @ F.permute(k, swap)) * (1.0 / math.sqrt(dh)))
    o = F.permute(a @ v, split).reshape(tuple(lead) + (s, d))
    return linear(P, f"{name}.out", o)


def encoder(F, P: dict, x, layers: int, heads: int):
    """Post-LN transformer encoder (``torch.nn.TransformerEncoderLayer`` with
    ``norm_first=False``, ReLU FFN, no dropout) on ``x [*lead, S, D]``, ``layers`` deep."""
    for i in range(layers):
        x = layer_norm(F, P, f"layer{i}.ln1", x + attention(F, P, f"layer{i}", x, heads))
        h = F.relu(linear(P, f"layer{i}.ff1", x))
        x = layer_norm(F, P, f"layer{i}.ln2", x + linear(P, f"layer{i}.ff2", h))
    return x


def matmul_flops(m: int, k: int, n: int, batch: int = 1, grads: int = 2) -> int:
    """FLOPs of one ``[batch, m, k] @ [batch, k, n]`` per training step: ``2mkn`` forward
    plus ``2mkn`` for each operand whose gradient is needed (``grads`` in 0..2)."""
    return 2 * m * k * n * batch * (1 + grads)


def encoder_flops(tokens: int, seqs: int, s: int, d: int, ff: int, heads: int,
                  layers: int) -> int:
    """Matmul FLOPs per training step of :func:`encoder` on ``seqs`` sequences of ``s``
    tokens (``tokens = seqs * s``); the first layer's projections need no input gradient."""
    dh = d // heads
    total = 0
    for i in range(layers):
        g_in = 1 if i == 0 else 2
        total += 3 * matmul_flops(tokens, d, d, grads=g_in)
        total += matmul_flops(s, dh, s, batch=seqs * heads)        # q @ k^T
        total += matmul_flops(s, s, dh, batch=seqs * heads)        # a @ v
        total += matmul_flops(tokens, d, d)                         # out projection
        total += matmul_flops(tokens, d, ff) + matmul_flops(tokens, ff, d)
    return total
