"""Lowering of host callbacks (graph ``CALLBACK``): a :class:`CallbackRead` as soon as the
operands exist, its :class:`CallbackWrite` only when nothing else is ready, so the kernels
that do not need the result (the backward pass of the next gradient bucket) run in between;
finishes in program order; the staging buffers in the memory plan."""
from __future__ import annotations

import numpy as np
import pytest

import autodiff as ad
from autodiff.nn import Linear
from autodiff.optim import SGD
from autodiff.procedural import CallbackRead, CallbackWrite, DotProduct, For, lower
from autodiff.procedural.ir import BufferKind
from autodiff.runtime import optimize, Report
from opt_like import traced


def _bucketed_step(calls=None):
    """Three layers; after backward() the gradients of layer 3 (ready first), then of
    layers 1-2, each bucket flattened through one identity host callback (a stand-in for
    the all-reduce), then SGD."""
    ad.manual_seed(0)
    layers = [Linear(8, 8) for _ in range(3)]
    params = [p for m in layers for p in m.parameters()]
    opt = SGD(params, lr=0.1)
    buckets = [list(layers[2].parameters()), [*layers[0].parameters(), *layers[1].parameters()]]
    feed = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)

    def host(a):
        if calls is not None:
            calls.append(a.size)
        return a

    def step():
        opt.zero_grad()
        h = ad.Feeder(lambda: feed, [4, 8], name="x")
        for m in layers:
            h = m(h).tanh()
        h.sum().backward()
        with ad.no_grad():
            for k, bucket in enumerate(buckets):
                flat = ad.cat([p.grad.reshape(-1) for p in bucket])
                red = ad.host_callback(host, [flat], flat.shape, name=f"bucket{k}")
                off = 0
                for p in bucket:
                    p.grad = red[off:off + p.numel()].reshape(p.shape)
                    off += p.numel()
        opt.step()
    ad.ir_for(3, step)
    return params


def test_start_early_finish_late():
    _bucketed_step()
    graph = optimize(traced([]), Report("-"))
    prog = lower(graph)
    loop, = [s for s, _ in prog.walk() if isinstance(s, For)]
    body = loop.body
    pos = {(type(s).__name__, s.call.spec.name): i for i, s in enumerate(body)
           if isinstance(s, (CallbackRead, CallbackWrite))}
    r0, r1 = pos["CallbackRead", "bucket0"], pos["CallbackRead", "bucket1"]
    w0, w1 = pos["CallbackWrite", "bucket0"], pos["CallbackWrite", "bucket1"]
    assert r0 < r1 < w0 < w1
    # the backward matmuls of layers 1-2 run while bucket 0 is with the host
    assert sum(isinstance(s, DotProduct) for s in body[r0:r1]) >= 3
    # nothing between bucket 1's read and the writes but what needs no result
    result = {body[w0].call.result.name, body[w1].call.result.name}
    assert not any(b.name in result for s in body[:w0] for b in s.reads())
    assert body[r0].call is body[w0].call
    assert all(b.kind is BufferKind.RECEIVER for b in body[r0].call.args)
    assert body[w0].call.result.kind is BufferKind.FEEDER


@pytest.mark.parametrize("fuse", [False, True])
def test_procedural_run_matches_the_graph_interpreter(fuse):
    calls = []
    params = _bucketed_step(calls)
    ad.execute(device="numpy")
    ref = [p.numpy() for p in params]
    ad.reset()
    calls.clear()
    params = _bucketed_step(calls)
    ad.execute(device="numpy", ir="procedural", fuse=fuse, debug=True)   # plan verified
    assert calls == [8 * 8 + 8, 2 * (8 * 8 + 8)] * 3
    for p, r in zip(params, ref):
        np.testing.assert_allclose(p.numpy(), r, rtol=1e-6, atol=1e-7)
