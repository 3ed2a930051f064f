"""nn.utils.rnn.PackedSequence, pack_padded_sequence, pad_packed_sequence, pack_sequence,
unpack_sequence and RNN/LSTM/GRU on packed input, against torch.nn.utils.rnn and torch's
recurrent modules with the same weights: the packed layout (data, batch_sizes, indices)
exactly, values and gradients, h_n/c_n at each sequence's last step, a training loop in
an ir_for body, and torch's errors (plus the error for lengths computed by the program).

Tolerances: packing and padding move values (gathers), so they are compared exactly
(rtol=atol=0), their gradients too (each element receives one gradient, no sums). The
recurrent layers' float32 results go through matrix products whose summation order
differs from torch's (its batch at step t is batch_sizes[t] rows, ours the padded batch):
rtol=1e-4, atol=1e-5 as tests/nn/test_rnn.py; the training loop compounds 4 steps:
rtol=2e-5 on the losses and states, as tests/nn/test_utils_rnn.py."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.utils.rnn as trnn
from backends import device_params

import autodiff as ad
from autodiff import nn
from autodiff.errors import TracedValueError
from autodiff.nn import rnn as rnn_module
from autodiff.nn.utils import rnn as R
from autodiff.optim import SGD

torch.set_num_threads(1)
EXACT = dict(rtol=0, atol=0)
RNN_TOL = dict(rtol=1e-4, atol=1e-5)


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _same_layout(ours: R.PackedSequence, theirs) -> None:
    np.testing.assert_allclose(ours.data.numpy(), theirs.data.detach().numpy(), **EXACT)
    assert ours.batch_sizes.dtype == "int64"
    np.testing.assert_array_equal(ours.batch_sizes.numpy(), theirs.batch_sizes.numpy())
    for name in ("sorted_indices", "unsorted_indices"):
        a, b = getattr(ours, name), getattr(theirs, name)
        assert (a is None) == (b is None), name
        if a is not None:
            assert a.dtype == "int64"
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_and_pad_match_torch(batch_first, enforce_sorted):
    lengths = [6, 4, 4, 2, 1] if enforce_sorted else [2, 6, 1, 4, 4]
    x = _rand((5, 6, 3) if batch_first else (6, 5, 3), 0)
    w = _rand((5, 8, 3) if batch_first else (8, 5, 3), 1)
    wd = _rand((sum(lengths), 3), 2)
    xa = ad.Tensor(x, requires_grad=True)
    p = R.pack_padded_sequence(xa, np.array(lengths), batch_first, enforce_sorted)
    out, lens = R.pad_packed_sequence(p, batch_first, -0.75, total_length=8)
    ((out * ad.Tensor(w)).sum() + (p.data * p.data * ad.Tensor(wd)).sum()).backward()
    grad = xa.grad
    ad.execute()
    xt = torch.tensor(x, requires_grad=True)
    pt = trnn.pack_padded_sequence(xt, torch.tensor(lengths), batch_first, enforce_sorted)
    tout, tlens = trnn.pad_packed_sequence(pt, batch_first, -0.75, total_length=8)
    ((tout * torch.tensor(w)).sum() + (pt.data * pt.data * torch.tensor(wd)).sum()).backward()
    _same_layout(p, pt)
    assert out.shape == tuple(tout.shape) and out.dtype == "float32"
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), **EXACT)
    assert lens.dtype == "int64"
    np.testing.assert_array_equal(lens.numpy(), tlens.numpy())
    np.testing.assert_allclose(grad.numpy(), xt.grad.numpy(), **EXACT)


def _rows(p, data) -> dict:
    """(sequence, time step) -> its row of a packed batch's ``data``."""
    sizes, order = np.asarray(p.batch_sizes.numpy()), np.asarray(p.sorted_indices.numpy())
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    return {(int(order[r]), t): data[starts[t] + r]
            for t in range(len(sizes)) for r in range(sizes[t])}


