"""Compile a CUDA program with NVRTC (``cuda.bindings.nvrtc``): no GPU and no driver needed.

The program is compiled once per (source, architecture): a CUBIN for ``sm_XY`` when this
NVRTC knows the architecture, else PTX for the newest ``compute_XY`` it knows below it,
which the driver compiles for the newer GPU when the module is loaded. The result is cached
on disk by a hash of the source, the architecture, the options and the NVRTC version, under
the user's cache directory (``$XDG_CACHE_HOME/autodiff/cuda``, else
``~/.cache/autodiff/cuda``) next to the ``.cu`` source and the compile log.

ptxas reports every kernel's resources (``--ptxas-options=-v``): registers, spilled bytes,
stack frame, static shared memory; :func:`resources` parses them from the log.
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
import time
from dataclasses import dataclass, field

from .errors import CUDABuildError, CUDAUnavailable, INSTALL

#: NVRTC options of every compile: C++17; functions without an execution space are device
#: functions (the shared templates' helpers carry no ``__device__``); ptxas reports each
#: kernel's resources; diagnostic 177 ("variable declared but never referenced") is off
#: because the templates declare every index variable a kernel shape may use (``bi``, the
#: batch index of an unbatched matmul; ``r``, the row of a reduction stored by its hook)
OPTIONS = ("-std=c++17", "--device-as-default-execution-space", "--ptxas-options=-v",
           "--diag-suppress=177")


@dataclass
class Resources:
    """What ptxas allocated for one kernel."""
    registers: int = 0
    shared: int = 0           # static shared memory, bytes
    stack: int = 0            # stack frame, bytes
    spill_stores: int = 0     # bytes
    spill_loads: int = 0      # bytes
    barriers: int = 0


@dataclass
class Binary:
    """A compiled program.

    Attributes:
        image: CUBIN bytes, or PTX text bytes (``kind == "ptx"``).
        kind: ``"cubin"`` or ``"ptx"``.
        arch: what it was compiled for (``sm_90``, or ``compute_90`` for PTX).
        log: NVRTC's log (with ptxas' resource report for a CUBIN).
        path: the ``.cu`` source file.
        seconds: compile time (0.0 when read from the cache).
        cached: read from the disk cache.
    """
    image: bytes
    kind: str
    arch: str
    log: str
    path: str
    seconds: float = 0.0
    cached: bool = False
    _res: dict | None = field(default=None, repr=False)

    @property
    def resources(self) -> dict:
        """kernel name -> :class:`Resources` (CUBIN only; empty for PTX)."""
        if self._res is None:
            self._res = resources(self.log)
        return self._res

    @property
    def warnings(self) -> list[str]:
        """The log's warning lines."""
        return [ln for ln in self.log.splitlines() if "warning" in ln.lower()]


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise CUDAUnavailable(f"compiling for CUDA needs cuda-bindings and the NVRTC library "
                              f"(the [cuda] extra): {INSTALL}") from e
    return nvrtc


def _check(nvrtc, result, what: str):
    err, *rest = result
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, msg = nvrtc.nvrtcGetErrorString(err)
        raise CUDAUnavailable(f"NVRTC {what} failed: {msg.decode()}")
    return rest[0] if len(rest) == 1 else rest


def version() -> tuple[int, int]:
    """NVRTC's version ``(major, minor)``.

    Raises:
        CUDAUnavailable: cuda-bindings or the NVRTC library is missing.
    """
    nvrtc = _nvrtc()
    try:
        return tuple(_check(nvrtc, nvrtc.nvrtcVersion(), "version"))
    except RuntimeError as e:         # the library itself could not be loaded
        raise CUDAUnavailable(f"the NVRTC library could not be loaded ({e}); {INSTALL}") from e


