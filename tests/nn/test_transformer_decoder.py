"""``TransformerDecoderLayer``, ``TransformerDecoder`` and ``Transformer`` against torch's:
state_dict keys in order, then outputs and every parameter gradient with torch's weights
loaded (both layouts, post- and pre-norm, causal target mask, memory padding mask)."""
import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import nn

RTOL, ATOL = 2e-4, 2e-5


def _randomize(m, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)


def _check(ours, theirs, args_np, call):
    """``call(module, lib, *tensors)``; compares the output and all parameter gradients."""
    assert list(ours.state_dict()) == list(theirs.state_dict())
    _randomize(theirs, 0)
    ours.load_state_dict(theirs.state_dict())
    xs = [ad.tensor(a, requires_grad=True) for a in args_np]
    out = call(ours, ad, *xs)
    G = np.random.default_rng(5).uniform(0.5, 1.5, out.shape).astype(np.float32)
    out.backward(ad.tensor(G))
    grads = {k: p.grad for k, p in ours.named_parameters()}
    ad.execute(device="numpy")
    ts = [torch.tensor(a, requires_grad=True) for a in args_np]
    ref = call(theirs, torch, *ts)
    ref.backward(torch.tensor(G))
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=RTOL, atol=ATOL)
    for k, p in theirs.named_parameters():
        np.testing.assert_allclose(grads[k].numpy(), p.grad.numpy(), rtol=RTOL, atol=ATOL,
                                   err_msg=k)


@pytest.mark.parametrize("batch_first,norm_first", [(False, False), (True, True)])
def test_decoder_layer_matches_torch(batch_first, norm_first):
    d, h, ff, b, t, s = 8, 2, 12, 2, 4, 5
    kw = dict(dropout=0.0, batch_first=batch_first, norm_first=norm_first, activation="gelu")
    ours, theirs = (nn.TransformerDecoderLayer(d, h, ff, **kw),
                    torch.nn.TransformerDecoderLayer(d, h, ff, **kw))
    rng = np.random.default_rng(1)
    shape = (lambda n: (b, n, d)) if batch_first else (lambda n: (n, b, d))
    tgt, mem = rng.standard_normal(shape(t)), rng.standard_normal(shape(s))
    mask = nn.Transformer.generate_square_subsequent_mask(t)
    pad = np.zeros((b, s), bool)
    pad[1, -2:] = True

    def call(m, lib, x, y):
        tm = torch.tensor(mask) if lib is torch else mask
        kp = torch.tensor(pad) if lib is torch else pad
        return m(x, y, tgt_mask=tm, memory_key_padding_mask=kp)
    _check(ours, theirs, [tgt.astype(np.float32), mem.astype(np.float32)], call)


def test_transformer_matches_torch_and_initialises_like_it():
    kw = dict(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
              dim_feedforward=12, dropout=0.0)
    ours, theirs = nn.Transformer(**kw), torch.nn.Transformer(**kw)
    w = ours.encoder.layers[0].linear1.weight.numpy()          # xavier-uniform, as torch
    assert np.abs(w).max() <= np.sqrt(6 / (8 + 12)) and w.std() > 0.1
    rng = np.random.default_rng(2)
    src, tgt = rng.standard_normal((5, 2, 8)), rng.standard_normal((3, 2, 8))
    mask = nn.Transformer.generate_square_subsequent_mask(3)

    def call(m, lib, x, y):
        return m(x, y, tgt_mask=torch.tensor(mask) if lib is torch else mask)
    _check(ours, theirs, [src.astype(np.float32), tgt.astype(np.float32)], call)
