"""A group first tries every same-size elementwise kernel it reaches at once
(``group._closure``): one build where growing one member at a time rebuilt the whole group
per member. The groups must be the ones one-at-a-time growth makes, the values the
interpreter's."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import autodiff as ad
import autodiff.fusion.group as group
from autodiff.fusion import fuse
from autodiff.nn import GELU, LayerNorm, Linear, Sequential
from autodiff.optim import AdamW
from autodiff.procedural.ir import FusedKernel
from autodiff.procedural.lower import lower

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "procedural"))
from helpers import check_against_interpreter, trace  # noqa: E402


def _adamw_graph(steps=2, clip=True):
    """Two layers with LayerNorm and GELU trained by AdamW (its per-parameter update is a
    chain of same-size elementwise kernels) with gradient clipping."""
    ad.manual_seed(0)
    net = Sequential(Linear(8, 16), LayerNorm(16), GELU(), Linear(16, 4))
    opt = AdamW(net.parameters(), lr=0.01)
    rng = np.random.default_rng(0)
    batch = rng.standard_normal((3, 8)).astype(np.float32)

    def build():
        def step():
            opt.zero_grad()
            x = ad.Feeder(lambda: batch, shape=[3, 8], name="x")
            loss = (net(x) ** 2).mean()
            loss.backward()
            if clip:
                ad.nn.utils.clip_grad_norm_(net.parameters(), 0.5)
            opt.step()
            ad.Receiver(lambda v: None, [loss], name="loss")
        ad.ir_for(range(steps), step)
    return trace(build)


def _composition(program):
    """Each group (in program order) as the ids of its members: the unfused kernels of the
    one lowered program both fusions start from."""
    return [tuple(map(id, s.members)) for s, _ in program.walk() if isinstance(s, FusedKernel)]


def _counting(monkeypatch):
    calls = []
    real = group.build
    monkeypatch.setattr(group, "build", lambda *a: calls.append(len(a[1])) or real(*a))
    return calls


def test_groups_match_one_member_at_a_time_with_fewer_builds(monkeypatch):
    graph = _adamw_graph()
    prog = lower(graph)
    calls = _counting(monkeypatch)
    with_closure = fuse(prog)
    n_closure = len(calls)
    calls.clear()
    monkeypatch.setattr(group, "_closure", lambda *a: [])
    one_by_one = fuse(prog)
    assert _composition(with_closure) == _composition(one_by_one)
    # AdamW's chains joined in one build each, not one per member
    assert n_closure < len(calls)
    assert max(map(len, _composition(with_closure))) >= 8


def test_fused_adamw_with_clipping_matches_the_interpreter():
    check_against_interpreter(_adamw_graph(steps=3), rtol=1e-5, atol=1e-6)


def test_closure_is_same_size_free_elementwise_only():
    """``_closure`` follows :meth:`Schedule.neighbours` (free plain elementwise kernels) and
    keeps those of the group's size; it returns at most ``most``."""
    from autodiff.procedural.ir import Elementwise
    prog = lower(_adamw_graph(steps=1))
    body = next(s for s in prog.body if hasattr(s, "body")).body
    sched = group.Schedule(body)
    seed = [s for s in body if type(s) is Elementwise][-1]
    size = group.member_size(seed)
    got = group._closure(sched, [seed], group.MAX_MEMBERS, size)
    assert got and all(type(c) is Elementwise and group.member_size(c) == size for c in got)
    assert all(sched.free(c) for c in got) and seed not in got
    assert len(group._closure(sched, [seed], 2, size)) == 2
