"""The process group: MPI start-up, rank and world size, and what a process does when it
dies of an uncaught exception.

One process group exists per process (MPI's ``COMM_WORLD``, duplicated so that autodiff's
collectives never match a user's own MPI messages). :func:`init_process_group` makes it;
every other entry point of :mod:`autodiff.distributed` makes it on first use (the
"implicit" start). mpi4py is imported only then: a single-process program never loads MPI.
"""
from __future__ import annotations

import sys
import threading

from .comm import Comm

#: what ``pip install`` gives a machine without MPI (mpi4py and the MPICH wheel)
INSTALL = "python3 -m pip install -e '.[distributed]'   (mpi4py + the mpich wheel)"

_lock = threading.Lock()
_group: list = []           # [Comm] once initialized


def is_available() -> bool:
    """Whether mpi4py (and an MPI library it can load) can be imported
    (``torch.distributed.is_available``)."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


def is_initialized() -> bool:
    """Whether the process group exists (``torch.distributed.is_initialized``)."""
    return bool(_group)


def init_process_group(backend: str = "mpi", init_method: str | None = None,
                       timeout=None, world_size: int = -1, rank: int = -1,
                       store=None, group_name: str = "", pg_options=None,
                       device_id=None) -> None:
    """Join the processes started by ``mpiexec`` (``torch.distributed.init_process_group``
    with the MPI backend: rank and world size come from MPI, so ``world_size`` and
    ``rank``, if given, must match them).

    Starting the group also (with more than one process): offsets the device random
    draws by the rank (:func:`~autodiff.distributed.seed_by_rank`), and installs a
    ``sys.excepthook`` that aborts the whole job (``MPI_Abort``) when a process dies of an
    uncaught exception other than :class:`~autodiff.DistributedError` (which every process
    raises together), so the others never wait forever in a collective.

    Raises:
        ImportError: mpi4py is not installed (names the install command).
        ValueError: a backend other than ``"mpi"``, or ``rank``/``world_size`` differ from
            MPI's.
        RuntimeError: already initialized (as in PyTorch; :func:`init` is idempotent).
    """
    if backend not in ("mpi", None):
        raise ValueError(f"backend {backend!r} is not available: autodiff.distributed runs "
                         f"on MPI (backend='mpi')")
    with _lock:
        if _group:
            raise RuntimeError("trying to initialize the default process group twice!")
        try:
            from mpi4py import MPI
        except ImportError as e:
            raise ImportError(f"autodiff.distributed needs mpi4py and an MPI library: "
                              f"{INSTALL}") from e
        comm = Comm(MPI.COMM_WORLD.Dup())
        if world_size not in (-1, None) and world_size != comm.size:
            raise ValueError(f"world_size={world_size} but mpiexec started {comm.size} "
                             f"processes")
        if rank not in (-1, None) and rank != comm.rank:
            raise ValueError(f"rank={rank} but MPI gives this process rank {comm.rank}")
        _group.append(comm)
    if comm.size > 1:
        from . import collectives
        collectives.seed_by_rank(True)
        _install_excepthook(comm)


def init() -> Comm:
    """The process group, started if needed (:func:`init_process_group` with the MPI
    backend); idempotent."""
    if not _group:
        try:
            init_process_group()
        except RuntimeError:
            if not _group:
                raise
    return _group[0]


def group() -> Comm:
    """The process group's communicator (started on first use)."""
    return _group[0] if _group else init()


def active() -> Comm | None:
    """The communicator when the group exists and has more than one process, else None."""
    return _group[0] if _group and _group[0].size > 1 else None


def get_rank(group=None) -> int:
    """This process's rank in ``[0, world size)`` (``torch.distributed.get_rank``)."""
    _check_group(group)
    return init().rank


def get_world_size(group=None) -> int:
    """The number of processes (``torch.distributed.get_world_size``)."""
    _check_group(group)
    return init().size


def barrier(group=None, async_op: bool = False, device_ids=None) -> None:
    """Wait until every process reaches this call (``torch.distributed.barrier``)."""
    _check_group(group)
    if async_op:
        raise NotImplementedError("async_op=True is not supported")
    init().barrier()


def destroy_process_group(group=None) -> None:
    """Leave the process group (``torch.distributed.destroy_process_group``): MPI itself
    stays initialized (mpi4py finalizes it at exit); a later call starts a new group."""
    _check_group(group)
    with _lock:
        if _group:
            _group.pop().free()
    from . import collectives
    collectives.seed_by_rank(False)


def _check_group(group) -> None:
    if group is not None and group is not _group[0:1] and not (
            _group and group is _group[0]):
        raise NotImplementedError("only the default process group (group=None) is "
                                  "supported")


def _install_excepthook(comm: Comm) -> None:
    """Abort the job when this process dies of an uncaught exception (``python -m
    mpi4py`` does the same): the others would otherwise wait in their next collective.
    A :class:`~autodiff.DistributedError` is raised by every process together, so it
    only ends this one."""
    from ..errors import DistributedError
    previous = sys.excepthook

    def hook(kind, value, tb):
        previous(kind, value, tb)
        if not isinstance(value, (DistributedError, KeyboardInterrupt, SystemExit)):
            sys.stderr.write(f"autodiff.distributed: rank {comm.rank} of {comm.size} died of "
                             f"an uncaught {kind.__name__}; aborting the job\n")
            sys.stderr.flush()
            comm.abort(1)

    sys.excepthook = hook
