"""Out-of-place, differentiable collectives (``torch.distributed.nn.functional``): each
returns a new tensor and leaves its argument unchanged; gradients as in
:mod:`autodiff.distributed.collectives`."""
from __future__ import annotations

from ...graph.tensor import Tensor, _wrap
from .. import collectives
from ..collectives import ReduceOp


def all_reduce(tensor: Tensor, op=ReduceOp.SUM, group=None) -> Tensor:
    """The reduction of ``tensor`` over all processes (see
    :func:`autodiff.distributed.all_reduce`)."""
    collectives._no_async(False, group)
    return _wrap(collectives.all_reduce_node(tensor.node, op))


def broadcast(tensor: Tensor, src: int = 0, group=None) -> Tensor:
    """Process ``src``'s ``tensor`` on every process."""
    collectives._no_async(False, group)
    return _wrap(collectives.broadcast_node(tensor.node, src))


def reduce(tensor: Tensor, dst: int = 0, op=ReduceOp.SUM, group=None) -> Tensor:
    """The reduction of ``tensor`` on process ``dst`` (zeros on the others)."""
    collectives._no_async(False, group)
    return _wrap(collectives.reduce_node(tensor.node, op, dst))
