"""The graph IR: small immutable nodes in program order, ``For`` nodes holding sub-graphs.

A :class:`Node` is one SSA value (or one effect) of the traced program. Elementwise nodes
always see operands of identical shape: the front end makes broadcasting explicit with
``RESHAPE`` + ``EXPAND`` nodes, so later stages can turn it into index arithmetic.

Value semantics of variables (parameters, optimizer state, any ``Tensor`` made from data):

* ``LOAD(var)`` reads the variable's value at that point of the program.
* ``ASSIGN(var, value)`` writes it; its own value is ``value``. Inside a ``For`` body the
  last ``ASSIGN`` of a variable is its loop-carried value for the next iteration.
* Program order is the order of ``Graph.nodes``; a ``LOAD`` of ``v`` that precedes an
  ``ASSIGN`` of ``v`` in the same graph reads the old value (the front end never creates a
  ``LOAD`` after an ``ASSIGN`` in the same scope: it reuses the ``ASSIGN`` node).
"""
from __future__ import annotations

import enum
import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from . import dtypes


class Op(enum.Enum):
    # leaves
    CONST = enum.auto()      # arg: python float (or int), filled to ``shape``
    LOAD = enum.auto()       # arg: Variable
    FEEDER = enum.auto()     # arg: FeederSpec
    RAND = enum.auto()       # arg: (seed, stream) ints; float32 uniform [0, 1), new every
                             # loop iteration (Philox-4x32-10, see graph/rng.py)
    # unary elementwise
    NEG = enum.auto(); EXP = enum.auto(); LOG = enum.auto(); EXP2 = enum.auto()
    LOG2 = enum.auto(); SQRT = enum.auto(); RSQRT = enum.auto(); RECIP = enum.auto()
    SIN = enum.auto(); COS = enum.auto(); TANH = enum.auto(); SIGMOID = enum.auto()
    RELU = enum.auto(); ABS = enum.auto(); ERF = enum.auto(); SIGN = enum.auto()
    CAST = enum.auto()       # arg: target dtype name
    ATAN = enum.auto(); LOG1P = enum.auto(); EXPM1 = enum.auto()   # accurate near 0
    NOT = enum.auto()        # bitwise not (logical not on bool); int and bool only
    # binary elementwise
    ADD = enum.auto(); SUB = enum.auto(); MUL = enum.auto(); DIV = enum.auto()
    POW = enum.auto(); MAX = enum.auto(); MIN = enum.auto()
    CMPLT = enum.auto(); CMPLE = enum.auto(); CMPGT = enum.auto(); CMPGE = enum.auto()
    CMPEQ = enum.auto(); CMPNE = enum.auto()
    FLOORDIV = enum.auto()   # floor(a / b) (Python's //, torch.floor_divide)
    MOD = enum.auto()        # a - floor(a / b) * b (Python's %, torch.remainder)
    AND = enum.auto(); OR = enum.auto(); XOR = enum.auto()   # bitwise; int and bool only
    SHL = enum.auto(); SHR = enum.auto()   # shifts (arithmetic right); int only
    # ternary elementwise
    WHERE = enum.auto()      # srcs: (mask bool, a, b); mask true -> a
    # contraction and reductions (reductions keep reduced dims as size 1)
    DOT = enum.auto()        # srcs: (a [..., M, K], b [..., K, N]) with equal batch dims
    SUM = enum.auto()        # arg: tuple of axes
    RMAX = enum.auto()       # arg: tuple of axes
    # movement (index arithmetic only, never arithmetic on values)
    RESHAPE = enum.auto()    # arg: new shape
    PERMUTE = enum.auto()    # arg: permutation
    EXPAND = enum.auto()     # arg: new shape; only size-1 dims grow
    SLICE = enum.auto()      # arg: tuple of (start, stop, step) per dim: element j of a dim
                             # is start + step*j (step != 0; negative only from flip)
    PAD = enum.auto()        # arg: tuple of (before, after) per dim, zeros outside
    CONCAT = enum.auto()     # arg: dim
    WINDOW = enum.auto()     # arg: (dim, size, step, dilation); sliding windows of ``dim``:
                             # out[..., o, ..., k] = x[..., o*step + k*dilation, ...], the
                             # window index k a new last dim (``Tensor.unfold`` + dilation)
    GATHER = enum.auto()     # srcs: (table [N, ...], idx int32/int64 [...]) -> [..., ...]
    SCATTER_ADD = enum.auto()  # srcs: (updates [..., ...], idx [...]); arg: N -> [N, ...]
    # effects
    ASSIGN = enum.auto()     # arg: Variable; srcs: (value,)
    RECEIVER = enum.auto()   # arg: ReceiverSpec; srcs: values handed to the callback
    FOR = enum.auto()        # arg: ForArg
    # control flow (autodiff.graph.control): nodes holding sub-graphs, and their values
    INDEX = enum.auto()      # arg: IndexArg; int32 [] index of an enclosing FOR/WHILE/SCAN
    IF = enum.auto()         # srcs: (pred,); arg: IfArg (two sub-graphs)
    WHILE = enum.auto()      # arg: WhileArg (condition and body sub-graphs)
    SCAN = enum.auto()       # srcs: (*init, *xs); arg: ScanArg (a body run once per step)
    ARG = enum.auto()        # arg: k; in a SCAN body: carry k (k < n_carry), else the
                             # current step's slice of xs[k - n_carry]
    RESULT = enum.auto()     # srcs: (IF or SCAN node,); arg: k; that node's k-th result
    AFTER = enum.auto()      # srcs: (x, anchor); the value of x, computed after anchor (an
                             # ordering barrier: activation checkpointing's recomputation)
    PUT = enum.auto()        # srcs: (base [N, ...], row [...], idx int32 []); base with
                             # row idx replaced (scan outputs; made by lowering only)
    # host boundary inside the program
    CALLBACK = enum.auto()   # srcs: device values handed to the host; arg: CallbackSpec;
                             # the value the host function returns (declared shape/dtype)

    # members are singletons compared by identity: hash them so too (Enum's own hash is a
    # Python-level call, and every pass looks ops up in tables and sets)
    __hash__ = object.__hash__


