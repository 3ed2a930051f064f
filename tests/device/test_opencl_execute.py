"""``execute(device="opencl")`` end to end against the numpy reference device: an op sweep
forward and backward in one program, SGD loops, Feeder/Receiver order, errors that restore
the last completed iteration, out-of-range gathers."""
import sys
from pathlib import Path

import numpy as np
import pytest

import autodiff as ad
from autodiff.device.opencl import device

try:
    device.candidates()
except device.OpenCLUnavailable as e:
    pytest.skip(f"no OpenCL platform: {e}", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import linear  # noqa: E402
from host_contract import (check_feeder_error, check_gather_out_of_range,  # noqa: E402
                           check_receiver_error, feeder, loop_program)

RTOL, ATOL = 1e-5, 1e-6


def _sweep(dev, **options):
    """Many ops forward and backward in one program; returns every value and gradient."""
    rng = np.random.default_rng(3)
    a = ad.Tensor(rng.uniform(0.5, 2.0, (3, 5)), requires_grad=True)
    b = ad.Tensor(rng.uniform(-1.0, 1.0, (5, 19)), requires_grad=True)
    c = ad.Tensor(rng.uniform(-1.0, 1.0, (19,)), requires_grad=True)
    h = (a @ b + c)                                   # [3, 19] DP + bias epilogue
    outs = [h.relu(), h.sigmoid(), h.tanh(), h.exp() * 0.1, a.log(), a.sqrt(),
            a.rsqrt(), a.reciprocal(), h.sin(), h.cos(), h.abs(), h.erf(),
            h.maximum(h * 0.5), h.minimum(h.T.T * 0.25), (h > 0.1).float() * h,
            ad.where(h > 0, h, h * 0.01), a ** 2, a.pow(1.5), h.softmax(-1),
            h.log_softmax(-1), h.sum(0), h.amax(-1), h.mean(), h.permute(1, 0) * 2.0,
            h[:, 2:11] * 3.0, ad.concat([h, a], dim=1), h.reshape(19, 3).sum(1),
            ad.matmul(h.T, h), ad.matmul(h.reshape(1, 3, 19), h.reshape(1, 19, 3))]
    loss = sum((o * o).sum() if i % 2 else o.sum() for i, o in enumerate(outs))
    loss.backward()
    report = ad.execute(device=dev, **options)
    return [o.numpy() for o in outs] + [loss.numpy(), a.grad.numpy(), b.grad.numpy(),
                                        c.grad.numpy()], report


@pytest.mark.parametrize("options", [
    {}, {"tile": (8, 16, 1), "chain_work": 0}, {"tile": (6, 8, 2), "vector": 4},
    {"vector": 1}, {"chain_work": 0, "reductions": "tree", "vector": 1}],
    ids=["cpu", "avx512-tile", "avx2-tile-vector4", "scalar", "gpu-form"])
def test_op_sweep_matches_numpy(options):
    """The default CPU code, other register tiles and vector widths, and the code a GPU
    gets (no chains, one point per work-item, work-group tree reductions) run on PoCL."""
    ref, _ = _sweep("numpy")
    got, report = _sweep("opencl", **options)
    for i, (r, g) in enumerate(zip(ref, got)):
        np.testing.assert_allclose(g, r, rtol=RTOL, atol=ATOL * max(1, np.abs(r).max()),
                                   err_msg=f"value {i}")
    st = report.stats["opencl"]
    assert st["kernels"] >= 1 and st["build_s"] >= 0 and st["source_path"].endswith(".cl")
    src = str(ad.runtime.TRACER.last.stages["opencl"])
    assert ("barrier(" in src) == (options.get("reductions") == "tree")


def test_linear_sgd_matches_numpy():
    net = linear.build()
    l_ref, _ = linear.train(net, 30, "numpy")
    w_ref = [p.numpy() for p in net.parameters()]
    net = linear.build()
    l_cl, report = linear.train(net, 30, "opencl")
    assert len(l_cl) == 30
    np.testing.assert_allclose(l_cl, l_ref, rtol=1e-5)
    for p, r in zip(net.parameters(), w_ref):
        np.testing.assert_allclose(p.numpy(), r, rtol=1e-5, atol=1e-6)
    st = report.stats["opencl"]             # fused: DP+Elw, Reduce+Elw groups (and the
    assert st["kernels"] - st["rings"] <= 8     # copies of the Feeder's and Receiver's rings)


def test_receivers_in_order_and_copies():
    seen_ref, seen = [], []
    w = loop_program(12, feeder(), lambda l, w: seen_ref.append((float(l), w)))
    ad.execute(device="numpy")
    w_ref = w.numpy()
    ad.reset()
    w = loop_program(12, feeder(), lambda l, w: seen.append((float(l), w)))
    ad.execute(device="opencl")
    assert len(seen) == 12
    np.testing.assert_allclose([s[0] for s in seen], [s[0] for s in seen_ref], rtol=RTOL,
                               atol=ATOL)
    for (_, a), (_, b) in zip(seen, seen_ref):        # each call got its own array
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(w.numpy(), w_ref, rtol=RTOL, atol=ATOL)


def test_receiver_error_restores_last_completed_iteration():
    check_receiver_error("opencl")


def test_feeder_error_keeps_last_completed_iteration():
    check_feeder_error("opencl")


def test_gather_out_of_range_raises():
    check_gather_out_of_range("opencl")


def test_gather_and_int_feeder():
    table = ad.Tensor(np.arange(12, dtype=np.float32).reshape(4, 3), requires_grad=True)
    got = []

    def body():
        idx = ad.Feeder(lambda: np.array([3, 0, 3], np.int32), shape=[3], dtype="int32")
        y = table[idx]
        (y * y).sum().backward()
        ad.Receiver(lambda v, g: got.append((v, g)), [y, table.grad])
    ad.ir_for(2, body)
    ad.execute(device="opencl")
    t = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(got[0][0], t[[3, 0, 3]])
    g = np.zeros((4, 3), np.float32)
    g[3], g[0] = 4 * t[3], 2 * t[0]
    np.testing.assert_allclose(got[0][1], g)
    np.testing.assert_allclose(got[1][1], 2 * g)    # no zero_grad: .grad accumulates (torch)


@pytest.mark.parametrize("width", [128, 24, 12, 3])
def test_gather_and_scatter_add_rows_in_vectors(width):
    """Embedding-style rows of 16-, 8-, 4-float vectors (and scalar rows): the lookup and
    its gradient (repeated indices accumulate) match numpy; a bad index still raises."""
    rng = np.random.default_rng(width)
    t = rng.standard_normal((7, width)).astype(np.float32)
    idx = rng.integers(0, 7, 40).astype(np.int32)
    up = rng.standard_normal((40, width)).astype(np.float32)
    table = ad.Tensor(t, requires_grad=True)
    y = table[ad.Tensor(idx)]
    (y * ad.Tensor(up)).sum().backward()
    ad.execute(device="opencl")
    np.testing.assert_array_equal(y.numpy(), t[idx])
    g = np.zeros_like(t)
    np.add.at(g, idx, up)
    np.testing.assert_allclose(table.grad.numpy(), g, rtol=1e-5, atol=1e-5)
    ad.reset()
    bad = ad.Tensor(t)[ad.Tensor(np.array([1, 9], np.int32))] * 1.0
    with pytest.raises(IndexError):
        ad.execute(device="opencl")
    del bad


def test_reduction_epilogue_reading_a_broadcast_operand():
    """``x.sum(-1) + b`` over a [2, 3] kept space with ``b`` [3] broadcast along dim 0: the
    fused epilogue's load ``b[y]`` must keep the reduction from flattening (z, y) into one
    row index (it read ``b[3 z + y]``, past ``b``, for z = 1)."""
    rng = np.random.default_rng(8)
    x, b = rng.standard_normal((2, 3, 4)).astype(np.float32), \
        rng.standard_normal(3).astype(np.float32)
    y = ad.Tensor(x).sum(-1) + ad.Tensor(b)
    m = ad.Tensor(x).amax(-1) * ad.Tensor(b)
    ad.execute(device="opencl")
    np.testing.assert_allclose(y.numpy(), x.sum(-1) + b, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(m.numpy(), x.max(-1) * b, rtol=1e-6, atol=1e-6)


def test_dot_operands_that_are_views_get_packed():
    """A matmul operand behind a permuting reshape (no constant strides) is packed into
    scratch, then the tile kernel runs; a weight-style B (contiguous along K, >= 64 rows)
    is transposed the same way."""
    rng = np.random.default_rng(5)

    def prog(dev):
        x = ad.Tensor(rng.standard_normal((4, 16, 6)).astype(np.float32), requires_grad=True)
        w = ad.Tensor(rng.standard_normal((9, 96)).astype(np.float32), requires_grad=True)
        v = x.permute(1, 0, 2).reshape(16, 24)                   # head-merge-like view
        y = v @ ad.Tensor(rng.standard_normal((24, 96)).astype(np.float32))
        z = ad.Tensor(rng.standard_normal((80, 96)).astype(np.float32)) @ w.T
        loss = (y * y).sum() + z.tanh().sum()
        loss.backward()
        ad.execute(device=dev)
        return [y.numpy(), z.numpy(), x.grad.numpy(), w.grad.numpy()]
    ref = prog("numpy")
    rng = np.random.default_rng(5)
    got = prog("opencl")
    for r, g in zip(ref, got):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5 * np.abs(r).max())
    src = str(ad.runtime.TRACER.last.stages["opencl"])
    assert "_pa_body(" in src or "_pb_body(" in src


@pytest.mark.slow
def test_transformer_steps_match_numpy():
    """One pre-norm layer (attention with head split/merge views, GELU's erf, softmax,
    cross-entropy's log) and AdamW, three steps on both devices."""
    import transformer as T
    text = T.load_text()[:20000]
    vocab = T.Vocab(text)
    ids = vocab.encode(text)
    runs = {}
    for dev in ("numpy", "opencl"):
        ad.manual_seed(0)
        model = T.CharTransformer(len(vocab), 32, 2, 1, 16, 0.0)
        losses, *_ = T.train(model, T.WindowSampler(ids, 4, 16, 0), 3, 3e-3, dev,
                               progress=False)
        runs[dev] = losses, [p.numpy() for p in model.parameters()]
        ad.reset()
    (l_ref, p_ref), (l_cl, p_cl) = runs["numpy"], runs["opencl"]
    np.testing.assert_allclose(l_cl, l_ref, rtol=1e-5)
    # AdamW's first steps move every parameter by ~lr * sign(grad): a gradient that is
    # ~0 may round to either sign, so parameters agree to lr, most to 1e-5
    close = []
    for r, g in zip(p_ref, p_cl):
        np.testing.assert_allclose(g, r, atol=2 * 3e-3)
        close.append(np.abs(g - r) <= 1e-5 * np.maximum(1e-2, np.abs(r)))
    assert np.mean(np.concatenate([c.ravel() for c in close])) > 0.95


def test_nan_propagates_through_max_min_relu_like_numpy():
    """numpy's maximum/minimum/max propagate NaN (OpenCL's fmax/fmin would drop it)."""
    x = np.array([[np.nan, -1.0, 2.0, 0.5] * 5, [3.0, np.inf, -np.inf, 1.0] * 5], np.float32)
    y = np.array([[1.0, np.nan, -2.0, 0.25] * 5, [-3.0, 0.0, 2.0, 1.0] * 5], np.float32)

    def prog(dev):
        a, b = ad.Tensor(x), ad.Tensor(y)
        outs = [a.relu(), a.maximum(b), a.minimum(b), a.amax(-1), b.amax(0), a.softmax(-1)]
        ad.execute(device=dev)
        return [o.numpy() for o in outs]
    for r, g in zip(prog("numpy"), prog("opencl")):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(r))
        np.testing.assert_allclose(g, r, rtol=1e-6)


