"""DP+Elw: a dot product with the elementwise kernels that consume its result as epilogue.

Bias add, activation, scaling, and the SGD update ``w -= lr * grad`` when the dot product is
the gradient: every elementwise kernel that reads the dot product's result (or a result
already in the group) over the same iteration space, up to a permutation or reshape of the
dot product's ``[..., M, N]`` space (the work item that computes ``acc`` at ``(m, n)`` also
computes the epilogue element that reads it). The dot product's operands are never fused
(recomputing an elementwise producer K times per output is not worth it).

A batched dot product whose result only a ``SUM`` over (some of) its batch dims reads --
the weight gradient of a linear layer applied to ``[B, T, D]`` activations,
``sum_b x[b]^T @ g[b]`` -- is first merged with that reduction into one dot product whose
contraction runs over the summed batch dims and ``K`` together (``k' = b * K + k``, the
operands re-indexed through ``k' // K`` and ``k' % K``): one kernel instead of two, and the
SGD update then joins it as epilogue. It is still one contraction per output element.
"""
from __future__ import annotations

from ..graph.ir import Op
from ..procedural.access import Var, simplify
from ..procedural.ir import Acc, BufferKind, DotProduct, Load, Reduce
from .group import Schedule, at_p, grow, invert, subst_value

NAME = "DP+Elw"


def merge_batch_sum(sched: Schedule, d: DotProduct):
    """``(dot product, [d, reduce])`` when only a batch-dim ``SUM`` reads ``d``'s result,
    else None. The returned dot product computes the reduction's outputs directly."""
    if len(d.outs) != 1 or not isinstance(d.outs[0].value, Acc) or len(d.shape) < 3:
        return None
    t = d.outs[0].buffer
    if t.kind is not BufferKind.TEMP or len(sched.writers_of(t)) != 1:
        return None
    rs = sched.readers_of(t)
    if len(rs) != 1 or type(rs[0]) is not Reduce or not sched.free(rs[0]):
        return None
    r = rs[0]
    if r.op is not Op.SUM or type(r.src) is not Load or r.src.buffer is not t:
        return None
    inv = invert(d.outs[0].index, d.vars)
    if inv is None or inv[1] != t.size:
        return None
    to_r = at_p(*inv, r.src.index)                 # d's vars as expressions over r's vars
    image = [to_r[v] for v in d.vars]
    if any(not isinstance(e, Var) for e in image) or len(set(image)) != len(image) or \
            any(e.extent != v.extent for e, v in zip(image, d.vars)):
        return None
    if set(image) != set(r.vars):
        return None
    reduced = set(r.reduced)
    batch = list(d.vars[:-2])
    summed = [b for b in batch if to_r[b] in reduced]
    if not summed or len(summed) != len(reduced) or \
            any(to_r[v] in reduced for v in d.vars[-2:]):
        return None
    if not sched.legal([d, r]):
        return None
    kk = d.k.extent
    ext = 1
    for b in summed:
        ext *= b.extent
    k = Var("K", ext * kk)
    sub = {d.k: simplify(k % kk)}
    stride = kk
    for b in reversed(summed):
        sub[b] = simplify((k // stride) % b.extent)
        stride *= b.extent
    keep = [b for b in batch if b not in summed]
    new_vars = tuple(to_r[v] for v in keep) + (to_r[d.vars[-2]], to_r[d.vars[-1]])
    for v in keep + [d.vars[-2], d.vars[-1]]:
        sub[v] = to_r[v]
    a, b = subst_value(d.a, sub), subst_value(d.b, sub)
    dp = DotProduct(tuple(v.extent for v in new_vars), new_vars, k, a, b, tuple(r.outs))
    return dp, [d, r]


def fuse_dp_elw(stmts: list) -> list:
    """One statement list (not its ``For`` bodies) with DP+Elw groups formed.

    Every :class:`DotProduct` takes the elementwise consumers it legally can, in program
    order; a dot product left alone stays as it is.
    """
    sched = Schedule(stmts)
    for s in list(stmts):
        if isinstance(s, DotProduct) and sched.free(s):
            merged = merge_batch_sum(sched, s)
            if merged is not None:
                if grow(sched, merged[0], [], NAME, stands_for=merged[1]) is not None:
                    continue
            grow(sched, s, [], NAME)
    return sched.statements()
