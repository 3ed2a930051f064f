"""Random graph programs for the pass tests: a hypothesis strategy draws a *spec*, and
:func:`build` traces it through the public front end (Tensor ops, Feeder, Receiver, ir_for,
in-place updates under no_grad, backward). The spec is plain data, so one spec traces the
same program every time; :func:`execute_graph` runs any graph of it on the numpy device
from the same initial values and records what the user can observe.

Shapes come from one broadcast family (right-aligned sub-shapes of ``BASE``), so any two
values broadcast together and every instruction's result stays in the family.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

import autodiff as ad
from autodiff.device.numpy.interpreter import Interpreter
from autodiff.graph.ir import Graph
from autodiff.graph.trace import TRACER

BASE = (2, 3, 4)
FAMILY = [(2, 3, 4), (3, 4), (4,), (1, 4), (3, 1), (2, 1, 4), (2, 3, 1), (1, 1, 1), (), (1,)]
SCALARS = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, 4.0, -0.25]

UNARY = {
    "neg": lambda x: -x, "exp": lambda x: x.exp(), "log": lambda x: x.abs().log(),
    "tanh": lambda x: x.tanh(), "sigmoid": lambda x: x.sigmoid(), "relu": lambda x: x.relu(),
    "abs": lambda x: x.abs(), "sin": lambda x: x.sin(), "sqrt": lambda x: x.sqrt(),
    "recip": lambda x: x.reciprocal(), "recip2": lambda x: x.reciprocal().reciprocal(),
    "negneg": lambda x: -(-x), "square": lambda x: x * x, "exp2": lambda x: x.exp2(),
    "erf": lambda x: x.erf(), "self_sub": lambda x: x - x,
}
BINARY = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b, "max": lambda a, b: a.maximum(b), "min": lambda a, b: a.minimum(b),
}
SCALAR_OPS = {
    "add": lambda a, c: a + c, "sub": lambda a, c: a - c, "mul": lambda a, c: a * c,
    "div": lambda a, c: a / c, "rsub": lambda a, c: c - a, "rmul": lambda a, c: c * a,
    "radd": lambda a, c: c + a, "pow": lambda a, c: a ** abs(c) if c in (0.0, 1.0, 2.0) else a,
}
CMPS = {"lt": lambda a, b: a < b, "ge": lambda a, b: a >= b, "eq": lambda a, b: a == b}


def _last(x, n):
    """Whether ``x``'s last dim has size ``n`` (shape-dependent ops fall back otherwise)."""
    return x.ndim >= 1 and x.shape[-1] == n


def _setitem(x):
    y = x * 1.0
    y[..., ::2] = x[..., :1] * 0.5
    return y


#: the PyTorch-breadth ops (issue 15), each keeping its result in the broadcast family
BREADTH = {
    "atan": lambda x, y: x.atan(), "log1p": lambda x, y: x.abs().log1p(),
    "expm1": lambda x, y: x.clamp(max=5.0).expm1(), "asinh": lambda x, y: x.asinh(),
    "floor": lambda x, y: x.floor() + x.frac(), "round": lambda x, y: (x * 3.0).round(),
    "clamp_t": lambda x, y: x.clamp(min=y), "logaddexp": lambda x, y: x.logaddexp(y),
    "atan2": lambda x, y: x.atan2(y), "lerp": lambda x, y: x.lerp(y, 0.25),
    "nan_to_num": lambda x, y: x.nan_to_num(), "copysign": lambda x, y: x.copysign(y),
    "flip": lambda x, y: x.flip(-1), "roll": lambda x, y: x.roll(1, -1) if x.ndim else x,
    "cumsum": lambda x, y: x.cumsum(-1) if x.ndim else x,
    "cumprod": lambda x, y: x.tanh().cumprod(-1) if x.ndim else x,
    "logcumsumexp": lambda x, y: x.logcumsumexp(-1) if x.ndim else x,
    "cummax": lambda x, y: x.cummax(-1).values if x.ndim else x,
    "sort": lambda x, y: x.sort(-1, descending=True).values if x.ndim else x,
    "strided": lambda x, y: x[..., ::2].repeat_interleave(2, -1) if _last(x, 4) else x,
    # the diagonal of the leading [3, 3] block as a matrix, then the last column back:
    # the value keeps its [..., 3, 4] shape (it came out [..., 3, 3], or of another rank
    # from a 2-D one, and a later binary op with it failed to trace)
    "diag": lambda x, y: ad.concat([x[..., :3, :3].diagonal(0, -2, -1).diag_embed()
                                    .repeat(*[1] * x.ndim), x[..., 3:]], -1)
    if x.ndim >= 2 and tuple(x.shape[-2:]) == (3, 4) else x,
    "setitem": lambda x, y: _setitem(x) if x.ndim else x,
    "gather": lambda x, y: x.gather(-1, ad.Tensor(np.broadcast_to(
        np.array([3, 0, 0, 2], np.int32), x.shape).copy())) if _last(x, 4) else x,
    "index": lambda x, y: x[..., [2, 2, 0, 1]] if _last(x, 4) else x,
    "tril": lambda x, y: x.tril() if x.ndim >= 2 else x,
    "prod": lambda x, y: x.tanh().prod(-1, keepdim=True) if x.ndim else x,
    "std": lambda x, y: x.std(-1, keepdim=True) if x.ndim and x.shape[-1] > 1 else x,
    "norm": lambda x, y: x.norm(dim=-1, keepdim=True) if x.ndim else x,
    "logsumexp": lambda x, y: x.logsumexp(-1, keepdim=True) if x.ndim else x,
    "masked_fill": lambda x, y: x.masked_fill(y > 0.5, -1.0),
    "einsum": lambda x, y: ad.einsum("...i,...i->...", x, x).unsqueeze(-1) if x.ndim else x,
}
VIEWS = ("perm", "flat", "unsq", "mT", "detach", "bcast")