def test_feeder_staging_is_reused(opencl_executables):
    """200 iterations with a Feeder allocate at most two checkpoint periods of pinned
    staging arrays (a checkpoint returns those of the one it drops to the pool), and every
    iteration still sees its own value."""
    from autodiff.device.opencl import runtime
    rng = np.random.default_rng(4)
    xs = rng.standard_normal((200, 3, 5)).astype(np.float32)
    feed, got = iter(xs), []

    def step():
        x = ad.Feeder(lambda: next(feed), shape=[3, 5])
        ad.Receiver(lambda v: got.append(v), [(x * x).sum(-1)])
    ad.ir_for(range(200), step)
    ad.execute(device="opencl")
    np.testing.assert_allclose(np.stack(got), (xs * xs).sum(-1), rtol=1e-6)
    staging = opencl_executables[-1]._staging
    assert staging.in_use == 0
    assert 1 <= len(staging._keep) * runtime.STAGING_SLAB <= \
        2 * runtime.CHECKPOINT + runtime.STAGING_SLAB


def test_unknown_reduction_form_is_rejected_before_running():
    x = ad.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = x.sum(-1)
    with pytest.raises(ValueError, match="reductions must be 'row' or 'tree'"):
        ad.execute(device="opencl", reductions="warp")
    assert y._node is not None


