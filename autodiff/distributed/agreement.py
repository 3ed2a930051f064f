"""Failures in a distributed run: every process stops, none waits forever in a collective.

A program holding collectives, run by more than one process, runs under :func:`run`:

1. Every collective starts with a one-integer agreement, ``Comm.agree(False)``
   (:mod:`.collectives`). A process whose run raises (a Feeder, Receiver or callback error,
   bad input, an index out of range) makes one ``agree(True)`` instead of its next
   collective; the others meet it in the collective they wait in (or in the agreement
   every process makes when its run ends), learn that someone failed, and stop that
   iteration too (:class:`PeerFailed`, raised inside their device's loop, which restores
   their variables as for any failing iteration).
2. Every process then sends its error (if any) to all (``allgather``). The failing
   process whose variables are the oldest (the fewest completed iterations) is the
   reference: its variables are broadcast to every process, so all hold the values after
   the last iteration every process completed, bit-identical as after any step.
3. Every process raises the same :class:`~autodiff.errors.DistributedError`, naming the
   failing rank, its iteration and its error (chained from the local error on the
   failing process).

An interrupt (``KeyboardInterrupt``) is not coordinated: ``mpiexec`` forwards Ctrl-C to
every process. A process killed outright (a signal, ``os._exit``) makes ``mpiexec`` abort
the whole job: MPI's own behaviour, which no library can turn into an exception.
"""
from __future__ import annotations

import numpy as np

from ..errors import DistributedError, _it
from ..graph.ir import Graph, Op
from . import state


class PeerFailed(DistributedError):
    """Raised inside a collective when another process reported a failure; :func:`run`
    replaces it by the full :class:`~autodiff.errors.DistributedError`."""

    def __init__(self) -> None:
        super().__init__("another process of the distributed run failed")


def collectives(graph: Graph) -> bool:
    """Whether ``graph`` (loop bodies included) holds a collective."""
    return any(n.op is Op.CALLBACK and n.arg.collective for n in graph.walk())


def run(graph: Graph, exe, store: dict) -> None:
    """``exe.run(store)``; under the agreement above when more than one process runs and
    ``graph`` holds collectives.

    Raises:
        DistributedError: this or another process failed (on every process).
    """
    comm = state.active()
    if comm is None or not collectives(graph):
        exe.run(store)
        return
    local = None
    try:
        exe.run(store)
    except PeerFailed:
        pass
    except Exception as e:              # noqa: BLE001 (told to the others, then re-raised)
        local = e
        comm.agree(True)
    else:
        if not comm.agree(False):
            return
    _stop(comm, exe, store, local)


def _stop(comm, exe, store: dict, local: Exception | None) -> None:
    mine = None
    if local is not None:
        mine = (getattr(local, "iteration", None), _completed(exe, local),
                f"{type(local).__name__}: {local}")
    infos = comm.allgather(mine)
    failures = [(r, info) for r, info in enumerate(infos) if info is not None]
    if not failures:                    # cannot happen: someone agreed to a failure
        failures = [(comm.rank, (None, None, "a process reported a failure"))]
    root, (it, completed, msg) = min(
        failures, key=lambda f: (-1 if f[1][1] is None else f[1][1], f[0]))
    synced = _sync(comm, store, root)
    where = f" in iteration {_it(it)}" if it else ""
    text = f"rank {root} of {comm.size} failed{where}: {msg}"
    for r, (_, _, m) in failures:
        if r != root:
            text += f"; rank {r} failed too: {m}"
    if not synced:
        text += ("; the ranks' variables differ in shape, so each keeps its own values "
                 "(not the same program on every rank?)")
    elif completed is not None:
        s = "" if completed == 1 else "s"
        text += (f"; every rank stopped with the variables after {completed} completed "
                 f"iteration{s} (rank {root}'s)")
    else:
        text += f"; every rank stopped with rank {root}'s variables"
    err = DistributedError(text, root, it, [(r, f[0], f[2]) for r, f in failures],
                           completed if synced else None)
    raise err from local


def _completed(exe, err) -> int | None:
    """Iterations of the outermost loop whose values this process's variables hold after
    its run stopped with ``err``: the device's record of the stop where it keeps one,
    else the iteration the error names."""
    stop = getattr(getattr(exe, "progress", None), "stop", None)
    if stop is not None and stop[1] is not None:
        return int(stop[1])
    it = getattr(err, "iteration", None)
    return int(it[0]) if it else None


def _sync(comm, store: dict, root: int) -> bool:
    """Broadcast ``root``'s variable values into ``store`` on every process (the program's
    variables, in the same order everywhere); False (nothing changed) if their shapes or
    dtypes differ between processes."""
    items = list(store.items())
    sig = [(tuple(np.shape(a)), str(np.asarray(a).dtype)) for _, a in items]
    if any(s != sig for s in comm.allgather(sig)):
        return False
    for var, a in items:
        store[var] = comm.broadcast(np.asarray(a), root)
    return True