def supported() -> list[int]:
    """Architectures this NVRTC compiles CUBINs for, as ``10 * major + minor``."""
    nvrtc = _nvrtc()
    return list(_check(nvrtc, nvrtc.nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs"))


def target(cc: tuple[int, int]) -> tuple[str, str]:
    """``(kind, arch)`` for a GPU of compute capability ``cc``: ``("cubin", "sm_XY")`` when
    NVRTC knows it, else ``("ptx", "compute_AB")`` for the newest known ``AB <= XY``.

    Raises:
        CUDAUnavailable: the GPU is older than every architecture NVRTC supports.
    """
    want = 10 * cc[0] + cc[1]
    known = supported()
    if want in known:
        return "cubin", f"sm_{want}"
    older = [a for a in known if a < want]
    if not older:
        raise CUDAUnavailable(f"compute capability {cc[0]}.{cc[1]} is older than every "
                              f"architecture this NVRTC supports ({min(known)})")
    return "ptx", f"compute_{max(older)}"


def cache_dir() -> str:
    """Directory of generated sources and compiled images (under the user's cache dir)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "autodiff", "cuda")
    os.makedirs(path, exist_ok=True)
    return path


def compile(src: str, arch: str, options: tuple[str, ...] = ()) -> Binary:
    """Compile ``src`` for ``arch`` (``sm_XY``: CUBIN; ``compute_XY``: PTX), from the disk
    cache when the same source was compiled before.

    Raises:
        CUDABuildError: NVRTC rejected the program (the source path and NVRTC's log).
        CUDAUnavailable: cuda-bindings / the NVRTC library is missing.
    """
    nvrtc = _nvrtc()
    kind = "cubin" if arch.startswith("sm_") else "ptx"
    opts = (f"--gpu-architecture={arch}",) + OPTIONS + tuple(options)
    if kind == "ptx":
        opts = tuple(o for o in opts if not o.startswith("--ptxas"))
    key = hashlib.sha1("\0".join((src, *opts, str(version()))).encode()).hexdigest()[:20]
    base = os.path.join(cache_dir(), key)
    path, image_path, log_path = base + ".cu", f"{base}.{kind}", base + ".log"
    if os.path.exists(image_path) and os.path.exists(log_path):
        with open(image_path, "rb") as f:
            image = f.read()
        with open(log_path) as f:
            log = f.read()
        return Binary(image, kind, arch, log, path, 0.0, True)
    _write(path, src.encode())
    t = time.perf_counter()
    prog = _check(nvrtc, nvrtc.nvrtcCreateProgram(src.encode(), os.path.basename(path).encode(),
                                                  0, [], []), "nvrtcCreateProgram")
    try:
        err, = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        log = _log(nvrtc, prog)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CUDABuildError(path, log)
        if kind == "cubin":
            n = _check(nvrtc, nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
            image = b" " * n
            _check(nvrtc, (nvrtc.nvrtcGetCUBIN(prog, image)[0], None), "nvrtcGetCUBIN")
        else:
            n = _check(nvrtc, nvrtc.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
            image = b" " * n
            _check(nvrtc, (nvrtc.nvrtcGetPTX(prog, image)[0], None), "nvrtcGetPTX")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    seconds = time.perf_counter() - t
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(image_path), suffix=".tmp")
    with os.fdopen(fd, "wb") as f:      # a name of its own: processes compiling the same
        f.write(image)                  # program at once each rename a whole image
    _write(log_path, log.encode())
    os.replace(tmp, image_path)
    return Binary(image, kind, arch, log, path, seconds, False)


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def _log(nvrtc, prog) -> str:
    n = _check(nvrtc, nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
    buf = b" " * n
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.rstrip(b"\0 ").decode(errors="replace")


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_BARS = re.compile(r"used (\d+) barriers")


def resources(log: str) -> dict:
    """kernel name -> :class:`Resources` parsed from ptxas' verbose report in ``log``."""
    out: dict = {}
    cur = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            cur = out.setdefault(m.group(1), Resources())
            continue
        if cur is None:
            continue
        if m := _FRAME.search(line):
            cur.stack, cur.spill_stores, cur.spill_loads = map(int, m.groups())
        if m := _USED.search(line):
            cur.registers = int(m.group(1))
            if s := _SMEM.search(line):
                cur.shared = int(s.group(1))
            if b := _BARS.search(line):
                cur.barriers = int(b.group(1))
    return out
