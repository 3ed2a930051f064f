"""TVM device plumbing: fusion and kernel counts, the default matmul schedule, targets,
``print_graph(stage="tvm")``, ``export=``, CUDA source generation, the missing-extra error,
and (slow) meta_schedule tuning with its persistent database."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

tvm = pytest.importorskip("tvm", reason="the tvm device needs the [tvm] extra")

import autodiff as ad  # noqa: E402
from autodiff.device import tvm as tvm_device  # noqa: E402
from autodiff.optim import SGD  # noqa: E402
from autodiff.graph.trace import TRACER  # noqa: E402
from autodiff.runtime import _variables  # noqa: E402

RNG = np.random.default_rng(0)


def _graph(fn, *arrays):
    """Trace ``fn`` on constant tensors; the graph with its result as the only output."""
    out = fn(*[ad.Tensor(a) for a in arrays])
    node = out.node
    g = TRACER.finish()
    g.outputs = [node]
    return g


def _run(graph, **kw):
    exe = tvm_device.compile(graph, **kw)
    exe.run({v: v.value for v in _variables(graph)})
    return exe, exe.vals[graph.outputs[0].id]


@pytest.mark.parametrize("m,k,n,batch", [(64, 128, 96, ()), (37, 19, 5, ()), (2, 255, 255, ()),
                                         (5, 18, 21, (2, 3))])
def test_matmul_bias_relu_fuses_into_one_scheduled_kernel(m, k, n, batch):
    a = RNG.standard_normal(batch + (m, k)).astype(np.float32)
    w = RNG.standard_normal((n, k)).astype(np.float32)        # used transposed, like Linear
    b = RNG.standard_normal(n).astype(np.float32)
    g = _graph(lambda a, w, b: (a @ w.T + b).relu(), a, w, b)
    rep = ad.Report("tvm")
    _, got = _run(g, report=rep)
    np.testing.assert_allclose(got, np.maximum(a @ w.T + b, 0), rtol=1e-5, atol=1e-5)
    st = rep.stats["tvm"]
    assert st["kernels"] < st["kernels_unfused"]
    assert st.get("scheduled_kernels", 0) + st.get("cache_hit", 0) >= 1
    lowered = tvm_device.unfold_products(g)           # as compile() does
    script = str(tvm_device.Listing(tvm_device.fuse(tvm_device.translate(lowered)[1])))
    fused = [line for line in script.splitlines() if "def fused_" in line and "dot" in line]
    assert len(fused) == 1 and "relu" in fused[0], fused


def test_unfold_products_batches_a_folded_product_but_keeps_outputs():
    from autodiff.graph.ir import Op
    a = RNG.standard_normal((2, 3, 5, 18)).astype(np.float32)
    w = RNG.standard_normal((21, 18)).astype(np.float32)
    g = _graph(lambda a, w: (a @ w.T).relu(), a, w)
    out = tvm_device.unfold_products(g)
    dots = [n for n in out.walk() if n.op is Op.DOT]
    assert [d.shape for d in dots] == [(2, 3, 5, 21)]
    assert not any(n.op is Op.RESHAPE and n.srcs[0].op is Op.DOT for n in out.walk())
    _, got = _run(g)
    np.testing.assert_allclose(got, np.maximum(a @ w.T, 0), rtol=1e-5, atol=1e-5)
    plain = _graph(lambda a, w: a @ w.T, a, w)      # the reshape is the program's output
    assert tvm_device.unfold_products(plain) is plain


def test_epilogue_over_a_larger_space_than_the_product_is_computed_whole():
    # a weight sliced into q/k/v parts: each part's gradient is a [32, 32] product padded
    # into the [96, 32] gradient sum, fused with the sum as the product's epilogue. Moving
    # that epilogue into the product's tile loop left rows 32..95 unwritten (NaN/garbage
    # weights after one step)
    def train(device):
        ad.reset()
        rng = np.random.default_rng(4)
        w = ad.tensor(rng.standard_normal((96, 32)).astype(np.float32) * 0.1,
                      requires_grad=True)
        x = ad.tensor(rng.standard_normal((8, 32)).astype(np.float32))
        opt = SGD([w], lr=0.1)

        def step():
            opt.zero_grad()
            q, k, v = x @ w[:32].T, x @ w[32:64].T, x @ w[64:].T
            (q * k + v).sum().backward()
            opt.step()
        ad.ir_for(2, step)
        ad.execute(device=device)
        return w.numpy()
    np.testing.assert_allclose(train("tvm"), train("numpy"), rtol=1e-5, atol=1e-5)


def test_default_schedule_tiles_parallelizes_and_vectorizes():
    a = RNG.standard_normal((128, 128)).astype(np.float32)
    g = _graph(lambda a, b: a @ b, a, a)
    _, mod = tvm_device.translate(g)
    mod, count = tvm_device.schedule_module(tvm_device.fuse(mod))
    assert count == 1
    text = mod.script()
    assert "T.parallel" in text and "T.vectorized" in text and "dot_init" in text


def test_print_graph_stage_tvm_and_export(tmp_path, capsys):
    x = ad.Tensor(np.ones((3, 4), np.float32))
    y = (x * 2.0).exp().sum(1)
    path = tmp_path / "model.so"
    rep = ad.execute(device="tvm", export=str(path))
    np.testing.assert_allclose(y.numpy(), np.full(3, 4 * np.exp(2.0)), rtol=1e-6)
    assert rep.stats["tvm"]["export"] == str(path)
    assert path.stat().st_size > 1000
    lib = tvm.runtime.load_module(str(path))
    assert lib is not None
    ad.print_graph(stage="tvm")
    out = capsys.readouterr().out
    assert "@R.function" in out and "def seg0(" in out and "@T.prim_func" in out


def test_targets():
    t = tvm_device.make_target(None)
    assert t.kind.name == "llvm"
    assert str(t.attrs["mcpu"]) == tvm.target.codegen.llvm_get_system_cpu()
    assert int(t.attrs["num-cores"]) >= 1
    assert tvm_device.make_target({"kind": "llvm"}).kind.name == "llvm"
    with pytest.raises(ValueError, match="unknown target 'vulkan-ish'"):
        tvm_device.make_target("vulkan-ish")


def test_cuda_source_generation_and_nvcc(tmp_path):
    """Without a GPU the module still compiles to CUDA C; nvcc (when present) accepts it."""
    x = RNG.standard_normal((64, 32)).astype(np.float32)
    w = RNG.standard_normal((32, 16)).astype(np.float32)
    g = _graph(lambda x, w: (x @ w).relu().sum(1).exp(), x, w)
    _, ex, _, stats = tvm_device.build(g, target="cuda")
    assert stats["target"] == "cuda"
    dev_mod = ex.mod.imports[0]
    src = (dev_mod.imports[0] if dev_mod.imports else dev_mod).inspect_source()
    assert "__global__" in src and "threadIdx.x" in src
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                    if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if nvcc is None:
        pytest.skip("nvcc not found: CUDA source generated but not compiled")
    cu = tmp_path / "kernels.cu"
    cu.write_text(src)
    res = subprocess.run([nvcc, "--ptx", "-arch=sm_80", str(cu), "-o", str(tmp_path / "k.ptx")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert ".entry" in (tmp_path / "k.ptx").read_text()
    if not tvm.cuda(0).exist:
        with pytest.raises(RuntimeError, match="no cuda device"):
            tvm_device.compile(g, target="cuda")


def test_missing_tvm_names_the_extra():
    code = ("import sys; sys.modules['tvm'] = None\n"
            "try:\n    import autodiff.device.tvm\n"
            "except ImportError as e:\n    print('ERR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120).stdout
    assert "ERR" in out and "pip install 'autodiff[tvm]'" in out


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("AUTODIFF_TVM_TUNE_TEST"),
                    reason="meta_schedule takes minutes (each builder worker imports TVM); "
                           "set AUTODIFF_TVM_TUNE_TEST=1")
def test_tuning_uses_and_reuses_the_database(tmp_path, monkeypatch):
    """Tuning fills the database under the cache dir; a second compile tunes nothing."""
    pytest.importorskip("psutil")
    pytest.importorskip("cloudpickle")
    monkeypatch.setenv("AUTODIFF_CACHE", str(tmp_path))
    a = RNG.standard_normal((64, 64)).astype(np.float32)
    g = _graph(lambda a, b: a @ b, a, a)
    tvm_device._CACHE.clear()
    rep = ad.Report("tvm")
    _, got = _run(g, tune=True, trials=4, report=rep)
    np.testing.assert_allclose(got, a @ a, rtol=1e-5, atol=1e-5)
    st = rep.stats["tvm"]
    assert st["tune_trials"] == 4 and st["tuned_kernels"] == 1 and st["tune_s"] > 0
    assert list(tmp_path.glob("tvm/*/database_tuning_record.json"))
    tvm_device._CACHE.clear()
    rep2 = ad.Report("tvm")
    _, got2 = _run(g, tune=True, trials=4, report=rep2)
    np.testing.assert_allclose(got2, a @ a, rtol=1e-5, atol=1e-5)
    assert rep2.stats["tvm"]["tune_trials"] == 0 and rep2.stats["tvm"]["tuned_kernels"] == 1