_i = st.integers(0, 63)
INSTR = st.one_of(
    st.tuples(st.just("un"), st.sampled_from(sorted(UNARY)), _i),
    st.tuples(st.just("bin"), st.sampled_from(sorted(BINARY)), _i, _i),
    st.tuples(st.just("sc"), st.sampled_from(sorted(SCALAR_OPS)), _i, st.sampled_from(SCALARS)),
    st.tuples(st.just("where"), st.sampled_from(sorted(CMPS)), _i, _i, _i, _i),
    st.tuples(st.just("red"), st.sampled_from(["sum", "amax", "mean"]), _i, _i, st.booleans()),
    st.tuples(st.just("softmax"), _i),
    st.tuples(st.just("mm"), _i, _i, _i),
    st.tuples(st.just("view"), st.sampled_from(VIEWS), _i, _i),
    st.tuples(st.just("slice"), _i),
    st.tuples(st.just("fill"), _i, st.sampled_from(SCALARS)),
    st.tuples(st.just("dup"), st.sampled_from(sorted(UNARY)), _i),
    st.tuples(st.just("breadth"), st.sampled_from(sorted(BREADTH)), _i, _i),
)
UPDATE = st.tuples(st.integers(0, 2), st.sampled_from(["sgd", "add", "mul", "copy"]), _i)


@dataclass
class Spec:
    """A random program: variables, an optional loop (with Feeders, backward, in-place
    updates, Receivers and an optional nested loop), code before and after it."""
    var_shapes: list
    var_grad: list
    var_special: list
    seed: int
    feeders: list
    iters: int | None            # None: the "body" runs at the top level, no loop
    pre: list
    body: list
    post: list
    backward: bool
    updates: list
    receivers: list
    inner: tuple | None          # (iterations, instructions, update) of a nested loop


@st.composite
def specs(draw) -> Spec:
    n = draw(st.integers(1, 3))
    iters = draw(st.one_of(st.none(), st.integers(0, 3)))
    inner = None
    if iters is not None and draw(st.integers(0, 3)) == 0:
        inner = (draw(st.integers(0, 2)), draw(st.lists(INSTR, max_size=3)), draw(UPDATE))
    return Spec(
        var_shapes=[draw(st.sampled_from(FAMILY)) for _ in range(n)],
        var_grad=[draw(st.booleans()) for _ in range(n)],
        var_special=[draw(st.integers(0, 5)) == 0 for _ in range(n)],
        seed=draw(st.integers(0, 2 ** 16)),
        feeders=draw(st.lists(st.sampled_from(FAMILY), max_size=2)),
        iters=iters,
        pre=draw(st.lists(INSTR, max_size=4)),
        body=draw(st.lists(INSTR, min_size=1, max_size=7)),
        post=draw(st.lists(INSTR, max_size=3)),
        backward=draw(st.booleans()),
        updates=draw(st.lists(UPDATE, max_size=3)),
        receivers=draw(st.lists(st.lists(_i, min_size=1, max_size=2), max_size=2)),
        inner=inner,
    )


