"""Control flow on the OpenCL device: loop counters in kernels, ``If`` and ``While``.

* **Loop counters.** Access expressions may read the counters of enclosing loops (a loop
  index, a scan step, ``data[i % n]``). The host keeps them in the arena, 8 ints at
  :data:`COUNTERS` (inside the 16 floats reserved after the error flag), written by
  :data:`SET_KERNEL` before the first launch of an iteration that reads them; a kernel
  reads counter ``d`` as ``as_int(buf[COUNTERS + d])`` (the counter variable is renamed to
  that C expression before rendering).
* **If.** A condition on loop counters (an :class:`~autodiff.procedural.ir.IndexValue`,
  ``i % 100 == 0``) is evaluated on the host from its own counters: no read-back. A
  condition in a buffer is decided *on the device* when the branches hold only kernels:
  every kernel of a branch is guarded by the flag (``if (cond) body(...)`` in its launch
  or launch chain), so the host enqueues both branches and never waits. A branch with host
  callbacks (Feeders, Receivers) or loops needs the host's decision: one 4-byte blocking
  read of the flag, then the host runs the branch taken.
* **While.** A host loop around the compiled condition and body: each iteration reads the
  predicate back (a condition on counters needs no read). An outermost ``While`` with host
  callbacks snapshots the loop-written parameters on the device before each iteration, so
  a failing callback leaves those of the last completed iteration.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...procedural.access import Var, evaluate, substitute, variables
from ...procedural.access import Num
from ...procedural.ir import IndexValue, Load
from ...procedural.rewrite import expr_vars, map_exprs
from ..cstyle.kernels import SLACK

#: float offset in the arena of the loop counters (one int per loop depth)
COUNTERS = SLACK + 8
#: loops deep that kernels can read the counters of
MAX_DEPTH = 8
#: name of the kernel writing the counters
SET_KERNEL = "_ad_set_counters"

SOURCE = (f"__kernel void {SET_KERNEL}(__global float* restrict buf, "
          + ", ".join(f"const int c{d}" for d in range(MAX_DEPTH)) + ") {\n"
          + "".join(f"  buf[{COUNTERS + d}] = as_float(c{d});\n" for d in range(MAX_DEPTH))
          + "}\n")


def _depth(var: Var) -> int | None:
    """Loop depth of a counter variable (``i<depth>``), None for a kernel's own index."""
    n = var.name
    return int(n[1:]) if n.startswith("i") and n[1:].isdigit() else None


def with_counters(stmt):
    """``(stmt, reads counters)``: kernel statement ``stmt`` with every loop counter of its
    access expressions replaced by the arena read of that counter."""
    loops = {v: _depth(v) for v in expr_vars(stmt)}
    mapping = {v: Var(f"as_int(buf[{COUNTERS + d}])", v.extent)
               for v, d in loops.items() if d is not None}
    if not mapping:
        return stmt, False
    if max(_depth(v) for v in mapping) >= MAX_DEPTH:
        raise NotImplementedError(f"opencl: kernels read loop counters at most "
                                  f"{MAX_DEPTH} loops deep")
    return map_exprs(stmt, lambda e: substitute(e, mapping)), True


def counters_now(exe) -> tuple:
    return tuple(exe._iters) + (0,) * (MAX_DEPTH - len(exe._iters))


def write_counters(exe) -> None:
    """Enqueue the write of the current loop counters into the arena."""
    import pyopencl as cl
    c = counters_now(exe)
    k = exe.counter_kernel
    k.set_args(exe.arena, *[np.int32(x) for x in c])
    cl.enqueue_nd_range_kernel(exe.queue, k, (1,), (1,))
    exe._dev_counters = c


def host_condition(cond: IndexValue, exe) -> bool:
    """A condition on loop counters, evaluated from the host's counters."""
    env = {f"i{d}": k for d, k in enumerate(exe._iters)}
    return bool(evaluate(cond.expr, env))


