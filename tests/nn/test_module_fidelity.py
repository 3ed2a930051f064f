"""``Module`` behaviours PyTorch scripts rely on: ``parameters()`` is an iterator,
``half()``/``bfloat16()``/``to(dtype)`` cast the parameters (inference in 16 bits, against
torch's own half model), ``load_state_dict`` raises torch's errors and accepts checkpoints
without BatchNorm's ``num_batches_tracked``."""
import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import nn


def _pair():
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.LayerNorm(7), torch.nn.GELU(),
                                 torch.nn.Linear(7, 3))
    ours = nn.Sequential(nn.Linear(5, 7), nn.LayerNorm(7), nn.GELU(), nn.Linear(7, 3))
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def test_parameters_is_an_iterator():
    ours, _ = _pair()
    first = next(ours.parameters())
    assert first is ours[0].weight
    assert len(list(ours.parameters())) == 6 and len(list(ours.buffers())) == 0


@pytest.mark.parametrize("cast,tdtype,atol", [("half", torch.float16, 4e-3),
                                             ("bfloat16", torch.bfloat16, 3e-2)])
def test_16_bit_inference_matches_torch(cast, tdtype, atol):
    ours, theirs = _pair()
    getattr(ours, cast)()
    getattr(theirs, cast)()
    assert next(ours.parameters()).dtype == getattr(ad, cast if cast != "half" else "float16")
    x = np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32)
    with ad.no_grad():
        y = ours(ad.tensor(x).to(getattr(ad, str(tdtype).split(".")[1])))
    ad.execute(device="numpy")
    ref = theirs(torch.tensor(x).to(tdtype)).detach().float().numpy()
    assert y.dtype == next(ours.parameters()).dtype
    np.testing.assert_allclose(y.numpy().astype(np.float32), ref, rtol=0, atol=atol)
    ours.float()
    assert all(p.dtype == ad.float32 for p in ours.parameters())
    np.testing.assert_allclose(ours[0].weight.numpy(),
                               theirs[0].weight.detach().float().numpy())


def test_to_dtype_and_double():
    ours, _ = _pair()
    assert ours.to("cpu") is ours and ours.to(torch.float16) is ours
    assert ours[3].bias.dtype == ad.float16
    ours.to(dtype=ad.float32)
    assert ours[3].bias.dtype == ad.float32
    with pytest.raises(TypeError, match="float64"):
        ours.double()


def test_load_state_dict_errors_and_old_batchnorm_checkpoints():
    bn = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    sd = {k: v for k, v in torch.nn.Sequential(torch.nn.Linear(3, 4),
                                                 torch.nn.BatchNorm1d(4)).state_dict().items()}
    del sd["1.num_batches_tracked"]              # checkpoints from before PyTorch 0.4.1
    missing, unexpected = bn.load_state_dict(sd)
    assert missing == [] and unexpected == []
    bad = dict(sd, **{"0.weight": torch.zeros(3, 3)})
    with pytest.raises(RuntimeError, match=r"size mismatch for 0\.weight: copying a param with "
                                           r"shape \[3, 3\] from checkpoint, the shape in "
                                           r"current model is \[4, 3\]"):
        bn.load_state_dict(bad)
    with pytest.raises(RuntimeError, match="missing"):
        bn.load_state_dict({"0.weight": torch.zeros(4, 3)})
