"""Compile PoCL's work-group functions ahead of their first launch, in a second process.

PoCL builds a program (``clBuildProgram``) into LLVM bitcode only; the machine code of a
kernel -- its *work-group function*, specialised for the local size, a zero global offset
and a "small grid" -- is generated at the kernel's first launch (about 50-100 ms of fixed
cost plus the body's code generation: 0.3-1.3 s for a dispatch kernel of matmul tiles,
measured on PoCL 3.1) and kept in PoCL's disk cache (``POCL_CACHE_DIR``). PoCL 3.1 runs
that compiler under one lock per process (one global ``LLVMContext``: ``GLOBAL_LLVM_CONTEXT``
in its ``pocl_llvm_utils.cc``), so the first iteration of a program compiles its kernels
one after the other on one core, however many threads or contexts the host uses.

:func:`start` runs a helper process (this file as a script: the standard library and
pyopencl only) that builds the same program source on the same device -- a hit in PoCL's
disk cache once the caller's own build has written it -- and launches the given kernels
in *reverse* order of their first use as no-ops (``which = -1``: no case of a
:func:`~.chain.dispatch` kernel's ``switch``), with their real global and local sizes so
that the specialisation is the one the real launch looks up. Each work-group function it
generates lands in the shared disk cache (PoCL writes a temporary file and renames it), so
the caller's first iteration, compiling its kernels in forward order on the other core,
finds the late ones already compiled: the two meet in the middle. The helper is stopped
(:meth:`Helper.stop`) as soon as the caller's first iteration is done.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys


#: fewest kernels to compile for a helper to start: its own start (an interpreter,
#: pyopencl, a build from the cache: 0.3-0.5 s) costs more than a few small kernels' JIT
MIN_KERNELS = 4


def enabled(device) -> bool:
    """Whether a helper can help on ``device``: a PoCL CPU device with the disk cache on
    (``POCL_KERNEL_CACHE`` not ``0``), on a machine with more than one core."""
    import pyopencl as cl
    if not device.type & cl.device_type.CPU:
        return False
    if "portable computing language" not in device.platform.name.lower():
        return False
    if os.environ.get("POCL_KERNEL_CACHE", "1") == "0":
        return False
    return (os.cpu_count() or 1) > 1


def label(device) -> str:
    """``"<platform name> <device name>"``, as :func:`.device.candidates` labels it."""
    return f"{device.platform.name} {device.name}"


class Helper:
    """A running helper process (:func:`start`)."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc

    def stop(self) -> None:
        """End the helper if it is still compiling (what it wrote stays in the cache)."""
        p, self.proc = self.proc, None
        if p is None:
            return
        if p.poll() is None:
            p.kill()
        p.wait()

    def __del__(self):
        self.stop()


def start(device, source_path: str, launches: list) -> Helper | None:
    """Start a helper compiling ``launches`` -- ``(kernel name, global size, local size)``
    of :func:`~.chain.dispatch` kernels in ``source_path``'s program, in the order of
    their first launch -- from the last to the first. Returns None when no helper runs
    (fewer than :data:`MIN_KERNELS` kernels, not :func:`enabled`, or the process cannot
    start)."""
    if len(launches) < MIN_KERNELS or not enabled(device):
        return None
    spec = {"device": label(device), "source": source_path,
            "launches": [[n, list(g), list(loc)] for n, g, loc in reversed(launches)]}
    try:
        p = subprocess.Popen([sys.executable, "-P", os.path.abspath(__file__)],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        p.stdin.write(json.dumps(spec).encode())
        p.stdin.close()
    except OSError:
        return None
    return Helper(p)


def _main() -> None:
    """The helper: read the spec from stdin, build, launch each kernel as a no-op."""
    import numpy as np
    import pyopencl as cl
    spec = json.loads(sys.stdin.read())
    dev = next(d for p in cl.get_platforms() for d in p.get_devices()
               if f"{p.name} {d.name}" == spec["device"])
    ctx = cl.Context([dev])
    with open(spec["source"]) as f:
        src = f.read()
    prg = cl.Program(ctx, src).build(devices=[dev])
    q = cl.CommandQueue(ctx, dev)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64)
    for name, gsize, lsize in spec["launches"]:
        k = cl.Kernel(prg, name)
        k.set_arg(0, buf)
        k.set_arg(1, np.int32(-1))              # no case of the switch: nothing runs
        for i in range(2, k.num_args):
            k.set_arg(i, np.int32(0))
        cl.enqueue_nd_range_kernel(q, k, tuple(gsize), tuple(lsize))
        q.finish()                              # one at a time: stop() loses at most one


if __name__ == "__main__":
    _main()
