"""Collectives as traced ops: ``all_reduce``, ``broadcast``, ``reduce``.

Each is one graph IR ``CALLBACK`` node (:func:`autodiff.graph.ops.callback`) whose host
function is an MPI collective (:class:`~.comm.Comm`), with ``collective`` set so that a
run holding it agrees with the other processes on failures (:mod:`.agreement`). Inside
``ir_for`` it runs once per iteration, at its place in the compiled program: the device
writes the operand to staging, the host runs the collective, the device continues with
the result (a host boundary, like a Feeder and a Receiver in one).

Gradients (reverse-mode AD traces them, each one more collective):

* ``all_reduce`` sum: ``dx_r = sum_j g_j`` (an all-reduce of the gradient); mean: the mean
  of the gradients; max/min: the summed gradient where this process holds the extremum,
  split evenly between tied processes (one all-reduce of ``[g, hit]``).
* ``broadcast`` from ``src``: the gradients summed on ``src``, zero elsewhere (a reduce).
* ``reduce`` (sum) to ``dst``: ``dst``'s gradient on every process (a broadcast).

The public functions follow ``torch.distributed``: they update ``tensor`` in place and
return None (for a variable: an assignment, so it must not require grad outside
``no_grad()``). :mod:`autodiff.distributed.nn.functional` has the out-of-place forms.
"""
from __future__ import annotations

import enum

from ..graph import dtypes, ops
from ..graph.ir import Node, Op
from ..graph.trace import user_site
from . import state


class ReduceOp(enum.Enum):
    """Reduction ops (``torch.distributed.ReduceOp``); the strings ``"sum"``, ``"mean"``
    (or ``"avg"``), ``"max"``, ``"min"`` are accepted too."""
    SUM = "sum"
    AVG = "mean"
    MAX = "max"
    MIN = "min"


def op_name(op) -> str:
    """``op`` (a :class:`ReduceOp` or a string) as one of ``sum mean max min``.

    Raises:
        ValueError: another op.
    """
    if isinstance(op, ReduceOp):
        return op.value
    name = str(op).lower()
    name = {"avg": "mean", "average": "mean", "reduceop.sum": "sum", "reduceop.avg": "mean",
            "reduceop.max": "max", "reduceop.min": "min"}.get(name, name)
    if name not in ("sum", "mean", "max", "min"):
        raise ValueError(f"unsupported reduction op {op!r}: use ReduceOp.SUM, AVG, MAX, MIN "
                         f"or 'sum', 'mean', 'max', 'min'")
    return name


def seed_by_rank(enabled: bool = True) -> None:
    """Whether device random draws (dropout masks, ``autodiff.rand`` inside programs...)
    traced from now on differ per process: on by default once the process group exists
    (each ``RAND`` seed is offset by ``rank * 0x9E3779B9``; rank 0 draws what a single
    process draws). ``seed_by_rank(False)`` makes every process draw the same numbers."""
    comm = state.active()
    ops.SEED_OFFSET[0] = (comm.rank * 0x9E3779B9) % 2 ** 32 if enabled and comm else 0


# -- host functions ------------------------------------------------------------------------
def _enter(comm) -> None:
    """Start of every collective: agree that no process failed, else stop this one."""
    if comm.agree(False):
        from .agreement import PeerFailed
        raise PeerFailed()


def _all_reduce_fn(op: str):
    def fn(x):
        comm = state.group()
        _enter(comm)
        return comm.all_reduce(x, op)
    return fn


def _broadcast_fn(src: int):
    def fn(x):
        comm = state.group()
        _enter(comm)
        return comm.broadcast(x, src)
    return fn


def _reduce_fn(op: str, dst: int):
    def fn(x):
        comm = state.group()
        _enter(comm)
        return comm.reduce(x, op, dst)
    return fn


# -- graph IR nodes ---------------------------------------------------------------------------
def _check(x: Node, what: str, op: str | None = None) -> None:
    if x.dtype not in ("float32", "float16", "bfloat16", "int32", "int64", "bool"):
        raise TypeError(f"{what}: dtype {x.dtype} is not supported (traced at {user_site()})")
    if op == "mean" and not dtypes.is_floating(x.dtype):
        raise TypeError(f"{what}: op 'mean' needs a floating tensor, got {x.dtype} "
                        f"(traced at {user_site()})")
    if op == "sum" and x.dtype == "bool":
        raise TypeError(f"{what}: op 'sum' of a bool tensor (cast it first) "
                        f"(traced at {user_site()})")


def _rank_arg(r: int, what: str, name: str) -> int:
    size = state.group().size
    if not isinstance(r, int) or not 0 <= r < size:
        raise ValueError(f"{what}: {name}={r!r} is not a rank of this group of {size} "
                         f"(traced at {user_site()})")
    return r