def first_iteration(cond: IndexValue) -> bool | None:
    """``cond`` in the first iteration of every loop around it (each counter 0), or None
    when it names no counter it can be evaluated from (it then decides nothing here)."""
    try:
        return bool(evaluate(cond.expr, {v: 0 for v in variables(cond.expr)}))
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None


def guard(cond_buffer, offsets: dict) -> str:
    """The C condition of a device-decided branch: element 0 of ``cond_buffer`` nonzero."""
    from ..cstyle.codegen import Values
    return f"({Values(offsets, {}).scalar(Load(cond_buffer, Num(0)))} != 0)"


@dataclass(eq=False)
class IfStep:
    """A branch the host decides: ``cond`` is an :class:`IndexValue` (evaluated on the
    host) or ``(byte offset, dtype)`` of the flag (read back)."""
    cond: object
    then: list
    orelse: list

    def taken(self, exe) -> bool:
        if isinstance(self.cond, IndexValue):
            return host_condition(self.cond, exe)
        return self.read_flag(exe, *self.cond)

    def read_flag(self, exe, offset: int, dtype: str) -> bool:
        """The flag read back (another device's subclass reads its own way)."""
        return _read_flag(exe, offset, dtype)

    def run(self, exe) -> None:
        exe._exec(self.then if self.taken(exe) else self.orelse)


@dataclass(eq=False)
class WhileStep:
    """``While``: ``cond`` steps, then ``pred`` (as :class:`IfStep.cond`), then ``body``,
    at most ``max_iterations`` times; ``recovers``: snapshot the loop-written parameters
    before each iteration (an outermost loop with host callbacks)."""
    cond: list
    pred: object
    body: list
    max_iterations: int | None = None
    recovers: bool = False
    _snap: object = field(default=None, repr=False)
    #: the branch step deciding ``pred`` (another device's subclass)
    branch = IfStep

    def run(self, exe) -> None:
        from ...graph.rng import iteration_words
        depth = len(exe._iters)
        exe._iters.append(0)
        k = 0
        recovers = self.recovers and not exe._iters[:depth] and exe._written[1] > 0 \
            and getattr(exe, "_replay", None) is None
        try:
            while self.max_iterations is None or k < self.max_iterations:
                exe._iters[depth] = k
                exe._words = iteration_words(exe._iters)
                exe._exec(self.cond)
                if not self.branch(self.pred, [], []).taken(exe):
                    break
                if recovers:
                    self._save(exe)
                try:
                    exe._exec(self.body)
                    if recovers:
                        exe._drain()            # this iteration's callbacks have run
                except BaseException:
                    if recovers:
                        self._restore(exe)
                    raise
                k += 1
        finally:
            del exe._iters[depth:]
            exe._words = iteration_words(exe._iters)

    def _save(self, exe) -> None:
        import pyopencl as cl
        off, nb = exe._written
        if self._snap is None:
            self._snap = cl.Buffer(exe.ctx, cl.mem_flags.READ_WRITE, nb)
        exe.queue.finish()
        cl.enqueue_copy(exe.queue, self._snap, exe.arena, byte_count=nb, src_offset=off,
                        dst_offset=0)

    def _restore(self, exe) -> None:
        import pyopencl as cl
        off, nb = exe._written
        exe.queue.finish()
        cl.enqueue_copy(exe.queue, exe.arena, self._snap, byte_count=nb, src_offset=0,
                        dst_offset=off)
        exe.queue.finish()


def _read_flag(exe, offset: int, dtype: str) -> bool:
    """Element 0 of a condition buffer at byte ``offset``, read back (waits for the
    queue)."""
    import pyopencl as cl
    ctype = {"bool": np.uint8, "int32": np.int32, "int64": np.int32}.get(dtype, np.float32)
    host = np.empty(1, ctype)
    cl.enqueue_copy(exe.queue, host, exe.arena, src_offset=offset, is_blocking=True)
    return bool(host[0] != 0)


#: step types the runtime hands to their ``run(exe)``
STEPS = (IfStep, WhileStep)