def test_head_merge_views_are_packed_into_panels_by_rows(monkeypatch):
    """Operands that are head-merge views (``[B, H, T, 16] -> [B*T, H*16]``, contiguous
    along K within aligned chunks of 16) are packed by the panel template a row at a time
    (A into 6-row panels, B = view^T into 16-column panels); the weight gradient's A (the
    view transposed: stride 16 along K) from row pointers; rows and columns that are not
    multiples of the tile; all give the numpy device's values. The row-at-a-time packs
    walk K first (neighbouring work-items on neighbouring K chunks of one panel), the
    row-pointer pack panels first."""
    from autodiff.device.opencl import codegen
    monkeypatch.setattr(codegen, "PANEL_MIN_FLOPS", 0)
    monkeypatch.setattr(codegen, "STRIDED_A_MAX_K", 0)      # weight gradients from panels too

    def run(dev):
        ad.reset()
        rng = np.random.default_rng(7)
        q = ad.Tensor(rng.standard_normal((2, 3, 16, 16)), requires_grad=True)
        k = ad.Tensor(rng.standard_normal((2, 3, 7, 16)), requires_grad=True)
        w = ad.Tensor(rng.standard_normal((48, 37)) * 0.2, requires_grad=True)
        a = q.permute(0, 2, 1, 3).reshape(32, 48)          # A: [32, 48] head merge
        b = k.permute(0, 2, 1, 3).reshape(14, 48)          # B = b^T: [48, 14]
        y = a @ w                                          # [32, 37]; dW = a^T @ dy
        z = a @ b.T                                        # [32, 14]
        loss = (y * y).sum() + (z * z).sum()
        loss.backward()
        ad.execute(device=dev)
        return [t.numpy() for t in (y, z, q.grad, k.grad, w.grad)]

    ref, got = run("numpy"), run("opencl")
    src = str(ad.runtime.TRACER.last.stages["opencl"])
    packs = [b for b in src.split("static inline void ")[1:]
             if b.split("(")[0].endswith(("_pa_body", "_pb_body"))]
    # contiguous along K: K chunks of a panel on neighbouring work-items (k0 = g_ % ...)
    rowwise = [b for b in packs if "k0 = (g_ % " in b and "vload16(0, buf + (((" in b]
    assert {b.split("(")[0][-8:] for b in rowwise} == {"_pa_body", "_pb_body"}
    assert any("k0 = (g_ / " in b and "s0_[kk*16]" in b for b in packs)
    for i, (r, g) in enumerate(zip(ref, got)):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4 * max(1, np.abs(r).max()),
                                   err_msg=f"value {i}")


