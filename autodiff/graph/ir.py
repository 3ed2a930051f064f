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
    WHERE = enum.auto()      # srcs: (mask, a, b); mask is nonzero -> a
    # contraction and reductions (reductions keep reduced dims as size 1)
    DOT = enum.auto()        # srcs: (a [..., M, K], b [..., K, N]) with equal batch dims
    SUM = enum.auto()        # arg: tuple of axes
    RMAX = enum.auto()       # arg: tuple of axes
    # movement (index arithmetic only, never arithmetic on values)
    RESHAPE = enum.auto()    # arg: new shape
    PERMUTE = enum.auto()    # arg: permutation
    EXPAND = enum.auto()     # arg: new shape; only size-1 dims grow
    SLICE = enum.auto()      # arg: tuple of (start, stop, step) per dim
    PAD = enum.auto()        # arg: tuple of (before, after) per dim, zeros outside
    CONCAT = enum.auto()     # arg: dim
    GATHER = enum.auto()     # srcs: (table [N, ...], idx int32 [...]) -> [..., ...]
    SCATTER_ADD = enum.auto()  # srcs: (updates [..., ...], idx [...]); arg: N -> [N, ...]
    # effects
    ASSIGN = enum.auto()     # arg: Variable; srcs: (value,)
    RECEIVER = enum.auto()   # arg: ReceiverSpec; srcs: values handed to the callback
    FOR = enum.auto()        # arg: ForArg


UNARY = frozenset({Op.NEG, Op.EXP, Op.LOG, Op.EXP2, Op.LOG2, Op.SQRT, Op.RSQRT, Op.RECIP,
                   Op.SIN, Op.COS, Op.TANH, Op.SIGMOID, Op.RELU, Op.ABS, Op.ERF, Op.SIGN,
                   Op.CAST, Op.NOT})
COMPARE = frozenset({Op.CMPLT, Op.CMPLE, Op.CMPGT, Op.CMPGE, Op.CMPEQ, Op.CMPNE})
BITWISE = frozenset({Op.AND, Op.OR, Op.XOR, Op.SHL, Op.SHR, Op.NOT})
BINARY = frozenset({Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.POW, Op.MAX, Op.MIN, Op.FLOORDIV,
                    Op.MOD, Op.AND, Op.OR, Op.XOR, Op.SHL, Op.SHR}) | COMPARE
ELEMENTWISE = UNARY | BINARY | {Op.WHERE}
REDUCE = frozenset({Op.SUM, Op.RMAX})
MOVEMENT = frozenset({Op.RESHAPE, Op.PERMUTE, Op.EXPAND, Op.SLICE, Op.PAD, Op.CONCAT})
LEAF = frozenset({Op.CONST, Op.LOAD, Op.FEEDER, Op.RAND})
EFFECT = frozenset({Op.ASSIGN, Op.RECEIVER, Op.FOR, Op.FEEDER})

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
class ForArg:
    """A rolled loop: ``body`` runs once per element of ``range``."""
    range: range
    body: "Graph"


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
        return int(np.prod(self.shape, dtype=np.int64))

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
        """Every node, bodies of ``For`` nodes included, in program order (pre-order)."""
        for n in self.nodes:
            yield n
            if n.op is Op.FOR:
                yield from n.arg.body.walk()

    def count(self) -> int:
        """Number of nodes, loop bodies included (each body counted once)."""
        return sum(1 for _ in self.walk())


def captures(body: Graph) -> list[Node]:
    """Nodes from enclosing graphs that ``body`` (or its nested bodies) reads, in first-use order.

    Complexity: O(nodes in body + edges).
    """
    inside = {n.id for n in body.walk()}
    seen: dict[int, Node] = {}
    for n in body.walk():
        for s in n.srcs:
            if s.id not in inside and s.id not in seen:
                seen[s.id] = s
    return list(seen.values())
