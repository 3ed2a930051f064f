"""DP+Elw merging a batched dot product with the SUM over its batch dims (weight gradients
of a linear layer on ``[B, T, D]`` activations) into one contraction over ``B * K``."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import autodiff as ad
from autodiff.procedural.ir import DotProduct, FusedKernel, Reduce

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "procedural"))
from helpers import check_against_interpreter, trace  # noqa: E402


def _weight_grad_program(shape=(3, 4, 5), n=6, steps=2):
    rng = np.random.default_rng(0)
    x = ad.tensor(rng.standard_normal(shape).astype(np.float32))
    w = ad.Tensor(rng.standard_normal((shape[-1], n)).astype(np.float32) * 0.1,
                  requires_grad=True)

    def build():
        def step():
            # a weight expanded over the batch (a 2-D weight would be folded into the
            # rows by matmul itself: tests/graph/test_ops_matmul_fold.py)
            y = x @ w.expand(*shape[:-2], *w.shape)
            (y * y).sum().backward()
            with ad.no_grad():
                w.sub_(w.grad, alpha=0.01)
                w.grad = None
        ad.ir_for(range(steps), step)
        return [w * 1.0]
    return trace(build)


def _merged(fused):
    return [s for s, _ in fused.walk() if isinstance(s, FusedKernel)
            and isinstance(s.kernel, DotProduct)
            and any(isinstance(m, Reduce) for m in s.members)]


def test_weight_gradient_and_sgd_update_are_one_kernel():
    prog, fused = check_against_interpreter(_weight_grad_program(), rtol=1e-5, atol=1e-6)
    (g,) = _merged(fused)
    assert g.kernel.k.extent == 3 * 4                 # the batch dim joins the contraction
    assert any(o.buffer.kind.value == "param" for o in g.kernel.outs)   # SGD as epilogue
    assert len(fused.kernels()) < len(prog.kernels())


def test_two_batch_dims_summed():
    prog, fused = check_against_interpreter(_weight_grad_program((2, 3, 4, 5), n=3),
                                            rtol=1e-5, atol=1e-6)
    (g,) = _merged(fused)
    assert g.kernel.k.extent == 2 * 3 * 4


def test_sum_over_one_of_two_batch_dims_keeps_the_other():
    rng = np.random.default_rng(1)
    a = ad.tensor(rng.standard_normal((2, 3, 4, 5)).astype(np.float32))
    b = ad.tensor(rng.standard_normal((2, 3, 5, 6)).astype(np.float32))

    def build():
        return [(a @ b).sum(0)]                       # batch dim 1 stays a batch dim
    prog, fused = check_against_interpreter(trace(build), rtol=1e-5, atol=1e-5)
    (g,) = _merged(fused)
    assert g.kernel.k.extent == 2 * 5 and g.kernel.shape == (3, 4, 6)


def test_sum_over_a_matrix_dim_is_not_merged():
    rng = np.random.default_rng(2)
    a = ad.tensor(rng.standard_normal((2, 3, 4)).astype(np.float32))
    b = ad.tensor(rng.standard_normal((2, 4, 5)).astype(np.float32))

    def build():
        return [(a @ b).sum(1)]                       # sums over M: a real second reduction
    prog, fused = check_against_interpreter(trace(build), rtol=1e-5, atol=1e-5)
    assert _merged(fused) == []
