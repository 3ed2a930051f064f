"""``Op.RAND`` on the OpenCL device: the Philox-4x32-10 port draws bit-identical numbers to
the numpy reference (:mod:`autodiff.graph.rng`) in every kernel kind and loop nesting."""
import numpy as np
import pytest

import autodiff as ad
from autodiff import nn
from autodiff.nn import functional as F
from autodiff.device.opencl import device
from autodiff.graph import ops
from autodiff.graph.rng import philox_uniform
from autodiff.graph.tensor import Tensor

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)


def _rand(shape, seed, stream=0):
    """A raw RAND node: float32 uniform in [0, 1)."""
    return Tensor(_node=ops.rand(tuple(shape), seed, stream))


def _draws(dev, prog):
    ad.reset()
    got = []
    outs = prog(got)
    ad.execute(device=dev)
    return got, [o.numpy() for o in outs]


def _equal_on_both(prog, rtol: float = 0.0):
    """Run ``prog`` on both devices: Receiver values and outputs equal (``rtol=0``: bit for
    bit; else the zero patterns, i.e. the masks, bit for bit and the values within rtol)."""
    ref, ref_out = _draws("numpy", prog)
    got, got_out = _draws("opencl", prog)
    assert len(got) == len(ref) and (ref or ref_out)
    flat = lambda xs: [y for x in xs for y in (x if isinstance(x, list) else [x])]
    for x, y in zip(flat(ref + ref_out), flat(got + got_out)):
        if rtol == 0.0:
            np.testing.assert_array_equal(y, x)
        else:
            np.testing.assert_array_equal(y == 0, x == 0)
            np.testing.assert_allclose(y, x, rtol=rtol, atol=rtol * np.abs(x).max())
    return got, got_out


def test_outside_loops_matches_generator_bits():
    """Key words with the top bit set (unsigned literals), odd sizes (a partial last
    block)."""
    def prog(got):
        a = F.dropout(ad.ones(7, 13), 0.5, seed=2**32 - 5, stream=2**31 + 3)
        return [a]
    _, (a,) = _equal_on_both(prog)
    assert 0.3 < (a == 0).mean() < 0.7


def test_nested_loops_and_after_inner_loop():
    """Iteration words of two nested loops, and back to the outer words after the inner
    loop ends (a draw in the outer body after it)."""
    drop = nn.Dropout(0.5, seed=9)

    def prog(got):
        def outer():
            def inner():
                ad.Receiver(lambda v: got.append(v), [drop(ad.ones(5, 9))])
            ad.ir_for(3, inner)
            ad.Receiver(lambda v: got.append(v), [drop(ad.ones(33))])
        ad.ir_for(2, outer)
        return []
    got, _ = _equal_on_both(prog)
    assert len(got) == 2 * 3 + 2
    assert not np.array_equal(got[0], got[1]) and not np.array_equal(got[3], got[7])


def test_rand_in_matmul_epilogue_and_reduction():
    """Dropout fused after a matmul (vector epilogue, drawn lane by lane) and a reduction
    over random values, forward and backward, inside a loop."""
    rng = np.random.default_rng(0)
    x = ad.Tensor(rng.standard_normal((6, 40)).astype(np.float32))
    w0 = rng.standard_normal((40, 37)).astype(np.float32)

    def prog(got):
        w = ad.Tensor(w0, requires_grad=True)
        drop = nn.Dropout(0.3, seed=4)

        def body():
            h = drop(x @ w)
            s = drop(ad.ones(3, 50)).sum(-1)
            loss = (h * h).sum() + s.sum()
            loss.backward()
            ad.Receiver(lambda a, b, g: got.append([a, b, g]), [h, s, w.grad])
        ad.ir_for(2, body)
        return []
    got, _ = _equal_on_both(prog, rtol=1e-5)
    h, s, g = got[1]
    assert (h == 0).any() and (h != 0).any() and g.shape == (40, 37)


def test_raw_uniform_values_are_the_generator_function():
    """RAND values themselves (not only masks), at each index of a loop, equal
    philox_uniform bit for bit."""
    seen = []
    ad.ir_for(3, lambda: ad.Receiver(lambda v: seen.append(v), [_rand((3, 11), 123, 5)]))
    ad.execute(device="opencl")
    assert len(seen) == 3
    for k, v in enumerate(seen):
        np.testing.assert_array_equal(v, philox_uniform(123, 5, (k,), (3, 11)))
        assert v.dtype == np.float32 and v.min() >= 0 and v.max() < 1