@pytest.mark.parametrize("tile", [(6, 8, 2), (8, 16, 1)])
def test_matmuls_from_panels_match_numpy(monkeypatch, tile):
    """Operands packed into register-tile panels (forward ``x @ W.T``, input and weight
    gradients, row counts that are not multiples of the tile, columns not multiples of 16)
    give the numpy device's values."""
    from autodiff.device.opencl import codegen
    monkeypatch.setattr(codegen, "PANEL_MIN_FLOPS", 0)
    monkeypatch.setattr(codegen, "STRIDED_A_MAX_K", 0)      # weight gradients from panels too

    def run(dev):
        ad.reset()
        rng = np.random.default_rng(5)
        x = ad.Tensor(rng.standard_normal((4, 25, 40)), requires_grad=True)
        w = ad.Tensor(rng.standard_normal((37, 40)) * 0.2, requires_grad=True)
        v = ad.Tensor(rng.standard_normal((37, 50)) * 0.2, requires_grad=True)
        h = (x @ w.T).relu()                          # [4, 25, 37]: A [100, 40], B = W^T
        out = h @ v                                   # [4, 25, 50]
        loss = (out * out).sum()
        loss.backward()
        ad.execute(device=dev, **({"tile": tile} if dev == "opencl" else {}))
        return [t.numpy() for t in (out, loss, x.grad, w.grad, v.grad)]

    ref, got = run("numpy"), run("opencl")
    src = str(ad.runtime.TRACER.last.stages["opencl"])
    assert "bp + k*16" in src and "ap[k*" in src            # the tile loops read panels
    for i, (r, g) in enumerate(zip(ref, got)):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-4 * max(1, np.abs(r).max()),
                                   err_msg=f"value {i}")


