"""Control flow on the CUDA device: the OpenCL device's (:mod:`autodiff.device.opencl.control`)
with the stream in place of the queue.

* **Loop counters** live in the arena at the same place; a one-thread kernel (its arguments
  are the counters, copied at launch) writes them before a graph that reads them, when
  they changed (:func:`write_counters`).
* **If**: a branch decided on the device (condition in the arena, branches of kernels
  only) is no host step at all: each of its kernels returns unless the flag holds, inside
  the same CUDA graph as its neighbours. A branch holding host callbacks, loops or
  work-group reductions is an :class:`IfStep`, a host boundary between graphs: a condition
  on loop counters is evaluated on the host, a flag costs one 4-byte read-back (a stream
  synchronisation).
* **While**: :class:`WhileStep`, the host loop of the OpenCL device; the predicate is read
  back every iteration, and an outermost while loop with host callbacks snapshots the
  loop-written parameters on the device before each iteration.
"""
from __future__ import annotations

import numpy as np

from ...graph.dtypes import storage
from ..opencl import control

__all__ = ["IfStep", "WhileStep", "STEPS", "write_counters"]


class IfStep(control.IfStep):
    """A branch the host decides (:class:`autodiff.device.opencl.control.IfStep`)."""

    def read_flag(self, exe, offset: int, dtype: str) -> bool:
        """Element 0 of the condition buffer at byte ``offset``, read back (synchronises the
        stream)."""
        host = np.empty(1, storage(dtype))
        exe._read(host, offset)
        exe._finish()
        return bool(host[0] != 0)


class WhileStep(control.WhileStep):
    """``While`` run by the host (:class:`autodiff.device.opencl.control.WhileStep`); the
    snapshot of the loop-written parameters is a device allocation of the executable."""
    branch = IfStep

    def _save(self, exe) -> None:
        off, nb = exe._written
        if self._snap is None:
            self._snap = exe._alloc(nb)
        exe._finish()
        exe._copy(self._snap, exe._arena + off, nb)

    def _restore(self, exe) -> None:
        off, nb = exe._written
        exe._finish()
        exe._copy(exe._arena + off, self._snap, nb)
        exe._finish()


#: step types the runtime hands to their ``run(exe)``
STEPS = (IfStep, WhileStep)


def write_counters(exe) -> None:
    """Launch the one-thread kernel writing the current loop counters into the arena."""
    c = control.counters_now(exe)
    exe._launch_args(exe._set_counters, [np.array([exe._arena], np.uint64)]
                     + [np.array([x], np.int32) for x in c])
    exe._dev_counters = c
