"""Pass ``lower_control``: values of control flow become variables, ``SCAN`` becomes ``FOR``.

Devices that run a program of statements (the procedural IR, TVM's host plan) see only
``FOR``/``IF``/``WHILE`` nodes whose sub-graphs communicate through variables, as a loop
body always did. The pass introduces *transient* variables (:attr:`Variable.transient`:
temporaries of this program, which the memory planner places in the arena):

* ``SCAN``: each carry is a variable, assigned the initial value before the loop, read by
  the body where the carry was (``LOAD``), assigned the new carry at the end of the body;
  each per-step output that is read is a ``[length, ...]`` variable (zero-filled first, so
  its life starts there) whose row ``t`` the body replaces (``PUT``); a scanned input's
  slice is ``GATHER(xs, t)``, ``t`` the loop's ``INDEX`` (counting down when ``reverse``).
  ``RESULT`` s read the variables after the loop.
* ``IF`` with results: each result that is read is a variable both branches assign.

Sub-graphs are lowered first (inside out). ``AFTER`` and everything else stay.
"""
from __future__ import annotations

import numpy as np

from ..graph.ir import (CONTROL, ForArg, Graph, IndexArg, Node, Op, Variable, bodies,
                        with_bodies)


def lower_control(graph: Graph) -> Graph:
    """The program with ``SCAN`` and ``IF`` results lowered (see the module docstring).

    Args:
        graph: the program (not modified).

    Returns:
        A new top-level :class:`Graph` (same ``outputs`` by position, ``inplace`` and
        ``unused_feeders`` kept: the nodes they name keep their ids). The input itself
        when it has no ``SCAN`` and no ``IF`` results.
    """
    if not any(n.op is Op.SCAN or (n.op is Op.IF and (n.arg.then.outputs or
                                                      n.arg.orelse.outputs))
               for n in graph.walk()):
        return graph
    used = {n.srcs[0].id: set() for n in graph.walk() if n.op is Op.RESULT}
    for n in graph.walk():
        if n.op is Op.RESULT:
            used[n.srcs[0].id].add(n.arg)
    mapping: dict[int, Node] = {}
    nodes = _lower(graph, mapping, used)
    return Graph(nodes, [mapping.get(o.id, o) for o in graph.outputs], dict(graph.inplace),
                 graph.unused_feeders)


def _var(shape, dtype: str, name: str) -> Variable:
    return Variable(np.broadcast_to(np.zeros((), dtype), tuple(shape)), name, transient=True)


def _lower(g: Graph, mapping: dict, used: dict) -> list[Node]:
    out: list[Node] = []

    def emit(n: Node) -> Node:
        out.append(n)
        return n

    for n in g.nodes:
        srcs = tuple(mapping.get(s.id, s) for s in n.srcs)
        if n.op is Op.SCAN:
            _scan(n, srcs, mapping, used, emit)
            continue
        if n.op in CONTROL:
            subs = [Graph(_lower(sub, mapping, used), [mapping.get(o.id, o) for o in sub.outputs])
                    for sub in bodies(n)]
            if n.op is Op.IF and subs[0].outputs:
                _if_results(n, srcs, subs, mapping, used.get(n.id, set()), emit)
                continue
            new = with_bodies(n, subs) if any(_changed(a, b) for a, b in zip(subs, bodies(n))) \
                else n
            if srcs != n.srcs:
                new = new.replace(srcs=srcs)
            mapping[n.id] = emit(new)
            continue
        if n.op is Op.RESULT:
            mapping[n.id] = mapping[(n.srcs[0].id, n.arg)]
            continue
        mapping[n.id] = emit(n if srcs == n.srcs else n.replace(srcs=srcs))
    return out


def _changed(a: Graph, b: Graph) -> bool:
    return (len(a.nodes) != len(b.nodes) or any(x is not y for x, y in zip(a.nodes, b.nodes))
            or any(x is not y for x, y in zip(a.outputs, b.outputs)))


def _load(var: Variable, like: Node) -> Node:
    return Node(Op.LOAD, (), var.shape, var.dtype, var, like.site)


def _assign(var: Variable, value: Node, like: Node) -> Node:
    return Node(Op.ASSIGN, (value,), var.shape, var.dtype, var, like.site)


def _if_results(n: Node, srcs, subs, mapping: dict, used: set, emit) -> None:
    """``IF`` results -> variables assigned at the end of each branch."""
    then, orelse = subs
    rvars = {k: _var(then.outputs[k].shape, then.outputs[k].dtype, f"if{n.id}.r{k}")
             for k in sorted(used)}
    branches = []
    for sub in (then, orelse):
        nodes = list(sub.nodes)
        for k, v in rvars.items():
            nodes.append(_assign(v, sub.outputs[k], n))
        branches.append(Graph(nodes))
    new = with_bodies(n, branches)
    emit(new.replace(srcs=srcs) if srcs != n.srcs else new)
    for k, v in rvars.items():
        mapping[(n.id, k)] = emit(_load(v, n))


def _scan(n: Node, srcs, mapping: dict, used: dict, emit) -> None:
    """``SCAN`` -> carries and outputs in variables, a ``FOR`` over the steps."""
    a = n.arg
    nc, T = a.n_carry, a.length
    init, xs = srcs[:nc], srcs[nc:]
    cvars = [_var(s.shape, s.dtype, f"scan{a.key}.c{k}") for k, s in enumerate(init)]
    for v, s in zip(cvars, init):
        emit(_assign(v, s, n))
    outs = a.body.outputs
    yvars = {}
    for k in sorted(used.get(n.id, set())):
        if k >= nc:
            y = outs[k]
            v = yvars[k] = _var((T,) + y.shape, y.dtype, f"scan{a.key}.y{k - nc}")
            zero = emit(Node(Op.CONST, (), v.shape, v.dtype, 0 if v.dtype == "int32" else 0.0,
                             n.site))
            emit(_assign(v, zero, n))
    t = Node(Op.INDEX, (), (), "int32",
             IndexArg(a.key, T - 1 if a.reverse else 0, -1 if a.reverse else 1, T), n.site)
    body = [t]
    inner = dict(mapping)
    loads = {}
    for m in a.body.nodes:
        if m.op is Op.ARG:
            if m.arg < nc:
                if m.arg not in loads:
                    loads[m.arg] = _load(cvars[m.arg], m)
                    body.append(loads[m.arg])
                inner[m.id] = loads[m.arg]
            else:
                x = xs[m.arg - nc]
                inner[m.id] = Node(Op.GATHER, (x, t), x.shape[1:], x.dtype, None, m.site)
                body.append(inner[m.id])
    rest = Graph([m for m in a.body.nodes if m.op is not Op.ARG])
    body += _lower(rest, inner, used)
    for k, v in yvars.items():
        y = inner.get(outs[k].id, outs[k])
        cur = _load(v, n)
        put = Node(Op.PUT, (cur, y, t), v.shape, v.dtype, None, n.site)
        body += [cur, put, _assign(v, put, n)]
    for k, v in enumerate(cvars):
        body.append(_assign(v, inner.get(outs[k].id, outs[k]), n))
    emit(Node(Op.FOR, (), (), "float32", ForArg(range(T), Graph(body), a.key), n.site))
    for k, v in enumerate(cvars):
        mapping[(n.id, k)] = emit(_load(v, n))
    for k, v in yvars.items():
        mapping[(n.id, k)] = emit(_load(v, n))