@dataclass
class Program:
    """A traced spec: the graph, its variables' initial values, and the host callbacks'
    state (reset before every run)."""
    graph: Graph
    init: dict                      # Variable -> initial array
    feed_data: list                 # per Feeder: arrays handed out in turn
    log: list = field(default_factory=list)
    calls: list = field(default_factory=list)
    keep: list = field(default_factory=list)


SPECIAL = np.array([-0.0, 0.0, np.inf, -np.inf, np.nan, 1e-40, 3e38, -1.5], np.float32)


def _values(shape, rng, special: bool) -> np.ndarray:
    a = rng.standard_normal(shape).astype(np.float32)
    if special:
        flat = a.reshape(-1)
        k = rng.integers(0, len(SPECIAL), size=flat.size)
        pick = rng.random(flat.size) < 0.5
        flat[pick] = SPECIAL[k[pick]]
    return a


def _pick(pool, i):
    return pool[i % len(pool)]


def _fits(t, shape) -> bool:
    try:
        return np.broadcast_shapes(t.shape, shape) == tuple(shape)
    except ValueError:
        return False


def _apply(ins, pool):
    kind = ins[0]
    if kind == "un":
        return UNARY[ins[1]](_pick(pool, ins[2]))
    if kind == "dup":
        x = _pick(pool, ins[2])
        return UNARY[ins[1]](x) + UNARY[ins[1]](x)
    if kind == "bin":
        return BINARY[ins[1]](_pick(pool, ins[2]), _pick(pool, ins[3]))
    if kind == "sc":
        return SCALAR_OPS[ins[1]](_pick(pool, ins[2]), ins[3])
    if kind == "where":
        a, b, c, d = (_pick(pool, i) for i in ins[2:])
        return ad.where(CMPS[ins[1]](a, b), c, d)
    if kind == "red":
        x = _pick(pool, ins[2])
        if x.ndim == 0:
            return x * 1.0
        axis = ins[3] % x.ndim if ins[4] else 0
        f = {"sum": x.sum, "amax": x.amax, "mean": x.mean}[ins[1]]
        return f(axis, keepdim=ins[4])
    if kind == "softmax":
        x = _pick(pool, ins[1])
        return x.softmax(-1) if x.ndim else x.exp()
    if kind == "mm":
        a, b, c = (_pick(pool, i) for i in ins[1:])
        a, b, c = (t.broadcast_to(np.broadcast_shapes(t.shape, (3, 4))) for t in (a, b, c))
        return (a @ b.mT) @ c
    if kind == "view":
        x = _pick(pool, ins[2])
        v = ins[1]
        if v == "perm" and x.ndim >= 2:       # two permutes, then the inverse of both
            rng = np.random.default_rng(ins[3])
            p, q = rng.permutation(x.ndim).tolist(), rng.permutation(x.ndim).tolist()
            y = x.permute(*p).permute(*q)
            return y.permute(*np.argsort([p[i] for i in q]).tolist())
        if v == "flat":
            return x.reshape(-1).reshape(*x.shape)
        if v == "unsq":
            return x.unsqueeze(0).squeeze(0)
        if v == "mT" and x.ndim >= 2:
            return x.mT.mT
        if v == "bcast":
            return x.broadcast_to(BASE).sum(0)
        return x.detach()
    if kind == "slice":
        x = _pick(pool, ins[1])
        if x.ndim == 0 or x.shape[-1] != 4:
            return x + 1.0
        return ad.concat([x[..., 1:][..., 1:], x[..., :2]], -1)
    if kind == "breadth":
        return BREADTH[ins[1]](_pick(pool, ins[2]), _pick(pool, ins[3]))
    if kind == "fill":
        t = _pick(pool, ins[1]) * 1.0
        t.fill_(ins[2])
        return t
    raise ValueError(ins)


def _run(instrs, pool) -> list:
    new = []
    for ins in instrs:
        t = _apply(ins, pool + new)
        new.append(t)
    return new


def _update(upd, variables, pool) -> None:
    v = variables[upd[0] % len(variables)]
    kind = upd[1]
    with ad.no_grad():
        if kind == "sgd":
            if v.requires_grad and v.grad is not None:
                v.sub_(v.grad, alpha=0.1)
            else:
                v.mul_(0.9)
        elif kind == "mul":
            v.mul_(0.5)
        else:
            fit = [t for t in pool if _fits(t, v.shape)]
            t = fit[upd[2] % len(fit)] if fit else _pick(pool, upd[2]).mean()
            if kind == "add":
                v.add_(t * 0.1)
            else:
                v.copy_(t.tanh())


