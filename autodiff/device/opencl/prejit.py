"""Compile PoCL's programs and work-group functions before the first iteration, on two
cores.

PoCL builds a program (``clBuildProgram``) into LLVM bitcode only; the machine code of a
kernel -- its *work-group function*, specialised for the local size, a zero global offset
and a "small grid" -- is generated at the kernel's first launch (about 50-100 ms of fixed
cost plus the body's code generation: 0.3-1.8 s for a dispatch kernel of matmul tiles,
measured on PoCL 3.1) and kept in PoCL's disk cache (``POCL_CACHE_DIR``). PoCL 3.1 runs
that compiler under one lock per process (one global ``LLVMContext``: ``GLOBAL_LLVM_CONTEXT``
in its ``pocl_llvm_utils.cc``), so however many threads or contexts a process uses, it
compiles its kernels one after the other on one core. A second process is the way to use
a second core: the *helper* (:func:`start`: this file as a script, the standard library
and pyopencl only).

Two ways to run it:

* **Early** (a large program, :func:`early`): the device's compile starts the helper
  before lowering; while this process lowers, fuses and renders, the helper starts its
  interpreter and PoCL's compiler (the first build in a process loads LLVM and PoCL's
  kernel library: 0.7 s). The program is then rendered in two parts (:mod:`.split`): the
  helper builds one while this process builds the other, then each compiles work-group
  functions; this process builds the helper's part from PoCL's cache once the helper
  says it is built (a file ``built-<part>`` in the claims directory).
* **Kept** (:func:`acquire`): a helper lent back waits for the next program (up to
  :data:`IDLE_S`; one lent back before it finished drops the rest of its program, whose
  claims directory is gone); the next large program of this process gets it with its
  interpreter, pyopencl and PoCL's compiler loaded, ready at once (a new helper's start:
  0.75-1.1 s of a core, which the first program's lowering hides but a later one's need
  not). The same idea as PyTorch Inductor's pool of compile workers, which outlives each
  ``torch.compile`` call.
* **Late** (:func:`compile_all` with no helper): at the first kernel not found in the
  cache a helper starts and builds the same program -- a hit in PoCL's disk cache, this
  process's build wrote it.
* **Later** (:func:`compile_later`): kernels the first iteration does not run (a branch
  on the step index it does not take) are left out of the above and given, once it is
  done, to the idle helper, which compiles them into the disk cache while the program
  runs (the main example's in-loop validation: one dispatch kernel of six).

:func:`compile_all` compiles the kernels from the first one launched towards the last, the
helper from the *last* towards the first. A kernel is compiled by launching it as a no-op
(``which = -1``: no case of a :func:`~.chain.dispatch` kernel's ``switch``) with its real
global and local sizes, so that the specialisation is the one the real launch looks up;
the work-group function lands in the shared disk cache (PoCL writes a temporary file and
renames it). Each side first *claims* a kernel (a file created with ``O_EXCL`` in a
directory both see), so no kernel is compiled twice: the two meet in the middle, the
caller waits for the helper's last kernel, and the first iteration then finds every
kernel compiled.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zlib

#: fewest kernels to compile for a helper to start: its own start (an interpreter,
#: pyopencl, a build from the cache: 0.3-0.5 s) costs more than a few small kernels' JIT
MIN_KERNELS = 4

#: seconds a kernel's no-op launch may take before the caller starts a helper: a kernel
#: found in PoCL's cache completes in a few milliseconds, a compile takes 50 ms or more
PROBE_S = 0.03

#: seconds the caller waits at most for the helper's last kernel (then it stops the
#: helper; the first iteration compiles whatever is missing)
WAIT_S = 300.0

#: seconds between a lent helper's checks for its done signal (:meth:`Helper.lend`): the
#: program runs meanwhile, and its driver thread shares the interpreter with the check
LEND_POLL_S = 0.05

#: seconds a helper that finished its program waits for the next one before it ends (a
#: process keeps one per device between ``execute()`` calls: :func:`acquire`)
IDLE_S = 120.0

#: graph IR nodes from which the device's compile starts a helper early (:func:`early`):
#: a helper's start takes ~1 s, which the caller's lowering, fusion and rendering hide;
#: W3's 1114 nodes gained 0.45 s of its cold first step (two threads: 3.97-4.04 ->
#: 3.52-3.60 s), the main example's 320-node validation program 0.5 s (3.02-3.05 ->
#: 2.49-2.52 s); small programs (most tests', W1's) would only pay for helpers they do
#: not need
EARLY_NODES = 300

#: :data:`EARLY_NODES` for a graph as traced, before the graph passes (common
#: subexpressions merged, dead nodes pruned: the main job's 4113 traced nodes are 1964
#: after them)
EARLY_TRACED_NODES = 2 * EARLY_NODES

#: what an early helper builds while it waits for the program: PoCL's first build in a
#: process loads LLVM and its kernel library (0.47 s more than a later build) -- unless
#: the build is a hit in PoCL's disk cache, which skips the compiler altogether. So the
#: source carries a key (:func:`warm_key`: the program's shape), new for a new program:
#: with one fixed source, every helper after the first on a machine found its warm-up in
#: the cache, idled until the program came and then loaded LLVM for it (the main job's
#: training program, compiled after its validation program in the same process: the
#: helper's part built 0.5 s after the caller's). Each key leaves one 36 KB entry in the
#: cache, beside the megabytes of the program it precedes.
WARM_SOURCE = "__kernel void _ad_warm(__global int* b) {{ b[0] = {key}; }}"


def warm_key(graph) -> int:
    """A 31-bit fingerprint of ``graph`` (its nodes' ops, shapes and dtypes in order),
    the same in every process: the same program gets the same warm-up source."""
    text = ";".join(f"{n.op.name}{n.shape}{n.dtype}" for n in graph.walk())
    return zlib.crc32(text.encode()) & 0x7FFFFFFF


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
    ``claims``; False when the other side already has or the directory is gone."""
    try:
        os.close(os.open(os.path.join(claims, str(i)), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except (FileExistsError, FileNotFoundError):    # no directory: the caller is done
        return False


def _signal(claims: str, name: str) -> None:
    """Create file ``name`` in directory ``claims`` (nothing if the caller removed it)."""
    try:
        open(os.path.join(claims, name), "w").close()
    except FileNotFoundError:
        pass


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


class Programs:
    """The parts of one program (:mod:`.split`) as this process builds them: part ``i``
    from source file ``paths[i]`` with ``build(path)`` (a ``cl.Program``), at first use."""

    def __init__(self, paths: list[str], build):
        self.paths, self._build, self.built = list(paths), build, {}

    def get(self, i: int, helper: "Helper | None" = None):
        """Part ``i``, built now if it is not yet; a part the ``helper`` builds is built
        here after it (from PoCL's cache) unless the helper has ended."""
        if i not in self.built:
            if helper is not None:
                helper.wait_built(i)
            self.built[i] = self._build(self.paths[i])
        return self.built[i]

    def get_ready(self, helper: "Helper | None") -> None:
        """Build here (from PoCL's cache) the part ``helper`` builds if it says it has
        built it: between this process's kernels, so that the build overlaps the helper's
        kernels instead of following the last of them."""
        if helper is not None and helper.mine is not None and \
                helper.mine not in self.built and helper.built():
            self.get(helper.mine, helper)


def early(device, graph, options: dict, traced: bool = False) -> "Helper | None":
    """A helper started now (before the caller lowers ``graph``) when it will pay: the
    pre-JIT is on (``options["prejit"]``, default on), ``device`` can use one
    (:func:`enabled`) and ``graph`` has at least :data:`EARLY_NODES` nodes
    (:data:`EARLY_TRACED_NODES` for a ``traced`` graph, before the graph passes)."""
    if not options.get("prejit", True) or not enabled(device):
        return None
    if sum(1 for _ in graph.walk()) < (EARLY_TRACED_NODES if traced else EARLY_NODES):
        return None
    return acquire(device, key=warm_key(graph))


def compile_all(ctx, device, programs: Programs, launches: list,
                helper: "Helper | None" = None) -> tuple[bool, int]:
    """Compile the work-group function of each of ``launches`` -- ``(part, kernel name,
    global size, local size)`` of :func:`~.chain.dispatch` kernels of ``programs``, in the
    order of their first launch -- before the first iteration.

    This process claims and compiles them from the first on. An early ``helper`` (given
    the program already, :meth:`Helper.send`) compiles from the last. Without one, when a
    kernel is not done after :data:`PROBE_S` (not in PoCL's cache: a compile), a helper
    starts and begins from the last. This process stops at the first kernel the helper has
    claimed and waits for the helper to finish (at most :data:`WAIT_S`). A warm cache
    starts no late helper. Returns whether a helper ran and how many kernels (the first
    ones) this process compiled; the helper compiled the others."""
    import pyopencl as cl
    helpful = helper is None and len(launches) >= MIN_KERNELS and enabled(device)
    queue = cl.CommandQueue(ctx, device)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64)
    claims = helper.claims if helper is not None else tempfile.mkdtemp(prefix="autodiff-prejit-")
    mine = len(launches)
    try:
        for i, (part, *la) in enumerate(launches):
            programs.get_ready(helper)
            if not claim(claims, i):            # the helper's from here on
                mine = i
                helper.wait(WAIT_S)
                break
            ev = launch_noop(queue, programs.get(part, helper), buf, la)
            if helpful and helper is None and _pending_after(ev, PROBE_S):
                helper = acquire(device, claims)
                if helper is not None:
                    helper.send(programs.paths, launches)
            ev.wait()
    finally:
        if helper is not None:
            helper.stop()
        shutil.rmtree(claims, ignore_errors=True)
    return helper is not None, mine


def compile_later(device, paths: list[str], launches: list) -> bool:
    """Give ``launches`` (as :func:`compile_all` 's: kernels the first iteration does not
    run) to this process's idle helper, to compile into PoCL's disk cache while the program
    runs; the helper goes back to the idle ones when it is done (:meth:`Helper.lend`).
    Starts no helper (a new one's start costs more than a few kernels' compile): without
    an idle one, or on a device that cannot use one, each kernel compiles at its first
    launch. Returns whether a helper took them."""
    if not launches or not enabled(device):
        return False
    p = _IDLE.pop((os.getpid(), label(device), _environment()), None)
    if p is None or p.poll() is not None:
        if p is not None:
            _end(p)
        return False
    h = Helper(p, tempfile.mkdtemp(prefix="autodiff-prejit-"), label(device))
    h.send(paths, launches)
    h.lend()
    return True


class Helper:
    """A helper process (:func:`start`) lent to one program: its claims directory and the
    part it builds. :meth:`stop` ends the loan: a running helper goes back to this
    process's idle helpers (:func:`acquire`; one still on the program drops the rest of
    it), an ended one is reaped."""

    def __init__(self, proc: subprocess.Popen, claims: str, device: str):
        self.proc, self.claims, self.device = proc, claims, device
        self.mine = None                # the part it builds (:meth:`send`)

    def send(self, paths: list[str], launches: list, mine: int | None = None) -> None:
        """Give the helper the program (its parts' source files ``paths``) and the
        ``launches`` to compile (as :func:`compile_all`); ``mine``: the part it builds
        first (and signals)."""
        self.mine = mine
        spec = {"sources": list(paths), "claims": self.claims, "mine": mine,
                "launches": [[p, n, list(g), list(loc)] for p, n, g, loc in launches]}
        try:
            self.proc.stdin.write((json.dumps(spec) + "\n").encode())
            self.proc.stdin.flush()
        except OSError:                 # it has ended: the caller compiles everything
            pass

    def wait_built(self, part: int) -> None:
        """Return once the helper has built ``part`` (its signal file) or has ended; at
        once if ``part`` is not the one it builds."""
        if part == self.mine:
            self._wait_for(f"built-{part}", WAIT_S)

    def wait(self, seconds: float) -> None:
        """Wait at most ``seconds`` for the helper to finish its last kernel (its signal
        file ``done``) or to end."""
        self._wait_for("done", seconds)

    def built(self) -> bool:
        """Whether the helper has signalled that it built its part."""
        return self.proc is not None and \
            os.path.exists(os.path.join(self.claims, f"built-{self.mine}"))

    def _wait_for(self, name: str, seconds: float, poll: float = 0.002) -> None:
        flag = os.path.join(self.claims, name)
        end = time.perf_counter() + seconds
        while not os.path.exists(flag) and self.proc is not None and \
                self.proc.poll() is None and time.perf_counter() < end:
            time.sleep(poll)

    def lend(self) -> None:
        """End the loan once the helper has compiled every kernel it was sent (its ``done``
        signal, at most :data:`WAIT_S`), from a daemon thread; until then the helper is
        busy (:func:`end_idle` ends it with this process)."""
        self.owner = os.getpid()
        _BUSY.add(self)

        def wait():                     # while the program runs: a slow poll
            self._wait_for("done", WAIT_S, LEND_POLL_S)
            self.stop()                 # back to the idle ones, then no longer busy
            _BUSY.discard(self)
        threading.Thread(target=wait, daemon=True, name="prejit-later").start()

    def stop(self) -> None:
        """End the loan (again: nothing): the claims directory is removed (a helper still
        on the program then finds every kernel claimed and ends it with the build or
        kernel it is on) and a running helper goes back to this process's idle helpers
        (:func:`acquire`) unless one is there already; any other is ended (what it wrote
        stays in the cache)."""
        p, self.proc = self.proc, None
        if p is None:
            return
        shutil.rmtree(self.claims, ignore_errors=True)
        key = (os.getpid(), self.device, _environment())
        if p.poll() is None and key not in _IDLE:
            _IDLE[key] = p
        else:
            _end(p)

    def __del__(self):
        self.stop()


#: this process's idle helpers: (its pid, device label, PoCL's environment) -> the
#: helper process (a child forked after it was started finds its parent's here, and
#: leaves them alone; a helper started with another ``POCL_CACHE_DIR`` is not reused)
_IDLE: dict[tuple, subprocess.Popen] = {}

#: helpers compiling kernels in the background (:meth:`Helper.lend`)
_BUSY: set = set()


def _environment() -> tuple:
    """The ``POCL_*`` environment variables a helper starts with, as a key."""
    return tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("POCL_")))


