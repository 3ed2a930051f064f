"""The OpenCL C dialect of the shared C-style kernel templates (:mod:`autodiff.device.cstyle`).

:data:`OPENCL` renders complete kernels; :data:`BODY` renders a kernel as an inline
function of its global index, which a wrapper (:func:`.chain.wrap`) runs once per work-item
of an NDRange or a launch chain (:func:`.chain.chain`) runs in plain loops. Math function
names need no table here: the templates are written in OpenCL C's own, and the slow PoCL
builtins are inline functions of :mod:`.mathlib`.
"""
from __future__ import annotations

from ..cstyle.dialect import Body, Dialect


class OpenCL(Dialect):
    """OpenCL C 1.2, complete kernels."""
    name = "opencl"
    kernel = "__kernel void"
    buffer = "__global"
    local = "__local"
    constant = "__constant"
    inline = "inline"
    barrier = "barrier(CLK_LOCAL_MEM_FENCE);"
    ids = {"global": "get_global_id({i})", "local": "get_local_id({i})",
           "group": "get_group_id({i})"}


OPENCL = OpenCL()
BODY = Body(OPENCL)
