"""Modules and functional ops against PyTorch: forward values and every gradient.

Each check traces the module on autodiff tensors, seeds the backward pass with a random
output gradient (a ``sum()`` seed would hide softmax errors: its gradient is zero), runs
the program on the numpy device and compares with PyTorch in float32 (rtol 1e-4).
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import nn
from autodiff.nn import functional as F

RTOL, ATOL = 1e-4, 1e-5
torch.set_num_threads(1)


def _rand(shape, seed, scale=1.0):
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def compare(ad_fn, torch_fn, inputs, *, ad_params=None, torch_params=None, seed=0,
            rtol=RTOL, atol=ATOL):
    """Run ``ad_fn(*tensors)`` and ``torch_fn(*tensors)`` on ``inputs`` (float arrays take
    gradients, int arrays are indices), compare the output, the input gradients and the
    gradients of the named parameters ``ad_params``/``torch_params`` (dicts)."""
    ad_params, torch_params = ad_params or {}, torch_params or {}
    xs = [ad.Tensor(a, requires_grad=a.dtype == np.float32) for a in inputs]
    out = ad_fn(*xs)
    g = _rand(out.shape, seed + 100)
    out.backward(ad.Tensor(g))
    grads = [x.grad for x in xs]
    pgrads = {k: p.grad for k, p in ad_params.items()}
    ad.execute()

    ts = [torch.tensor(a, requires_grad=True) if a.dtype == np.float32
          else torch.tensor(a.astype(np.int64)) for a in inputs]
    ref = torch_fn(*ts)
    ref.backward(torch.tensor(g))

    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=rtol, atol=atol,
                               err_msg="forward")
    for i, (x, t) in enumerate(zip(grads, ts)):
        if t.requires_grad:
            assert x is not None, f"input {i} got no gradient"
            np.testing.assert_allclose(x.numpy(), t.grad.numpy(), rtol=rtol, atol=atol,
                                       err_msg=f"gradient of input {i}")
    for k, pg in pgrads.items():
        assert pg is not None, f"{k} got no gradient"
        np.testing.assert_allclose(pg.numpy(), torch_params[k].grad.numpy(), rtol=rtol,
                                   atol=atol, err_msg=f"gradient of {k}")
    return out.numpy()


def _randomize(module: torch.nn.Module, seed: int) -> None:
    """Random values for every torch parameter (biases and norms start at 0/1 otherwise)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)


def _pair(ours: nn.Module, theirs: torch.nn.Module, seed: int = 0):
    _randomize(theirs, seed)
    ours.load_state_dict(theirs.state_dict())
    return dict(ours.named_parameters()), dict(theirs.named_parameters())


# -- activations -----------------------------------------------------------------------------
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(approximate):
    x = _rand((4, 33), 1, 3.0)
    compare(lambda t: nn.GELU(approximate)(t),
            lambda t: torch.nn.functional.gelu(t, approximate=approximate), [x])


def test_gelu_forms_differ():
    """The tanh form is an approximation: it must not equal the exact form."""
    x = ad.Tensor(np.linspace(-3, 3, 61, dtype=np.float32))
    a, b = F.gelu(x), F.gelu(x, "tanh")
    ad.execute()
    assert 1e-5 < np.abs(a.numpy() - b.numpy()).max() < 1e-2
    with pytest.raises(ValueError):
        nn.GELU("fast")


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax(dim):
    x = _rand((3, 5, 7), 2, 2.0)
    compare(lambda t: nn.Softmax(dim)(t), lambda t: torch.softmax(t, dim), [x])


@pytest.mark.parametrize("dim", [-1, 1])
def test_log_softmax(dim):
    x = _rand((4, 6, 3), 3, 2.0)
    compare(lambda t: nn.LogSoftmax(dim)(t), lambda t: torch.log_softmax(t, dim), [x])


def test_softmax_log_softmax_stable_for_large_inputs():
    x = _rand((4, 9), 4, 1.0) * 1e4 + 5e4          # exp would overflow float32
    compare(lambda t: F.log_softmax(t, -1), lambda t: torch.log_softmax(t, -1), [x],
            rtol=1e-4, atol=1e-2)
    out = compare(lambda t: F.softmax(t, -1), lambda t: torch.softmax(t, -1), [x])
    assert np.isfinite(out).all()


