"""``nn.EmbeddingBag`` against torch's: every mode, with and without ``padding_idx``, fixed
bags (2-D input) and bags from offsets (an empty one included), per-sample weights; the
output and the weight's gradient."""
import numpy as np
import pytest
import torch

import autodiff as ad
from autodiff import nn

INP = np.array([[1, 2, 4], [2, 2, 2], [6, 0, 1]])
FLAT, OFFS = np.array([1, 2, 4, 5, 2, 6, 0]), np.array([0, 3, 3, 5])


@pytest.mark.parametrize("pad", [None, 2])
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_matches_torch(mode, pad):
    torch.manual_seed(0)
    theirs = torch.nn.EmbeddingBag(7, 3, mode=mode, padding_idx=pad)
    ours = nn.EmbeddingBag(7, 3, mode=mode, padding_idx=pad)
    ours.load_state_dict(theirs.state_dict())
    psw = np.random.default_rng(0).uniform(0.5, 2, INP.shape).astype(np.float32)
    outs = [ours(ad.tensor(INP)), ours(ad.tensor(FLAT), OFFS),
            ours(ad.tensor(FLAT), ad.tensor(OFFS))]          # offsets as data, or a tensor
    if mode == "sum":
        outs.append(ours(ad.tensor(INP), per_sample_weights=ad.tensor(psw)))
    sum(o.sum() for o in outs).backward()
    g = ours.weight.grad
    ad.execute(device="numpy")
    refs = [theirs(torch.tensor(INP)), theirs(torch.tensor(FLAT), torch.tensor(OFFS)),
            theirs(torch.tensor(FLAT), torch.tensor(OFFS))]
    if mode == "sum":
        refs.append(theirs(torch.tensor(INP), per_sample_weights=torch.tensor(psw)))
    sum(r.sum() for r in refs).backward()
    for o, r in zip(outs, refs):
        np.testing.assert_allclose(o.numpy(), r.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g.numpy(), theirs.weight.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_include_last_offset_and_errors():
    torch.manual_seed(1)
    theirs = torch.nn.EmbeddingBag(7, 2, mode="sum", include_last_offset=True)
    ours = nn.EmbeddingBag(7, 2, mode="sum", include_last_offset=True)
    ours.load_state_dict(theirs.state_dict())
    out = ours(ad.tensor(FLAT), np.r_[OFFS, len(FLAT)])
    ad.execute(device="numpy")
    ref = theirs(torch.tensor(FLAT), torch.tensor(np.r_[OFFS, len(FLAT)]))
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-6)
    with pytest.raises(RuntimeError, match="offsets computed by the program"):
        ours(ad.tensor(FLAT), ad.tensor(OFFS) * 1)
    with pytest.raises(ValueError, match="per_sample_weights is only supported"):
        nn.EmbeddingBag(7, 2)(ad.tensor(INP), per_sample_weights=ad.tensor(np.ones((3, 3))))
