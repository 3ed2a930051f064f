"""C-style kernel dialects: the few spellings in which OpenCL C, CUDA and friends differ.

Modelled on tinygrad's ``renderer/cstyle.py``: kernel sources are written once against a
:class:`Dialect` and each device supplies one as data, a subclass setting a handful of
fields (:class:`autodiff.device.opencl.dialect.OpenCL`,
:class:`autodiff.device.cuda.dialect.CUDA`). Everything else (expressions, loops, vector
types spelled ``float16``) is shared C in OpenCL C's vocabulary, which a C++ target defines
in its prelude.

A dialect is a handful of class attributes (kernel qualifier, buffer qualifier,
shared-memory and constant spellings, barrier, index builtins, warp width and shuffle);
:class:`autodiff.device.cuda.dialect.CUDA` is a complete example.
"""
from __future__ import annotations

_AXES = "xyz"

#: the fields a :class:`Body` takes from its kernel dialect
FIELDS = ("buffer", "local", "constant", "inline", "noinline", "barrier", "preamble", "warp",
          "shuffle_down")


class Dialect:
    """A C-style kernel language (subclasses set the fields).

    Attributes:
        name: dialect name.
        kernel: qualifier and return type that start a kernel definition.
        buffer: address-space qualifier of global-memory pointers ("" where there is none).
        local: qualifier of work-group shared memory.
        constant: qualifier of read-only constant memory.
        inline: qualifier of device helper functions.
        noinline: qualifier of a helper function the compiler must keep a function of its
            own.
        barrier: work-group barrier statement (local memory fence).
        ids: work-item index expressions, ``{d}`` being the axis letter (``x``, ``y``,
            ``z``) and ``{i}`` the axis number.
        preamble: source text put before the first kernel (pragmas).
        warp: work-items that run in lockstep and exchange registers without a barrier
            (:attr:`shuffle_down`); 0 where the dialect has no such exchange.
        shuffle_down: C expression of the value ``{x}`` held by the work-item ``{o}``
            lanes further in the warp (the caller's own where that is past the warp).
        whole: the dialect of complete kernels (work-group code with local memory and
            barriers); itself here, the whole-kernel dialect for a :class:`Body`.
    """
    name: str = ""
    kernel: str = ""
    buffer: str = ""
    local: str = ""
    constant: str = ""
    inline: str = ""
    noinline: str = "__attribute__((noinline))"
    barrier: str = ""
    ids: dict = {}
    preamble: str = ""
    warp: int = 0
    shuffle_down: str = ""

    @property
    def whole(self) -> "Dialect":
        return self

    def index(self, kind: str, axis: int) -> str:
        """The expression for the work-item's ``kind`` index (``"global"``, ``"local"``,
        ``"group"``) along ``axis`` (0, 1 or 2); an ``int`` in both OpenCL and CUDA."""
        return "(int)" + self.ids[kind].format(i=axis, d=_AXES[axis])

    def pointer(self, ctype: str = "float", const: bool = False) -> str:
        """A kernel parameter type for a global buffer, e.g. ``__global float*``."""
        c = "const " if const else ""
        return f"{self.buffer} {c}{ctype}*".strip()

    def signature(self, name: str, params: list[str], inline: bool = True) -> str:
        """The first line of kernel ``name`` with parameter declarations ``params``
        (``inline``: for a :class:`Body`; a complete kernel is never inlined)."""
        return f"{self.kernel} {name}({', '.join(params)})"


class Body(Dialect):
    """A kernel's work-item body as an inline function of its global index, in the
    dialect of the complete kernels ``of``.

    ``signature(name, params)`` declares ``static <inline> void name_body(params..., g0,
    g1, g2)`` and the global index along axis ``i`` is the argument ``g{i}``. A device's
    *wrapper* kernel then runs the body once per work-item of its index space (and the
    OpenCL device also in plain loops inside a launch chain). Bodies may not use local or
    group indices (nothing shared between work-items, no barrier), which holds for every
    template but :func:`.kernels.tree_reduce` (rendered in :attr:`whole`).
    """
    def __init__(self, of: Dialect):
        self.of = of
        for field in FIELDS:
            setattr(self, field, getattr(of, field))
        self.name = f"{of.name}-body"
        self.kernel = f"static {of.inline} void"
        self.ids = {"global": "g{i}"}

    @property
    def whole(self) -> Dialect:
        return self.of

    def signature(self, name: str, params: list[str], inline: bool = True) -> str:
        """``inline=False``: the body stays a function of its own (:attr:`noinline`), called
        per work-item (a matmul tile's body that calls the shared tile loop: its caller's
        loop then holds one call, not the tile's 16-32 epilogue addresses, which LLVM's
        loop strength reduction worked through in every block function)."""
        args = params + [f"const int g{i}" for i in range(3)]
        head = self.kernel if inline else f"static {self.noinline} void"
        return f"{head} {body_name(name)}({', '.join(args)})"


def body_name(kernel: str) -> str:
    """The C name of kernel ``kernel`` 's body function in a :class:`Body` dialect."""
    return f"{kernel}_body"
