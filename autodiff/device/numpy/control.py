"""Control flow in the numpy reference interpreter: ``IF``, ``WHILE``, ``SCAN`` run natively
(the reference semantics of :mod:`autodiff.graph.control`), and the values ``INDEX``,
``ARG``, ``RESULT``, ``AFTER``, ``PUT``.

Loop indices: every ``FOR``/``WHILE``/``SCAN`` pushes its iteration count onto
``interp.iters`` (what ``RAND`` draws are keyed by) and records it under its key in
``interp.index`` (what ``INDEX`` nodes read). ``IF`` pushes nothing.
"""
from __future__ import annotations

import numpy as np

from ...graph import dtypes
from ...graph.ir import Node, Op

#: step kinds handled here
KINDS = frozenset({"if", "while", "scan", "index", "arg", "result", "after", "put"})


def compile_step(interp, n: Node):
    """The step tuple of a control node (sub-graphs compiled), or None for other nodes."""
    if n.op is Op.IF:
        return ("if", n, interp._compile(n.arg.then), interp._compile(n.arg.orelse))
    if n.op is Op.WHILE:
        return ("while", n, interp._compile(n.arg.cond), interp._compile(n.arg.body))
    if n.op is Op.SCAN:
        args: dict[int, list[int]] = {}
        for m in n.arg.body.nodes:
            if m.op is Op.ARG:
                args.setdefault(m.arg, []).append(m.id)
        return ("scan", n, interp._compile(n.arg.body), args)
    return None


def run(interp, step, store) -> None:
    """Execute one step of a kind in :data:`KINDS`."""
    kind, n = step[0], step[1]
    vals = interp.vals
    if kind == "index":
        a = n.arg
        vals[n.id] = np.asarray(a.start + a.step * interp.index[a.key], np.int32)
    elif kind == "arg":
        pass                                   # set by the enclosing scan before each step
    elif kind == "result":
        vals[n.id] = interp.results[n.srcs[0].id][n.arg]
    elif kind == "after":
        vals[n.id] = vals[n.srcs[0].id]
    elif kind == "put":
        base, row, idx = (vals[s.id] for s in n.srcs)
        out = base.copy()
        out[int(idx)] = row
        vals[n.id] = out
    elif kind == "if":
        taken = n.arg.then if vals[n.srcs[0].id] != 0 else n.arg.orelse
        interp._run(step[2] if taken is n.arg.then else step[3], store)
        interp.results[n.id] = [vals[o.id] for o in taken.outputs]
    elif kind == "while":
        _while(interp, n, step[2], step[3], store)
    elif kind == "scan":
        _scan(interp, n, step[2], step[3], store)
    else:
        raise NotImplementedError(f"numpy device: no control step {kind}")


def _while(interp, n: Node, cond, body, store) -> None:
    a = n.arg
    pred = a.cond.outputs[0].id
    interp.iters.append(0)
    k = 0
    while a.max_iterations is None or k < a.max_iterations:
        interp.iters[-1] = k
        interp.index[a.index] = k
        interp._run(cond, store)
        if interp.vals[pred] == 0:
            break
        snapshot = dict(store)
        try:
            interp._run(body, store)
        except BaseException:
            store.clear()
            store.update(snapshot)
            raise
        k += 1
    interp.iters.pop()


def _scan(interp, n: Node, body, args: dict, store) -> None:
    a = n.arg
    vals = interp.vals
    nc, T = a.n_carry, a.length
    ins = [vals[s.id] for s in n.srcs]
    carries = ins[:nc]
    outs = a.body.outputs
    ys = [np.zeros((T,) + o.shape, dtypes.storage(o.dtype)) for o in outs[nc:]]
    interp.iters.append(0)
    for k in range(T):
        t = T - 1 - k if a.reverse else k
        interp.iters[-1] = k
        interp.index[a.key] = t
        for j, ids in args.items():
            v = carries[j] if j < nc else ins[j][t]
            for i in ids:
                vals[i] = v
        interp._run(body, store)
        carries = [vals[o.id] for o in outs[:nc]]
        for y, o in zip(ys, outs[nc:]):
            y[t] = vals[o.id]
    interp.iters.pop()
    interp.results[n.id] = carries + ys