UNARY = frozenset({Op.NEG, Op.EXP, Op.LOG, Op.EXP2, Op.LOG2, Op.SQRT, Op.RSQRT, Op.RECIP,
                   Op.SIN, Op.COS, Op.TANH, Op.SIGMOID, Op.RELU, Op.ABS, Op.ERF, Op.SIGN,
                   Op.CAST, Op.ATAN, Op.LOG1P, Op.EXPM1, Op.NOT})
COMPARE = frozenset({Op.CMPLT, Op.CMPLE, Op.CMPGT, Op.CMPGE, Op.CMPEQ, Op.CMPNE})
BITWISE = frozenset({Op.AND, Op.OR, Op.XOR, Op.SHL, Op.SHR, Op.NOT})
BINARY = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.POW, Op.MAX, Op.MIN, Op.FLOORDIV,
                    Op.MOD, Op.AND, Op.OR, Op.XOR, Op.SHL, Op.SHR}) | COMPARE
ELEMENTWISE = UNARY | BINARY | {Op.WHERE}
REDUCE = frozenset({Op.SUM, Op.RMAX})
MOVEMENT = frozenset({Op.RESHAPE, Op.PERMUTE, Op.EXPAND, Op.SLICE, Op.PAD, Op.CONCAT,
                      Op.WINDOW})
LEAF = frozenset({Op.CONST, Op.LOAD, Op.FEEDER, Op.RAND})
EFFECT = frozenset({Op.ASSIGN, Op.RECEIVER, Op.FOR, Op.FEEDER, Op.IF, Op.WHILE,
                    Op.CALLBACK})
#: host callbacks: the program stops at them for the host (never removed or merged)
HOST_CALLS = frozenset({Op.FEEDER, Op.RECEIVER, Op.CALLBACK})
#: nodes holding sub-graphs (see :func:`bodies`)
CONTROL = frozenset({Op.FOR, Op.IF, Op.WHILE, Op.SCAN})

_ids = itertools.count()


@dataclass(eq=False)
class Variable:
    """Device-resident storage that outlives a program: a parameter, optimizer state.

    ``value`` is the host copy (a numpy array of ``shape``/``dtype``); devices write the
    final value back into it when :func:`autodiff.execute` ends.
    """
    value: np.ndarray
    name: str | None = None
    id: int = field(default_factory=lambda: next(_ids))
    owner: Any = None   # weakref to the Tensor that holds this variable
    transient: bool = False   # made by lowering (scan carries, branch results): the
                              # storage is a temporary of one program, never the host's

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.value.shape)

    @property
    def dtype(self) -> str:
        """The dtype name (the host value's dtype: ``int64`` values are int64 here even
        though devices store them as int32)."""
        return str(self.value.dtype)

    def __repr__(self) -> str:
        return f"Variable({self.name or self.id}, {list(self.shape)})"


@dataclass(eq=False)
class FeederSpec:
    """Host callback ``fn() -> np.ndarray`` producing a value each time the node runs."""
    fn: Any
    shape: tuple[int, ...]
    dtype: str
    name: str


