"""Helpers for the graph-pass tests: trace a program, run a graph, check well-formedness."""
from __future__ import annotations

import numpy as np

import autodiff
from autodiff.device.numpy.interpreter import Interpreter
from autodiff.graph.ir import CONTROL, EFFECT, ELEMENTWISE, Graph, Op, bodies
from autodiff.graph.trace import TRACER


def trace(build) -> Graph:
    """The graph ``build()`` traces; its outputs are the tensors it returns, in order."""
    autodiff.reset()
    outs = build()
    if outs is None:
        outs = []
    elif not isinstance(outs, (list, tuple)):
        outs = [outs]
    nodes = [t.node for t in outs]
    graph = TRACER.finish()
    graph.outputs = nodes
    return graph


def variables(graph: Graph) -> list:
    seen = {}
    for n in graph.walk():
        if n.op in (Op.LOAD, Op.ASSIGN):
            seen.setdefault(n.arg.id, n.arg)
    return list(seen.values())


def run(graph: Graph, init: dict | None = None, interpreter=Interpreter):
    """Run ``graph`` on the numpy device from the variables' current values (or ``init``:
    Variable -> array); returns ``(outputs, final values by variable id)``. Variables are
    not modified."""
    store = {v: np.array((init or {}).get(v, v.value), copy=True) for v in variables(graph)}
    exe = interpreter(graph)
    with np.errstate(all="ignore"):
        exe.run(store)
    return [exe.vals[o.id] for o in graph.outputs], {v.id: a for v, a in store.items()}


def assert_same_results(a, b, rtol=1e-5, atol=1e-6) -> None:
    """Outputs and final variable values of two runs agree (NaN and inf included)."""
    (oa, va), (ob, vb) = a, b
    assert len(oa) == len(ob)
    for x, y in zip(oa, ob):
        np.testing.assert_allclose(y, x, rtol=rtol, atol=atol)
    assert va.keys() == vb.keys()
    for k in va:
        np.testing.assert_allclose(vb[k], va[k], rtol=rtol, atol=atol)


def ops(graph: Graph) -> list[str]:
    """Op names in program order, loop bodies included."""
    return [n.op.name for n in graph.walk()]


def count(graph: Graph, op: Op) -> int:
    return sum(n.op is op for n in graph.walk())


def effects(graph: Graph) -> list:
    """``(op, variable or callback spec)`` of every effect but control flow (the effects
    inside loops and branches are listed where they are), in program order."""
    return [(n.op, id(n.arg)) for n in graph.walk() if n.op in EFFECT and n.op not in CONTROL]


def snapshot(graph: Graph) -> list:
    """Everything a pass must not change about its input graph."""
    return [(n.id, n.op, tuple(s.id for s in n.srcs), n.shape, n.arg if n.op is not Op.FOR
             else tuple(m.id for m in n.arg.body.nodes)) for n in graph.walk()] \
        + [tuple(o.id for o in graph.outputs)]


def check_wellformed(graph: Graph) -> None:
    """Every operand is defined earlier in its graph or in an enclosing graph before the
    loop (or branch, or scan); ids are unique; elementwise operands have the node's shape;
    sub-graph outputs are visible in their sub-graph."""
    seen_ids: set[int] = set()

    def walk(g: Graph, visible: set) -> None:
        visible = set(visible)
        for n in g.nodes:
            assert n.id not in seen_ids, f"{n} appears twice"
            seen_ids.add(n.id)
            for s in n.srcs:
                assert s.id in visible, f"{n} reads {s}, which is not defined before it"
                if n.op in ELEMENTWISE:
                    assert s.shape == n.shape, f"{n} reads {s} of another shape"
            for sub in bodies(n):             # loop bodies, branches, scan bodies
                inner = walk(sub, visible)
                for o in sub.outputs:
                    assert o.id in inner, f"{n} returns {o}, which its sub-graph cannot see"
            visible.add(n.id)
        return visible

    walk(graph, set())
    top = {n.id for n in graph.nodes}
    for o in graph.outputs:
        assert o.id in top, f"output {o} is not a top-level node"


def apply_exact_pass(build, graph_pass, name: str):
    """Trace ``build``, apply ``graph_pass`` and check what every exact pass must keep: the
    input graph untouched, a well-formed result, the same effects in the same order, and
    bit-identical results on the numpy device. Returns ``(before, after)``."""
    g = trace(build)
    before = snapshot(g)
    out = graph_pass(g)
    assert snapshot(g) == before, f"{name} modified its input"
    check_wellformed(out)
    assert effects(out) == effects(g)
    assert_same_results(run(g), run(out), rtol=0, atol=0)
    return g, out
