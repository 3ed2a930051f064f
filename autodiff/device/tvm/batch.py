"""Several loop iterations per device call: the ``K``-step function of a loop body.

From Python, each call of a segment's VM function costs host time for argument
conversion, the call and result unpacking: about 25 us per step for W1 (5 variables) and
about 130 us for W2 (about 100 variables) on the benchmark machine, a large part of a small
training step. A loop whose body is one segment (:func:`.plan.batch_segment`) gets a
second Relax function ``<segment>_x<K>``: ``K`` copies of the body unrolled in one
function (emitted as calls of a private copy of the one-step function, inlined after
fusion by :func:`autodiff.device.tvm.fuse`), the variables chained from one step to the next. Calling a
Relax function ``K`` times without inlining was measured slower per step than calling it
from Python (the nested calls cost more VM time than the host time they save); unrolled,
Relax plans the memory of the whole function and the host overhead is paid once per ``K``
steps. Its per-iteration inputs
(Feeder values, the Philox loop-index words) come stacked on a new leading axis ``[K, ...]``
and are sliced per step on the device; its per-iteration outputs (values for Receivers,
gather checks) go back stacked the same way. The Feeders of the ``K`` iterations have been
called before the function runs, so ``K <= prefetch + 1`` (``execute()``'s order contract,
:mod:`autodiff.device.host`); the host calls the Receivers of each iteration after the
Feeders ``prefetch`` iterations ahead of it, exactly as one call per iteration would. The
one-step function stays for the remainder of the range and for error recovery
(:mod:`.runtime`).

The unrolled copies call the same kernels (structurally equal PrimFuncs are shared), so the
kernel count grows by the slice and stack kernels only, but the Relax function, and the
time ``tvm.compile`` spends on it, grow with ``K`` times the body's size (W2, 1551 nodes:
1.2 s build at ``K`` = 1, 1.9 s at 4, 5.2 s at 16). Hence the automatic ``K``
(:func:`choose_steps_per_call`) is capped by :data:`UNROLL_NODES`.
"""
from __future__ import annotations

import numpy as np
from tvm import relax, te, topi
from tvm.relax.utils import copy_with_new_vars

from ...graph import dtypes
from ...graph.ir import Op
from .plan import Loop, Segment

#: ``steps_per_call=None``: iterations per call for a small body.
DEFAULT_STEPS_PER_CALL = 16
#: Largest ``K`` accepted: the unrolled function's build time grows with ``K``, and
#: beyond this the host overhead left is below 1 us per iteration.
MAX_STEPS_PER_CALL = 128
#: ``steps_per_call=None`` leaves a body of more estimated FLOPs than this at one
#: iteration per call: it runs about a millisecond, so the 10-25 us saved are noise,
#: while its Receivers would report in bursts of ``K``.
SMALL_BODY_FLOPS = 2e7
#: ``steps_per_call=None`` keeps ``K`` times the body's node count under this (W1, 45
#: nodes: ``K`` = 16; W2, 1551 nodes: ``K`` = 5).
UNROLL_NODES = 8192
#: Cap on the bytes of stacked per-iteration inputs and outputs of one call.
STACK_BYTES = 64 << 20


def batched_name(seg: Segment, k: int) -> str:
    """Name of the ``k``-step function of ``seg``."""
    return f"{seg.name}_x{k}"


def stacked_inputs(seg: Segment) -> set:
    """Input keys that differ per iteration (Feeder values, loop-index words)."""
    fed = {n.id for n in seg.feeders}
    return {k for k in seg.inputs if k[0] == "iters" or (k[0] == "val" and k[1] in fed)}


def body_flops(seg: Segment) -> float:
    """Rough work of one iteration: ``2 m k n`` per matmul, one per element otherwise."""
    total = 0.0
    for n in seg.nodes:
        size = float(np.prod(n.shape, dtype=np.float64))
        if n.op is Op.DOT:
            total += 2.0 * size * n.srcs[0].shape[-1]
        elif n.op not in (Op.LOAD, Op.ASSIGN):
            total += size
    return total


def _step_bytes(seg: Segment, nodes_by_id: dict) -> int:
    out = 0
    for k in list(stacked_inputs(seg)) + [k for k in seg.outputs if k[0] == "val"]:
        if k[0] == "val":
            n = nodes_by_id[k[1]]
            out += int(np.prod(n.shape, dtype=np.int64)) * dtypes.itemsize(n.dtype)
    return out + 8


