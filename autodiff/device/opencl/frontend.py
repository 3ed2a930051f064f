"""A program's OpenCL C front end outside PoCL: the system's ``clang -cc1`` with PoCL's
flags, its headers precompiled once, the LLVM bitcode given to PoCL as a binary.

PoCL's ``clBuildProgram`` runs clang inside the process (PoCL 3.1,
``lib/CL/pocl_llvm_build.cc``): it preprocesses the whole source with its OpenCL headers
(``opencl-c.h`` alone is 18,000 lines) to key its disk cache, parses it all again to
compile it at -O2, then links its kernel library; PoCL's compiler lock lets one build run
per process at a time. Here the same front end runs as a ``clang-<LLVM major>`` process
(Debian's ``libpocl2`` depends on that very compiler): the headers come from a
precompiled header (:meth:`Frontend.pch`, built once per machine into the cache), several
parts of a program compile at once on several cores, and PoCL gets the bitcode with
``clCreateProgramWithBinary`` (it accepts LLVM bitcode for its device's triple and links
its kernel library when the program is built: ~0.05 s). The bitcode is kept next to the
source (:func:`bitcode_path`), so a later run builds the very same binary and finds the
work-group functions PoCL compiled for it in PoCL's cache.

The bitcode is -O2's IR (its alias metadata, no ``optnone``, no ``noinline`` on every
function as at -O0) with none of -O2's passes (``OPT``: ``-disable-llvm-passes``): PoCL's
first launch of each kernel optimises the linked program at -O3 for its work-group
function anyway, so optimising at the build as well was work done twice. Measured on the
main job's training program (two parts of ~150,000 characters, PoCL 3.1, LLVM 15, 2 vCPU;
BENCHMARKS.md): PoCL's build of a part 0.65-1.1 s; here both parts 0.16-0.22 s (at once),
PoCL's read and link of each 0.03-0.1 s, and the work-group compiles 0.1-0.2 s longer per
part; cold start 3.95 -> 3.42 s (means of four alternating pairs), steady state and
losses unchanged (the machine code of the matmul micro-kernels and bodies has the same
instructions). At -O2 the front end took as long as PoCL's build: the header parse it
saves is small beside -O2's passes.

The flags are PoCL 3.1's (:func:`flags`): its ``-D`` definitions and ``-cl-ext`` list from
the device's extensions and OpenCL C features, ``-triple`` and ``-target-cpu`` from the
device's ``HSTR`` (``pthread-x86_64-pc-linux-gnu-skylake-avx512``), and what it sets on
clang's options directly (blocks, no builtins, PIC level 2, PIE, stack realignment, no
loop unrolling or vectorisation before the work-group compile, kernel argument metadata,
its five implicit headers). ``tests/device/test_opencl_frontend.py``
checks them against the options PoCL prints (``POCL_DEBUG=llvm``). Any failure (no PoCL
CPU device, no clang of PoCL's LLVM version, headers not found, clang rejecting the source,
PoCL rejecting the bitcode) leaves the build to PoCL, which reports a source's errors as
before; ``AUTODIFF_OPENCL_FRONTEND=0`` (or the ``frontend=False`` compile option) always
does.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile

#: the bitcode's optimisation: -O2's IR (PoCL's level), none of its passes (the module
#: docstring says why)
OPT = ("-O2", "-disable-llvm-passes")

#: PoCL's implicit headers, in its order (``po.Includes`` in PoCL 3.1)
HEADERS = ("pocl_types.h", "_builtin_renames.h", "opencl-c-base.h", "opencl-c.h",
           "_kernel.h")

#: places PoCL's private data directory (``pocl_get_private_datadir``) may be, after the
#: one next to the loaded ``libpocl`` (``<lib>/../../share/pocl``)
DATA_DIRS = ("/usr/share/pocl", "/usr/local/share/pocl")

_CACHE: dict = {}


class Frontend:
    """The front end for one device: ``clang`` (path), PoCL's ``flags`` (:func:`flags`) and
    the ``include`` directory holding PoCL's headers; ``args`` are the ``cc1`` arguments
    but for the input, the output and the headers, ``key`` names its precompiled header
    and bitcode files."""

    def __init__(self, clang: str, flags: list[str], include: str):
        self.clang, self.flags, self.include = clang, list(flags), include
        # PoCL's headers as clang's own (PoCL's resource directory, ``RELOC`` builds)
        self.args = self.flags + ["-resource-dir", os.path.dirname(include),
                                  "-internal-isystem", include]
        stamp = [clang, *self.args] + [f"{h}:{os.path.getmtime(os.path.join(include, h))}"
                                  for h in HEADERS]
        self.key = hashlib.sha1("\0".join(stamp).encode()).hexdigest()[:12]
        self._pch: _Compile | None = None       # the header's build, while it runs
        self._no_pch = False                    # it failed: compiles parse the headers

    def pch_path(self) -> str:
        """Where this front end's precompiled header is kept (in the generated sources'
        cache directory, named by :attr:`key`)."""
        from .runtime import source_dir
        return os.path.join(source_dir(), f"headers-{self.key}.pch")

    def warm(self) -> None:
        """Start building the precompiled header in the background if it is missing (a
        compile that begins before it is done waits for it, :meth:`pch`). Raises nothing:
        a header that cannot be built leaves each compile to parse the headers."""
        path = self.pch_path()
        if self._pch is not None or self._no_pch or os.path.exists(path):
            return
        head = path[:-len(".pch")] + ".h"            # PoCL's headers, in its order
        try:
            _write(head, "".join(f'#include "{os.path.join(self.include, h)}"\n'
                                 for h in HEADERS))
            self._pch = _Compile([self.clang, "-cc1", *self.args, "-emit-pch", head],
                                 path)
        except OSError:
            self._no_pch = True

    def pch(self) -> str | None:
        """Path of the precompiled header (built now, or waited for, if missing); None if
        it cannot be built (then each compile parses the headers)."""
        path = self.pch_path()
        if os.path.exists(path):
            return path
        self.warm()
        job, self._pch = self._pch, None
        if job is not None:
            job.result()
        if os.path.exists(path):            # built here, or by another process meanwhile
            return path
        self._no_pch = True
        return None

    def command(self, src: str) -> list[str]:
        """The ``clang -cc1`` command compiling source file ``src`` to bitcode (the output
        file is appended)."""
        pch = self.pch()
        head = ["-include-pch", pch] if pch else \
            [a for h in HEADERS for a in ("-include", os.path.join(self.include, h))]
        return [self.clang, "-cc1", *self.args, *head, "-w", "-emit-llvm-bc", src]

    def start(self, src: str) -> "_Compile":
        """Compile source file ``src`` in a clang process (nothing to do when its bitcode
        is there from an earlier run); the result's ``result()`` waits for it."""
        out = bitcode_path(src, self.key)
        if os.path.exists(out):
            return _Compile(None, out)
        try:
            return _Compile(self.command(src), out)
        except OSError:
            return _Compile(None, None)


