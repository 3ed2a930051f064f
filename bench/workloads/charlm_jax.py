"""W5 on JAX: ``examples/transformer.py``'s model as plain ``jax.numpy`` functions over the
example's ``state_dict`` (same names, same initial weights), trained as the example
trains: AdamW written out as ``torch.optim.AdamW`` computes it, the learning rate of its
schedule (:func:`.charlm.lr_at`), the gradient norm clipped as ``clip_grad_norm_`` does,
the validation loss every ``eval_every`` steps (a ``lax.cond`` inside the loop); one
training step under ``jax.jit`` called per step (``"jit"``) or the whole loop as one
``jax.lax.fori_loop`` (``"fori"``)."""
from __future__ import annotations

import math
import time

import numpy as np

from . import charlm
from .spec import Outcome

LN_EPS = 1e-5


def loss(P: dict, x, y):
    """Mean next-character cross-entropy of windows ``x``/``y`` (int32 ``[B, T]``)."""
    import jax
    import jax.numpy as jnp

    def ln(v, name):
        mu = v.mean(-1, keepdims=True)
        var = ((v - mu) ** 2).mean(-1, keepdims=True)
        return (v - mu) * jax.lax.rsqrt(var + LN_EPS) * P[f"{name}.weight"] + P[f"{name}.bias"]

    def lin(v, name):
        return v @ P[f"{name}.weight"].T + P[f"{name}.bias"]

    c = charlm.config()
    b, t = x.shape
    d, h = c.d_model, c.heads
    dh = d // h
    mask = jnp.triu(jnp.full((t, t), -jnp.inf, jnp.float32), 1)
    v = P["tok_emb.weight"][x] + P["pos_emb.weight"][jnp.arange(t)]
    for i in range(c.layers):
        pre = f"encoder.layers.{i}"
        a = ln(v, f"{pre}.norm1")
        w, bias = P[f"{pre}.self_attn.in_proj_weight"], P[f"{pre}.self_attn.in_proj_bias"]
        q, k, val = (a @ w[j * d:(j + 1) * d].T + bias[j * d:(j + 1) * d] for j in range(3))
        q, k, val = (z.reshape(b, t, h, dh).transpose(0, 2, 1, 3) for z in (q, k, val))
        scores = (q @ k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(dh)) + mask
        o = jax.nn.softmax(scores, axis=-1) @ val
        o = o.transpose(0, 2, 1, 3).reshape(b, t, d)
        v = v + lin(o, f"{pre}.self_attn.out_proj")
        f = jax.nn.gelu(lin(ln(v, f"{pre}.norm2"), f"{pre}.linear1"), approximate=False)
        v = v + lin(f, f"{pre}.linear2")
    logits = lin(ln(v, "norm"), "head").reshape(b * t, -1)
    logp = jax.nn.log_softmax(logits, axis=-1)
    return -jnp.take_along_axis(logp, y.reshape(b * t, 1), axis=1).mean()


def clip(g, max_norm: float):
    """Every gradient scaled by ``min(1, max_norm / (total norm + 1e-6))``, as
    ``torch.nn.utils.clip_grad_norm_``."""
    import jax
    import jax.numpy as jnp
    total = jnp.sqrt(sum(jnp.sum(x * x) for x in jax.tree.leaves(g)))
    coef = jnp.minimum(max_norm / (total + 1e-6), 1.0)
    return jax.tree.map(lambda x: x * coef, g)


def adamw(P, M, V, g, step, lr):
    """One ``torch.optim.AdamW`` step (weight decay 0.01, betas 0.9/0.999, eps 1e-8) at
    learning rate ``lr`` of every parameter; ``step`` counts from 1."""
    import jax
    import jax.numpy as jnp
    b1, b2, eps = 0.9, 0.999, 1e-8
    t = step.astype(jnp.float32)
    c1, c2 = 1 - b1 ** t, 1 - b2 ** t
    M = jax.tree.map(lambda m, d: b1 * m + (1 - b1) * d, M, g)
    V = jax.tree.map(lambda v, d: b2 * v + (1 - b2) * d * d, V, g)
    P = jax.tree.map(lambda p, m, v: p * (1 - lr * charlm.WD)
                     - (lr / c1) * m / (jnp.sqrt(v) / jnp.sqrt(c2) + eps), P, M, V)
    return P, M, V


