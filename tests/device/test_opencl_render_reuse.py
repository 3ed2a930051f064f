"""Kernel statements of the same structure render once (``_Kernels.render``): a statement
whose single-kernel form equals an earlier one's but for its buffers' names takes the
earlier one's sources with its own buffers' offsets as arguments. Checked against a
fresh rendering of every such statement, on programs full of repeated layers."""
import dataclasses

import numpy as np
import pytest

import autodiff as ad
from autodiff import nn
from autodiff.device import opencl
from autodiff.device.opencl import device
from autodiff.optim import AdamW

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)


def _layers_program(steps: int = 3):
    """Two transformer encoder layers trained with AdamW and gradient clipping: the same
    shapes in both layers, the same update for every same-shaped parameter."""
    ad.reset()
    ad.manual_seed(0)
    rng = np.random.default_rng(0)
    net = nn.Sequential(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True),
                        nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True))
    opt = AdamW(net.parameters(), lr=1e-3)
    xs = rng.standard_normal((steps, 2, 8, 32)).astype(np.float32)
    losses = []

    def step(i):
        opt.zero_grad()
        loss = net(ad.Tensor(xs)[i]).square().mean()
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        ad.Receiver(lambda v: losses.append(float(v)), [loss])
    ad.ir_for(range(steps), step)
    return net, losses


def test_reused_renderings_equal_fresh_ones(monkeypatch):
    """Every statement that reuses an earlier rendering gets what rendering it afresh
    gives (body up to its name, sizes, parameters, arguments); over a third of the
    program's statements do; and the run's losses are bit for bit those of a run that
    renders every statement."""
    real = opencl._Kernels.render
    reused, total = [], []

    def check(self, s, off, target, check=(1, None)):
        key, _ = opencl._structure(s, off, check)
        hit = key in self.structures
        got = real(self, s, off, target, check)
        total.append(s)
        if hit:
            fresh = opencl._Kernels(self.base)
            fresh.constants = list(self.constants)   # lifted literals: same slots' values
            want = real(fresh, s, off, target, check)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert g.src.replace(g.name, "@") == w.src.replace(w.name, "@")
                norm = lambda x: dataclasses.replace(x, name="", src="", args=())  # noqa
                assert norm(g) == norm(w)
                # buffer arguments as fresh; lifted literals: slots holding equal values
                nb = len(g.params) - (len(g.args) - len(w.args))
                assert g.args[:nb] == w.args[:nb]
                assert [self.constants[a - self.base] for a in g.args[nb:]] == \
                    [fresh.constants[a - fresh.base] for a in w.args[nb:]]
            reused.append(s)
        return got
    monkeypatch.setattr(opencl._Kernels, "render", check)
    net, losses = _layers_program()
    ad.execute(device="opencl")
    assert len(reused) > len(total) // 3
    monkeypatch.setattr(opencl._Kernels, "render", real)
    fresh = iter(range(1 << 30))                    # a key no statement shares
    monkeypatch.setattr(opencl, "_structure", lambda s, off, check: ((next(fresh),), []))
    _, want = _layers_program()
    ad.execute(device="opencl")
    np.testing.assert_array_equal(losses, want)
    assert len(set(losses)) == len(losses)


def _sizes_program(sizes=(64, 192, 1024, 4096), steps: int = 3):
    """AdamW with gradient clipping over parameters of four sizes: the same update and
    the same squared norm for each, over spaces of other extents."""
    ad.reset()
    rng = np.random.default_rng(1)
    ps = [nn.Parameter(ad.Tensor(rng.standard_normal(n).astype(np.float32)))
          for n in sizes]
    xs = [ad.Tensor(rng.standard_normal(n).astype(np.float32)) for n in sizes]
    opt = AdamW(ps, lr=1e-2)
    losses = []

    def step():
        opt.zero_grad()
        loss = sum(((p * x).sin().square().sum() for p, x in zip(ps, xs)), ad.Tensor(0.0))
        loss.backward()
        nn.utils.clip_grad_norm_(ps, 0.5)
        opt.step()
        ad.Receiver(lambda v: losses.append(float(v)), [loss])
    ad.ir_for(range(steps), step)
    return ps, losses


def test_kernels_over_other_sizes_share_a_body(monkeypatch):
    """The AdamW update and the squared gradient norm of parameters of different sizes
    render to one body each (the extents are arguments, ``Args.size``): fewer distinct
    bodies than with the extents as literals, the same losses and parameters bit for bit,
    and those of the numpy device."""
    def run(device):
        ps, losses = _sizes_program()
        report = ad.execute(device=device)
        return report, losses, [p.numpy() for p in ps]
    report, losses, params = run("opencl")
    monkeypatch.setattr(opencl.codegen.Args, "size", lambda self, value: str(value))
    monkeypatch.setattr(opencl.unify, "unify", lambda bodies, launches: bodies)
    literal, want, want_params = run("opencl")
    shared = report.stats["opencl"]["distinct_kernels"]
    assert shared <= literal.stats["opencl"]["distinct_kernels"] - 6   # 2 kinds x 3 sizes
    np.testing.assert_array_equal(losses, want)
    for p, w in zip(params, want_params):
        np.testing.assert_array_equal(p, w)
    monkeypatch.undo()
    _, ref, ref_params = run("numpy")
    np.testing.assert_allclose(losses, ref, rtol=1e-5, atol=1e-6)
    for p, w in zip(params, ref_params):
        np.testing.assert_allclose(p, w, rtol=1e-5, atol=1e-6)
