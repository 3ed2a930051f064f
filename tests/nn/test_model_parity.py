"""End-to-end parity with PyTorch: a CNN (Conv-BatchNorm-ReLU-MaxPool blocks, Linear) and a
2-layer LSTM language model, each built by ONE builder from ``autodiff.nn`` or ``torch.nn``
(the same names and arguments), trained 20 steps with every optimizer and every schedule,
gradient clipping included, within 1e-4 of PyTorch float32; PyTorch's initial state_dict
loads unchanged and gives the same logits. A subset runs on OpenCL and TVM."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import nn, optim
from autodiff.nn.utils import clip_grad_norm_
from autodiff.optim import lr_scheduler as S
from backends import opencl_missing

torch.set_num_threads(1)
STEPS, BATCH = 20, 8
VOCAB, SEQ = 11, 6


def cnn(lib):
    """Two Conv-BN-ReLU-MaxPool blocks on [N, 1, 8, 8], then Flatten and Linear."""
    def block(i, o):
        return lib.Sequential(lib.Conv2d(i, o, 3, padding=1, bias=False), lib.BatchNorm2d(o),
                              lib.ReLU(), lib.MaxPool2d(2))
    return lib.Sequential(block(1, 4), block(4, 6), lib.Flatten(), lib.Linear(24, 10))


def lstm_lm(lib):
    class LM(lib.Module):
        def __init__(self):
            super().__init__()
            self.emb = lib.Embedding(VOCAB, 8)
            self.rnn = lib.LSTM(8, 12, num_layers=2, batch_first=True)
            self.head = lib.Linear(12, VOCAB)

        def forward(self, idx):
            return self.head(self.rnn(self.emb(idx))[0])
    return LM()


def data(kind: str, seed: int = 0):
    rng = np.random.default_rng(seed)
    if kind == "cnn":
        x = rng.uniform(0, 1, (STEPS, BATCH, 1, 8, 8)).astype(np.float32)
        y = rng.integers(0, 10, (STEPS, BATCH)).astype(np.int32)
    else:
        seq = rng.integers(0, VOCAB, (STEPS, BATCH, SEQ + 1)).astype(np.int32)
        x, y = seq[..., :-1].copy(), seq[..., 1:].copy()
    return x, y


def _loss(lib_f, logits, y):
    return lib_f.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def pair(kind: str, seed: int = 0):
    torch.manual_seed(seed)
    build = cnn if kind == "cnn" else lstm_lm
    theirs = build(torch.nn)
    ours = build(nn)
    ours.load_state_dict(theirs.state_dict())           # PyTorch's state_dict, unchanged
    return ours, theirs


def run_ours(model, kind, make_opt, make_sched, device="numpy", clip=1.0):
    xs, ys = data(kind)
    opt = make_opt(model.parameters())
    sched = make_sched(opt) if make_sched else None
    it, losses = iter(zip(xs, ys)), []
    cur = {}

    def feed_x():
        cur["x"], cur["y"] = next(it)
        return cur["x"]

    def body():
        x = ad.Feeder(feed_x, xs.shape[1:], "float32" if kind == "cnn" else "int32")
        y = ad.Feeder(lambda: cur["y"], ys.shape[1:], "int32")
        opt.zero_grad()
        loss = _loss(nn.functional, model(x), y)
        loss.backward()
        clip_grad_norm_(model.parameters(), clip)
        opt.step()
        if sched is not None:
            sched.step()
        ad.Receiver(lambda v: losses.append(float(v)), [loss])
    model.train()
    ad.ir_for(STEPS, body)
    # one loop iteration per TVM call: unrolling several would only cost compile time here
    ad.execute(device=device, **({"steps_per_call": 1} if device == "tvm" else {}))
    return np.array(losses)


def run_theirs(model, kind, make_opt, make_sched, clip=1.0):
    xs, ys = data(kind)
    opt = make_opt(model.parameters())
    sched = make_sched(opt) if make_sched else None
    losses = []
    model.train()
    for x, y in zip(xs, ys):
        opt.zero_grad()
        loss = _loss(torch.nn.functional, model(torch.tensor(x) if kind == "cnn" else
                                                torch.tensor(x.astype(np.int64))),
                     torch.tensor(y.astype(np.int64)))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        if sched is not None:
            sched.step()
        losses.append(loss.item())
    return np.array(losses)


def compare(kind, ours_opt, torch_opt, ours_sched=None, torch_sched=None, device="numpy",
            rtol=1e-4, atol=1e-4):
    ours, theirs = pair(kind)
    losses = run_ours(ours, kind, ours_opt, ours_sched, device)
    ref = run_theirs(theirs, kind, torch_opt, torch_sched)
    np.testing.assert_allclose(losses, ref, rtol=rtol, atol=atol, err_msg="losses")
    sd = ours.state_dict()
    for k, v in theirs.state_dict().items():        # parameters and BatchNorm buffers
        np.testing.assert_allclose(sd[k], v.numpy(), rtol=rtol, atol=atol, err_msg=k)
    assert losses[-1] < losses[0]


OPTIMIZERS = {
    "SGD": (lambda p: optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
            lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True,
                                      weight_decay=1e-3)),
    "Adam": (lambda p: optim.Adam(p, lr=3e-3, amsgrad=True),
             lambda p: torch.optim.Adam(p, lr=3e-3, amsgrad=True)),
    "AdamW": (lambda p: optim.AdamW(p, lr=3e-3), lambda p: torch.optim.AdamW(p, lr=3e-3)),
    "RMSprop": (lambda p: optim.RMSprop(p, lr=1e-3, momentum=0.5),
                lambda p: torch.optim.RMSprop(p, lr=1e-3, momentum=0.5)),
    "Adagrad": (lambda p: optim.Adagrad(p, lr=0.03), lambda p: torch.optim.Adagrad(p, lr=0.03)),
    "Adamax": (lambda p: optim.Adamax(p, lr=5e-3), lambda p: torch.optim.Adamax(p, lr=5e-3)),
    "NAdam": (lambda p: optim.NAdam(p, lr=3e-3), lambda p: torch.optim.NAdam(p, lr=3e-3)),
    "RAdam": (lambda p: optim.RAdam(p, lr=5e-3), lambda p: torch.optim.RAdam(p, lr=5e-3)),
}

T = torch.optim.lr_scheduler
SCHEDULES = {
    "StepLR": (lambda o: S.StepLR(o, 5, 0.5), lambda o: T.StepLR(o, 5, 0.5)),
    "MultiStepLR": (lambda o: S.MultiStepLR(o, [4, 12]), lambda o: T.MultiStepLR(o, [4, 12])),
    "ExponentialLR": (lambda o: S.ExponentialLR(o, 0.9), lambda o: T.ExponentialLR(o, 0.9)),
    "CosineAnnealingLR": (lambda o: S.CosineAnnealingLR(o, STEPS),
                          lambda o: T.CosineAnnealingLR(o, STEPS)),
    "LinearLR": (lambda o: S.LinearLR(o, 0.2, total_iters=8),
                 lambda o: T.LinearLR(o, 0.2, total_iters=8)),
    "OneCycleLR": (lambda o: S.OneCycleLR(o, 1e-2, total_steps=STEPS),
                   lambda o: T.OneCycleLR(o, 1e-2, total_steps=STEPS)),
    "LambdaLR": (lambda o: S.LambdaLR(o, lambda t: 1.0 / (1.0 + 0.1 * t)),
                 lambda o: T.LambdaLR(o, lambda t: 1.0 / (1.0 + 0.1 * t))),
    "SequentialLR": (lambda o: S.SequentialLR(o, [S.LinearLR(o, 0.1, total_iters=5),
                                                  S.CosineAnnealingLR(o, STEPS - 5)], [5]),
                     lambda o: T.SequentialLR(o, [T.LinearLR(o, 0.1, total_iters=5),
                                                  T.CosineAnnealingLR(o, STEPS - 5)], [5])),
}


@pytest.mark.parametrize("kind", ["cnn", "lstm"])
def test_torch_state_dict_gives_the_same_logits(kind):
    ours, theirs = pair(kind, seed=3)
    xs, _ = data(kind, seed=4)
    ours.eval()
    theirs.eval()
    logits = ours(ad.Tensor(xs[0]))
    ad.execute()
    ref = theirs(torch.tensor(xs[0]) if kind == "cnn" else torch.tensor(xs[0].astype(np.int64)))
    np.testing.assert_allclose(logits.numpy(), ref.detach().numpy(), rtol=1e-5, atol=1e-5)
    assert list(ours.state_dict()) == list(theirs.state_dict())


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["cnn", "lstm"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_optimizers(kind, name):
    compare(kind, *OPTIMIZERS[name])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["cnn", "lstm"])
@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedules(kind, name):
    compare(kind, *OPTIMIZERS["AdamW"], *SCHEDULES[name])


def test_cnn_adamw_onecycle_quick():
    """The example's recipe (AdamW, OneCycleLR, clipping), not marked slow."""
    compare("cnn", *OPTIMIZERS["AdamW"], *SCHEDULES["OneCycleLR"])


def _device(name):
    if name == "opencl":
        why = opencl_missing()
        return pytest.param("opencl", marks=pytest.mark.skip(reason=why)) if why else "opencl"
    try:
        import tvm  # noqa: F401
    except ImportError as e:
        return pytest.param("tvm", marks=pytest.mark.skip(reason=f"no TVM: {e}"))
    return "tvm"


@pytest.mark.slow
@pytest.mark.parametrize("kind,opt,sched,device", [
    ("cnn", "AdamW", "OneCycleLR", _device("opencl")),
    ("lstm", "SGD", "SequentialLR", _device("opencl")),
    ("cnn", "AdamW", "OneCycleLR", _device("tvm"))])    # a TVM build of ~125 kernels: ~30 s
def test_other_devices(kind, opt, sched, device):
    compare(kind, *OPTIMIZERS[opt], *SCHEDULES[sched], device=device)