def test_ties_sort_stably():
    """More than 16 sequences with many equal lengths: PyTorch's CPU sort is not stable
    there, ours is. The lengths' order, ``batch_sizes``, every sequence's rows and the
    padded result are PyTorch's; tied sequences may sit in another order."""
    lengths = np.random.default_rng(3).integers(1, 4, 41)
    x = _rand((3, 41, 2), 4)
    p = R.pack_padded_sequence(ad.Tensor(x), lengths.tolist(), enforce_sorted=False)
    out, lens = R.pad_packed_sequence(p)
    ad.execute()
    pt = trnn.pack_padded_sequence(torch.tensor(x), torch.tensor(lengths),
                                   enforce_sorted=False)
    tout, tlens = trnn.pad_packed_sequence(pt)
    np.testing.assert_array_equal(p.sorted_indices.numpy(),
                                  np.argsort(-lengths, kind="stable"))
    np.testing.assert_array_equal(lengths[p.sorted_indices.numpy()],
                                  lengths[pt.sorted_indices.numpy()])
    np.testing.assert_array_equal(p.batch_sizes.numpy(), pt.batch_sizes.numpy())
    ours, theirs = _rows(p, p.data.numpy()), _rows(pt, pt.data.numpy())
    assert ours.keys() == theirs.keys()
    for k in ours:
        np.testing.assert_array_equal(ours[k], theirs[k], err_msg=str(k))
    np.testing.assert_allclose(out.numpy(), tout.numpy(), **EXACT)
    np.testing.assert_array_equal(lens.numpy(), tlens.numpy())


@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_sequence_unpack_sequence(enforce_sorted):
    lengths = [5, 3, 3, 1] if enforce_sorted else [3, 1, 5, 3]
    seqs = [_rand((n, 2, 2), 10 + i) for i, n in enumerate(lengths)]
    xs = [ad.Tensor(s, requires_grad=True) for s in seqs]
    p = R.pack_sequence(xs, enforce_sorted)
    back = R.unpack_sequence(p)
    sum((b * b).sum() * (i + 1.0) for i, b in enumerate(back)).backward()
    grads = [x.grad for x in xs]
    ad.execute()
    ts = [torch.tensor(s, requires_grad=True) for s in seqs]
    pt = trnn.pack_sequence(ts, enforce_sorted)
    tback = trnn.unpack_sequence(pt)
    sum((b * b).sum() * (i + 1.0) for i, b in enumerate(tback)).backward()
    _same_layout(p, pt)
    for b, tb in zip(back, tback):
        np.testing.assert_allclose(b.numpy(), tb.detach().numpy(), **EXACT)
    for g, t in zip(grads, ts):
        np.testing.assert_allclose(g.numpy(), t.grad.numpy(), **EXACT)


def test_packed_sequence_api():
    data = _rand((6, 3), 20)
    p = R.PackedSequence(ad.Tensor(data), [3, 2, 1], [2, 0, 1])
    t = trnn.PackedSequence(torch.tensor(data), torch.tensor([3, 2, 1]),
                            torch.tensor([2, 0, 1]))
    assert R.PackedSequence._fields == t._fields
    _same_layout(p, t)
    q = R.PackedSequence((p.data, p.batch_sizes))           # the pair form
    assert q.sorted_indices is None and q.unsorted_indices is None
    np.testing.assert_array_equal(R.invert_permutation([2, 0, 1]).numpy(),
                                  trnn.invert_permutation(torch.tensor([2, 0, 1])).numpy())
    assert R.invert_permutation(None) is None
    h = p.to("float16")
    assert h.data.dtype == "float16" and h.batch_sizes is p.batch_sizes
    assert p.to("float32") is p and p.cpu() is p
    out, lens = R.pad_packed_sequence(p._replace(data=p.data * 2.0), batch_first=True)
    ad.execute()
    tout, tlens = trnn.pad_packed_sequence(t._replace(data=t.data * 2.0), batch_first=True)
    np.testing.assert_allclose(out.numpy(), tout.numpy(), **EXACT)
    np.testing.assert_array_equal(lens.numpy(), tlens.numpy())