# -- LayerNorm -------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,norm", [((2, 5, 8), 8), ((3, 4, 6), (4, 6))])
def test_layer_norm(shape, norm):
    ours, theirs = nn.LayerNorm(norm), torch.nn.LayerNorm(norm)
    pa, pt = _pair(ours, theirs, 5)
    x = _rand(shape, 6, 2.0) + 3.0
    compare(ours, theirs, [x], ad_params=pa, torch_params=pt)


def test_layer_norm_no_affine_and_eps():
    ours = nn.LayerNorm(10, eps=1e-3, elementwise_affine=False)
    theirs = torch.nn.LayerNorm(10, eps=1e-3, elementwise_affine=False)
    assert not list(ours.parameters())
    compare(ours, theirs, [_rand((7, 10), 7) * 0.01])


def test_layer_norm_bad_shape():
    with pytest.raises(ValueError, match="normalized_shape"):
        nn.LayerNorm(5)(ad.Tensor(np.zeros((2, 4), np.float32)))


# -- Embedding ---------------------------------------------------------------------------------
def test_embedding_scatter_add_gradient_with_repeated_indices():
    ours, theirs = nn.Embedding(7, 5), torch.nn.Embedding(7, 5)
    pa, pt = _pair(ours, theirs, 8)
    idx = np.array([[1, 3, 1, 6], [3, 1, 0, 1]], np.int32)      # 1 four times, 3 twice
    out = compare(ours, theirs, [idx], ad_params=pa, torch_params=pt)
    assert out.shape == (2, 4, 5)
    assert ours.weight.shape == (7, 5)


def test_embedding_scatter_add_sums_rows():
    emb = nn.Embedding(4, 3)
    out = emb(ad.Tensor(np.array([2, 2, 2, 0], np.int32)))
    out.backward()
    grad = emb.weight.grad
    ad.execute()
    np.testing.assert_array_equal(grad.numpy(), [[1, 1, 1], [0, 0, 0], [3, 3, 3], [0, 0, 0]])


def test_embedding_rejects_float_indices():
    with pytest.raises(TypeError):
        nn.Embedding(4, 3)(ad.Tensor(np.zeros(3, np.float32)))


# -- losses ------------------------------------------------------------------------------------
def test_cross_entropy_from_int32_targets():
    logits = _rand((6, 5), 9, 2.0)
    target = np.array([0, 4, 2, 2, 1, 3], np.int32)
    compare(lambda x, t: nn.CrossEntropyLoss()(x, t),
            lambda x, t: torch.nn.functional.cross_entropy(x, t), [logits, target])


def test_cross_entropy_from_feeder_targets():
    logits = _rand((4, 3), 10)
    target = np.array([2, 0, 1, 1], np.int32)
    x = ad.Tensor(logits, requires_grad=True)
    loss = F.cross_entropy(x, ad.Feeder(lambda: target, [4], "int32"))
    ad.execute()
    ref = torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(target).long())
    np.testing.assert_allclose(loss.numpy(), ref.numpy(), rtol=RTOL)


@pytest.mark.parametrize("kw", [dict(reduction="sum"), dict(reduction="none"),
                                dict(ignore_index=2), dict(label_smoothing=0.2),
                                dict(ignore_index=-100, label_smoothing=0.1)])
def test_cross_entropy_options(kw):
    logits = _rand((8, 4), 11, 2.0)
    target = np.array([0, 2, 3, 2, 1, -100, 3, 0], np.int32)
    if kw.get("ignore_index", -100) != -100:
        target[5] = 1
    compare(lambda x, t: F.cross_entropy(x, t, **kw),
            lambda x, t: torch.nn.functional.cross_entropy(x, t, **kw), [logits, target])


