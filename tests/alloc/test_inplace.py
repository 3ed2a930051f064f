"""In-place marks: a result takes its dying operand's slot only where that is safe."""
from __future__ import annotations

from alloc_programs import feed, recv

from autodiff.alloc import plan_memory, verify
from autodiff.graph.ir import Op
from autodiff.procedural.access import Var
from autodiff.procedural.ir import Apply, Buffer, BufferKind, Elementwise, Load, Output, Program


def node_buf(name, node, n=1024, kind=BufferKind.TEMP):
    return Buffer(name, (n,), "float32", kind, node=node)


def neg(out, src, flip=False):
    x = Var("X", out.shape[0])
    read = (out.shape[0] - 1) - x if flip else x
    return Elementwise(out.shape, (x,), (Output(out, x, Apply(Op.NEG, (Load(src, read),))),))


def chain(n_ops, flip_at=None):
    x = node_buf("x", 0, kind=BufferKind.FEEDER)
    bufs = [x] + [node_buf(f"t{i}", i) for i in range(1, n_ops + 1)]
    body = [feed(x)] + [neg(bufs[i], bufs[i - 1], flip=(i == flip_at)) for i in range(1, n_ops + 1)]
    return Program(body + [recv(bufs[-1])], bufs), {i: i - 1 for i in range(1, n_ops + 1)}


def test_marked_elementwise_chain_runs_in_one_slot():
    prog, marks = chain(6)
    without = plan_memory(prog, 64, debug=True)
    assert without.arena_bytes == without.lower_bound_bytes == 2 * 4096
    plan = plan_memory(prog, 64, inplace=marks, debug=True)
    assert plan.arena_bytes == plan.lower_bound_bytes == 4096
    assert plan.naive_bytes == 7 * 4096
    assert set(plan.offsets.values()) == {0} and len(plan.offsets) == 7
    assert plan.aliases == {f"t{i}": "x" for i in range(1, 7)}
    verify(plan)


def test_mark_refused_when_the_kernel_reads_other_elements():
    prog, marks = chain(4, flip_at=3)   # t3[x] = -t2[N-1-x]: overwriting t2 would be a race
    plan = plan_memory(prog, 64, inplace=marks, debug=True)
    assert "t3" not in plan.aliases and {"t1", "t2", "t4"} <= set(plan.aliases)
    assert plan.offsets["t3"] != plan.offsets["t2"]


def test_mark_refused_when_the_operand_is_still_live():
    x = node_buf("x", 0, kind=BufferKind.FEEDER)
    a, b = node_buf("a", 1), node_buf("b", 2)
    prog = Program([feed(x), neg(a, x), recv(a, x)], [x, a])   # x read again after a is made
    plan = plan_memory(prog, 1, inplace={1: 0}, debug=True)
    assert plan.aliases == {} and plan.offsets["a"] != plan.offsets["x"]
    prog = Program([feed(x), neg(b, x), recv(b)], [x, b])
    assert plan_memory(prog, 1, inplace={2: 0}).aliases == {"b": "x"}
