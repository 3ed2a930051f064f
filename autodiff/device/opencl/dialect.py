"""C-style kernel dialects: the few spellings in which OpenCL C, CUDA and friends differ.

Modelled on tinygrad's ``renderer/cstyle.py``: kernel sources are written once against a
:class:`Dialect` and a new target is a subclass overriding a handful of fields. Everything
else (expressions, loops, vector types spelled ``float16``) is shared C.

Example::

    class CUDA(Dialect):
        name = "cuda"
        kernel = 'extern "C" __global__ void'
        buffer = ""
        local = "__shared__"
        barrier = "__syncthreads();"
        ids = {"global": "(blockIdx.{d}*blockDim.{d}+threadIdx.{d})",
               "local": "threadIdx.{d}", "group": "blockIdx.{d}"}
"""
from __future__ import annotations

_AXES = "xyz"


class Dialect:
    """OpenCL C, the default dialect.

    Attributes:
        name: dialect name.
        kernel: qualifier and return type that start a kernel definition.
        buffer: address-space qualifier of global-memory pointers.
        local: qualifier of work-group shared memory.
        constant: qualifier of read-only constant memory.
        inline: qualifier of device helper functions.
        barrier: work-group barrier statement (local memory fence).
        ids: work-item index expressions, ``{d}`` being the axis letter (``x``, ``y``,
            ``z``) and ``{i}`` the axis number.
        preamble: source text put before the first kernel (pragmas).
        whole: the dialect of complete kernels (work-group code with local memory and
            barriers); itself here, the kernel dialect for :class:`Body`.
    """
    name = "opencl"
    kernel = "__kernel void"
    buffer = "__global"
    local = "__local"
    constant = "__constant"
    inline = "inline"
    barrier = "barrier(CLK_LOCAL_MEM_FENCE);"
    ids = {"global": "get_global_id({i})", "local": "get_local_id({i})",
           "group": "get_group_id({i})"}
    preamble = ""

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

    def signature(self, name: str, params: list[str]) -> str:
        """The first line of kernel ``name`` with parameter declarations ``params``."""
        return f"{self.kernel} {name}({', '.join(params)})"


OPENCL = Dialect()


class Body(Dialect):
    """A kernel's work-item body as an inline function of its global index.

    ``signature(name, params)`` declares ``static inline void name_body(params..., g0, g1,
    g2)`` and the global index along axis ``i`` is the argument ``g{i}``. A *wrapper*
    kernel then runs the body, either once per work-item of an NDRange
    (:func:`.chain.wrap`) or in plain loops over the whole index space inside a launch that
    runs several bodies back to back (:func:`.chain.chain`). Bodies may not use local or
    group indices (nothing shared between work-items, no barrier), which holds for every
    CPU template in :mod:`.kernels`.
    """
    name = "opencl-body"
    kernel = "static inline void"
    ids = {"global": "g{i}"}

    @property
    def whole(self) -> Dialect:
        return OPENCL

    def signature(self, name: str, params: list[str]) -> str:
        args = params + [f"const int g{i}" for i in range(3)]
        return f"{self.kernel} {body_name(name)}({', '.join(args)})"


def body_name(kernel: str) -> str:
    """The C name of kernel ``kernel`` 's body function under :data:`BODY`."""
    return f"{kernel}_body"


BODY = Body()
