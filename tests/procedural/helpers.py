"""Helpers for procedural-IR and fusion tests: trace, lower, fuse, run, compare."""
from __future__ import annotations

import numpy as np

import autodiff as ad
from autodiff.device.numpy.interpreter import Interpreter
from autodiff.device.numpy.procedural import ProceduralExecutor
from autodiff.fusion import fuse
from autodiff.graph.ir import Op
from autodiff.graph.trace import TRACER
from autodiff.procedural.ir import DotProduct, FusedKernel, Reduce
from autodiff.procedural.lower import lower


def trace(build):
    """The graph ``build()`` traces; outputs are the tensors it returns."""
    ad.reset()
    outs = build()
    outs = [] if outs is None else outs
    outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    nodes = [t.node for t in outs]
    g = TRACER.finish()
    g.outputs = nodes
    return g


def variables(graph):
    seen = {}
    for n in graph.walk():
        if n.op in (Op.LOAD, Op.ASSIGN):
            seen.setdefault(n.arg.id, n.arg)
    return list(seen.values())


def run(exe, graph):
    """``(outputs, finals by variable id)`` of ``exe`` run from the variables' values."""
    store = {v: np.array(v.value, copy=True) for v in variables(graph)}
    exe.run(store)
    return [exe.vals[o.id] for o in graph.outputs], {v.id: a for v, a in store.items()}


def check_against_interpreter(graph, rtol=1e-5, atol=1e-6, **kw):
    """Run ``graph`` unfused, fused and fused-by-member; all must match the interpreter."""
    want = run(Interpreter(graph), graph)
    prog = lower(graph)
    fused = fuse(prog)
    for p, extra in ((prog, {}), (fused, {}), (fused, {"by_member": True})):
        got = run(ProceduralExecutor(p, **extra, **kw), graph)
        for a, b in zip(want[0], got[0]):
            np.testing.assert_allclose(b, a, rtol=rtol, atol=atol)
        for k in want[1]:
            np.testing.assert_allclose(got[1][k], want[1][k], rtol=rtol, atol=atol)
    check_fusion_invariants(prog, fused)
    return prog, fused


def flat_kernels(stmts):
    """Every unfused kernel, fused groups expanded to their members, loops entered."""
    from autodiff.procedural.ir import For, Kernel
    out = []
    for s in stmts:
        if isinstance(s, For):
            out += flat_kernels(s.body)
        elif isinstance(s, FusedKernel):
            out += list(s.members)
        elif isinstance(s, Kernel):
            out.append(s)
    return out


def check_fusion_invariants(prog, fused):
    """Every kernel of ``prog`` appears exactly once in ``fused``; no group holds two
    reductions or dot products."""
    a = flat_kernels(prog.body)
    b = flat_kernels(fused.body)
    assert sorted(map(id, a)) == sorted(map(id, b)), "fusion lost or duplicated a kernel"
    for s, _ in fused.walk():
        if isinstance(s, FusedKernel):
            heavy = [m for m in s.members if isinstance(m, (DotProduct, Reduce))]
            if len(heavy) == 2 and isinstance(s.kernel, DotProduct):
                d, r = heavy                     # a batch-dim SUM merged into the contraction
                assert isinstance(d, DotProduct) and isinstance(r, Reduce)
                assert s.kernel.k.extent == d.k.extent * (d.outs[0].buffer.size
                                                          // r.outs[0].buffer.size)
                continue
            assert len(heavy) <= 1, f"{s.name} holds {len(heavy)} dot products/reductions"


def groups(program):
    """Names of the fused groups, in program order (loops entered)."""
    return [s.name for s, _ in program.walk() if isinstance(s, FusedKernel)]