@dataclass(eq=False)
class ReceiverSpec:
    """Host callback ``fn(*arrays)`` run with the values of the node's operands
    (``dtypes``: their dtype names, which the arrays are converted to on the host)."""
    fn: Any
    name: str
    dtypes: tuple = ()


@dataclass(eq=False)
class CallbackSpec:
    """A host function inside the program (``CALLBACK``): ``fn(*arrays) -> array``.

    The device hands ``fn`` the values of the node's operands (fresh numpy arrays in their
    host dtypes) and continues with the array it returns, which must have ``shape`` and
    ``dtype``; like ``jax.pure_callback`` with one result, or an effect such as an MPI
    collective (``collective`` set). Every call happens in program order relative to the
    other ``CALLBACK`` nodes, and is never skipped, repeated or merged.

    Attributes:
        fn: the host function.
        name: shown in printers and errors.
        shape, dtype: of the result.
        vjp: ``vjp(g, out, *srcs) -> tuple`` of one gradient node (or None) per operand,
            traced by reverse-mode AD; None: the callback is not differentiable.
        collective: the name of the collective (``"all_reduce"``...) when ``fn`` talks to
            the other processes of a distributed run (:mod:`autodiff.distributed`): a run
            holding one agrees with them on failures; None otherwise.
        dtypes: the operands' dtype names (their arrays are converted to these host
            dtypes before ``fn`` sees them).
    """
    fn: Any
    name: str
    shape: tuple[int, ...]
    dtype: str
    vjp: Any = None
    collective: str | None = None
    dtypes: tuple = ()

    def __str__(self) -> str:
        return self.name


@dataclass(eq=False)
class ForArg:
    """A rolled loop: ``body`` runs once per element of ``range``.

    ``index`` is the loop's key (:class:`IndexArg`) when the body reads its index (an
    ``INDEX`` node), else None.
    """
    range: range
    body: "Graph"
    index: int | None = None

    def graphs(self) -> list["Graph"]:
        return [self.body]

    def with_graphs(self, gs) -> "ForArg":
        return replace(self, body=gs[0])


@dataclass(frozen=True)
class IndexArg:
    """The arg of an ``INDEX`` node: ``start + step * k`` in iteration ``k`` (counted from 0)
    of the loop whose key is ``key`` (a ``FOR``, ``WHILE`` or ``SCAN``), which runs at most
    ``count`` iterations (None: unbounded)."""
    key: int
    start: int = 0
    step: int = 1
    count: int | None = None

    def bounds(self) -> tuple[int, int] | None:
        """Smallest and largest value the index takes (None if unbounded or never run)."""
        if not self.count:
            return None
        last = self.start + self.step * (self.count - 1)
        return min(self.start, last), max(self.start, last)


@dataclass(eq=False)
class IfArg:
    """``then`` runs when the predicate is nonzero, else ``orelse``; the ``outputs`` of the
    two graphs are the node's results (``RESULT`` k: ``then.outputs[k]`` or
    ``orelse.outputs[k]``, same shapes and dtypes). Either graph may assign variables."""
    then: "Graph"
    orelse: "Graph"

    def graphs(self) -> list["Graph"]:
        return [self.then, self.orelse]

    def with_graphs(self, gs) -> "IfArg":
        return replace(self, then=gs[0], orelse=gs[1])


@dataclass(eq=False)
class WhileArg:
    """``cond`` (whose single output is a 0-d predicate) runs before every iteration;
    ``body`` runs while it is nonzero, at most ``max_iterations`` times (None: no bound).
    State is carried by variables, as in ``FOR``; ``index`` as in :class:`ForArg`."""
    cond: "Graph"
    body: "Graph"
    max_iterations: int | None = None
    index: int | None = None

    def graphs(self) -> list["Graph"]:
        return [self.cond, self.body]

    def with_graphs(self, gs) -> "WhileArg":
        return replace(self, cond=gs[0], body=gs[1])


@dataclass(eq=False)
class ScanArg:
    """JAX's ``lax.scan``: ``body`` runs ``length`` times (backwards when ``reverse``).

    The body reads its carries and the current slices of the scanned inputs through ``ARG``
    nodes; ``body.outputs`` are the new carries (``n_carry`` of them, shapes and dtypes of
    the initial ones) then the per-step outputs. ``RESULT`` k of the node is the final carry
    k (k < ``n_carry``), else per-step output ``k - n_carry`` stacked along a new leading
    dim of ``length``. ``key`` names the loop for ``INDEX`` nodes in the body. The body is
    pure (no variable updates, host callbacks or loops with effects). ``remat``: the
    backward pass recomputes the body from the saved carries instead of saving its values
    (``scan(checkpoint=k)``'s outer loop over segments).
    """
    body: "Graph"
    length: int
    n_carry: int
    reverse: bool = False
    key: int = 0
    remat: bool = False

    def graphs(self) -> list["Graph"]:
        return [self.body]

    def with_graphs(self, gs) -> "ScanArg":
        return replace(self, body=gs[0])