def _run_packed(kind, kw, lengths, enforce_sorted, batch_first, with_hx, seed=0):
    """Pack a random padded batch, run ours and torch's module (torch's weights) with
    random output gradients on data, h_n (and c_n); compare all."""
    torch.manual_seed(seed)
    theirs = getattr(torch.nn, kind)(3, 5, batch_first=batch_first, **kw)
    ours = getattr(nn, kind)(3, 5, batch_first=batch_first, **kw)
    ours.load_state_dict(theirs.state_dict())
    lstm = kind == "LSTM"
    t_len, n = max(lengths), len(lengths)
    dirs, layers = (2 if kw.get("bidirectional") else 1), kw.get("num_layers", 1)
    h_size = kw.get("proj_size") or 5
    x = _rand((n, t_len, 3) if batch_first else (t_len, n, 3), seed + 1)
    h0 = _rand((layers * dirs, n, h_size), seed + 2) if with_hx else None
    c0 = _rand((layers * dirs, n, 5), seed + 3) if with_hx and lstm else None
    g_data = _rand((sum(lengths), dirs * h_size), seed + 4)
    g_h = _rand((layers * dirs, n, h_size), seed + 5)
    g_c = _rand((layers * dirs, n, 5), seed + 6)

    def run(lib, pack, tensor):
        xs = tensor(x, requires_grad=True)
        hs = tensor(h0, requires_grad=True) if with_hx else None
        cs = tensor(c0, requires_grad=True) if with_hx and lstm else None
        packed = pack(xs, lengths, batch_first=batch_first, enforce_sorted=enforce_sorted)
        out, hn = ours(packed, (hs, cs) if lstm and with_hx else hs) if lib is ad else \
            theirs(packed, (hs, cs) if lstm and with_hx else hs)
        h_n, c_n = hn if lstm else (hn, None)
        loss = (out.data * tensor(g_data)).sum() + (h_n * tensor(g_h)).sum()
        if lstm:
            loss = loss + (c_n * tensor(g_c)).sum()
        loss.backward()
        return out, h_n, c_n, xs, hs, cs

    out, h_n, c_n, xa, ha, ca = run(ad, R.pack_padded_sequence, ad.Tensor)
    grads = {k: p.grad for k, p in ours.named_parameters()}
    gx, gh = xa.grad, ha.grad if with_hx else None
    gc = ca.grad if with_hx and lstm else None
    ad.execute()
    tout, th_n, tc_n, xt, ht, ct = run(torch, trnn.pack_padded_sequence, torch.tensor)
    assert isinstance(out, R.PackedSequence)
    _same_layout(R.PackedSequence(ad.Tensor(tout.data.detach().numpy()), out.batch_sizes,
                                  out.sorted_indices, out.unsorted_indices), tout)
    np.testing.assert_allclose(out.data.numpy(), tout.data.detach().numpy(), **RNN_TOL,
                               err_msg="output")
    np.testing.assert_allclose(h_n.numpy(), th_n.detach().numpy(), **RNN_TOL, err_msg="h_n")
    if lstm:
        np.testing.assert_allclose(c_n.numpy(), tc_n.detach().numpy(), **RNN_TOL,
                                   err_msg="c_n")
    np.testing.assert_allclose(gx.numpy(), xt.grad.numpy(), **RNN_TOL, err_msg="input grad")
    if with_hx:
        np.testing.assert_allclose(gh.numpy(), ht.grad.numpy(), **RNN_TOL, err_msg="h0 grad")
        if lstm:
            np.testing.assert_allclose(gc.numpy(), ct.grad.numpy(), **RNN_TOL,
                                       err_msg="c0 grad")
    for k, p in theirs.named_parameters():
        np.testing.assert_allclose(grads[k].numpy(), p.grad.numpy(), **RNN_TOL, err_msg=k)


_KINDS = [("LSTM", dict(num_layers=2, bidirectional=True)), ("LSTM", dict(proj_size=3)),
          ("GRU", dict(bidirectional=True)), ("GRU", dict(num_layers=2)),
          ("RNN", dict(nonlinearity="relu", num_layers=2)), ("RNN", dict(bidirectional=True))]


