"""The procedural IR: an ordered program of kernels over named buffers.

Lowering (:mod:`.lower`) turns the graph IR into a :class:`Program`; fusion
(:mod:`autodiff.fusion`) rewrites it into a program whose kernels may be
:class:`FusedKernel` groups; the memory planner (:mod:`autodiff.alloc`) assigns arena offsets
to ``temp`` buffers; devices execute or render it.

Structure
---------
* :class:`Buffer`: a named, contiguous (row-major) array of ``shape``/``dtype``. Its ``kind``
  says who owns the storage (see :class:`BufferKind`).
* Values (:class:`Load`, :class:`Const`, :class:`Apply`, :class:`Select`, :class:`Acc`) are
  expression trees a kernel evaluates per work item (:class:`Local` and :class:`Rand` too). A :class:`Load` is a (buffer, access
  expression) pair: the element at flat offset ``index`` of ``buffer``, ``index`` an
  :mod:`access expression <.access>` over the kernel's index variables.
* Kernels iterate over an index space, one :class:`~.access.Var` per dim (``vars``), and
  write one or more :class:`Output` (buffer, access expression, value). All values a work item
  writes are computed from the buffers' contents at kernel start (reads before writes).

  - :class:`Elementwise`: ``outs[j].buffer[outs[j].index] = outs[j].value`` for every point
    of ``shape``.
  - :class:`DotProduct`: ``acc = sum_k a * b`` per point of the output space
    (``[..., M, N]``), with ``a`` over ``(batch vars, M var, k)`` and ``b`` over
    ``(batch vars, k, N var)``; outputs read it through :class:`Acc` (an epilogue when they do
    more than store it).
  - :class:`Reduce`: ``acc = op over the reduced vars of src``; outputs use only the kept vars.
  - :class:`Copy`: whole contiguous buffer to buffer (only where unavoidable).
  - :class:`Gather`, :class:`ScatterAdd`: contiguous buffers, their own kernel kinds.
* Host boundaries: :class:`FeederWrite` (host fills a ``feeder`` staging buffer) and
  :class:`ReceiverRead` (host reads ``receiver`` staging buffers); a host callback inside
  the program (a graph ``CALLBACK``, e.g. an MPI all-reduce) is one :class:`HostCall` in
  two statements: :class:`CallbackRead` (the host takes the operands: a device -> host
  copy a device may start without waiting) and, later, :class:`CallbackWrite` (the host
  waits for them, calls the function and writes the result back).
* :class:`For`: a rolled loop whose ``body`` is a statement list run once per iteration;
  :class:`If` (two statement lists, chosen by a 1-element buffer) and :class:`While` (a
  condition block and a body) are the other control statements (``BLOCKS``), and
  :class:`IndexValue` reads loop counters in a kernel.
* :class:`FusedKernel`: a group made by fusion: ``members`` (the unfused statements, in order,
  for op-by-op execution) and ``kernel`` (the same computation as one kernel: its epilogue is
  in ``kernel.outs``; buffers produced and consumed only inside the group are gone).

Invariants (checked in tests/procedural): every access expression
stays inside its buffer for all index values in range (loads under a false :class:`Select`
condition excepted); a kernel reading a buffer it writes reads it only at the index it writes
with the same work item.
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..graph import dtypes
from ..graph.ir import CallbackSpec, FeederSpec, Op, ReceiverSpec, Variable
from .access import Expr, Var, cached_hash


class BufferKind(str, enum.Enum):
    """Who owns a buffer's storage.

    PARAM: a :class:`~autodiff.graph.ir.Variable` (parameters, optimizer state); persists
        across runs; ``Buffer.var`` is set.
    TEMP: an intermediate value; the memory planner gives it an arena offset.
    FEEDER: host-to-device staging written by a :class:`FeederWrite`.
    RECEIVER: device-to-host staging read by a :class:`ReceiverRead`.
    OUTPUT: a value of ``graph.outputs`` kept after the program ends; ``Buffer.node`` is the
        graph node id.
    """
    PARAM = "param"
    TEMP = "temp"
    FEEDER = "feeder"
    RECEIVER = "receiver"
    OUTPUT = "output"


@dataclass(eq=False)
class Buffer:
    """A named contiguous row-major array.

    Attributes:
        name: unique in its program (``t12`` for the temp made for graph node 12, the
            variable's name for params, the feeder's name for feeder staging...).
        shape: logical shape (the layout is always row-major contiguous).
        dtype: dtype name (:mod:`autodiff.graph.dtypes`); the storage is that dtype's
            device storage (int64 as int32, bool one byte).
        kind: a :class:`BufferKind`.
        var: the Variable backing a PARAM buffer, else None.
        node: id of the graph IR node whose value the buffer holds (None for params).
    """
    name: str
    shape: tuple[int, ...]
    dtype: str
    kind: BufferKind
    var: Variable | None = None
    node: int | None = None

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(map(int, self.shape))

    @property
    def itemsize(self) -> int:
        """Bytes per element in device storage."""
        return dtypes.itemsize(self.dtype)

    @property
    def nbytes(self) -> int:
        """Size in bytes."""
        return self.size * self.itemsize

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {self.kind.value}, {list(self.shape)}, {self.dtype})"


# -- values -----------------------------------------------------------------------------
class Value:
    """Base class of per-work-item value expressions."""
    __slots__ = ()


@dataclass(frozen=True, eq=True)
class Load(Value):
    """``buffer`` element at flat offset ``index`` (an access expression)."""
    buffer: Buffer
    index: Expr

    def __hash__(self):
        return hash((id(self.buffer), self.index))

    def __eq__(self, o):
        return isinstance(o, Load) and o.buffer is self.buffer and o.index == self.index

    @property
    def dtype(self) -> str:
        return self.buffer.dtype


@dataclass(frozen=True, eq=True)
class Const(Value):
    """A scalar constant of ``dtype``."""
    value: float | int
    dtype: str = "float32"


@dataclass(frozen=True, eq=True)
class Apply(Value):
    """Elementwise graph-IR op ``op`` (in :data:`~autodiff.graph.ir.ELEMENTWISE`) on ``args``.

    ``arg`` is the op attribute (the target dtype for ``CAST``); ``dtype`` the result's.
    """
    op: Op
    args: tuple[Value, ...]
    dtype: str = "float32"
    arg: Any = None


@dataclass(frozen=True, eq=True)
class Select(Value):
    """``a`` where the index condition ``cond`` (access expression, 0/1) holds, else ``b``.

    Only the chosen branch is evaluated (its loads may be out of range otherwise): padding
    and concatenation lower to it.
    """
    cond: Expr
    a: Value
    b: Value

    @property
    def dtype(self) -> str:
        return value_dtype(self.a)


# value expressions are trees: hash each node once (remat's op counts put every node of a
# kernel's expressions in a set; a 60-op chain's fusion took 6.5 s, 4 of them in hashing)
Apply.__hash__, Select.__hash__ = cached_hash(Apply), cached_hash(Select)


@dataclass(frozen=True, eq=True)
class Acc(Value):
    """The accumulator of the enclosing :class:`DotProduct` or :class:`Reduce` at this
    work item (the leaf an epilogue starts from)."""
    dtype: str = "float32"


@dataclass(frozen=True, eq=False)
class Local(Value):
    """Inside a fused kernel: the value an earlier entry of ``outs`` computed for ``buffer``
    at this same work item (a register; rendered ``%name``). Never a memory read."""
    buffer: Buffer

    def __hash__(self):
        return id(self.buffer)

    def __eq__(self, o):
        return isinstance(o, Local) and o.buffer is self.buffer

    @property
    def dtype(self) -> str:
        return self.buffer.dtype


@dataclass(frozen=True, eq=True)
class Rand(Value):
    """Element ``index`` (flat, row-major) of a graph ``RAND`` node of ``shape``.

    ``key`` is the node's ``arg`` ``(seed, stream)``; the value is
    ``autodiff.graph.rng.philox_uniform(seed, stream, iters, shape).flat[index]`` where
    ``iters`` are the indices of the enclosing ``For`` loops at run time (float32 in [0, 1)).
    """
    key: Any
    index: Expr
    shape: tuple[int, ...]
    dtype: str = "float32"


@dataclass(frozen=True, eq=True)
class IndexValue(Value):
    """An integer value computed from loop counters: the access expression ``expr`` over
    the counters of enclosing ``For``/``While`` loops (``Var`` s named like their ``var``,
    the iteration count from 0), e.g. a loop index ``start + step * i0`` or ``i0 % 7``."""
    expr: Expr
    dtype: str = "int32"


def value_dtype(v: Value) -> str:
    """The dtype a value expression produces."""
    if isinstance(v, (Load, Local)):
        return v.buffer.dtype
    if isinstance(v, Select):
        return value_dtype(v.a)
    return v.dtype


def walk_values(v: Value) -> Iterator[Value]:
    """``v`` and its sub-values, pre-order."""
    return iter(_preorder(v))


def _preorder(v: Value, distinct: bool = False) -> list[Value]:
    out: list[Value] = []
    seen: set[int] = set()
    stack = [v]
    while stack:
        x = stack.pop()
        if distinct:
            if id(x) in seen:
                continue
            seen.add(id(x))
        out.append(x)
        t = type(x)
        if t is Apply:
            stack.extend(reversed(x.args))
        elif t is Select:
            stack.append(x.b)
            stack.append(x.a)
    return out


def distinct_values(v: Value) -> list[Value]:
    """``v`` and its sub-values, each node object once (pre-order): linear in a value that
    shares sub-values (a DAG), where :func:`walk_values` walks every path (exponential in
    a chain whose every step reads the one before twice)."""
    return _preorder(v, distinct=True)


def loads(v: Value) -> list[Load]:
    """Every :class:`Load` in ``v`` (pre-order)."""
    return [x for x in _preorder(v) if type(x) is Load]


@dataclass(frozen=True, eq=False)
class Output:
    """One result of a kernel: ``buffer[index] = value`` per work item."""
    buffer: Buffer
    index: Expr
    value: Value


# -- statements -------------------------------------------------------------------------
class Stmt:
    """Base class of statements. ``reads()``/``writes()`` give the buffers touched."""
    kind = "stmt"

    def reads(self) -> list[Buffer]:
        return []

    def writes(self) -> list[Buffer]:
        return []


def _uniq(bufs) -> list[Buffer]:
    seen: dict[int, Buffer] = {}
    for b in bufs:
        seen.setdefault(id(b), b)
    return list(seen.values())


class Kernel(Stmt):
    """A statement that is one device kernel launch.

    A kernel is not changed once built (passes make new ones), so :meth:`reads` and
    :meth:`writes` are computed once per kernel (passes ask for them repeatedly)."""

    outs: tuple[Output, ...]

    def values(self) -> list[Value]:
        """Every value expression the kernel evaluates (operands, then outputs)."""
        return [o.value for o in self.outs]

    def reads(self) -> list[Buffer]:
        r = self.__dict__.get("_reads")
        if r is None:
            r = self.__dict__["_reads"] = \
                tuple(_uniq(ld.buffer for v in self.values() for ld in loads(v)))
        return list(r)

    def writes(self) -> list[Buffer]:
        w = self.__dict__.get("_writes")
        if w is None:
            w = self.__dict__["_writes"] = tuple(_uniq(o.buffer for o in self.outs))
        return list(w)


@dataclass(eq=False)
class Elementwise(Kernel):
    """One work item per point of ``shape`` (index variables ``vars``), writing ``outs``."""
    shape: tuple[int, ...]
    vars: tuple[Var, ...]
    outs: tuple[Output, ...]
    kind = "Elw"


@dataclass(eq=False)
class DotProduct(Kernel):
    """Batched matrix product with an epilogue.

    Attributes:
        shape: output space ``[..., M, N]``; ``vars`` one per dim (``..., Y, X``).
        k: the contraction variable (extent K).
        a: value over ``vars[:-1]`` and ``k`` (the left operand ``[..., M, K]``).
        b: value over ``vars[:-2]``, ``k`` and ``vars[-1]`` (the right operand ``[..., K, N]``).
        outs: outputs over ``vars``; :class:`Acc` is ``sum_k a * b``, accumulated in
            float32 (int32 for integer operands) and of dtype :attr:`dtype`.
    """
    shape: tuple[int, ...]
    vars: tuple[Var, ...]
    k: Var
    a: Value
    b: Value
    outs: tuple[Output, ...]
    kind = "DP"

    def values(self) -> list[Value]:
        return [self.a, self.b] + [o.value for o in self.outs]

    @property
    def dtype(self) -> str:
        """The product's dtype: its operands' (one dtype)."""
        return value_dtype(self.a)


@dataclass(eq=False)
class Reduce(Kernel):
    """``SUM`` or ``RMAX`` of ``src`` over ``axes`` of the input space, with an epilogue.

    Attributes:
        op: ``Op.SUM`` or ``Op.RMAX``.
        shape: the input space; ``vars`` one per dim; ``axes`` the reduced dims.
        src: value over ``vars``.
        outs: outputs over the kept vars only; :class:`Acc` is the reduction.
    """
    op: Op
    shape: tuple[int, ...]
    vars: tuple[Var, ...]
    axes: tuple[int, ...]
    src: Value
    outs: tuple[Output, ...]
    kind = "Reduce"

    def values(self) -> list[Value]:
        return [self.src] + [o.value for o in self.outs]

    @property
    def dtype(self) -> str:
        """The reduction's dtype: its source's (16-bit floats accumulate in float32)."""
        return value_dtype(self.src)

    @property
    def kept(self) -> tuple[Var, ...]:
        return tuple(v for i, v in enumerate(self.vars) if i not in self.axes)

    @property
    def reduced(self) -> tuple[Var, ...]:
        return tuple(self.vars[i] for i in self.axes)


@dataclass(eq=False)
class Copy(Kernel):
    """``dst[:] = src[:]`` for two contiguous buffers of equal size and dtype."""
    src: Buffer
    dst: Buffer
    kind = "Copy"

    @property
    def outs(self):
        return ()

    def reads(self):
        return [self.src]

    def writes(self):
        return [self.dst]


@dataclass(eq=False)
class Gather(Kernel):
    """``out[i..., j...] = table[idx[i...], j...]`` (contiguous buffers).

    Raises at run time (IndexError) when an index is outside ``[0, table.shape[0])``.
    """
    out: Buffer
    table: Buffer
    idx: Buffer
    kind = "Gather"

    @property
    def outs(self):
        return ()

    def reads(self):
        return [self.table, self.idx]

    def writes(self):
        return [self.out]


@dataclass(eq=False)
class ScatterAdd(Kernel):
    """``out = 0; out[idx[i...], j...] += updates[i..., j...]`` (contiguous buffers)."""
    out: Buffer
    updates: Buffer
    idx: Buffer
    kind = "ScatterAdd"

    @property
    def outs(self):
        return ()

    def reads(self):
        return [self.updates, self.idx]

    def writes(self):
        return [self.out]


@dataclass(eq=False)
class FeederWrite(Stmt):
    """The host calls ``spec.fn()`` and writes the result into ``buffer`` (kind FEEDER)."""
    spec: FeederSpec
    buffer: Buffer
    kind = "Feeder"

    def writes(self):
        return [self.buffer]


@dataclass(eq=False)
class ReceiverRead(Stmt):
    """The host calls ``spec.fn(*arrays)`` with copies of ``buffers`` (kind RECEIVER)."""
    spec: ReceiverSpec
    buffers: tuple[Buffer, ...]
    kind = "Receiver"

    def reads(self):
        return list(self.buffers)


@dataclass(eq=False)
class HostCall:
    """One host callback of the program (a graph ``CALLBACK`` node).

    Attributes:
        spec: the node's :class:`~autodiff.graph.ir.CallbackSpec` (``fn``, result shape
            and dtype, ``collective``).
        args: staging buffers (kind RECEIVER) holding the operand values, in order.
        result: the staging buffer (kind FEEDER) the host writes the result into.
        node: the graph node id.
    """
    spec: CallbackSpec
    args: tuple[Buffer, ...]
    result: Buffer
    node: int | None = None


@dataclass(eq=False)
class CallbackRead(Stmt):
    """Start of ``call``: the host takes the values of ``call.args`` (device -> host). A
    device may only start the copy here and wait for it at the :class:`CallbackWrite`, so
    that the kernels in between (the scheduler puts there everything that does not need
    the result) overlap the copy and the host function."""
    call: HostCall
    kind = "CallbackRead"

    def reads(self):
        return list(self.call.args)


@dataclass(eq=False)
class CallbackWrite(Stmt):
    """End of ``call``: the host has the operands, calls ``call.spec.fn`` on them and
    writes the result into ``call.result`` (host -> device); readers of the result come
    after. Always after its :class:`CallbackRead`, in the same block."""
    call: HostCall
    kind = "CallbackWrite"

    def writes(self):
        return [self.call.result]


@dataclass(eq=False)
class For(Stmt):
    """``body`` run once per element of ``range``; ``var`` names the loop counter: the
    iteration count ``0 .. len(range) - 1``, which access expressions read as
    ``Var(var, len(range))``."""
    range: range
    body: list[Stmt]
    var: str = "i0"
    kind = "For"

    def blocks(self) -> list[list[Stmt]]:
        return [self.body]

    def with_blocks(self, blocks) -> "For":
        return For(self.range, blocks[0], self.var)

    def reads(self):
        return _uniq(b for s in self.body for b in s.reads())

    def writes(self):
        return _uniq(b for s in self.body for b in s.writes())


@dataclass(eq=False)
class If(Stmt):
    """``then`` runs when the condition is nonzero, else ``orelse``. The condition is
    element 0 of ``cond``, a 1-element buffer, or an :class:`IndexValue` (a condition on the
    loop counters, e.g. ``i0 % 100 == 0``, which a host can evaluate without reading the
    device). Whether a device decides on the host (reading ``cond`` back) or on the device
    (every kernel of the branches reads ``cond``) is its choice: ``cond`` stays live
    through both branches."""
    cond: "Buffer | IndexValue"
    then: list[Stmt]
    orelse: list[Stmt]
    kind = "If"

    def blocks(self) -> list[list[Stmt]]:
        return [self.then, self.orelse]

    def with_blocks(self, blocks) -> "If":
        return If(self.cond, blocks[0], blocks[1])

    def reads(self):
        own = [self.cond] if isinstance(self.cond, Buffer) else []
        return _uniq(own + [b for blk in self.blocks() for s in blk for b in s.reads()])

    def writes(self):
        return _uniq(b for blk in self.blocks() for s in blk for b in s.writes())


@dataclass(eq=False)
class While(Stmt):
    """Repeat: run ``cond`` (statements that compute ``pred``, a 1-element buffer or an
    :class:`IndexValue`); stop if it is zero or ``max_iterations`` iterations ran (None: no
    bound); run ``body``. ``var`` names the iteration counter, as in :class:`For`."""
    cond: list[Stmt]
    pred: "Buffer | IndexValue"
    body: list[Stmt]
    max_iterations: int | None = None
    var: str = "i0"
    kind = "While"

    def blocks(self) -> list[list[Stmt]]:
        return [self.cond, self.body]

    def with_blocks(self, blocks) -> "While":
        return While(blocks[0], self.pred, blocks[1], self.max_iterations, self.var)

    def reads(self):
        own = [self.pred] if isinstance(self.pred, Buffer) else []
        return _uniq(own + [b for blk in self.blocks() for s in blk for b in s.reads()])

    def writes(self):
        return _uniq(b for blk in self.blocks() for s in blk for b in s.writes())


#: statements holding statement lists (``blocks()``)
BLOCKS = (For, If, While)


@dataclass(eq=False)
class FusedKernel(Kernel):
    """A group of statements fused into one kernel.

    Attributes:
        name: the fusion that made it: ``"DP+Elw"``, ``"Reduce+Elw"`` or ``"ElwFuse"``.
        members: the original kernels in program order (what running op by op executes).
        kernel: the single-kernel form (a :class:`DotProduct`, :class:`Reduce` or
            :class:`Elementwise` whose ``outs`` carry the epilogue). Its ``outs`` run in
            order; later ones refer to earlier results with :class:`Local`. An out whose
            buffer is in ``internal`` is a register only (never stored).
        internal: buffers produced and consumed only inside the group: no memory needed
            when ``kernel`` runs (the memory planner skips them).
    """
    name: str
    members: tuple[Stmt, ...]
    kernel: Kernel
    internal: tuple[Buffer, ...] = ()

    @property
    def kind(self):
        return self.name

    @property
    def outs(self):
        return self.kernel.outs

    def values(self):
        return self.kernel.values()

    def reads(self):
        return self.kernel.reads()

    def writes(self):
        w = self.__dict__.get("_writes")
        if w is None:
            inside = {id(b) for b in self.internal}
            w = self.__dict__["_writes"] = \
                tuple(b for b in self.kernel.writes() if id(b) not in inside)
        return list(w)

    def stored(self) -> list[Output]:
        """The outputs ``kernel`` writes to memory (``internal`` ones excluded)."""
        inside = {id(b) for b in self.internal}
        return [o for o in self.kernel.outs if id(o.buffer) not in inside]


@dataclass(eq=False)
class Program:
    """A whole lowered program.

    Attributes:
        body: top-level statements in execution order.
        buffers: every buffer the statements use (params, temps, staging, outputs), in
            first-use order.
        outputs: graph node id -> OUTPUT buffer holding its value after the run (the
            top-level ``graph.outputs``).
        title: printed header (``"procedural"`` or ``"fused"``).
        graph: the graph IR the statements were lowered from, after
            :func:`~autodiff.opt.lower_control.lower_control` (statements name its node
            ids; control lowering gives branch bodies new nodes).
    """
    body: list[Stmt]
    buffers: list[Buffer]
    outputs: dict[int, Buffer] = field(default_factory=dict)
    title: str = "procedural"
    graph: object = field(default=None, repr=False, compare=False)

    def walk(self) -> Iterator[tuple[Stmt, int]]:
        """``(statement, depth)`` pairs, the blocks of ``For``/``If``/``While`` included, in
        program order."""
        def rec(stmts, depth):
            for s in stmts:
                yield s, depth
                if isinstance(s, BLOCKS):
                    for blk in s.blocks():
                        yield from rec(blk, depth + 1)
        return rec(self.body, 0)

    def kernels(self) -> list[Stmt]:
        """Every kernel (loop bodies counted once), fused groups counted as one."""
        return [s for s, _ in self.walk() if isinstance(s, Kernel)]

    def temps(self) -> list[Buffer]:
        """The TEMP buffers (what the memory planner places in the arena)."""
        return [b for b in self.buffers if b.kind is BufferKind.TEMP]

    def __str__(self) -> str:
        from .printer import format_program
        return format_program(self)
