"""Lowering of control flow to the procedural IR: ``For`` with counters in access
expressions, ``If`` on a 1-element buffer, ``While``; scan outputs written row by row in
place, scanned inputs read as dynamic slices (no copies)."""
from __future__ import annotations

import numpy as np

import autodiff as ad
from autodiff.procedural import For, If, IndexValue, While, lower
from autodiff.procedural.access import Var, variables
from autodiff.procedural.ir import BufferKind, Copy, Elementwise, Gather, walk_values
from opt_like import traced


def _stmts(prog, kind):
    return [s for s, _ in prog.walk() if isinstance(s, kind)]


def test_scan_is_a_loop_with_row_writes_and_dynamic_slices():
    xs = ad.tensor(np.ones((5, 3), np.float32))
    c, ys = ad.scan(lambda c, x: (c + x, c * 2.0), ad.zeros(3), xs)
    prog = lower(traced([c, ys]))
    loop, = _stmts(prog, For)
    counter = Var(loop.var, 5)
    writes = [o for s in loop.body if isinstance(s, Elementwise) for o in s.outs
              if counter in variables(o.index)]
    assert writes and all(o.buffer.kind is BufferKind.TEMP for o in writes)   # ys rows
    reads = [v for s in loop.body if isinstance(s, Elementwise) for o in s.outs
             for v in walk_values(o.value) if hasattr(v, "index")
             and counter in variables(v.index)]
    assert reads                                                 # xs[t] in place
    assert not _stmts(prog, Gather) and not [s for s in loop.body if isinstance(s, Copy)
                                             and s.src.shape == (5, 3)]


def test_branches_and_while_loops():
    x = ad.tensor(np.arange(4, dtype=np.float32))
    k = ad.zeros(())
    r = ad.ir_if(x.sum() > 2, lambda: x * 2.0, lambda: x - 1.0)
    ad.ir_while(lambda: k < 3.0, lambda: k.add_(1.0), max_iterations=10)
    prog = lower(traced([r]))
    br, = _stmts(prog, If)
    assert br.cond.size == 1 and br.then and br.orelse
    wh, = _stmts(prog, While)
    assert wh.pred.size == 1 and wh.max_iterations == 10 and wh.cond and wh.body
    text = str(prog)
    assert "if " in text and "else:" in text and "while i0 (at most 10):" in text


def test_loop_index_is_an_index_value():
    t = ad.tensor(np.arange(8, dtype=np.float32))
    got = []
    ad.ir_for(range(2, 8, 3), lambda i: ad.Receiver(lambda v: got.append(int(v)), [i]))
    prog = lower(traced([]))
    loop, = _stmts(prog, For)
    vals = [v for s in loop.body if isinstance(s, Elementwise) for o in s.outs
            for v in walk_values(o.value) if isinstance(v, IndexValue)]
    assert vals and "i0" in str(vals[0].expr) and t is not None


def _validation_every(n: int, steps: int, got: list):
    """A loop of ``steps`` that receives ``x + i`` each step and, every ``n`` th step
    (``ir_if((i + 1) % n == 0)``), ``x * 2``."""
    x = ad.tensor(np.arange(3, dtype=np.float32))

    def step(i):
        ad.Receiver(lambda v: got.append(("step", v.tolist())), [x + i], name="each")
        ad.ir_if((i + 1) % n == 0,
                 lambda: ad.Receiver(lambda v: got.append(("every", v.tolist())), [x * 2.0],
                                     name="every"))
    ad.ir_for(steps, step)


def test_a_branch_the_graph_passes_decided_is_lowered_in_line():
    """Over 5 steps ``(i + 1) % 100 == 0`` is never true: the graph passes fold it to a
    constant, and lowering puts the taken block (here the empty one) in line, so the
    other is never lowered nor compiled; over 300 steps it stays a branch on the counter
    (tests/device/test_opencl_cold.py runs both)."""
    from autodiff.opt import optimize
    from autodiff.procedural.ir import ReceiverRead
    _validation_every(100, 5, [])
    prog = lower(optimize(traced([])))
    assert not _stmts(prog, If)
    assert [r.spec.name for r in _stmts(prog, ReceiverRead)] == ["each"]
    _validation_every(100, 300, [])
    prog = lower(optimize(traced([])))
    br, = _stmts(prog, If)
    assert isinstance(br.cond, IndexValue)
    _validation_every(1, 3, [])                     # always true: the block in line
    prog = lower(optimize(traced([])))
    assert not _stmts(prog, If)
    assert sorted(r.spec.name for r in _stmts(prog, ReceiverRead)) == ["each", "every"]