def run(s: "charlm.Setup", steps: int, mode: str) -> Outcome:
    """Train for ``steps`` steps; ``mode`` is ``"jit"`` or ``"fori"`` (timed as the other
    JAX systems: see :mod:`.run_jax`).

    Raises:
        ValueError: an unknown ``mode``.
    """
    import jax
    import jax.numpy as jnp

    def start():                      # fresh buffers: a jitted step donates its state
        P = {k: jnp.asarray(v) for k, v in s.params.items()}
        return (P, {k: jnp.zeros_like(v) for k, v in P.items()},
                {k: jnp.zeros_like(v) for k, v in P.items()})

    c = s.cfg
    t0 = time.perf_counter()
    state = start()
    windows = jnp.asarray(s.train)
    val = jnp.asarray(s.val)
    rates = jnp.asarray([charlm.lr_at(i, steps, c) for i in range(steps)], jnp.float32)

    def validation(P):
        return jax.lax.fori_loop(0, val.shape[0], lambda j, acc: acc + loss(
            P, val[j, :, :-1], val[j, :, 1:]), jnp.float32(0.0)) / val.shape[0]

    def step(state, i):
        P, M, V = state
        w = jax.lax.dynamic_index_in_dim(windows, i, keepdims=False)
        g = jax.grad(loss)(P, w[:, :-1], w[:, 1:])
        if c.clip:
            g = clip(g, c.clip)
        return adamw(P, M, V, g, i + 1, rates[i])

    def step_and_validate(carry, i):          # the validation loss every eval_every steps
        state, vals = step(carry[0], i), carry[1]
        if not c.eval_every:
            return state, vals
        due = (i + 1) % c.eval_every == 0
        v = jax.lax.cond(due, lambda: validation(state[0]), lambda: jnp.float32(0.0))
        k = jnp.clip((i + 1) // c.eval_every - 1, 0, vals.size - 1)
        return state, jnp.where(due, vals.at[k].set(v), vals)

    stats = {"jax": jax.__version__}
    n_val = max(1, steps // c.eval_every) if c.eval_every else 1
    if mode == "jit":
        f = jax.jit(step, donate_argnums=0)
        val_fn = jax.jit(validation)
        stamps: list[float] = []
        cpu: list[float] = []
        during = []
        for i in range(steps):
            state = jax.block_until_ready(f(state, i))
            if c.eval_every and (i + 1) % c.eval_every == 0:
                during.append((i + 1, float(val_fn(state[0]))))
            stamps.append(time.perf_counter() - t0)
            cpu.append(time.process_time())
        first, loop_s = stamps[0], None
    elif mode == "fori":
        def loop(state):
            return jax.lax.fori_loop(0, steps, lambda i, cv: step_and_validate(cv, i),
                                     (state, jnp.zeros(n_val, jnp.float32)))

        compiled = jax.jit(loop, donate_argnums=0).lower(state).compile()
        t_compiled = time.perf_counter() - t0
        state, vals = jax.block_until_ready(compiled(state))
        first_loop_s = time.perf_counter() - t0 - t_compiled
        first, stamps, cpu = t_compiled + first_loop_s / steps, None, None
        during = [((k + 1) * c.eval_every, float(v)) for k, v in enumerate(vals)
                  if c.eval_every and (k + 1) * c.eval_every <= steps]
        stats.update(compile_s=t_compiled, first_loop_s=first_loop_s)
    else:
        raise ValueError(f"jax mode must be 'jit' or 'fori', got {mode!r}")
    stats["val_during"] = during
    P = state[0]
    val_fn = jax.jit(loss)
    stats["val_loss"] = float(np.mean([float(val_fn(P, v[:, :-1], v[:, 1:])) for v in s.val]))
    final = {k: np.asarray(jax.device_get(v)).copy() for k, v in P.items()}
    total = time.perf_counter() - t0
    if mode == "fori":
        again = start()
        t, c = time.perf_counter(), time.process_time()
        jax.block_until_ready(compiled(again))
        loop_s = time.perf_counter() - t
        cpu_loop = time.process_time() - c
    return Outcome(first, total, stamps, loop_s, final, stats, cpu=cpu,
                   cpu_loop_s=cpu_loop if mode == "fori" else None)