@dataclass(frozen=True, eq=False)
class Node:
    """One value or effect of the graph IR.

    Attributes:
        op: the operation.
        srcs: operand nodes (may belong to an enclosing graph: a loop body reads values
            computed before the loop directly).
        shape: result shape, a tuple of ints (``()`` for scalars and effects).
        dtype: dtype name, one of :data:`autodiff.graph.dtypes.DTYPES` (``"float32"``,
            ``"int64"``, ``"bool"``...); every operand of an elementwise node has one dtype
            (the front end inserts ``CAST`` nodes), except ``WHERE``'s bool mask.
        arg: op attribute, see :class:`Op`.
        site: ``file:line`` of the user's code that traced the node.
        requires_grad: whether reverse-mode AD propagates through the node.
        id: unique, increasing in creation order.
    """
    op: Op
    srcs: tuple["Node", ...]
    shape: tuple[int, ...]
    dtype: str = "float32"
    arg: Any = None
    site: str = "?"
    requires_grad: bool = False
    id: int = field(default_factory=lambda: next(_ids))

    def replace(self, **kw) -> "Node":
        """A copy with some fields changed and a fresh id."""
        kw.setdefault("id", next(_ids))
        return replace(self, **kw)

    @property
    def size(self) -> int:
        return math.prod(int(d) for d in self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes in device storage (int64 is stored as int32)."""
        return self.size * dtypes.itemsize(self.dtype)

    def __repr__(self) -> str:
        return f"%{self.id}:{self.op.name}{list(self.shape)}"


@dataclass(eq=False)
class Graph:
    """A list of nodes in program order, plus the values kept after it runs.

    ``outputs`` are nodes whose values the user can still read after ``execute()`` (top
    level only); effects (``ASSIGN``, ``RECEIVER``, ``FOR``, ``FEEDER``) are kept by being
    in ``nodes``.

    Side tables filled by :mod:`autodiff.opt` on the top-level graph (keys are node ids,
    loop bodies included; a pass that rebuilds nodes drops ``inplace``):

    * ``inplace``: node id -> id of the operand whose buffer the node may overwrite (the
      operand dies at that node; see :mod:`autodiff.opt.inplace`).
    * ``unused_feeders``: ids of ``FEEDER`` nodes nothing reads; they are still called,
      but their data need not be transferred (see :mod:`autodiff.opt.prune`).
    """
    nodes: list[Node] = field(default_factory=list)
    outputs: list[Node] = field(default_factory=list)
    inplace: dict = field(default_factory=dict)
    unused_feeders: frozenset = frozenset()

    def walk(self):
        """Every node, sub-graphs of ``For`` (and other control) nodes included, in program
        order (pre-order)."""
        for n in self.nodes:
            yield n
            if n.op in CONTROL:
                for g in n.arg.graphs():
                    yield from g.walk()

    def count(self) -> int:
        """Number of nodes, loop bodies included (each body counted once)."""
        return sum(1 for _ in self.walk())


def bodies(n: Node) -> list[Graph]:
    """The sub-graphs of ``n`` (``FOR``: its body; ``IF``: then, else; ``WHILE``: condition,
    body; ``SCAN``: its body), ``[]`` for other nodes."""
    return n.arg.graphs() if n.op in CONTROL else []


def with_bodies(n: Node, graphs) -> Node:
    """A copy of control node ``n`` (fresh id) holding ``graphs`` instead of its sub-graphs."""
    return n.replace(arg=n.arg.with_graphs(list(graphs)))


def captures(body: Graph | Node) -> list[Node]:
    """Nodes from enclosing graphs that ``body`` (or its nested bodies) reads, in first-use order.

    ``body`` may be a graph or a control node (then: what all its sub-graphs read, their
    outputs included, other than the node's own ``srcs``).

    Complexity: O(nodes in body + edges).
    """
    graphs = bodies(body) if isinstance(body, Node) else [body]
    inside = {n.id for g in graphs for n in g.walk()}
    seen: dict[int, Node] = {}

    def visit(g: Graph) -> None:
        for n in g.nodes:
            for s in n.srcs:
                if s.id not in inside and s.id not in seen:
                    seen[s.id] = s
            for sub in bodies(n):
                visit(sub)
        for o in g.outputs:
            if o.id not in inside and o.id not in seen:
                seen[o.id] = o

    for g in graphs:
        visit(g)
    return list(seen.values())
