"""Gradient clipping inside the traced body, as ``torch.nn.utils.clip_grad_norm_`` /
``clip_grad_value_``.

Gradients are traced values of the current iteration; clipping rebinds each ``p.grad`` to
the clipped value, so an optimizer ``step()`` traced afterwards reads it. The total norm is
computed on the device and returned as a 0-d tensor (hand it to a ``Receiver`` to log it).
"""
from __future__ import annotations

import math

from ...graph.tensor import Tensor
from ...graph.trace import no_grad


def _grads(parameters) -> list[Tensor]:
    ps = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    return [p.grad for p in ps if p.grad is not None]


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False,
                   foreach=None) -> Tensor:
    """The ``norm_type``-norm of all ``tensors`` together (the norm of their norms), a
    float32 0-d tensor; ``inf`` is the largest absolute value.

    Raises:
        NotImplementedError: ``error_if_nonfinite=True`` (a device value cannot raise on
            the host mid-loop; check the returned norm in a ``Receiver``).
        ValueError: no tensors.
    """
    if error_if_nonfinite:
        raise NotImplementedError("error_if_nonfinite=True is not supported: log the "
                                  "returned norm with a Receiver and check it there")
    ts = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    if not ts:
        raise ValueError("get_total_norm: no tensors")
    p = float(norm_type)
    with no_grad():
        # the norms combine pairwise (a tree of scalar ops fused into one kernel), not
        # through a concatenation: a concat of n scalars reads as an n-way select per lane
        if math.isinf(p):
            if p > 0:
                return _tree([t.abs().amax() for t in ts], lambda a, b: a.maximum(b))
            return _tree([t.abs().amin() for t in ts], lambda a, b: a.minimum(b))
        if p == 2.0:
            norms = [(t * t).sum().sqrt() for t in ts]
            return _tree([n * n for n in norms], lambda a, b: a + b).sqrt()
        if p == 1.0:
            return _tree([t.abs().sum() for t in ts], lambda a, b: a + b)
        norms = [(t.abs() ** p).sum() ** (1.0 / p) for t in ts]
        return _tree([n ** p for n in norms], lambda a, b: a + b) ** (1.0 / p)


def _tree(xs: list, op):
    """``op`` over ``xs`` as a balanced tree (pairwise, like a reduction's partial sums)."""
    while len(xs) > 1:
        xs = [op(xs[i], xs[i + 1]) if i + 1 < len(xs) else xs[i]
              for i in range(0, len(xs), 2)]
    return xs[0]


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """Scale every gradient by ``min(1, max_norm / (total_norm + 1e-6))``, as
    ``torch.nn.utils.clip_grad_norm_``.

    Args:
        parameters: tensors (or one tensor) whose ``.grad`` is clipped; those without a
            gradient are skipped.
        max_norm: the norm's upper bound.
        norm_type: ``p`` of the norm (``float("inf")`` for the max norm).

    Returns:
        The total norm of the gradients before clipping: a float32 0-d tensor computed on
        the device (a ``Receiver`` can log it).

    Raises:
        NotImplementedError: ``error_if_nonfinite=True``.
    """
    ps = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    grads = _grads(ps)
    if not grads:
        return Tensor(0.0)
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    with no_grad():
        coef = (float(max_norm) / (total + 1e-6)).clamp(max=1.0)
        for p in ps:
            if p.grad is not None:
                p.grad = p.grad * coef
    return total


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient to ``[-clip_value, clip_value]``, as
    ``torch.nn.utils.clip_grad_value_``."""
    ps = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    v = float(clip_value)
    with no_grad():
        for p in ps:
            if p.grad is not None:
                p.grad = p.grad.clamp(-v, v)