def test_cross_entropy_k_dim_and_probabilities():
    logits = _rand((2, 4, 3), 12)                        # [N, C, d]
    target = np.array([[0, 3, 1], [2, 2, 0]], np.int32)
    compare(lambda x, t: F.cross_entropy(x, t), lambda x, t: torch.nn.functional.cross_entropy(
        x, t), [logits, target])
    probs = np.random.default_rng(0).dirichlet(np.ones(5), 3).astype(np.float32)
    x2 = _rand((3, 5), 13)
    compare(lambda x: F.cross_entropy(x, ad.Tensor(probs)),
            lambda x: torch.nn.functional.cross_entropy(x, torch.tensor(probs)), [x2])


def test_cross_entropy_rejects_bad_targets():
    x = ad.Tensor(np.zeros((3, 4), np.float32))
    with pytest.raises(ValueError):
        F.cross_entropy(x, ad.Tensor(np.zeros(4, np.int32)))
    with pytest.raises(ValueError):
        F.cross_entropy(x, ad.Tensor(np.zeros(3, np.int32)), reduction="avg")


def test_mse_loss_kept():
    a, b = _rand((3, 4), 14), _rand((3, 4), 15)
    compare(lambda x, y: nn.MSELoss()(x, y), lambda x, y: torch.nn.functional.mse_loss(x, y),
            [a, b])


# -- attention --------------------------------------------------------------------------------
@pytest.mark.parametrize("causal", [False, True])
def test_multihead_self_attention(causal):
    d, h, b, t = 16, 4, 3, 6
    ours = nn.MultiheadAttention(d, h, batch_first=True)
    theirs = torch.nn.MultiheadAttention(d, h, batch_first=True)
    pa, pt = _pair(ours, theirs, 16)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(t) if causal else None

    def ref(x):
        return theirs(x, x, x, attn_mask=mask, is_causal=causal, need_weights=False)[0]

    compare(lambda x: ours(x, x, x, is_causal=causal, need_weights=False)[0], ref,
            [_rand((b, t, d), 17)], ad_params=pa, torch_params=pt)


def test_causal_mask_blocks_the_future():
    """Changing later tokens must not change earlier outputs under the causal mask."""
    d, t = 8, 5
    mha = nn.MultiheadAttention(d, 2, batch_first=True)
    x = _rand((1, t, d), 18)
    x2 = x.copy()
    x2[:, 3:] += 1.0
    a = ad.Tensor(x)
    b = ad.Tensor(x2)
    ya, yb = mha(a, a, a, is_causal=True)[0], mha(b, b, b, is_causal=True)[0]
    ad.execute()
    np.testing.assert_allclose(ya.numpy()[:, :3], yb.numpy()[:, :3], rtol=1e-6, atol=1e-6)
    assert np.abs(ya.numpy()[:, 3:] - yb.numpy()[:, 3:]).max() > 1e-3


def test_multihead_cross_attention_masks_and_weights():
    d, h, b, t, s = 12, 3, 2, 4, 7
    ours = nn.MultiheadAttention(d, h, batch_first=True)
    theirs = torch.nn.MultiheadAttention(d, h, batch_first=True)
    pa, pt = _pair(ours, theirs, 19)
    amask = _rand((t, s), 20)                            # additive float mask
    kpm = np.zeros((b, s), bool)
    kpm[0, -2:] = True
    kpm[1, 0] = True

    def ref(q, kv):
        out, w = theirs(q, kv, kv, attn_mask=torch.tensor(amask),
                        key_padding_mask=torch.tensor(np.where(kpm, -np.inf, 0.0)).float())
        return torch.cat([out.reshape(-1), w.reshape(-1)])

    def mine(q, kv):
        out, w = ours(q, kv, kv, attn_mask=amask, key_padding_mask=kpm)
        return ad.concat([out.reshape(-1), w.reshape(-1)])

    compare(mine, ref, [_rand((b, t, d), 21), _rand((b, s, d), 22)], ad_params=pa,
            torch_params=pt)


