"""nn.utils.rnn.pad_sequence / unpad_sequence against torch.nn.utils.rnn: values, dtypes,
gradients, both padding sides, batch_first, errors, and use inside an ir_for loop with an
LSTM trained by SGD."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from backends import device_params

import autodiff as ad
from autodiff import nn
from autodiff.nn.utils.rnn import pad_sequence, unpad_sequence
from autodiff.optim import SGD


def _seqs(lengths, trailing=(3,), seed=0):
    r = np.random.default_rng(seed)
    return [r.standard_normal((n, *trailing)).astype(np.float32) for n in lengths]


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_side", ["right", "left"])
def test_pad_sequence_values_and_gradients(batch_first, padding_side):
    a = _seqs([2, 5, 1, 5], (3, 2))
    w = np.random.default_rng(9).standard_normal((5, 4, 3, 2)).astype(np.float32)
    w = w.transpose(1, 0, 2, 3) if batch_first else w
    xs = [ad.Tensor(x, requires_grad=True) for x in a]
    p = pad_sequence(xs, batch_first, -0.75, padding_side)
    (p * p.sin() * ad.Tensor(w)).sum().backward()
    grads = [x.grad for x in xs]
    ad.execute()
    ts = [torch.tensor(x, requires_grad=True) for x in a]
    pt = torch.nn.utils.rnn.pad_sequence(ts, batch_first, -0.75, padding_side)
    (pt * pt.sin() * torch.tensor(w)).sum().backward()
    assert p.shape == tuple(pt.shape) and p.dtype == "float32"
    np.testing.assert_allclose(p.numpy(), pt.detach().numpy(), rtol=0, atol=0)
    for g, t in zip(grads, ts):
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_pad_sequence_int_and_tensor_input():
    ints = [np.array([3, 1, 4]), np.array([1, 5]), np.array([9, 2, 6, 5])]
    p = pad_sequence([ad.Tensor(x) for x in ints], batch_first=True, padding_value=-1)
    stacked = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
    q = pad_sequence(ad.Tensor(stacked))                # a tensor: its rows, [L, B]
    ad.execute()
    pt = torch.nn.utils.rnn.pad_sequence([torch.tensor(x) for x in ints], True, -1)
    assert p.dtype == "int64"
    np.testing.assert_array_equal(p.numpy(), pt.numpy())
    np.testing.assert_array_equal(
        q.numpy(), torch.nn.utils.rnn.pad_sequence(torch.tensor(stacked)).numpy())


def test_pad_sequence_errors_as_torch():
    for args, kw in [(([],), {}), (([ad.Tensor(np.ones((2, 3))), ad.Tensor(np.ones((3, 4)))],),
                                   {}),
                     (([ad.Tensor(np.ones((2, 3)))],), {"padding_side": "middle"}),
                     (([ad.Tensor(np.float32(1.0))],), {})]:
        with pytest.raises(RuntimeError):
            pad_sequence(*args, **kw)


@pytest.mark.parametrize("batch_first", [False, True])
def test_unpad_sequence_round_trip(batch_first):
    a = _seqs([4, 1, 3], (2,), seed=1)
    xs = [ad.Tensor(x, requires_grad=True) for x in a]
    p = pad_sequence(xs, batch_first)
    outs = unpad_sequence(p, torch.tensor([4, 1, 3]), batch_first)
    outs2 = unpad_sequence(p, [4, 0, 2], batch_first)
    sum(((o * o).sum() * (i + 1)) for i, o in enumerate(outs)).backward()
    grads = [x.grad for x in xs]
    ad.execute()
    ts = [torch.tensor(x, requires_grad=True) for x in a]
    tt = torch.nn.utils.rnn.unpad_sequence(torch.nn.utils.rnn.pad_sequence(ts, batch_first),
                                           torch.tensor([4, 1, 3]), batch_first)
    sum(((o * o).sum() * (i + 1)) for i, o in enumerate(tt)).backward()
    for o, t in zip(outs, tt):
        np.testing.assert_allclose(o.numpy(), t.detach().numpy(), rtol=0, atol=0)
    for g, t in zip(grads, ts):
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-6)
    assert [o.shape for o in outs2] == [(4, 2), (0, 2), (2, 2)]
    np.testing.assert_allclose(outs2[2].numpy(), a[2][:2], rtol=0, atol=0)
    with pytest.raises(ValueError):
        unpad_sequence(p, [4, 1], batch_first)
    with pytest.raises(ValueError):
        unpad_sequence(p, [4, 5, 1], batch_first)


@pytest.mark.parametrize("device", device_params())
def test_padded_batches_train_an_lstm_in_a_loop_like_torch(device):
    """Each iteration pads three fed sequences of different lengths, runs an LSTM and a
    loss masked to the real steps; SGD, 4 steps, against torch doing the same."""
    lengths = [5, 2, 4]
    data = [_seqs(lengths, (3,), seed=10 + i) for i in range(4)]
    mask = np.zeros((5, 3, 1), np.float32)
    for b, n in enumerate(lengths):
        mask[:n, b] = 1.0
    ad.manual_seed(0)
    lstm = nn.LSTM(3, 4)
    tl = torch.nn.LSTM(3, 4)
    tl.load_state_dict({k: torch.tensor(v) for k, v in lstm.state_dict().items()})
    opt = SGD(lstm.parameters(), lr=0.2)
    losses = []
    feeds = [iter([d[i] for d in data]) for i in range(3)]

    def body():
        opt.zero_grad()
        seqs = [ad.Feeder(lambda f=f: next(f), [n, 3]) for f, n in zip(feeds, lengths)]
        out, _ = lstm(pad_sequence(seqs, padding_value=0.5))
        loss = (out * out * ad.Tensor(mask)).sum()
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: losses.append(float(v)), [loss])
    ad.ir_for(4, body)
    ad.execute(device=device)
    topt = torch.optim.SGD(tl.parameters(), lr=0.2)
    tlosses = []
    for d in data:
        topt.zero_grad()
        out, _ = tl(torch.nn.utils.rnn.pad_sequence([torch.tensor(x) for x in d],
                                                    padding_value=0.5))
        loss = (out * out * torch.tensor(mask)).sum()
        loss.backward()
        topt.step()
        tlosses.append(loss.item())
    np.testing.assert_allclose(losses, tlosses, rtol=2e-5, atol=1e-6)
    assert losses[-1] < losses[0]
    for k, v in tl.state_dict().items():
        np.testing.assert_allclose(lstm.state_dict()[k], v.numpy(), rtol=2e-5, atol=2e-6)
