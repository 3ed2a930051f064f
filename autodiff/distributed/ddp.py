"""``DistributedDataParallel``: every parameter's gradient averaged over the processes once
per ``backward()``, in buckets, inside the compiled loop.

Mechanism (PyTorch's, ``torch/nn/parallel/distributed.py``, on a traced program):

* Construction: parameters and buffers are broadcast from rank 0 on the host (their
  current values, before any program runs), so every process starts identical.
  Parameters are grouped into buckets of at most ``bucket_cap_mb`` (25 MB; under the
  default cap the first bucket holds at most 1 MiB, as PyTorch's), in reverse
  registration order (about the order their gradients are ready in the backward pass),
  one dtype per bucket.
* Each parameter gets a post-accumulate-grad hook; the first one fired in a
  ``backward()`` queues a finalizer (``autograd.queue_callback``) that, once every
  gradient is traced, replaces the gradients of each bucket by their mean over the
  processes: the bucket's gradients flattened and concatenated (a view; the copy into the
  staging buffer is the only pass over them), ONE all-reduce (a ``CALLBACK`` node: the
  device writes the bucket to staging, MPI reduces it, the device continues), and views of
  the result as the new ``.grad``. The lowering scheduler starts each bucket's all-reduce
  as soon as its gradients exist and finishes it as late as the optimizer allows, so a
  device that copies asynchronously overlaps bucket ``k``'s transfer and reduction with
  the backward kernels of bucket ``k + 1``.
* Forward with ``broadcast_buffers`` (training mode): the buffers (BatchNorm's running
  statistics) are replaced by rank 0's, one broadcast per dtype, as PyTorch does.

The reduction sums in a fixed order on one process per chunk and hands the same bits to
all (:mod:`.comm`), so parameters stay bit-identical across processes after every step.
"""
from __future__ import annotations

import contextlib

import numpy as np

from ..graph import dtypes, ops
from ..graph.autograd import queue_callback
from ..graph.tensor import _wrap
from ..graph.trace import TRACER, no_grad
from ..nn.module import Module
from . import state
from .collectives import all_reduce_node, broadcast_node

#: PyTorch's default bucket size (MiB)
BUCKET_CAP_MB = 25
#: PyTorch's first bucket with the default cap (``dist._DEFAULT_FIRST_BUCKET_BYTES``, MiB):
#: small, so that the first all-reduce starts early in the backward pass
FIRST_BUCKET_MB = 1


class DistributedDataParallel(Module):
    """Data-parallel training of ``module`` (``torch.nn.parallel.DistributedDataParallel``
    on MPI): ``forward`` calls ``module``; after each ``backward()`` every parameter's
    ``.grad`` is the mean of the processes' gradients, reduced in buckets of about
    ``bucket_cap_mb`` (one all-reduce per bucket), so ``optimizer.step()`` makes the same
    update on every process. ``state_dict()`` keys are ``module.``-prefixed, as PyTorch's.

    One process (world size 1): no collective is traced; the module trains as without the
    wrapper.

    Args:
        module: the model (same architecture on every process; its parameters and buffers
            are replaced by rank 0's now).
        device_ids, output_device: None (a process runs one device; pick it with
            ``execute(device=...)``).
        dim: 0 (accepted for compatibility).
        broadcast_buffers: in training mode, use rank 0's buffers at every forward.
        process_group: None (the default group).
        bucket_cap_mb: bucket size in MiB (default 25, the first bucket 1 MiB).
        find_unused_parameters: parameters without a gradient in a ``backward()`` take part
            with zeros (else that ``backward()`` raises, naming them).
        check_reduction, gradient_as_bucket_view, static_graph: accepted for compatibility
            (gradients are always views of the reduced bucket; the graph is static).

    Raises:
        ValueError: ``device_ids``/``output_device`` given, or the processes' parameter
            shapes differ.
        ImportError: mpi4py is not installed.
    """

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, process_group=None,
                 bucket_cap_mb: float | None = None, find_unused_parameters: bool = False,
                 check_reduction: bool = False, gradient_as_bucket_view: bool = False,
                 static_graph: bool = False):
        super().__init__()
        if device_ids or output_device is not None:
            raise ValueError("DistributedDataParallel: device_ids and output_device must be "
                             "None (each process runs one device: execute(device=...))")
        state._check_group(process_group)
        comm = state.init()
        self.module = module
        self.broadcast_buffers = bool(broadcast_buffers)
        self.find_unused_parameters = bool(find_unused_parameters)
        self.require_backward_grad_sync = True
        cap = BUCKET_CAP_MB if bucket_cap_mb is None else bucket_cap_mb
        self.bucket_bytes_cap = int(cap * 1024 * 1024)
        first = FIRST_BUCKET_MB * 1024 * 1024 if bucket_cap_mb is None else None
        self._ddp_params = [p for p in module.parameters() if p.requires_grad]
        self._ddp_buckets = plan_buckets(self._ddp_params, self.bucket_bytes_cap, first)
        self._ddp_ready: dict = {}
        self._ddp_comm = comm
        sync_module_states(module)
        for p in self._ddp_params:
            p.register_post_accumulate_grad_hook(self._on_grad)

    @property
    def buckets(self) -> list[list[str]]:
        """The parameter names of each bucket, in all-reduce order."""
        names = {id(p): n for n, p in self.module.named_parameters()}
        return [[names[id(p)] for p in b] for b in self._ddp_buckets]

    def forward(self, *args, **kwargs):
        if self.broadcast_buffers and self._ddp_comm.size > 1 and self.module.training \
                and TRACER.grad_enabled:
            _broadcast_buffers(self.module)
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Within the block, ``backward()`` only accumulates gradients locally (gradient
        accumulation); the first ``backward()`` after it reduces the accumulated ones."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    # -- the gradient hooks ------------------------------------------------------------
    def _on_grad(self, p) -> None:
        if not self.require_backward_grad_sync:
            return
        if not self._ddp_ready:
            queue_callback(self._finish)
        self._ddp_ready[id(p)] = p

    def _finish(self) -> None:
        ready, self._ddp_ready = self._ddp_ready, {}
        missing = [p for p in self._ddp_params if id(p) not in ready]
        if missing and not self.find_unused_parameters:
            gone = {id(p) for p in missing}
            names = [n for n, p in self.module.named_parameters() if id(p) in gone]
            raise RuntimeError(
                f"DistributedDataParallel: parameter(s) {', '.join(names)} received no "
                f"gradient in this backward(); pass find_unused_parameters=True (their "
                f"gradients then take part as zeros) or freeze them (requires_grad_(False))")
        if self._ddp_comm.size == 1:
            return
        with no_grad():
            for bucket in self._ddp_buckets:
                _reduce_bucket(bucket, ready)