def test_multihead_attention_not_batch_first_and_per_head_weights():
    d, h, b, t = 8, 2, 2, 3
    ours = nn.MultiheadAttention(d, h)                  # PyTorch's default: [T, B, D]
    theirs = torch.nn.MultiheadAttention(d, h)
    assert ours.batch_first is False
    pa, pt = _pair(ours, theirs, 23)

    def ref(x):
        out, w = theirs(x, x, x, average_attn_weights=False)
        return torch.cat([out.reshape(-1), w.reshape(-1)])

    def mine(x):
        out, w = ours(x, x, x, average_attn_weights=False)
        assert w.shape == (b, h, t, t)
        return ad.concat([out.reshape(-1), w.reshape(-1)])

    compare(mine, ref, [_rand((t, b, d), 24)], ad_params=pa, torch_params=pt)


def test_multihead_attention_layout_and_init():
    m = nn.MultiheadAttention(10, 5)
    assert list(m.state_dict()) == ["in_proj_weight", "in_proj_bias", "out_proj.weight",
                                    "out_proj.bias"]
    assert m.in_proj_weight.shape == (30, 10) and m.head_dim == 2
    w = m.in_proj_weight.numpy()
    assert np.abs(w).max() <= np.sqrt(6 / 40) and w.std() > 0.1
    assert not m.in_proj_bias.numpy().any() and not m.out_proj.bias.numpy().any()
    with pytest.raises(ValueError):
        nn.MultiheadAttention(10, 3)


def test_scaled_dot_product_attention():
    q, k, v = _rand((2, 3, 5, 4), 25), _rand((2, 3, 6, 4), 26), _rand((2, 3, 6, 4), 27)
    compare(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, is_causal=True),
            lambda a, b, c: torch.nn.functional.scaled_dot_product_attention(
                a, b, c, is_causal=True), [q, k, v])
    keep = np.random.default_rng(0).random((5, 6)) > 0.3
    keep[:, 0] = True
    compare(lambda a, b, c: F.scaled_dot_product_attention(a, b, c, attn_mask=keep),
            lambda a, b, c: torch.nn.functional.scaled_dot_product_attention(
                a, b, c, attn_mask=torch.tensor(keep)), [q, k, v])


# -- transformer --------------------------------------------------------------------------------
@pytest.mark.parametrize("activation,norm_first", [("relu", False), ("gelu", True)])
def test_transformer_encoder_layer(activation, norm_first):
    d, h, ff, b, t = 16, 4, 24, 2, 5
    ours = nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, activation=activation,
                                      norm_first=norm_first, batch_first=True)
    theirs = torch.nn.TransformerEncoderLayer(d, h, ff, dropout=0.0, activation=activation,
                                              norm_first=norm_first, batch_first=True)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    pa, pt = _pair(ours, theirs, 28)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(t)
    compare(lambda x: ours(x, is_causal=True), lambda x: theirs(x, src_mask=mask, is_causal=True),
            [_rand((b, t, d), 29)], ad_params=pa, torch_params=pt)


def test_transformer_encoder_layer_default_is_sequence_first():
    """Defaults as PyTorch's (``batch_first=False``): ``[T, B, D]`` in, the same numbers out."""
    d, h, ff, b, t = 8, 2, 12, 3, 4
    ours = nn.TransformerEncoderLayer(d, h, ff, dropout=0.0)
    theirs = torch.nn.TransformerEncoderLayer(d, h, ff, dropout=0.0)
    assert ours.self_attn.batch_first is False
    pa, pt = _pair(ours, theirs, 34)
    compare(ours, theirs, [_rand((t, b, d), 35)], ad_params=pa, torch_params=pt)


def test_transformer_encoder_names_and_independent_layers():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.1, batch_first=True)
    enc = nn.TransformerEncoder(layer, 3, norm=nn.LayerNorm(8))
    ref = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 3,
        norm=torch.nn.LayerNorm(8), enable_nested_tensor=False)
    assert list(enc.state_dict()) == list(ref.state_dict())
    assert "layers.0.self_attn.in_proj_weight" in enc.state_dict()
    assert "layers.2.norm1.weight" in enc.state_dict()
    # copies start equal (as in PyTorch) but are separate variables with separate seeds
    w0, w1 = enc.layers[0].linear1.weight, enc.layers[1].linear1.weight
    np.testing.assert_array_equal(w0.numpy(), w1.numpy())
    assert w0._var is not w1._var and w0._var.id != w1._var.id
    assert enc.layers[0].dropout.rng.seed != enc.layers[1].dropout.rng.seed
    ids = {p._var.id for p in enc.parameters()}
    assert len(ids) == len(list(enc.parameters())) == 3 * 12 + 2


