"""The ops whose spelling differs between frameworks, one namespace per framework.

:mod:`.layers` writes the model math once against these names:

``permute(x, perm)``, ``softmax(x)`` and ``log_softmax(x)`` over the last dim, ``relu(x)``,
``sigmoid(x)``, ``mean(x)`` over the last dim keeping it (size 1), ``rsqrt(x)``.

autodiff and PyTorch tensors share one spelling (:data:`TENSOR`); JAX's namespace is built
on first use so that importing this module never imports JAX.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

#: autodiff.Tensor and torch.Tensor (method spelling).
TENSOR = SimpleNamespace(
    permute=lambda x, perm: x.permute(*perm),
    softmax=lambda x: x.softmax(-1),
    log_softmax=lambda x: x.log_softmax(-1),
    relu=lambda x: x.relu(),
    sigmoid=lambda x: x.sigmoid(),
    mean=lambda x: x.mean(-1, keepdim=True),
    rsqrt=lambda x: x.rsqrt(),
)


def _np_log_softmax(x):
    z = x - x.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


#: numpy, for evaluating final parameters on the host.
NUMPY = SimpleNamespace(
    permute=np.transpose,
    softmax=lambda x: np.exp(_np_log_softmax(x)),
    log_softmax=_np_log_softmax,
    relu=lambda x: np.maximum(x, 0),
    sigmoid=lambda x: 1 / (1 + np.exp(-x)),
    mean=lambda x: x.mean(-1, keepdims=True),
    rsqrt=lambda x: 1 / np.sqrt(x),
)


def jax_ops() -> SimpleNamespace:
    """The namespace for ``jax.numpy`` arrays (imports JAX)."""
    import jax
    import jax.numpy as jnp
    return SimpleNamespace(
        permute=jnp.transpose,
        softmax=lambda x: jax.nn.softmax(x, axis=-1),
        log_softmax=lambda x: jax.nn.log_softmax(x, axis=-1),
        relu=jax.nn.relu,
        sigmoid=jax.nn.sigmoid,
        mean=lambda x: jnp.mean(x, axis=-1, keepdims=True),
        rsqrt=jax.lax.rsqrt,
    )
