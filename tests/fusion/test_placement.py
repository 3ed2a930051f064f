"""Placement of a fused group at one of its members' ranks: an unrelated in-place update
between a matmul's epilogue members (AdamW's weight decay of the bias, which the
memory-greedy schedule runs right after the bias's last forward read) no longer splits the
epilogue."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import autodiff as ad
import autodiff.nn.functional as F
from autodiff.optim import AdamW
from autodiff.procedural.ir import DotProduct, Elementwise, FusedKernel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "procedural"))
from helpers import check_against_interpreter, trace  # noqa: E402


def _program():
    rng = np.random.default_rng(0)
    x = ad.tensor(rng.standard_normal((6, 5)).astype(np.float32))
    w = ad.Tensor(rng.standard_normal((7, 5)).astype(np.float32) * 0.3, requires_grad=True)
    b = ad.Tensor(rng.standard_normal(7).astype(np.float32) * 0.1, requires_grad=True)
    opt = AdamW([w, b], lr=0.01, weight_decay=0.1)

    def build():
        def step():
            opt.zero_grad()
            h = F.gelu(x @ w.T + b)
            (h * h).sum().backward()
            opt.step()
        ad.ir_for(range(2), step)
        return [w * 1.0, b * 1.0]
    return trace(build)


def test_gelu_joins_the_matmul_epilogue_across_the_bias_decay():
    prog, fused = check_against_interpreter(_program(), rtol=1e-5, atol=1e-6)
    forward = next(s for s, _ in fused.walk() if isinstance(s, FusedKernel)
                   and isinstance(s.kernel, DotProduct) and s.kernel.k.extent == 5
                   and len(s.kernel.shape) == 2 and s.kernel.shape == (6, 7))
    ops = {o.value.op.name for o in forward.kernel.outs if hasattr(o.value, "op")}
    assert "ERF" in ops                                # the GELU is in the epilogue
    body = next(s for s, _ in prog.walk() if type(s).__name__ == "For").body
    decays = [s for s in body if type(s) is Elementwise and any(
        o.buffer.kind.value == "param" for o in s.outs)]
    assert decays, "expected an in-place parameter update in the unfused program"