@pytest.mark.parametrize("kind,kw", _KINDS)
@pytest.mark.parametrize("enforce_sorted,batch_first", [(True, False), (False, True)])
def test_packed_recurrent_layers_match_torch(kind, kw, enforce_sorted, batch_first):
    lengths = [6, 5, 3, 3, 1] if enforce_sorted else [3, 6, 1, 5, 3]
    _run_packed(kind, kw, lengths, enforce_sorted, batch_first, with_hx=False)


@pytest.mark.parametrize("kind,kw", [_KINDS[0], _KINDS[2], _KINDS[4]])
def test_packed_with_initial_state_match_torch(kind, kw):
    """hx in the original batch order, permuted into the packed order; also sorted input
    with batch_first and unsorted time-major."""
    _run_packed(kind, kw, [2, 6, 1, 5, 3], False, False, with_hx=True, seed=7)
    _run_packed(kind, kw, [6, 5, 3, 3, 1], True, True, with_hx=True, seed=8)


@pytest.mark.parametrize("kind,kw", [_KINDS[0], _KINDS[2], _KINDS[5]])
def test_packed_scan_matches_torch(monkeypatch, kind, kw):
    """The time loop as a scan with the step mask as a scanned input."""
    monkeypatch.setattr(rnn_module, "SCAN_MIN_STEPS", 1)
    _run_packed(kind, kw, [3, 6, 1, 5, 3], False, False, with_hx=True, seed=9)


@pytest.mark.parametrize("device", device_params())
def test_packed_lstm_trains_in_a_loop_like_torch(device):
    """Each iteration packs a fed padded batch (fixed, unsorted lengths), runs a
    bidirectional LSTM and a loss on the packed output and h_n; SGD, 4 steps, against
    torch doing the same."""
    lengths = [3, 5, 2, 5]
    data = [_rand((5, 4, 3), 30 + i) for i in range(4)]
    ad.manual_seed(0)
    lstm = nn.LSTM(3, 4, bidirectional=True)
    tl = torch.nn.LSTM(3, 4, bidirectional=True)
    tl.load_state_dict({k: torch.tensor(v) for k, v in lstm.state_dict().items()})
    opt = SGD(lstm.parameters(), lr=0.1)
    losses, feed = [], iter(data)

    def body():
        opt.zero_grad()
        x = ad.Feeder(lambda: next(feed), [5, 4, 3])
        out, (h_n, _) = lstm(R.pack_padded_sequence(x, lengths, enforce_sorted=False))
        padded, _ = R.pad_packed_sequence(out)
        loss = (out.data * out.data).sum() + h_n.sum() + padded[-1].sum()
        loss.backward()
        opt.step()
        ad.Receiver(lambda v: losses.append(float(v)), [loss])
    ad.ir_for(4, body)
    ad.execute(device=device)
    topt = torch.optim.SGD(tl.parameters(), lr=0.1)
    tlosses = []
    for d in data:
        topt.zero_grad()
        out, (h_n, _) = tl(trnn.pack_padded_sequence(torch.tensor(d), lengths,
                                                     enforce_sorted=False))
        padded, _ = trnn.pad_packed_sequence(out)
        loss = (out.data * out.data).sum() + h_n.sum() + padded[-1].sum()
        loss.backward()
        topt.step()
        tlosses.append(loss.item())
    np.testing.assert_allclose(losses, tlosses, rtol=2e-5, atol=1e-6)
    assert losses[-1] < losses[0]
    for k, v in tl.state_dict().items():
        np.testing.assert_allclose(lstm.state_dict()[k], v.numpy(), rtol=2e-5, atol=2e-6)


def _both(fn_ours, fn_torch, exc, match=None):
    """The same error from ours and torch (type; message when given)."""
    with pytest.raises(exc, match=match):
        fn_torch()
    with pytest.raises(exc, match=match):
        fn_ours()


