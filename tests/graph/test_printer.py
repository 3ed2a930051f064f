"""The text form of the graph IR and its networkx view."""
from __future__ import annotations

import io
import os
import re

import networkx as nx
import numpy as np

import autodiff as ad
from autodiff.graph.trace import TRACER
from autodiff.nn import Linear

HERE = os.path.basename(__file__)


def _program():
    """A top-level op, a training loop with a nested loop, and an op after it."""
    ad.manual_seed(0)
    net = Linear(3, 2)
    x0 = ad.Tensor(np.ones((4, 3), np.float32), name="x0")
    scaled = x0 * 2.0

    def inner():
        x = ad.Feeder(lambda: np.ones((4, 3), np.float32), (4, 3), name="batch")
        net(x).sum().backward()
        ad.Receiver(lambda g: None, [net.weight.grad], name="grads")

    ad.ir_for(3, lambda: ad.ir_for(2, inner))
    total = scaled.sum()
    return net, scaled, total


def _text(**kw) -> str:
    buf = io.StringIO()
    ad.print_graph(file=buf, **kw)
    return buf.getvalue()


def _body_lines(text: str) -> list[str]:
    lines = text.rstrip("\n").split("\n")
    assert lines[0] == "graph {" and lines[-1] == "}"
    return [ln for ln in lines[1:-1] if not ln.lstrip().startswith("outputs:")]


def test_one_line_per_node_with_ops_and_shapes():
    keep = _program()
    text = _text()
    lines = _body_lines(text)
    graph = TRACER.root.graph
    assert len(lines) == graph.count()
    nodes = list(graph.walk())
    for line, node in zip(lines, nodes):
        if node.op is ad.graph.Op.FOR:
            assert line.lstrip().startswith("for "), line
        elif node.op is ad.graph.Op.RECEIVER:
            assert "receiver grads" in line, line
        else:
            shape = ",".join(map(str, node.shape))
            assert f"%{node.id}: f32[{shape}] = {node.op.name.lower()}" in line, line
    for op in ("dot", "sum", "feeder batch", "load weight", "permute", "expand", "mul"):
        assert op in text, op
    assert "f32[4,3]" in text and "f32[2,3]" in text
    del keep


def test_loop_bodies_indented_by_depth():
    keep = _program()
    lines = _body_lines(_text())
    depth = {n.id: d for n, d in _depths(TRACER.root.graph)}
    fors = [ln for ln in lines if ln.lstrip().startswith("for ")]
    assert [_indent(ln) for ln in fors] == [2, 4]
    assert fors[0].strip().startswith("for i0 in range(0, 3, 1)")
    assert fors[1].strip().startswith("for i1 in range(0, 2, 1)")
    for ln in lines:
        m = re.match(r"\s*%(\d+):", ln)
        if m:
            assert _indent(ln) == 2 + 2 * depth[int(m.group(1))], ln
    del keep


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _depths(graph, d=0):
    for n in graph.nodes:
        yield n, d
        if n.op is ad.graph.Op.FOR:
            yield from _depths(n.arg.body, d + 1)


def test_outputs_listed():
    net, scaled, total = _program()
    text = _text()
    outs = re.search(r"outputs: (.*)", text).group(1).split()
    assert sorted(outs) == sorted([f"%{scaled.node.id}", f"%{total.node.id}"])


def test_sites_show_this_file():
    keep = _program()
    text = _text(sites=True)
    lines = _body_lines(text)
    assert all(f"{HERE}:" in ln for ln in lines), text
    # The Feeder is traced on the source line of ``ad.Feeder(..., name="batch")`` above.
    src = open(__file__).read().split("\n")
    want = next(i + 1 for i, s in enumerate(src) if 'name="batch")' in s)
    feeder = next(ln for ln in lines if "feeder batch" in ln)
    assert feeder.endswith(f"{HERE}:{want}"), feeder
    assert HERE not in _text()       # sites only when asked
    del keep


def test_print_after_execute_shows_last_program():
    keep = _program()
    n = TRACER.root.graph.count()
    ad.execute()
    lines = _body_lines(_text())
    assert len(lines) == n
    del keep


def test_to_networkx_matches_graph():
    keep = _program()
    graph = TRACER.root.graph
    g = ad.to_networkx()
    assert isinstance(g, nx.DiGraph)
    assert g.number_of_nodes() == graph.count()
    assert nx.is_directed_acyclic_graph(g)
    for n in graph.walk():
        assert g.nodes[n.id]["op"] == n.op.name
        assert g.nodes[n.id]["shape"] == n.shape
        for s in n.srcs:
            assert g.has_edge(s.id, n.id)
    assert g.number_of_edges() == sum(len(set(s.id for s in n.srcs)) for n in graph.walk())
    assert max(d for _, d in g.nodes(data="depth")) == 2
    del keep


def test_program_outputs_are_in_trace_order():
    """The outputs of the traced program follow the order the tensors were traced in,
    whatever their addresses (a WeakSet's order made generated sources, and so the PoCL
    and NVRTC caches' keys, differ from run to run)."""
    import gc
    x = ad.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    junk = [object() for _ in range(997)]       # scatter the addresses of what follows
    outs = []
    for k in range(64):
        outs.append(x * float(k + 1))
        junk.append([object() for _ in range(k % 7)])
    del junk
    gc.collect()
    want = [t._node.id for t in outs]
    got = [t._node.id for t in TRACER.live_outputs()]
    assert got == sorted(got) and set(want) <= set(got)
    ad.execute()
    for k, t in enumerate(outs):
        np.testing.assert_allclose(t.numpy(), np.arange(6).reshape(2, 3) * (k + 1), rtol=0)