def plan_buckets(params: list, cap_bytes: int, first_bytes: int | None = None) -> list[list]:
    """Parameters in buckets of at most ``cap_bytes`` (a larger parameter alone), one dtype
    each, in reverse order of ``params``; the first bucket of each dtype holds at most
    ``first_bytes`` when given (PyTorch's 1 MiB first bucket under the default cap)."""
    buckets: list[list] = []
    open_: dict[str, tuple[list, int]] = {}
    opened: dict[str, int] = {}             # buckets made per dtype
    for p in reversed(params):
        dt = p._var.dtype
        nbytes = p.numel() * dtypes.itemsize(dt)
        cur = open_.get(dt)
        limit = first_bytes if first_bytes is not None and opened.get(dt) == 1 else cap_bytes
        if cur is None or (cur[1] + nbytes > limit and cur[0]):
            cur = ([], 0)
            buckets.append(cur[0])
            opened[dt] = opened.get(dt, 0) + 1
        cur[0].append(p)
        open_[dt] = (cur[0], cur[1] + nbytes)
    return buckets


def _reduce_bucket(bucket: list, ready: dict) -> None:
    parts = [ops.reshape(p.grad.node if id(p) in ready and p.grad is not None
                         else ops.const(0.0, p.shape, p._var.dtype), (-1,)) for p in bucket]
    flat = ops.concat(parts, 0) if len(parts) > 1 else parts[0]
    mean = all_reduce_node(flat, "mean")
    off = 0
    for p in bucket:
        n = p.numel()
        p.grad = _wrap(ops.reshape(ops.slice_(mean, [(off, off + n, 1)]), p.shape))
        off += n


def _broadcast_buffers(module: Module) -> None:
    """Replace ``module``'s buffers by rank 0's (one traced broadcast per dtype)."""
    by_dtype: dict[str, list] = {}
    for b in module.buffers():
        if b is not None:
            by_dtype.setdefault(b._var.dtype if b._var is not None else b.node.dtype,
                            []).append(b)
    with no_grad():
        for bufs in by_dtype.values():
            parts = [ops.reshape(b.node, (-1,)) for b in bufs]
            flat = broadcast_node(ops.concat(parts, 0) if len(parts) > 1 else parts[0], 0)
            off = 0
            for b in bufs:
                n = b.numel()
                b._set(ops.reshape(ops.slice_(flat, [(off, off + n, 1)]), b.shape))
                off += n


def sync_module_states(module: Module, src: int = 0) -> None:
    """Replace the host values of ``module``'s parameters and buffers by process ``src``'s
    (before any program uses them: what ``DistributedDataParallel`` does when made).

    Raises:
        ValueError: the processes' parameter or buffer shapes or dtypes differ.
    """
    comm = state.init()
    tensors = [t for t in list(module.parameters()) + list(module.buffers())
               if t is not None and t._var is not None]
    sig = [(tuple(t.shape), t._var.dtype) for t in tensors]
    sigs = comm.allgather(sig)
    for r, s in enumerate(sigs):
        if s != sig:
            raise ValueError(f"DistributedDataParallel: the model on rank {r} has "
                             f"{len(s)} parameters and buffers of other shapes or dtypes "
                             f"than rank {comm.rank}'s ({len(sig)}): build the same model "
                             f"on every process")
    if comm.size == 1:
        return
    by_dtype: dict = {}
    for t in tensors:
        by_dtype.setdefault(t._var.value.dtype, []).append(t)
    for dt, ts in by_dtype.items():
        flat = np.concatenate([t._var.value.ravel() for t in ts]) if ts else np.zeros(0, dt)
        flat = comm.broadcast(flat, src)
        off = 0
        for t in ts:
            n = t._var.value.size
            t._var.value = flat[off:off + n].reshape(t._var.value.shape).copy()
            off += n
