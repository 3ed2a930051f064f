"""Liveness over branches and while loops (procedural ``If`` / ``While``)."""
from __future__ import annotations

import numpy as np

import autodiff as ad
from alloc_programs import buf, ew, feed, program, recv
from autodiff.alloc import plan_memory, verify
from autodiff.alloc.liveness import liveness
from autodiff.procedural.ir import BufferKind, Copy, For, If, While


def spans(prog, **kw):
    return {r.buffer: (r.start, r.end) for r in liveness(prog, **kw).ranges}


def test_branch_results_and_condition():
    """``c`` (the condition) lives from its write through the join; ``r`` is written in
    both branches and read after; a branch's temporary lives inside its branch."""
    x, c, t, u, r = buf("x", kind=BufferKind.FEEDER), buf("c"), buf("t"), buf("u"), buf("r")
    prog = program([feed(x),                       # 0
                    ew(c, x),                      # 1
                    If(c, [ew(t, x),               # 2: If step, 3
                           ew(r, t)],              # 4
                       [ew(u, x),                  # 5
                        ew(r, u)]),                # 6, join 7
                    recv(r)], x, c, t, u, r)       # 8
    got = spans(prog)
    assert got["c"] == (1, 7) and got["r"] == (4, 8)
    assert got["t"] == (3, 4) and got["u"] == (5, 6)
    assert got["x"] == (0, 5)                      # read in the else branch: hull to step 5


def test_write_in_one_branch_kills_nothing_on_the_other_path():
    """``v`` assigned only in the then-branch keeps its earlier value when the else branch
    runs, so it lives from its first write."""
    x, c, v = buf("x", kind=BufferKind.FEEDER), buf("c"), buf("v")
    prog = program([feed(x), ew(v, x), ew(c, x),   # 0 1 2
                    If(c, [ew(v, x)], []),         # 3, 4, join 5
                    recv(v)], x, c, v)             # 6
    assert spans(prog)["v"] == (1, 6)


def test_while_predicate_and_loop_carried_buffer():
    x, p, acc, t = buf("x", kind=BufferKind.FEEDER), buf("p"), buf("acc"), buf("t")
    prog = program([feed(x), Copy(x, acc),                      # 0 1
                    While([ew(p, acc)], p,                      # 2, test 3
                          [ew(t, acc), Copy(t, acc)]),          # 4 5
                    recv(acc)], x, p, acc, t)                   # 6
    got = spans(prog)
    assert got["acc"] == (1, 6) and got["p"] == (2, 3) and got["t"] == (4, 5)


def test_plans_of_control_flow_programs_verify():
    """Real programs with branches, while loops and scans get verified plans (checked
    against overlap by ``verify``) and run on the arena."""
    w = ad.tensor(np.eye(4, dtype=np.float32), requires_grad=True)
    k = ad.zeros(())
    got = []

    def body(i):
        h, ys = ad.scan(lambda h, x: ((h @ w + x).tanh(),) * 2, ad.zeros(4),
                        ad.tensor(np.ones((6, 4), np.float32)))
        loss = ad.ir_if(i.float() > 1, lambda: (ys * ys).sum(), lambda: h.sum())
        loss.backward()
        with ad.no_grad():
            w.sub_(w.grad * 0.01)
        ad.ir_while(lambda: k < 2.0 * (i.float() + 1), lambda: k.add_(1.0))
        ad.Receiver(lambda v: got.append(float(v)), [loss])

    ad.ir_for(4, body)
    ad.execute(device="numpy", ir="procedural", debug=True)
    plan = ad.graph.trace.TRACER.last.stages["alloc"]
    verify(plan)
    assert len(got) == 4 and float(k.numpy()) == 8.0
    prog = ad.graph.trace.TRACER.last.stages["fused"]
    verify(plan_memory(prog, 64, members=False))
