"""``host_callback``: a host function inside the compiled program (graph op ``CALLBACK``)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff.device import unavailable
from autodiff.graph.ir import Op
from op_helper import check_op


def _device(name):
    why = unavailable(name)
    return pytest.param({"device": name}, id=name,
                        marks=pytest.mark.skipif(why is not None, reason=str(why)))


DEVICES = [pytest.param({"device": "numpy"}, id="graph"),
           pytest.param({"device": "numpy", "ir": "procedural"}, id="procedural"),
           _device("opencl"), _device("tvm")]


def _sin(x):
    """sin computed on the host, differentiable through its vjp."""
    return ad.host_callback(lambda a: np.sin(a).astype(np.float32), [x], x.shape,
                            name="host_sin", vjp=lambda g, out, x: (g * x.cos(),))


def test_forward_and_gradient_against_torch():
    check_op([(3, 4)], lambda x: torch.sin(x) * x, lambda x: _sin(x) * x)


def test_two_operands_one_vjp_call():
    calls = []

    def vjp(g, out, a, b):
        calls.append(1)
        return g * b, g * a

    def mul(a, b):
        return ad.host_callback(lambda x, y: (x * y).astype(np.float32), [a, b], a.shape,
                                vjp=vjp)
    check_op([(2, 3), (2, 3)], lambda a, b: (a * b).exp(), lambda a, b: mul(a, b).exp())
    assert len(calls) == 1                 # traced once for both operands


@pytest.mark.parametrize("options", DEVICES)
def test_runs_once_per_iteration_in_order(options):
    seen = []
    w = ad.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))

    def host(a):
        seen.append(a.copy())
        return (a.sum(0) * 2).astype(np.float32)

    out = []

    def step(i):
        v = ad.host_callback(host, [w * (i.float() + 1)], (3,), name="colsum")
        ad.Receiver(lambda x: out.append(x), [v + 1])
    ad.ir_for(3, step)
    ad.execute(**options)
    assert len(seen) == 3
    for k in range(3):
        np.testing.assert_array_equal(seen[k], w.numpy() * (k + 1))
        np.testing.assert_array_equal(out[k], w.numpy().sum(0) * 2 * (k + 1) + 1)


@pytest.mark.parametrize("options", DEVICES)
def test_int_operands_arrive_in_host_dtypes(options):
    got = []
    x = ad.tensor(np.array([1, 2, 3], np.int64))
    r = ad.host_callback(lambda a: got.append(a.dtype) or (a * 2), [x * 1], (3,), "int64")
    y = r + 1
    ad.execute(**options)
    assert got == [np.dtype(np.int64)]
    np.testing.assert_array_equal(y.numpy(), [3, 5, 7])


@pytest.mark.parametrize("options", DEVICES)
def test_a_failing_callback_names_it_and_the_iteration(options):
    w = ad.Tensor(np.ones(3, np.float32))

    def host(a):
        if a[0] > 3.5:
            raise ValueError("too big")
        return a

    def step():
        v = ad.host_callback(host, [w + 1], (3,), name="check")
        w.copy_(v)
    ad.ir_for(10, step)
    with pytest.raises(ad.CallbackError, match=r"Callback 'check' in iteration 2: callback "
                                               r"raised ValueError: too big") as e:
        ad.execute(**options)
    assert e.value.iteration == (2,) and isinstance(e.value.__cause__, ValueError)
    np.testing.assert_array_equal(w.numpy(), [3, 3, 3])     # after iterations 0 and 1


@pytest.mark.parametrize("options", DEVICES)
@pytest.mark.parametrize("bad", [np.zeros(4, np.float32), np.zeros(3, np.float64), 1.0])
def test_a_wrong_result_is_an_error(bad, options):
    x = ad.Tensor(np.ones(3, np.float32))
    ad.host_callback(lambda a: bad, [x * 2], (3,), name="cb")
    with pytest.raises(ad.CallbackError, match=r"Callback 'cb': expected a numpy array of "
                                               r"shape \[3\] float32"):
        ad.execute(**options)


def test_never_pruned_or_merged():
    calls = []
    x = ad.Tensor(np.ones(3, np.float32))
    for _ in range(2):                    # identical calls, results unused
        ad.host_callback(lambda a: calls.append(1) or a, [x * 2], (3,), name="same")
    ad.execute(device="numpy", ir="procedural")
    assert len(calls) == 2


def test_not_differentiable_without_vjp():
    x = ad.Tensor(np.ones(3, np.float32), requires_grad=True)
    y = ad.host_callback(lambda a: a, [x * 2], (3,), name="opaque")
    assert not y.requires_grad             # no vjp: no gradient flows through it
    with pytest.raises(RuntimeError, match="does not require grad"):
        y.sum().backward()


def test_printed_and_rejected_where_effects_are():
    from autodiff.graph.printer import format_graph
    from autodiff.graph.trace import TRACER
    x = ad.Tensor(np.ones(3, np.float32))
    ad.host_callback(lambda a: a, [x * 2], (3,), name="shown")
    assert "callback shown" in format_graph(TRACER.root.graph)
    assert any(n.op is Op.CALLBACK for n in TRACER.root.graph.nodes)
    ad.reset()
    with pytest.raises(TypeError, match="host callbacks"):
        ad.checkpoint(lambda v: ad.host_callback(lambda a: a, [v], (3,)), x * 1)


def test_bad_arguments():
    x = ad.Tensor(np.ones(3, np.float32))
    with pytest.raises(TypeError, match="callable"):
        ad.host_callback(3, [x], (3,))
    with pytest.raises(TypeError, match="at least one operand"):
        ad.host_callback(lambda: None, [], (3,))
