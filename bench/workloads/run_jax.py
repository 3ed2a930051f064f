"""Workloads on JAX: ``jit`` of one training step called from Python (``"jit"``), or the
whole loop compiled as one ``jax.lax.fori_loop`` (``"fori"``). Gradients by
``jax.value_and_grad``; the SGD update is part of the compiled step."""
from __future__ import annotations

import time

from .frameworks import jax_ops
from .spec import Data, Outcome, Workload


def run(w: Workload, params: dict, data: Data, steps: int, mode: str) -> Outcome:
    """Train ``w`` for ``steps`` steps; ``mode`` is ``"jit"`` or ``"fori"`` (on JAX's default
    device), or ``"jit-cuda"`` (``"jit"`` with every array on the first GPU).

    With ``"fori"`` there is no host round trip per step. The first step counts as done when
    compilation has finished plus the first loop's run time over ``steps``; the executable
    is then run once more from the initial parameters (after ``total_s`` was taken), and
    that second loop's time over ``steps`` is the steady per-step time, without the first
    call's one-time costs (~15 ms).

    Raises:
        ImportError: JAX is not installed.
    """
    import jax
    import jax.numpy as jnp

    F = jax_ops()
    gpu = mode.endswith("-cuda")
    mode = mode.removesuffix("-cuda")
    put = (lambda v: jax.device_put(v, jax.devices("gpu")[0])) if gpu else jnp.asarray
    t0 = time.perf_counter()
    P = {k: put(v) for k, v in params.items()}
    C = {k: put(v) for k, v in data.const.items()}
    S = {k: put(v) for k, v in data.stream.items()}

    def step(P, C, S, i):
        D = dict(C)
        D.update({k: jax.lax.dynamic_index_in_dim(v, i, keepdims=False) for k, v in S.items()})
        loss, g = jax.value_and_grad(lambda P: w.loss(F, P, D))(P)
        return jax.tree.map(lambda p, d: p - w.lr * d, P, g), loss

    stats = {"jax": jax.__version__}
    if mode == "jit":
        f = jax.jit(step, donate_argnums=0)
        stamps: list[float] = []
        cpu: list[float] = []
        for i in range(steps):
            P, loss = f(P, C, S, i)
            jax.block_until_ready((P, loss))
            stamps.append(time.perf_counter() - t0)
            cpu.append(time.process_time())
        first, loop_s = stamps[0], None
    elif mode == "fori":
        def loop(P, C, S):
            return jax.lax.fori_loop(0, steps, lambda i, P: step(P, C, S, i)[0], P)

        compiled = jax.jit(loop, donate_argnums=0).lower(P, C, S).compile()
        t_compiled = time.perf_counter() - t0
        P = jax.block_until_ready(compiled(P, C, S))
        first_loop_s = time.perf_counter() - t0 - t_compiled
        first, stamps, cpu = t_compiled + first_loop_s / steps, None, None
        stats.update(compile_s=t_compiled, first_loop_s=first_loop_s)
    else:
        raise ValueError(f"jax mode must be 'jit' or 'fori', got {mode!r}")
    final = {k: jax.device_get(v).copy() for k, v in P.items()}
    total = time.perf_counter() - t0
    if mode == "fori":
        again = {k: jnp.asarray(v) for k, v in params.items()}
        t, c = time.perf_counter(), time.process_time()
        jax.block_until_ready(compiled(again, C, S))
        loop_s = time.perf_counter() - t
        cpu_loop = time.process_time() - c
    return Outcome(first, total, stamps, loop_s, final, stats, cpu=cpu,
                   cpu_loop_s=cpu_loop if mode == "fori" else None)
