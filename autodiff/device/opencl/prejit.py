"""Compile PoCL's work-group functions before the first iteration, on two cores.

PoCL builds a program (``clBuildProgram``) into LLVM bitcode only; the machine code of a
kernel -- its *work-group function*, specialised for the local size, a zero global offset
and a "small grid" -- is generated at the kernel's first launch (about 50-100 ms of fixed
cost plus the body's code generation: 0.3-1.8 s for a dispatch kernel of matmul tiles,
measured on PoCL 3.1) and kept in PoCL's disk cache (``POCL_CACHE_DIR``). PoCL 3.1 runs
that compiler under one lock per process (one global ``LLVMContext``: ``GLOBAL_LLVM_CONTEXT``
in its ``pocl_llvm_utils.cc``), so however many threads or contexts a process uses, it
compiles its kernels one after the other on one core.

:func:`compile_all` compiles the kernels from the first one launched towards the last;
at the first kernel not found in the cache it starts a helper process (:func:`start`:
this file as a script, the standard library and pyopencl only) that builds the same
program source on the same device -- a hit in PoCL's disk cache, the caller's build
wrote it -- and compiles from the *last* kernel towards the first. A kernel is compiled by launching it as a no-op
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
import time

#: fewest kernels to compile for a helper to start: its own start (an interpreter,
#: pyopencl, a build from the cache: 0.3-0.5 s) costs more than a few small kernels' JIT
MIN_KERNELS = 4

#: seconds a kernel's no-op launch may take before the caller starts a helper: a kernel
#: found in PoCL's cache completes in a few milliseconds, a compile takes 50 ms or more
PROBE_S = 0.03

#: seconds the caller waits at most for the helper's last kernel (then it stops the
#: helper; the first iteration compiles whatever is missing)
WAIT_S = 300.0


def enabled(device) -> bool:
    """Whether a helper can help on ``device``: a PoCL CPU device with the disk cache on
    (``POCL_KERNEL_CACHE`` not ``0``), with more than one core to run on
    (:func:`usable_cores`)."""
    import pyopencl as cl
    if not device.type & cl.device_type.CPU:
        return False
    if "portable computing language" not in device.platform.name.lower():
        return False
    if os.environ.get("POCL_KERNEL_CACHE", "1") == "0":
        return False
    return usable_cores() > 1


def usable_cores() -> int:
    """Cores this process may run on (its affinity: a process pinned to one core, as the
    one-thread benchmark pins each system, gains nothing from a helper, which inherits it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:              # no affinity call on this platform
        return os.cpu_count() or 1


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


def launch_noop(queue, prg, buf, launch):
    """Launch ``launch`` = ``(dispatch kernel name, global size, local size)`` of ``prg``
    as a no-op; returns its event. PoCL compiles the work-group function (if no cache
    holds it) before the launch completes."""
    import numpy as np
    import pyopencl as cl
    name, gsize, lsize = launch
    k = cl.Kernel(prg, name)
    k.set_arg(0, buf)
    k.set_arg(1, np.int32(-1))                  # no case of the switch: nothing runs
    for i in range(2, k.num_args):
        k.set_arg(i, np.int32(0))
    return cl.enqueue_nd_range_kernel(queue, k, tuple(gsize), tuple(lsize))


def _pending_after(ev, seconds: float) -> bool:
    """Whether event ``ev`` is still not complete after ``seconds``."""
    import pyopencl as cl
    end = time.perf_counter() + seconds
    while ev.command_execution_status != cl.command_execution_status.COMPLETE:
        if time.perf_counter() > end:
            return True
        time.sleep(PROBE_S / 10)
    return False


def compile_all(ctx, device, prg, source_path: str, launches: list) -> tuple[bool, int]:
    """Compile the work-group function of each of ``launches`` -- ``(kernel name, global
    size, local size)`` of :func:`~.chain.dispatch` kernels of ``prg`` (built from
    ``source_path``), in the order of their first launch -- before the first iteration.

    This process claims and compiles them from the first on. When one is not done after
    :data:`PROBE_S` (not in PoCL's cache: a compile), a helper process (:func:`start`)
    begins from the last, and this process stops at the first kernel the helper has
    claimed and waits for the helper to finish (at most :data:`WAIT_S`). A warm cache
    starts no helper. Returns whether a helper ran and how many kernels (the first ones)
    this process compiled; the helper compiled the others."""
    import pyopencl as cl
    helpful = len(launches) >= MIN_KERNELS and enabled(device)
    queue = cl.CommandQueue(ctx, device)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64)
    claims = tempfile.mkdtemp(prefix="autodiff-prejit-")
    helper, mine = None, len(launches)
    try:
        for i, la in enumerate(launches):
            if not claim(claims, i):            # the helper's from here on
                mine = i
                try:
                    helper.proc.wait(timeout=WAIT_S)
                except subprocess.TimeoutExpired:
                    pass
                break
            ev = launch_noop(queue, prg, buf, la)
            if helpful and helper is None and _pending_after(ev, PROBE_S):
                helper = start(device, source_path, launches, claims)
            ev.wait()
    finally:
        if helper is not None:
            helper.stop()
        shutil.rmtree(claims, ignore_errors=True)
    return helper is not None, mine


class Helper:
    """A running helper process (:func:`start`)."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc

    def stop(self) -> None:
        """End the helper if it is still running (what it wrote stays in the cache)."""
        p, self.proc = self.proc, None
        if p is not None:
            if p.poll() is None:
                p.kill()
            p.wait()

    def __del__(self):
        self.stop()


def start(device, source_path: str, launches: list, claims: str) -> Helper | None:
    """Start a helper process compiling ``launches`` (as :func:`compile_all`) from the
    last towards the first, each claimed first in directory ``claims``; it stops at the
    first kernel claimed by the caller. Returns None if the process cannot start."""
    spec = {"device": label(device), "source": source_path, "claims": claims,
            "launches": [[n, list(g), list(loc)] for n, g, loc in launches]}
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
        launch_noop(q, prg, buf, launches[i]).wait()


if __name__ == "__main__":
    _main()