def _end(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.kill()
    p.wait()
    if p.stdin is not None and not p.stdin.closed:
        try:
            p.stdin.close()
        except OSError:
            pass


def idle_pids() -> list[int]:
    """Process ids of this process's idle helpers (running, waiting for a program)."""
    return [p.pid for k, p in _IDLE.items() if k[0] == os.getpid() and p.poll() is None]


@atexit.register
def end_idle() -> None:
    """End this process's idle helpers and those still compiling in the background (at
    exit; they also end by themselves once this process has ended, or after
    :data:`IDLE_S` without a program)."""
    for key in [k for k in _IDLE if k[0] == os.getpid()]:
        _end(_IDLE.pop(key))
    for h in [h for h in _BUSY if h.owner == os.getpid()]:
        _BUSY.discard(h)
        p, h.proc = h.proc, None
        if p is not None:
            _end(p)
        shutil.rmtree(h.claims, ignore_errors=True)


def acquire(device, claims: str | None = None, key: int = 0) -> Helper | None:
    """A helper for ``device`` claiming kernels in directory ``claims`` (a fresh one by
    default): this process's idle one if it is running (one still ending its last program
    reads the next after it), else a new one (:func:`start`, which warms up with ``key``).
    None if none can start."""
    p = _IDLE.pop((os.getpid(), label(device), _environment()), None)
    if p is not None and p.poll() is None:
        return Helper(p, claims or tempfile.mkdtemp(prefix="autodiff-prejit-"), label(device))
    if p is not None:
        _end(p)
    return start(device, claims, key)


def start(device, claims: str | None = None, key: int = 0) -> Helper | None:
    """Start a helper process for ``device`` claiming kernels in directory ``claims`` (a
    fresh one by default); unless :meth:`Helper.send` has given it a program by then, it
    warms PoCL's compiler up by building :data:`WARM_SOURCE` with ``key``. Returns None
    if the process cannot start."""
    claims = claims or tempfile.mkdtemp(prefix="autodiff-prejit-")
    try:
        p = subprocess.Popen([sys.executable, "-P", os.path.abspath(__file__), label(device),
                              str(int(key)), str(IDLE_S)],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    except OSError:
        shutil.rmtree(claims, ignore_errors=True)
        return None
    return Helper(p, claims, label(device))


def _lines(idle_s: float):
    """The lines on standard input (bytes, without the newline) until it closes or none
    comes for ``idle_s`` seconds."""
    buf = b""
    while True:
        while b"\n" not in buf:
            if not select.select([0], [], [], idle_s)[0]:
                return
            chunk = os.read(0, 1 << 16)
            if not chunk:
                return
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        yield line


def _main() -> None:
    """The helper: warm PoCL's compiler up unless a program is there already; then, for
    each program it is sent, build its own part (and signal it) and compile from the last
    kernel on until one is claimed by the caller (and signal that); end when the caller
    closes standard input or sends nothing for :data:`IDLE_S`."""
    import pyopencl as cl
    dev = next(d for p in cl.get_platforms() for d in p.get_devices()
               if f"{p.name} {d.name}" == sys.argv[1])
    ctx = cl.Context([dev])
    if not select.select([0], [], [], 0)[0]:
        cl.Program(ctx, WARM_SOURCE.format(key=int(sys.argv[2]))).build(devices=[dev])
    q = cl.CommandQueue(ctx, dev)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 64)
    for line in _lines(float(sys.argv[3]) if len(sys.argv) > 3 else IDLE_S):
        if line.strip():
            _program(cl, ctx, dev, q, buf, json.loads(line))


def _program(cl, ctx, dev, q, buf, spec: dict) -> None:
    """One program for the helper (:func:`_main`)."""
    programs: dict = {}

    def program(i: int):
        if i not in programs:
            path = spec["sources"][i]
            with open(path, "rb") as f:         # a source, or bitcode (.frontend)
                data = f.read()
            prg = cl.Program(ctx, [dev], [data]) if path.endswith(".bc") else \
                cl.Program(ctx, data.decode())
            programs[i] = prg.build(devices=[dev])
        return programs[i]
    if not os.path.isdir(spec["claims"]):
        return                          # its caller is done already
    if spec["mine"] is not None:
        program(spec["mine"])
        _signal(spec["claims"], f"built-{spec['mine']}")
    launches = spec["launches"]
    for i in reversed(range(len(launches))):
        if not claim(spec["claims"], i):
            break
        part, *la = launches[i]
        launch_noop(q, program(part), buf, la).wait()
    _signal(spec["claims"], "done")


if __name__ == "__main__":
    _main()