class _Compile:
    """A clang process writing file ``out`` (``cmd`` without ``-o``: it writes a temporary
    file renamed to ``out`` once complete, so that processes compiling the same file at
    once never read a half-written one); ``cmd`` None: ``out`` is there already (or None:
    nothing could start)."""

    def __init__(self, cmd: list[str] | None, out: str | None):
        self.out, self.proc, self.tmp = out, None, None
        if cmd is not None:
            fd, self.tmp = tempfile.mkstemp(dir=os.path.dirname(out), suffix=".tmp")
            os.close(fd)
            try:
                self.proc = subprocess.Popen(cmd + ["-o", self.tmp],
                                             stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL)
            except OSError:
                os.unlink(self.tmp)
                raise

    def result(self) -> str | None:
        """``out`` once clang has finished, or None if it failed (clang's errors are not
        kept: the build falls back to PoCL's, which reports them)."""
        if self.proc is not None:
            ok = self.proc.wait() == 0
            self.proc = None
            if ok:
                os.replace(self.tmp, self.out)
            else:
                if os.path.exists(self.tmp):        # clang removes it as it fails
                    os.unlink(self.tmp)
                self.out = None
        return self.out


def _write(path: str, text: str) -> None:
    """Write ``path`` whole or not at all (a temporary file renamed)."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def bitcode_path(src: str, key: str) -> str:
    """Where the bitcode of source file ``src`` compiled by the front end ``key`` is kept."""
    return f"{os.path.splitext(src)[0]}.{key}.bc"


def source_of(path: str) -> str:
    """The source file a :func:`bitcode_path` was compiled from (``path`` itself if it is
    a source)."""
    if not path.endswith(".bc"):
        return path
    return path.rsplit(".", 2)[0] + ".cl"


def enabled(options: dict | None = None) -> bool:
    """Whether the front end may be used: not turned off by ``options["frontend"]`` or by
    ``AUTODIFF_OPENCL_FRONTEND=0``, and PoCL is not told to add build flags of its own
    (``POCL_EXTRA_BUILD_FLAGS``)."""
    if options is not None and options.get("frontend") is False:
        return False
    if os.environ.get("AUTODIFF_OPENCL_FRONTEND", "1") == "0":
        return False
    return not os.environ.get("POCL_EXTRA_BUILD_FLAGS")


def for_device(device, options: dict | None = None) -> Frontend | None:
    """The front end for ``device`` (a PoCL CPU device), or None where it cannot be used
    (see the module docstring); looked up once per device and process."""
    if not enabled(options):
        return None
    key = (device.platform.name, device.name, device.version)
    if key not in _CACHE:
        try:
            _CACHE[key] = _make(device)
        except Exception:       # noqa: BLE001 (a query the platform lacks...: PoCL builds)
            _CACHE[key] = None
    return _CACHE[key]


def _make(device) -> Frontend | None:
    import pyopencl as cl
    if not device.type & cl.device_type.CPU or \
            "portable computing language" not in device.platform.name.lower():
        return None
    m = re.search(r"LLVM (\d+)\.", device.platform.version)
    if m is None:
        return None
    major = m.group(1)
    clang = shutil.which(f"clang-{major}") or next(
        (p for p in (f"/usr/lib/llvm-{major}/bin/clang",) if os.access(p, os.X_OK)), None)
    if clang is None:
        return None
    triple = subprocess.run([clang, "-print-target-triple"], capture_output=True,
                            text=True, timeout=30).stdout.strip()
    include = _include_dir()
    args = flags(device, triple)
    if include is None or args is None:
        return None
    return Frontend(clang, args, include)


def _include_dir() -> str | None:
    """PoCL's header directory: ``<private data dir>/include`` holding its headers."""
    dirs = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if os.path.basename(path).startswith("libpocl.so"):
                    dirs.append(os.path.join(os.path.dirname(path), "..", "..",
                                             "share", "pocl"))
                    break
    except OSError:
        pass
    for d in dirs + list(DATA_DIRS):
        inc = os.path.normpath(os.path.join(d, "include"))
        if all(os.path.exists(os.path.join(inc, h)) for h in HEADERS):
            return inc
    return None