def build(spec: Spec) -> Program:
    """Trace ``spec`` (from fresh variables) and return the program."""
    ad.reset()
    rng = np.random.default_rng(spec.seed)
    variables = [ad.Tensor(_values(s, rng, sp), requires_grad=g)
                 for s, g, sp in zip(spec.var_shapes, spec.var_grad, spec.var_special)]
    feed_data = [[_values(s, rng, False) for _ in range(4)] for s in spec.feeders]
    prog = Program(None, {v._var: v._var.value.copy() for v in variables}, feed_data)
    prog.calls = [0] * len(feed_data)

    def feeder(k):
        def fn():
            c = prog.calls[k]
            prog.calls[k] += 1
            return prog.feed_data[k][c % 4]
        return fn

    def receiver(name):
        return lambda *arrays: prog.log.append((name, [np.array(a) for a in arrays]))

    pre = _run(spec.pre, list(variables))

    def body():
        feeds = [ad.Feeder(feeder(k), s, name=f"f{k}") for k, s in enumerate(spec.feeders)]
        pool = list(variables) + pre + feeds
        new = _run(spec.body, pool)
        if spec.backward:       # a root computed in the body (a fallback returns its input)
            grads = [t for t in new if t.node.requires_grad and not any(t is p for p in pool)]
            if grads:
                grads[-1].sum().backward()
        pool = pool + new
        for u in spec.updates:
            _update(u, variables, pool)
        for k, idx in enumerate(spec.receivers):
            ad.Receiver(receiver(f"r{k}"), [_pick(pool, i) for i in idx], name=f"r{k}")
        if spec.inner is not None:
            n_inner, instrs, upd = spec.inner

            def inner():
                got = _run(instrs, pool)
                _update(upd, variables, pool + got)
                ad.Receiver(receiver("inner"), [(got or pool)[-1]], name="inner")
            ad.ir_for(n_inner, inner)
        for v in variables:
            v.grad = None
        return new

    if spec.iters is None:
        prog.keep = body()
    else:
        ad.ir_for(spec.iters, body)
    post = _run(spec.post, list(variables) + pre)
    ad.Receiver(receiver("post"), [variables[0]], name="post")
    prog.keep = prog.keep + pre + post
    prog.graph = TRACER.finish()
    for n in prog.graph.walk():            # constants the ops made (positions, masks)
        if n.op.name == "LOAD" and n.arg not in prog.init:
            prog.init[n.arg] = n.arg.value.copy()
    return prog


@dataclass
class Observed:
    """What the user sees: Receiver calls, Feeder call counts, outputs, final variables."""
    log: list
    calls: list
    outputs: list
    finals: dict


def execute_graph(prog: Program, graph: Graph, interpreter=Interpreter) -> Observed:
    """Run ``graph`` (the program's graph or an optimized one) from the initial values."""
    prog.log = []
    prog.calls = [0] * len(prog.feed_data)
    store = {v: a.copy() for v, a in prog.init.items()}
    exe = interpreter(graph)
    with np.errstate(all="ignore"):
        exe.run(store)
    return Observed(prog.log, list(prog.calls), [exe.vals[o.id] for o in graph.outputs],
                    {v.id: a for v, a in store.items()})


def assert_same(a: Observed, b: Observed, rtol: float, atol: float, what: str) -> None:
    assert b.calls == a.calls, f"{what}: Feeder calls {b.calls} != {a.calls}"
    assert [n for n, _ in b.log] == [n for n, _ in a.log], f"{what}: Receiver calls differ"
    for (name, xs), (_, ys) in zip(a.log, b.log):
        assert len(xs) == len(ys)
        for x, y in zip(xs, ys):
            np.testing.assert_allclose(y, x, rtol=rtol, atol=atol,
                                       err_msg=f"{what}: Receiver {name}")
    assert len(b.outputs) == len(a.outputs)
    for k, (x, y) in enumerate(zip(a.outputs, b.outputs)):
        np.testing.assert_allclose(y, x, rtol=rtol, atol=atol, err_msg=f"{what}: output {k}")
    for k in a.finals:
        np.testing.assert_allclose(b.finals[k], a.finals[k], rtol=rtol, atol=atol,
                                   err_msg=f"{what}: variable {k}")
