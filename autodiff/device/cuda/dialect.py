"""The CUDA dialect of the shared C-style kernel templates.

:class:`CUDA` sets the fields of :class:`~autodiff.device.cstyle.dialect.Dialect`
(kernel qualifier, buffer spelling, shared memory, barrier, index builtins, warp
shuffles: the work-group tree reductions finish their last 32 lanes in registers);
:data:`BODY` renders a kernel as a ``__device__`` function of its global index, which a
wrapper (:func:`autodiff.device.cuda.launch.wrapper`) calls from a block of any shape.
Math function names are the prelude's table (:data:`.prelude.MATH`).

The templates still write a few OpenCL C spellings outside the dialect's fields; the
prelude (:mod:`.prelude`) defines the vocabulary, and :data:`REWRITES` turns the one
construct C++ cannot define into its C++ form:

* ``(float16)(a, b, ...)``, an OpenCL vector literal, is in C++ a cast of a comma
  expression; ``float16(a, b, ...)`` is the constructor call meant.
* ``(__global uchar*)buf``: an address-space qualifier inside a cast (the narrow-dtype
  accesses); CUDA pointers have none.
* ``x/(0.0f)``: IEEE division by a signed zero (``inf``, ``nan``) is meant, but NVRTC warns
  about a division by the constant zero; the zero is spelled as its bit pattern.
"""
from __future__ import annotations

import re

from ..cstyle.dialect import Body, Dialect


class CUDA(Dialect):
    """CUDA C++ (NVRTC), complete kernels."""
    name = "cuda"
    kernel = 'extern "C" __global__ void'
    buffer = ""
    local = "__shared__"
    constant = "__constant__"
    inline = "__forceinline__"
    noinline = "__noinline__"
    barrier = "__syncthreads();"
    ids = {"global": "(blockIdx.{d}*blockDim.{d}+threadIdx.{d})",
           "local": "threadIdx.{d}", "group": "blockIdx.{d}"}
    warp = 32
    shuffle_down = "__shfl_down_sync(0xffffffffu, {x}, {o})"


CUDA_WHOLE = CUDA()
BODY = Body(CUDA_WHOLE)

#: how the shared templates render for CUDA (the codegen "target": one point per thread,
#: no vector lanes, the 8x16 register tile, work-group tree reductions)
TARGET = {"vector": 1, "tile": (8, 16, 1), "reductions": "tree"}

#: OpenCL spellings in template output -> their C++ form: (pattern, replacement)
REWRITES = [
    (re.compile(r"\(((?:float|int|uint)(?:2|4|8|16))\)\("), r"\1("),
    (re.compile(r"\b__global\s+"), ""),
    (re.compile(r"/\(0\.0f\)"), "/(__int_as_float(0))"),
    (re.compile(r"/\(-0\.0f\)"), "/(__uint_as_float(0x80000000u))"),
]


def translate(src: str) -> str:
    """``src`` (a template's output in the CUDA dialect) with :data:`REWRITES` applied."""
    for pattern, repl in REWRITES:
        src = pattern.sub(repl, src)
    return src