def flags(device, triple: str) -> list[str] | None:
    """PoCL 3.1's clang options for a program built for ``device`` (a CPU device of
    LLVM target ``triple``), as ``clang -cc1`` arguments; None if the device's ``HSTR``
    does not name ``triple`` and a CPU."""
    m = re.search(r"HSTR: (\S+)", device.version)
    if m is None or f"-{triple}-" not in m.group(1):
        return None
    cpu = m.group(1).split(f"-{triple}-", 1)[1]
    v = re.match(r"OpenCL (\d+)\.(\d+)", device.version)
    if v is None:
        return None
    major, minor = int(v.group(1)), int(v.group(2))
    exts = device.extensions.split()
    if major >= 3:
        exts += [f.name for f in device.opencl_c_features]
    args = ["-Dcl_khr_int64"] if device.preferred_vector_width_long > 0 else []
    args += [f"-DPOCL_DEVICE_ADDRESS_BITS={device.address_bits}",
             "-D__USE_CLANG_OPENCL_C_H", "-x", "cl", "-Dinline=", "-I.",
             "-cl-kernel-arg-info", "-opaque-pointers"]
    if device.endian_little:
        args.append("-D__ENDIAN_LITTLE__=1")
    if device.image_support:
        args.append("-D__IMAGE_SUPPORT__=1")
    args += [f"-DCL_DEVICE_MAX_GLOBAL_VARIABLE_SIZE={_global_var_max(device)}",
             f"-D__OPENCL_VERSION__={major * 100 + minor * 10}",
             f"-cl-std=CL{major}.{minor}", f"-D__OPENCL_C_VERSION__={major * 100 + minor * 10}"]
    args += [f"-D{e}=1" for e in exts]
    if exts:
        args.append("-cl-ext=-all," + ",".join(f"+{e}" for e in exts))
    args += ["-fno-builtin", "-triple", triple, "-target-cpu", cpu,
             # set on clang's options by PoCL rather than passed as flags:
             "-fblocks", "-fasm-blocks",
             "-pic-level", "2", "-pic-is-pie", "-mstackrealign", "-fno-unroll-loops",
             *OPT]
    return args


def _global_var_max(device) -> int:
    try:
        return int(device.max_global_variable_size)
    except Exception:       # not an OpenCL 2.0+ device: PoCL's value is 0
        return 0