def choose_steps_per_call(loop: Loop, seg: Segment, requested: int | None,
                          prefetch: int | None = None) -> int:
    """Iterations per device call for ``loop`` (whose body is the single segment ``seg``).

    Parameters
    ----------
    loop : Loop
        The loop.
    seg : Segment
        Its body.
    requested : int or None
        The user's ``steps_per_call``: an ``int`` is used as given (capped by the loop's
        length); None picks :data:`DEFAULT_STEPS_PER_CALL` for a body of at most
        :data:`SMALL_BODY_FLOPS` and 1 otherwise, lowered to keep the unrolled function
        under :data:`UNROLL_NODES` nodes and the stacked per-iteration data of a call
        under :data:`STACK_BYTES`.
    prefetch : int or None
        ``execute()``'s ``prefetch``: a call of ``K`` iterations calls their Feeders
        ``K - 1`` iterations ahead of the first one's Receivers, so ``K <= prefetch + 1``
        (the automatic ``K`` is lowered to it).

    Returns
    -------
    int
        ``K`` >= 1 (1: one call per iteration).

    Raises
    ------
    ValueError
        ``requested`` is not None and not an integer in ``[1, MAX_STEPS_PER_CALL]``, or
        it exceeds ``prefetch + 1``.
    """
    n = len(loop.node.arg.range)
    limit = MAX_STEPS_PER_CALL if prefetch is None else prefetch + 1
    if requested is not None:
        if isinstance(requested, bool) or not isinstance(requested, (int, np.integer)) or \
                not 1 <= requested <= MAX_STEPS_PER_CALL:
            raise ValueError(f"tvm device: steps_per_call must be None or an int in "
                             f"[1, {MAX_STEPS_PER_CALL}], got {requested!r}")
        if requested > limit:
            raise ValueError(f"tvm device: steps_per_call={requested} calls the Feeders "
                             f"{requested - 1} iterations ahead of the Receivers; that needs "
                             f"execute(..., prefetch={requested - 1}) or more, got "
                             f"prefetch={prefetch}")
        return max(1, min(int(requested), n))
    if body_flops(seg) > SMALL_BODY_FLOPS:
        return 1
    nodes_by_id = {m.id: m for m in seg.nodes + seg.feeders}
    k = min(DEFAULT_STEPS_PER_CALL, n, limit, UNROLL_NODES // max(len(seg.nodes), 1),
            STACK_BYTES // _step_bytes(seg, nodes_by_id))
    return k if k > 1 else 1


def _take(stacked: te.Tensor, at: te.Tensor) -> te.Tensor:
    """``stacked[at[0]]``: one iteration's slice of a stacked input (one PrimFunc for all
    steps, the step index being data)."""
    return te.compute(stacked.shape[1:], lambda *i: stacked[(at[0], *i)], name="take_step")


def _stack(*xs: te.Tensor) -> te.Tensor:
    return topi.stack(list(xs), 0)


def emit_batched(bb: relax.BlockBuilder, seg: Segment, k: int, param) -> None:
    """Add ``<seg>_x<k>``: ``k`` calls of a private copy of the already emitted one-step
    function ``seg`` (``InlinePrivateFunctions`` in :func:`autodiff.device.tvm.fuse` then
    unrolls them).

    Parameters
    ----------
    bb : relax.BlockBuilder
        Builder holding the function ``seg.name``.
    seg : Segment
        The loop body.
    k : int
        Iterations per call.
    param : callable
        ``param(key, lead=())`` -> the ``relax.Var`` for input ``key`` with ``lead`` dims
        prepended.

    The function takes ``seg.inputs`` in order, the stacked ones (:func:`stacked_inputs`)
    as ``[k, ...]``, and returns ``seg.outputs`` in order: variables after the ``k``-th
    step, the other outputs stacked ``[k, ...]`` (row ``j``: step ``j``).
    """
    public = bb.get()[bb.get().get_global_var(seg.name)]
    step = bb.add_func(copy_with_new_vars(public).without_attr("global_symbol"),
                       f"{seg.name}_inline")
    stacked = stacked_inputs(seg)
    params = [param(key, (k,)) if key in stacked else param(key) for key in seg.inputs]
    with bb.function(batched_name(seg, k), params):
        with bb.dataflow():
            cur = dict(zip(seg.inputs, params))
            rows: dict = {key: [] for key in seg.outputs if key[0] != "var"}
            for j in range(k):
                at = relax.const(np.array([j], np.int32))
                args = [bb.emit_te(_take, cur[key], at, primfunc_name_hint="take_step")
                        if key in stacked else cur[key] for key in seg.inputs]
                res = bb.emit(relax.Call(step, args))
                for i, key in enumerate(seg.outputs):
                    item = bb.emit(relax.TupleGetItem(res, i))
                    if key[0] == "var":
                        cur[key] = item
                    else:
                        rows[key].append(item)
            outs = [cur[key] if key[0] == "var" else
                    bb.emit_te(_stack, *rows[key], primfunc_name_hint="stack_steps")
                    for key in seg.outputs]
            result = bb.emit_output(relax.Tuple(outs))
        bb.emit_func_output(result)
