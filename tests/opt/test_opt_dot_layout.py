"""The ``dot_layout`` pass: a DOT read only through a transpose of its last two dims is
computed transposed (``(A B)^T = B^T A^T``); one with other readers, or a program output,
stays."""
from __future__ import annotations

import numpy as np

import autodiff as ad
from autodiff.graph.ir import Op
from autodiff.nn import Linear
from autodiff.opt import dot_layout, prune
from autodiff.optim import SGD
from opt_helpers import assert_same_results, check_wellformed, effects, run, trace


def transposed_dots(g) -> int:
    return sum(n.op is Op.PERMUTE and n.srcs[0].op is Op.DOT for n in g.walk())


def rewritten(build):
    g = trace(build)
    out = prune(dot_layout(g))          # the replaced DOT stays until pruned
    check_wellformed(out)
    assert effects(out) == effects(g)
    assert_same_results(run(g), run(out), rtol=1e-5, atol=1e-6)
    return g, out


def test_linear_weight_gradient_is_computed_in_the_weights_layout():
    rng = np.random.default_rng(0)
    net = Linear(5, 3)
    opt = SGD(net.parameters(), lr=0.1)
    x = ad.tensor(rng.standard_normal((4, 2, 5)).astype(np.float32))

    def build():
        def step():
            opt.zero_grad()
            net(x).square().sum().backward()
            opt.step()
        ad.ir_for(2, step)
        return net.weight * 1.0
    g, out = rewritten(build)
    assert transposed_dots(g) == 1 and transposed_dots(out) == 0
    dots = [n for n in out.walk() if n.op is Op.DOT]
    assert any(n.shape == (3, 5) for n in dots), "the gradient DOT has W's shape [out, in]"


def test_batched_transpose_is_rewritten_and_operand_transposes_fold():
    rng = np.random.default_rng(1)
    a = ad.tensor(rng.standard_normal((2, 3, 4)).astype(np.float32))
    b = ad.tensor(rng.standard_normal((2, 5, 4)).astype(np.float32))
    g, out = rewritten(lambda: (a @ b.transpose(1, 2)).transpose(1, 2) + 1.0)
    assert transposed_dots(g) == 1 and transposed_dots(out) == 0
    (d,) = [n for n in out.walk() if n.op is Op.DOT]
    assert d.shape == (2, 5, 3) and d.srcs[0].op is not Op.PERMUTE, "b^T^T folded to b"


def test_dot_with_another_reader_or_a_program_output_stays():
    rng = np.random.default_rng(2)
    a = ad.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    b = ad.tensor(rng.standard_normal((4, 5)).astype(np.float32))

    def shared():
        y = a @ b
        return [y.T * 2.0, y + 1.0]

    def output():
        y = a @ b
        return [y, y.T * 2.0]
    for build in (shared, output):
        g, out = rewritten(build)
        assert transposed_dots(out) == transposed_dots(g) == 1


def test_other_permutations_stay():
    rng = np.random.default_rng(3)
    a = ad.tensor(rng.standard_normal((2, 3, 4)).astype(np.float32))
    b = ad.tensor(rng.standard_normal((2, 4, 3)).astype(np.float32))
    g, out = rewritten(lambda: (a @ b).permute(1, 0, 2) * 1.0)
    assert transposed_dots(out) == transposed_dots(g) == 1