def test_a_short_weight_gradient_reads_its_operands_in_place():
    """``dW = dY^T @ X`` with a short K (the batch) and at most PANEL_MIN_ROWS rows is large
    enough for panels but reads ``dY^T`` (A along M) and ``X`` where they are: no pack
    kernel; a longer K still packs. Values match the numpy device."""
    from autodiff.device.opencl import codegen

    def run(dev, batch):
        ad.reset()
        rng = np.random.default_rng(11)
        x = ad.Tensor(rng.standard_normal((batch, 96)).astype(np.float32))
        w = ad.Tensor((rng.standard_normal((200, 96)) * 0.1).astype(np.float32),
                      requires_grad=True)
        g = ad.Tensor(rng.standard_normal((batch, 200)).astype(np.float32))
        loss = ((x @ w.T).relu() * g).sum()
        loss.backward()
        ad.execute(device=dev)
        src = str(ad.runtime.TRACER.last.stages["opencl"]) if dev == "opencl" else ""
        return w.grad.numpy(), src

    for batch, packs in ((64, False), (2 * codegen.STRIDED_A_MAX_K, True)):
        assert 2 * 200 * 96 * batch >= codegen.PANEL_MIN_FLOPS
        (ref, _), (got, src) = run("numpy", batch), run("opencl", batch)
        assert ("_dp_pa_body" in src) == packs, batch
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_the_variables_go_in_with_one_mapped_write(monkeypatch):
    """A run writes its variables into the arena with one mapped write of the region they
    span, no copy command per variable, and the loop starts from their values (an SGD
    loop over five variables of several dtypes and sizes against the numpy device)."""
    import pyopencl as cl
    copies, maps = [], []
    real_copy, real_map = cl.enqueue_copy, cl.enqueue_map_buffer

    def copy(queue, dest, src, **kw):
        if isinstance(dest, cl.Buffer) and "dst_offset" in kw:
            copies.append(kw["dst_offset"])
        return real_copy(queue, dest, src, **kw)

    def map_buffer(queue, buf, flags, *a, **kw):
        maps.append(flags)
        return real_map(queue, buf, flags, *a, **kw)

    def run(dev):
        ad.reset()
        rng = np.random.default_rng(8)
        ws = [ad.Tensor(rng.standard_normal(s).astype(np.float32), requires_grad=True)
              for s in [(6, 7), (7,), (7, 3), (3,), (1,)]]
        idx = ad.Tensor(np.array([2, 0, 1, 2], np.int64))
        from autodiff.optim import SGD
        opt = SGD(ws, lr=0.05)
        losses = []

        def step():
            opt.zero_grad()
            h = (ad.Tensor(rng.standard_normal((4, 6)).astype(np.float32)) @ ws[0] + ws[1])
            out = h.tanh() @ ws[2] + ws[3]
            loss = (out.gather(1, idx.reshape(4, 1)) * ws[4]).tanh().mean()
            loss.backward()
            opt.step()
            ad.Receiver(lambda v: losses.append(float(v)), [loss], name="loss")
        ad.ir_for(3, step)
        ad.execute(device=dev)
        return losses, [w.numpy() for w in ws]
    from autodiff.device.opencl import runtime
    offsets, real_run = [], runtime.Executable.run

    def spy_run(self, store):
        offsets.extend(off for _, off in self.params)
        return real_run(self, store)
    ref = run("numpy")
    monkeypatch.setattr(cl, "enqueue_copy", copy)
    monkeypatch.setattr(cl, "enqueue_map_buffer", map_buffer)
    monkeypatch.setattr(runtime.Executable, "run", spy_run)
    got = run("opencl")
    assert maps.count(cl.map_flags.WRITE_INVALIDATE_REGION) == 1
    assert len(offsets) >= 5 and not set(copies) & set(offsets)     # no copy per variable
    np.testing.assert_allclose(got[0], ref[0], rtol=RTOL, atol=ATOL)
    for g, r in zip(got[1], ref[1]):
        np.testing.assert_allclose(g, r, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("shape", [(37, 512), (9, 128), (5, 3, 192), (11, 64), (7, 520)])
def test_column_reductions_match_numpy(shape):
    """Sums and maxima over the leading axes (bias gradients): a work-item takes four
    adjacent vectors of each row ([37, 512]), two (128 and 192 columns: four work-items
    or more kept), or one (64 columns; 520, in vectors of 8); a NaN reaches its column."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal(shape).astype(np.float32)
    x[(1,) * (len(shape) - 1) + (3,)] = np.nan
    t = ad.Tensor(x)
    axes = tuple(range(len(shape) - 1))
    outs = [t.sum(axes), t.amax(axes), (t * 2.0 + 1.0).sum(axes) * 0.5]
    ad.execute(device="opencl")
    x64 = x.astype(np.float64)
    refs = [x64.sum(axes), x.max(axes), (x64 * 2 + 1).sum(axes) * 0.5]
    for o, r in zip(outs, refs):
        np.testing.assert_allclose(o.numpy(), r, rtol=1e-5, atol=1e-4)
        assert np.isnan(o.numpy()[3])


def test_division_by_a_row_value_keeps_ieee_special_cases():
    """``x / d`` with ``d`` one value per row renders as one reciprocal and a product per
    vector (``_ad_divs``): within 2 ulp of the division, and the division itself where
    the reciprocal overflows -- zero, subnormal, infinite and NaN divisors give what numpy
    gives."""
    rng = np.random.default_rng(2)
    x = rng.uniform(-3, 3, (6, 64)).astype(np.float32)
    x[2, :3] = [0.0, np.inf, -np.inf]
    d = np.array([[3.7], [-0.25], [0.0], [1e-39], [np.inf], [np.nan]], np.float32)
    with np.errstate(all="ignore"):
        want = x / d
    got = (ad.Tensor(x) / ad.Tensor(d))
    ad.execute(device="opencl")
    np.testing.assert_allclose(got.numpy(), want, rtol=2.5e-7, atol=0)
    np.testing.assert_array_equal(np.isnan(got.numpy()), np.isnan(want))