def test_errors_as_torch():
    x = _rand((5, 4, 2), 40)
    xa, xt = ad.Tensor(x), torch.tensor(x)
    for lengths, kw, match in [
            ([3, 5, 3, 1], {}, "must be sorted in decreasing order when `enforce_sorted`"),
            ([5, 3, 3, 0], {}, "has to be greater than 0"),
            ([5, 0, 3, 1], dict(enforce_sorted=False), "has to be greater than 0"),
            ([5, 3], {}, r"Expected `len\(lengths\)` to be equal to batch_size"),
            ([[5, 3, 3, 1]], {}, "1D")]:
        _both(lambda: R.pack_padded_sequence(xa, lengths, **kw),
              lambda: trnn.pack_padded_sequence(xt, torch.tensor(lengths), **kw),
              RuntimeError, match)
    _both(lambda: R.pack_padded_sequence(ad.Tensor(np.zeros((0, 2, 2), np.float32)), [1, 1]),
          lambda: trnn.pack_padded_sequence(torch.zeros(0, 2, 2), [1, 1]),
          RuntimeError, "Cannot pack empty tensors")
    _both(lambda: R.pack_padded_sequence(ad.Tensor(x[:, 0, 0]), [5]),
          lambda: trnn.pack_padded_sequence(xt[:, 0, 0], [5]), IndexError)
    _both(lambda: R.pack_sequence([]), lambda: trnn.pack_sequence([]), RuntimeError)
    _both(lambda: R.pack_sequence([ad.Tensor(x[:2, 0]), ad.Tensor(x[:3, 0])]),
          lambda: trnn.pack_sequence([xt[:2, 0], xt[:3, 0]]), RuntimeError, "sorted")
    p, pt = R.pack_padded_sequence(xa, [5, 3, 3, 1]), trnn.pack_padded_sequence(xt, [5, 3, 3, 1])
    _both(lambda: R.pad_packed_sequence(p, total_length=4),
          lambda: trnn.pad_packed_sequence(pt, total_length=4), ValueError,
          "Expected total_length to be at least the length of the longest")
    with pytest.raises(RuntimeError, match="exceeds"):        # torch reads past the input
        R.pack_padded_sequence(xa, [6, 3, 3, 1])
    # the packed data of an RNN: 2-D and input_size wide (RuntimeError as torch)
    lstm, tlstm = nn.LSTM(2, 3), torch.nn.LSTM(2, 3)
    bad = R.PackedSequence(ad.Tensor(_rand((12, 2, 2), 41)), p.batch_sizes)
    tbad = trnn.PackedSequence(torch.tensor(_rand((12, 2, 2), 41)), pt.batch_sizes)
    _both(lambda: lstm(bad), lambda: tlstm(tbad), RuntimeError, "2")
    _both(lambda: nn.LSTM(3, 3)(p), lambda: torch.nn.LSTM(3, 3)(pt), RuntimeError)
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size"):
        nn.LSTM(3, 3)(p)                            # torch's message is its matmul's
    h = _rand((2, 4, 3), 42)
    _both(lambda: lstm(p, (ad.Tensor(h),) * 2), lambda: tlstm(pt, (torch.tensor(h),) * 2),
          RuntimeError)
    with pytest.raises(RuntimeError, match=r"Expected hidden size \[1, 4, 3\]"):
        lstm(p, (ad.Tensor(h),) * 2)


def test_traced_lengths_raise_with_the_fixed_shape_alternative():
    x = ad.Tensor(_rand((5, 3, 2), 50))
    traced = ad.Tensor(np.array([5, 2, 1])) * 1                   # computed by the program
    with pytest.raises(TracedValueError, match=r"pack_padded_sequence.*shape \[3\].*mask"):
        R.pack_padded_sequence(x, traced)
    made = R.PackedSequence(x.reshape(-1, 2)[:8], traced)          # kept as given, as torch
    with pytest.raises(TracedValueError, match=r"LSTM.*batch_sizes.*shape \[3\]"):
        nn.LSTM(2, 3)(made)
    with pytest.raises(TypeError, match="pad_packed_sequence"):   # TracedValueError is one
        R.pad_packed_sequence(made)

    def body():
        lens = ad.Feeder(lambda: np.array([5, 2, 1]), [3], "int64")
        R.pack_padded_sequence(x, lens)
    with pytest.raises(TracedValueError, match="pack_padded_sequence"):
        ad.ir_for(2, body)
    ad.reset()
