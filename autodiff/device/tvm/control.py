"""Control flow on the TVM device: branches and while loops as host steps of the plan.

The graph reaches TVM through :func:`autodiff.opt.lower_control.lower_control`: ``SCAN``
is a ``FOR`` over transient variables (its loop index an ``INDEX``, its outputs written by
``PUT``), and ``IF`` results are variables the branches assign. The plan (:mod:`.plan`)
then holds, next to segments and loops:

* :class:`Branch` (``IF``): the predicate is a value of an earlier segment (on the device);
  the host reads it (one small copy) and runs the steps of the branch taken. Branches are
  not compiled into Relax ``If``: every segment function stays one dataflow block, which
  Relax's fusion passes need, and a branch with Feeders or Receivers needs the host anyway.
* :class:`WhileLoop` (``WHILE``): a host loop around the compiled condition and body
  segments, reading the predicate back each iteration (Relax has no loop construct; TVM
  compiles each segment once).

* :class:`Callback` (``CALLBACK``: ``host_callback``, the collectives of
  :mod:`autodiff.distributed`): a host step between segments. The operands (values of
  earlier segments) are copied to the host, the function runs
  (:func:`~autodiff.device.host.call_callback`; a collective: the MPI all-reduce) and its
  result becomes a device tensor that later segments read. No overlap with device work:
  a segment call returns when its results are ready.

A loop index (``INDEX``) is an input of the segment that reads it: a 0-d int32 tensor the
host makes from the loop's iteration (stacked ``[K]`` in a ``K``-step call).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...graph.ir import Node


@dataclass
class Branch:
    """An ``IF`` node: ``then`` / ``orelse`` steps, the predicate node ``node.srcs[0]``."""
    node: Node
    then: list
    orelse: list

    def blocks(self) -> list[list]:
        return [self.then, self.orelse]

    def run(self, exe, vars_, env) -> None:
        exe._run(self.then if _true(env[self.node.srcs[0].id]) else self.orelse, vars_, env)


@dataclass
class WhileLoop:
    """A ``WHILE`` node: ``cond`` steps (computing ``node.arg.cond.outputs[0]``), then
    ``body`` steps, while the predicate holds (at most ``max_iterations`` times)."""
    node: Node
    cond: list
    body: list
    steps_per_call: int = field(default=1)

    def blocks(self) -> list[list]:
        return [self.cond, self.body]

    def run(self, exe, vars_, env) -> None:
        a = self.node.arg
        pred = a.cond.outputs[0].id
        exe.iters.append(0)
        k = 0
        try:
            while a.max_iterations is None or k < a.max_iterations:
                exe.iters[-1] = k
                exe.index[a.index] = k
                exe._run(self.cond, vars_, env)
                if not _true(env[pred]):
                    break
                snapshot = dict(vars_)
                try:
                    exe._run(self.body, vars_, env)
                except BaseException:
                    vars_.clear()
                    vars_.update(snapshot)
                    raise
                k += 1
        finally:
            exe.iters.pop()


@dataclass
class Callback:
    """A ``CALLBACK`` node: ``node.arg.fn`` on the host values of ``node.srcs``; the result
    (a device tensor) is bound to the node's id."""
    node: Node

    def blocks(self) -> list[list]:
        return []

    def run(self, exe, vars_, env) -> None:
        from ..host import call_callback
        arrays = [a if isinstance(a, np.ndarray) else a.numpy()
                  for a in (env[s.id] for s in self.node.srcs)]
        env[self.node.id] = exe._tensor(call_callback(self.node.arg, tuple(exe.iters),
                                                      arrays))


def _true(v) -> bool:
    a = v if isinstance(v, np.ndarray) else v.numpy()
    return bool(np.asarray(a).reshape(-1)[0] != 0)


def index_value(key: tuple, index: dict) -> np.ndarray:
    """The value of input ``("index", IndexArg)``: ``start + step * k`` for the loop's
    current iteration ``k``."""
    a = key[1]
    return np.array(a.start + a.step * index.get(a.key, 0), np.int32)


def index_rows(key: tuple, start: int, k: int) -> np.ndarray:
    """Input ``("index", IndexArg)`` of ``k`` iterations from ``start`` of the innermost
    loop, stacked ``[k]``."""
    a = key[1]
    return np.array([a.start + a.step * (start + j) for j in range(k)], np.int32)


#: plan steps that run themselves (``run(exe, vars_, env)``) and hold step lists
STEPS = (Branch, WhileLoop, Callback)
