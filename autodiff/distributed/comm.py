"""The MPI operations autodiff's collectives are made of (mpi4py on numpy buffers).

Every collective a program runs starts with :meth:`Comm.agree`: a one-integer
``Allreduce(MAX)`` of "did this process fail?". A process whose run failed calls it once
(with ``True``) instead of its next collective, so the others learn of the failure in the
collective they are waiting in rather than hanging (:mod:`.agreement`).

Reductions whose result depends on the order of the additions (``sum``, ``mean``) are
made bit-identical on every process by construction: ``Reduce_scatter_block`` gives each
process one chunk of the sum to compute, ``Allgather`` hands every chunk to everyone (the
bandwidth-optimal shape of an all-reduce: Rabenseifner, "Optimization of Collective
Reduction Operations", ICCS 2004). A buffer whose size is not a multiple of the process
count is padded with zeros on the host. ``max``/``min`` are exact in any order and use
``Allreduce``.

Every operation is MPI's nonblocking form, completed by polling with short sleeps
(:func:`complete`): a blocking MPI call spins on its core while it waits for the other
processes, which takes the core from the device's own threads (on OpenCL they compute
the next gradient bucket's backward meanwhile) and, on a loaded machine, from everyone.
"""
from __future__ import annotations

import time

import numpy as np

from ..graph import dtypes

#: reduction ops by name
OPS = ("sum", "mean", "max", "min")

#: first and longest sleep between two polls of a pending MPI request (seconds)
POLL_FIRST, POLL_MAX = 1e-5, 2e-4


def complete(req) -> None:
    """Wait for the MPI request ``req`` by polling it (``Test``, which also makes MPI's
    progress), sleeping between polls from :data:`POLL_FIRST` doubling up to
    :data:`POLL_MAX` seconds."""
    delay = POLL_FIRST
    while not req.Test():
        time.sleep(delay)
        delay = min(2 * delay, POLL_MAX)


def _mpi():
    from mpi4py import MPI
    return MPI


class Comm:
    """A communicator and the operations on numpy arrays that autodiff needs.

    Args:
        comm: an ``mpi4py.MPI.Comm`` (autodiff uses a duplicate of ``COMM_WORLD``).

    Attributes:
        rank, size: this process's rank and the process count.
    """

    def __init__(self, comm) -> None:
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self._flag = np.zeros(1, np.int32)
        self._any = np.zeros(1, np.int32)

    # -- failure agreement ------------------------------------------------------------
    def agree(self, failed: bool) -> bool:
        """Whether any process calls this with ``failed`` true (a one-int ``Allreduce``;
        every process must call it the same number of times)."""
        if self.size == 1:
            return bool(failed)
        self._flag[0] = 1 if failed else 0
        complete(self.comm.Iallreduce(self._flag, self._any, op=_mpi().MAX))
        return bool(self._any[0])

    def allgather(self, obj) -> list:
        """Every process's ``obj`` (picklable), in rank order."""
        return self.comm.allgather(obj) if self.size > 1 else [obj]

    def barrier(self) -> None:
        if self.size > 1:
            self.comm.Barrier()

    def abort(self, code: int = 1) -> None:
        self.comm.Abort(code)

    def free(self) -> None:
        try:
            self.comm.Free()
        except Exception:     # noqa: BLE001 (MPI already finalized at exit)
            pass

    # -- data ---------------------------------------------------------------------------
    def all_reduce(self, x: np.ndarray, op: str) -> np.ndarray:
        """The elementwise reduction ``op`` (:data:`OPS`) of every process's ``x`` (one
        shape and dtype everywhere), the same bits on every process; a new array of
        ``x``'s shape and dtype. 16-bit floats are reduced in float32, bool as uint8;
        ``mean`` divides the sum by the process count."""
        MPI = _mpi()
        work = _wide(x)
        if self.size == 1:
            out = work.copy()
        elif op in ("sum", "mean"):
            n = work.size
            per = -(-n // self.size)
            send = np.zeros(per * self.size, work.dtype)
            send[:n] = work.ravel()
            part = np.empty(per, work.dtype)
            complete(self.comm.Ireduce_scatter_block(send, part, op=MPI.SUM))
            full = np.empty(per * self.size, work.dtype)
            complete(self.comm.Iallgather(part, full))
            out = full[:n].reshape(work.shape)
        else:
            out = np.empty_like(work)
            complete(self.comm.Iallreduce(work, out, op=MPI.MAX if op == "max" else MPI.MIN))
        if op == "mean":
            out = np.asarray(out / np.asarray(self.size, out.dtype))
        return np.asarray(out.astype(x.dtype, copy=False))

    def broadcast(self, x: np.ndarray, src: int) -> np.ndarray:
        """Process ``src``'s ``x`` on every process (a new array)."""
        buf = np.array(_wide(x), order="C", copy=True)
        if self.size > 1:
            complete(self.comm.Ibcast(buf, root=src))
        return np.asarray(buf.astype(x.dtype, copy=False))

    def reduce(self, x: np.ndarray, op: str, dst: int) -> np.ndarray:
        """The reduction ``op`` of every process's ``x`` on process ``dst``, zeros on the
        others (``MPI_Reduce``)."""
        MPI = _mpi()
        work = _wide(x)
        if self.size == 1:
            out = work.copy()
        else:
            out = np.zeros_like(work)
            mop = {"sum": MPI.SUM, "mean": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}[op]
            complete(self.comm.Ireduce(work, out if self.rank == dst else None, op=mop,
                                       root=dst))
        if op == "mean" and self.rank == dst:
            out = np.asarray(out / np.asarray(self.size, out.dtype))
        return np.asarray(out.astype(x.dtype, copy=False))


def _wide(x: np.ndarray) -> np.ndarray:
    """A C-contiguous array MPI can reduce: 16-bit floats as float32, bool as uint8."""
    if x.dtype == np.float16 or x.dtype == dtypes.host("bfloat16"):
        return np.asarray(x, dtype=np.float32, order="C")
    if x.dtype == np.bool_:
        return np.asarray(x, dtype=np.uint8, order="C")
    return np.asarray(x, order="C")          # keeps 0-d arrays 0-d
