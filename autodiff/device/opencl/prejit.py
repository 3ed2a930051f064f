"""Compile PoCL's work-group functions before the first iteration, on two cores.

PoCL builds a program (``clBuildProgram``) into LLVM bitcode only; the machine code of a
kernel -- its *work-group function*, specialised for the local size, a zero global offset
and a "small grid" -- is generated at the kernel's first launch (about 50-100 ms of fixed
cost plus the body's code generation: 0.3-1.8 s for a dispatch kernel of matmul tiles,
measured on PoCL 3.1) and kept in PoCL's disk cache (``POCL_CACHE_DIR``). PoCL 3.1 runs
that compiler under one lock per process (one global ``LLVMContext``: ``GLOBAL_LLVM_CONTEXT``
in its ``pocl_llvm_utils.cc``), so however many threads or contexts a process uses, it
compiles its kernels one after the other on one core.

:func:`start` runs a helper process (this file as a script: the standard library and
pyopencl only) that builds the same program source on the same device -- a hit in PoCL's
disk cache once the caller's own build has written it -- and compiles kernels from the
*last* one launched towards the first, while the caller (:meth:`Helper.compile`) compiles
from the first towards the last. A kernel is compiled by launching it as a no-op
(``which = -1``: no case of a :func:`~.chain.dispatch` kernel's ``switch``) with its real
global and local sizes, so that the specialisation is the one the real launch looks up;
the work-group function lands in the shared disk cache (PoCL writes a temporary file and
renames it). Each side first *claims* a kernel (a file created with ``O_EXCL`` in a
directory both see), so no kernel is compiled twice: the two meet in the middle, the
caller waits for the helper's last kernel, and the first iteration then finds every
kernel compiled.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

#: fewest kernels to compile for a helper to start: its own start (an interpreter,
#: pyopencl, a build from the cache: 0.3-0.5 s) costs more than a few small kernels' JIT
MIN_KERNELS = 4

#: seconds the caller waits at most for the helper's last kernel (then it stops the
#: helper; the first iteration compiles whatever is missing)
WAIT_S = 300.0


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


def claim(claims: str, i: int) -> bool:
    """Claim kernel ``i`` (its position in the first-launch order) in directory
    ``claims``; False when the other side already has."""
    try:
        os.close(os.open(os.path.join(claims, str(i)), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


def launch_noop(ctx, queue, prg, buf, launch) -> None:
    """Launch ``launch`` = ``(dispatch kernel name, global size, local size)`` of ``prg``
    as a no-op and wait: PoCL compiles its work-group function if no cache holds it."""
    import numpy as np
    import pyopencl as cl
    name, gsize, lsize = launch
    k = cl.Kernel(prg, name)
    k.set_arg(0, buf)
    k.set_arg(1, np.int32(-1))                  # no case of the switch: nothing runs
    for i in range(2, k.num_args):
        k.set_arg(i, np.int32(0))
    cl.enqueue_nd_range_kernel(queue, k, tuple(gsize), tuple(lsize))
    queue.finish()


class Helper:
    """A running helper process (:func:`start`) and the claims directory it shares with
    the caller.

    Attributes:
        mine: positions of the kernels the caller compiled (:meth:`compile`).
    """

    def __init__(self, proc: subprocess.Popen, claims: str, launches: list):
        self.proc, self.claims, self.launches = proc, claims, launches
        self.mine: list = []

    def compile(self, ctx, device, prg) -> None:
        """Compile the caller's share: claim and no-op-launch kernels from the first on
        until one is the helper's, then wait for the helper to finish its own (at most
        :data:`WAIT_S`)."""
        import pyopencl as cl
        queue = cl.CommandQueue(ctx, device)
        buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64)
        for i, la in enumerate(self.launches):
            if not claim(self.claims, i):
                break
            self.mine.append(i)
            launch_noop(ctx, queue, prg, buf, la)
        if self.proc is not None:
            try:
                self.proc.wait(timeout=WAIT_S)
            except subprocess.TimeoutExpired:
                pass
        self.stop()

    def stop(self) -> None:
        """End the helper if it is still running (what it wrote stays in the cache) and
        remove the claims."""
        p, self.proc = self.proc, None
        if p is not None:
            if p.poll() is None:
                p.kill()
            p.wait()
        if self.claims is not None:
            shutil.rmtree(self.claims, ignore_errors=True)
            self.claims = None

    def __del__(self):
        self.stop()


def start(device, source_path: str, launches: list) -> Helper | None:
    """Start a helper compiling ``launches`` -- ``(kernel name, global size, local size)``
    of :func:`~.chain.dispatch` kernels in ``source_path``'s program, in the order of
    their first launch -- from the last towards the first; the caller then compiles its
    share with :meth:`Helper.compile`. Returns None when no helper runs (fewer than
    :data:`MIN_KERNELS` kernels, not :func:`enabled`, or the process cannot start)."""
    if len(launches) < MIN_KERNELS or not enabled(device):
        return None
    launches = [(n, tuple(g), tuple(loc)) for n, g, loc in launches]
    claims = tempfile.mkdtemp(prefix="autodiff-prejit-")
    spec = {"device": label(device), "source": source_path, "claims": claims,
            "launches": [[n, list(g), list(loc)] for n, g, loc in launches]}
    try:
        p = subprocess.Popen([sys.executable, "-P", os.path.abspath(__file__)],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        p.stdin.write(json.dumps(spec).encode())
        p.stdin.close()
    except OSError:
        shutil.rmtree(claims, ignore_errors=True)
        return None
    return Helper(p, claims, launches)


def _main() -> None:
    """The helper: read the spec from stdin, build, compile from the last kernel on until
    one is claimed by the caller."""
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
    launches = spec["launches"]
    for i in reversed(range(len(launches))):
        if not claim(spec["claims"], i):
            break
        launch_noop(ctx, q, prg, buf, launches[i])


if __name__ == "__main__":
    _main()