def all_reduce_node(x: Node, op: str = "sum") -> Node:
    """A ``CALLBACK`` node: the elementwise ``op`` (sum, mean, max, min) of ``x`` over all
    processes, identical bits on every process (see :mod:`.comm`).

    Raises:
        TypeError: an unsupported dtype (mean: floating only; sum: not bool).
        ValueError: an unknown op.
    """
    op = op_name(op)
    _check(x, "all_reduce", op)
    state.group()
    return ops.callback(_all_reduce_fn(op), [x], x.shape, x.dtype, f"all_reduce_{op}",
                        _ALL_REDUCE_VJP[op], "all_reduce")


def broadcast_node(x: Node, src: int = 0) -> Node:
    """A ``CALLBACK`` node: process ``src``'s ``x`` on every process.

    Raises:
        ValueError: ``src`` is not a rank.
    """
    _check(x, "broadcast")
    src = _rank_arg(src, "broadcast", "src")
    return ops.callback(_broadcast_fn(src), [x], x.shape, x.dtype, f"broadcast_from_{src}",
                        lambda g, out, x: (reduce_node(g, "sum", src),), "broadcast")


def reduce_node(x: Node, op: str = "sum", dst: int = 0) -> Node:
    """A ``CALLBACK`` node: the ``op`` of ``x`` over all processes on ``dst``, zeros on the
    others (differentiable for sum and mean).

    Raises:
        TypeError, ValueError: as :func:`all_reduce_node`; ``dst`` is not a rank.
    """
    op = op_name(op)
    _check(x, "reduce", op)
    dst = _rank_arg(dst, "reduce", "dst")

    def vjp(g, out, x):
        if op not in ("sum", "mean"):
            raise RuntimeError(f"derivative of reduce with op {op!r} is not implemented")
        b = broadcast_node(g, dst)
        return (ops.scale(b, 1.0 / state.group().size) if op == "mean" else b,)
    return ops.callback(_reduce_fn(op, dst), [x], x.shape, x.dtype, f"reduce_{op}_to_{dst}",
                        vjp, "reduce")


def _extremum_vjp(op: str):
    def vjp(g, out, x):
        hit = ops.cast(ops.binary(Op.CMPEQ, x, out), g.dtype)
        both = all_reduce_node(ops.concat([ops.reshape(g, (-1,)), ops.reshape(hit, (-1,))],
                                          0), "sum")
        n = x.size
        total = ops.reshape(ops.slice_(both, [(0, n, 1)]), x.shape)
        count = ops.reshape(ops.slice_(both, [(n, 2 * n, 1)]), x.shape)
        return (ops.div(ops.mul(total, hit), count),)
    return vjp


_ALL_REDUCE_VJP = {
    "sum": lambda g, out, x: (all_reduce_node(g, "sum"),),
    "mean": lambda g, out, x: (all_reduce_node(g, "mean"),),
    "max": _extremum_vjp("max"),
    "min": _extremum_vjp("min"),
}


# -- torch.distributed's in-place API ----------------------------------------------------------
def _no_async(async_op: bool, group) -> None:
    if async_op:
        raise NotImplementedError("async_op=True is not supported: a traced collective "
                                  "already overlaps the device work that does not need it")
    state._check_group(group)


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op: bool = False) -> None:
    """Reduce ``tensor`` over all processes, in place (``torch.distributed.all_reduce``):
    afterwards it holds the sum (mean, max, min) of every process's value, the same bits
    on every process. Traced: usable inside ``ir_for`` (one collective per iteration) and
    differentiable (see the module doc).

    Args:
        tensor: float32/float16/bfloat16/int32/int64/bool tensor (the same shape on every
            process).
        op: :class:`ReduceOp` or ``"sum"``, ``"mean"``, ``"max"``, ``"min"``.
        group: None (the default group).
        async_op: False (True is not supported).

    Raises:
        TypeError: unsupported dtype for ``op``.
        ValueError: unknown op.
        NotImplementedError: ``async_op`` or another group.
    """
    _no_async(async_op, group)
    tensor._set(all_reduce_node(tensor.node, op))


def broadcast(tensor, src: int = 0, group=None, async_op: bool = False) -> None:
    """Replace ``tensor`` by process ``src``'s value, in place
    (``torch.distributed.broadcast``). Traced and differentiable, as :func:`all_reduce`.

    Raises:
        ValueError: ``src`` is not a rank.
    """
    _no_async(async_op, group)
    tensor._set(broadcast_node(tensor.node, src))


def reduce(tensor, dst: int = 0, op=ReduceOp.SUM, group=None, async_op: bool = False) -> None:
    """Reduce ``tensor`` onto process ``dst``, in place (``torch.distributed.reduce``; the
    other processes get zeros here, where PyTorch leaves them unspecified)."""
    _no_async(async_op, group)
    tensor._set(reduce_node(tensor.node, op, dst))
