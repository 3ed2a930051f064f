"""The ``inplace`` pass: marks only where the operand dies at the node."""
from __future__ import annotations

import numpy as np

import autodiff as ad
from autodiff.graph.ir import Op
from autodiff.opt import inplace, optimize
from opt_helpers import snapshot, trace


def marked(build, **kw):
    g = trace(build)
    g = optimize(g, passes=["simplify", "cse", "prune"], **kw)
    before = snapshot(g)
    m = inplace(g)
    assert snapshot(g) == before and g.inplace == {}, "inplace modified its input"
    assert [n.id for n in m.walk()] == [n.id for n in g.walk()]
    nodes = {n.id: n for n in m.walk()}
    return m, {nodes[k]: nodes[v] for k, v in m.inplace.items()}


def test_chain_of_temporaries_reuses_buffers():
    x = ad.Tensor(np.arange(4, dtype=np.float32))
    m, marks = marked(lambda: [((x.exp() + 1.0).sin() * 3.0).tanh()])
    pairs = {(n.op, s.op) for n, s in marks.items()}
    assert pairs == {(Op.ADD, Op.EXP), (Op.SIN, Op.ADD), (Op.MUL, Op.SIN), (Op.TANH, Op.MUL)}


def test_no_mark_when_operand_is_read_later_or_is_an_output_or_constant():
    x = ad.Tensor(np.arange(4, dtype=np.float32))

    def build():
        e = x.exp()
        a = e + 1.0            # e is read again below: no mark
        b = e * a              # e dies here, a dies here: one of them
        return [b, x.sin()]
    m, marks = marked(build)
    ops_marked = {(n.op, s.op) for n, s in marks.items()}
    assert (Op.ADD, Op.EXP) not in ops_marked
    assert len([n for n in marks if n.op is Op.MUL]) == 1
    assert not any(s.op is Op.CONST for s in marks.values())
    assert not any(s.op is Op.LOAD for s in marks.values()), "x is not updated in place"

    m, marks = marked(lambda: [x.exp(), x.exp() + 1.0])
    assert not marks, "an output's buffer is the user's"


def test_no_mark_when_the_node_also_reads_a_view_of_the_operand():
    x = ad.Tensor(np.arange(9, dtype=np.float32).reshape(3, 3))

    def build():
        e = x.exp()
        return [(e + e.T).sum()]
    m, marks = marked(build)
    assert not any(n.op is Op.ADD for n in marks)


def test_sgd_update_writes_into_the_parameter():
    w = ad.Tensor(np.ones((2, 2), np.float32), requires_grad=True)
    seen = []

    def body():
        loss = (w * w).sum()
        loss.backward()
        with ad.no_grad():
            w.sub_(w.grad * 0.1)
        ad.Receiver(lambda a: seen.append(a), [loss])
    m, marks = marked(lambda: ad.ir_for(3, body))
    storage = [(n, s) for n, s in marks.items() if s.op is Op.LOAD]
    assert len(storage) == 1
    n, s = storage[0]
    assert n.op is Op.SUB and s.arg is w._var
    body_nodes = m.nodes[0].arg.body.nodes
    i = body_nodes.index(n)
    assert body_nodes[i + 1].op is Op.ASSIGN and body_nodes[i + 1].srcs[0] is n


def test_no_update_mark_when_an_effect_sits_between_update_and_assign():
    w = ad.Tensor(np.ones(2, np.float32))
    seen = []

    def body():
        with ad.no_grad():
            new = w + 1.0
            ad.Receiver(lambda a: seen.append(a), [new])
            w.copy_(new)
    m, marks = marked(lambda: ad.ir_for(2, body))
    assert not any(s.op is Op.LOAD for s in marks.values())


def test_values_from_outside_the_loop_are_never_overwritten_inside():
    x = ad.Tensor(np.arange(3, dtype=np.float32))
    seen = []

    def build():
        e = x.exp()
        ad.ir_for(2, lambda: ad.Receiver(lambda a: seen.append(a), [e + 1.0]))
    m, marks = marked(build)
    assert not marks