def test_transformer_encoder_gradients_reach_every_layer():
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0,
                                                           batch_first=True), 2)
    x = ad.Tensor(_rand((2, 3, 8), 30))
    enc(x, is_causal=True).backward(ad.Tensor(_rand((2, 3, 8), 31)))
    grads = {k: p.grad for k, p in enc.named_parameters()}
    ad.execute()
    for k in ("layers.0.self_attn.in_proj_weight", "layers.1.linear2.weight"):
        assert grads[k] is not None and np.abs(grads[k].numpy()).max() > 0, k


def test_multihead_attention_unbatched():
    d, h, t = 8, 2, 5
    ours = nn.MultiheadAttention(d, h, batch_first=True)
    theirs = torch.nn.MultiheadAttention(d, h, batch_first=True)
    pa, pt = _pair(ours, theirs, 32)
    compare(lambda x: ours(x, x, x, need_weights=False)[0],
            lambda x: theirs(x, x, x, need_weights=False)[0], [_rand((t, d), 33)],
            ad_params=pa, torch_params=pt)


def test_state_dict_moves_to_torch(tmp_path):
    """Our initialisation, saved to .npz and loaded into PyTorch, gives PyTorch's output."""
    ad.manual_seed(3)
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0,
                                                           activation="gelu",
                                                           batch_first=True), 2)
    enc.save(tmp_path / "enc.npz")
    ref = torch.nn.TransformerEncoder(
        torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu",
                                         batch_first=True), 2, enable_nested_tensor=False)
    with np.load(tmp_path / "enc.npz") as f:
        ref.load_state_dict({k: torch.tensor(f[k]) for k in f.files})
    x = _rand((2, 4, 8), 34)
    y = enc(ad.Tensor(x))
    ad.execute()
    np.testing.assert_allclose(y.numpy(), ref(torch.tensor(x)).detach().numpy(), rtol=RTOL,
                               atol=ATOL)


@pytest.mark.parametrize("shape", [(5,), (3, 5), (2, 3, 4), (2, 3, 2, 2)])
@pytest.mark.parametrize("kind", ["Softmax", "LogSoftmax", "Softmin"])
def test_softmax_without_dim_takes_torchs_implicit_dim(kind, shape):
    """``nn.Softmax()``, ``F.softmax(x)`` (``dim=None``): PyTorch's deprecated implicit dim
    (0 for 1-D and 3-D inputs, else 1) with its warning; the last dim was taken, a silent
    difference on 3-D and 4-D inputs (and ``F.softmax(x, dim=None)`` normalised over every
    element)."""
    x = _rand(shape, 4, 2.0)
    fn = {"Softmax": F.softmax, "LogSoftmax": F.log_softmax, "Softmin": F.softmin}[kind]
    tfn = {"Softmax": torch.nn.functional.softmax, "LogSoftmax": torch.nn.functional.log_softmax,
           "Softmin": torch.nn.functional.softmin}[kind]
    with pytest.warns(UserWarning, match="Implicit dimension choice"):
        compare(lambda t: getattr(nn, kind)()(t), lambda t: getattr(torch.nn, kind)()(t), [x])
    with pytest.warns(UserWarning, match="Implicit dimension choice"):
        compare(lambda t: fn(t, dim=None), lambda t: tfn(t, dim=None), [x])


def test_tensor_softmax_needs_an_int_dim():
    for f in (lambda t: t.softmax(None), lambda t: t.log_softmax(None)):
        with pytest.raises(TypeError, match="must be int"):
            f(torch.zeros(2, 3))
        with pytest.raises(TypeError, match="must be int"):
            f(ad.zeros(2, 3))
