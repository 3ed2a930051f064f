"""A stand-in for the CUDA driver that runs the generated CUDA program on the CPU, so the
CUDA device's host loop, launch geometry and the CUDA dialect of the kernel templates are
executed (against the numpy reference) on machines without a GPU.

:class:`HostDriver` answers the driver calls :mod:`autodiff.device.cuda.runtime` makes,
with the real ``cuda.bindings.driver`` enums: memory is host memory, copies are
``memmove``, a stream runs every command at once (so stream order holds trivially),
captured graphs replay their launches. ``cuModuleLoadData`` receives the CUDA *source*
(tests put :func:`source_binary` in place of NVRTC, whose CUBINs the CPU cannot run) and
compiles it with g++ after :data:`SHIM`, a header that spells the CUDA built-ins in C++:
``blockIdx``/``threadIdx`` are variables set by the launcher, a body kernel's threads run
one after the other, and a kernel with shared memory and barriers (the work-group tree
reduction) runs each block's threads as real threads meeting at a ``std::barrier``; its
warp shuffles (``__shfl_down_sync``) exchange values through a per-block array between two
barriers of the warp's threads.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess

import numpy as np
from cuda.bindings import driver as _real

from autodiff.device.cuda import nvrtc
from autodiff.device.opencl.control import MAX_DEPTH
from autodiff.device.opencl.control import SET_KERNEL as COUNTERS_KERNEL

SHIM = r"""
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <algorithm>
#include <barrier>
#include <memory>
#include <thread>
#include <vector>
#undef INFINITY
#undef NAN
struct ad_dim3 { unsigned x = 0, y = 0, z = 0; };
static ad_dim3 blockIdx, blockDim, gridDim;
static thread_local ad_dim3 threadIdx;
static std::barrier<>* ad_block_barrier = nullptr;
static std::vector<std::unique_ptr<std::barrier<>>> ad_warp_barriers;   // one per warp
static std::vector<float> ad_warp_slots;                                  // one per thread
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
inline void __syncthreads() { ad_block_barrier->arrive_and_wait(); }
inline float __shfl_down_sync(unsigned mask, float v, unsigned o) {
  if (mask != 0xffffffffu) abort();                 /* the templates shuffle whole warps */
  const unsigned id = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned lane = id % 32, n = blockDim.x * blockDim.y * blockDim.z;
  ad_warp_slots[id] = v;
  ad_warp_barriers[id / 32]->arrive_and_wait();
  const float r = (lane + o < 32 && id + o < n) ? ad_warp_slots[id + o] : v;
  ad_warp_barriers[id / 32]->arrive_and_wait();
  return r;
}
inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
inline float __uint_as_float(unsigned x) { float f; memcpy(&f, &x, 4); return f; }
inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
inline unsigned __float_as_uint(float x) { unsigned i; memcpy(&i, &x, 4); return i; }
inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline int atomicCAS(int* p, int c, int v) { __atomic_compare_exchange_n(p, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return c; }
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline int atomicMin(int* p, int v) { int o = __atomic_load_n(p, __ATOMIC_SEQ_CST); while (v < o && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {} return o; }
inline int atomicMax(int* p, int v) { int o = __atomic_load_n(p, __ATOMIC_SEQ_CST); while (v > o && !__atomic_compare_exchange_n(p, &o, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {} return o; }
extern "C" void ad_launch(void (*k)(float*), float* arena, unsigned gx, unsigned gy,
                          unsigned gz, unsigned bx, unsigned by, unsigned bz, int threads) {
  gridDim = {gx, gy, gz}; blockDim = {bx, by, bz};
  for (unsigned z = 0; z < gz; z++) for (unsigned y = 0; y < gy; y++) for (unsigned x = 0; x < gx; x++) {
    blockIdx = {x, y, z};
    if (!threads) {
      for (unsigned tz = 0; tz < bz; tz++) for (unsigned ty = 0; ty < by; ty++) for (unsigned tx = 0; tx < bx; tx++) {
        threadIdx = {tx, ty, tz}; k(arena);
      }
      continue;
    }
    std::barrier<> bar(bx * by * bz);
    ad_block_barrier = &bar;
    const unsigned nt = bx * by * bz;
    ad_warp_barriers.clear();
    for (unsigned w = 0; w < nt; w += 32)
      ad_warp_barriers.emplace_back(new std::barrier<>(std::min(32u, nt - w)));
    ad_warp_slots.assign(nt, 0.0f);
    std::vector<std::thread> ts;
    for (unsigned tz = 0; tz < bz; tz++) for (unsigned ty = 0; ty < by; ty++) for (unsigned tx = 0; tx < bx; tx++)
      ts.emplace_back([=] { threadIdx = {tx, ty, tz}; k(arena); });
    for (auto& t : ts) t.join();
    ad_block_barrier = nullptr;
  }
}
extern "C" void ad_launch_words(void (*k)(float*, unsigned, unsigned), float* arena,
                                unsigned c2, unsigned c3) {
  blockIdx = {}; threadIdx = {}; k(arena, c2, c3);
}
typedef void (*ad_counters_kernel)(float*, int, int, int, int, int, int, int, int);
extern "C" void ad_launch_counters(ad_counters_kernel k, float* arena, const int* c) {
  blockIdx = {}; threadIdx = {}; k(arena, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]);
}
"""

OK = _real.CUresult.CUDA_SUCCESS


def gxx() -> str | None:
    """Why the host emulation cannot run here (no C++20 compiler), or None."""
    return None if shutil.which("g++") else "no g++ to compile the CUDA program for the CPU"


def workdir() -> str:
    """Where compiled host programs are kept, by source hash (under the user's cache dir)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "autodiff", "cuda-host")
    os.makedirs(path, exist_ok=True)
    return path


def source_binary(src: str, arch: str, options=()) -> nvrtc.Binary:
    """An NVRTC stand-in: a :class:`~autodiff.device.cuda.nvrtc.Binary` holding the source."""
    return nvrtc.Binary(src.encode(), "cubin", arch, "", "<host emulation>")


def install(monkeypatch) -> "HostDriver":
    """Put a :class:`HostDriver` in place of the driver and :func:`source_binary` in place of
    NVRTC for the rest of a test (``monkeypatch``: pytest's); returns the driver. Call
    :func:`uninstall` at the end."""
    from autodiff.device.cuda import driver
    fake = HostDriver()
    uninstall()
    monkeypatch.setattr(driver, "bindings", lambda: fake)
    monkeypatch.setattr(nvrtc, "compile", source_binary)
    return fake


def uninstall() -> None:
    """Forget the devices a :class:`HostDriver` listed (the driver's caches)."""
    from autodiff.device.cuda import driver
    driver.init.cache_clear()
    driver.devices.cache_clear()


class _Module:
    def __init__(self, src: str, workdir: str):
        key = hashlib.sha1((SHIM + src).encode()).hexdigest()[:16]    # the shim changes too
        lib = os.path.join(workdir, f"{key}.so")
        if not os.path.exists(lib):
            path = os.path.join(workdir, f"{key}.cpp")
            with open(path, "w") as f:
                f.write(SHIM + src)
            subprocess.run(["g++", "-std=c++20", "-O0", "-w", "-shared", "-fPIC", "-pthread",
                            "-o", lib + ".tmp", path], check=True, capture_output=True, text=True)
            os.replace(lib + ".tmp", lib)
        self.lib = ctypes.CDLL(lib)
        self.lib.ad_launch.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_uint] * 6 \
            + [ctypes.c_int]
        self.lib.ad_launch_words.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint,
                                             ctypes.c_uint]
        self.lib.ad_launch_counters.argtypes = [ctypes.c_void_p] * 3
        self.src = src


class HostDriver:
    """The subset of ``cuda.bindings.driver`` the CUDA device uses, on the CPU (see the
    module docstring). ``calls`` counts the calls by name (graph launches, copies...)."""

    def __init__(self, gpus: int = 1, name: str = "Host emulation", cc=(9, 0),
                 multiprocessors: int = 4):
        for enum in ("CUresult", "CUdevice_attribute", "CUfunction_attribute",
                     "CUstream_flags", "CUstreamCaptureMode", "CUevent_flags"):
            setattr(self, enum, getattr(_real, enum))
        self.gpus, self.name, self.cc, self.sms = gpus, name, cc, multiprocessors
        self.workdir = workdir()
        self.calls: dict = {}
        self._mem: dict = {}
        self._capturing: list | None = None
        self._whole: set = set()

    def __getattribute__(self, name):
        if name.startswith("cu"):
            calls = object.__getattribute__(self, "calls")
            calls[name] = calls.get(name, 0) + 1
        return object.__getattribute__(self, name)

    # -- devices -------------------------------------------------------------------------
    def cuInit(self, flags):
        return (OK,)

    def cuDeviceGetCount(self):
        return OK, self.gpus

    def cuDeviceGet(self, i):
        return OK, i

    def cuDeviceGetName(self, n, dev):
        return OK, self.name.encode() + b"\0"

    def cuDeviceGetAttribute(self, attr, dev):
        table = {"COMPUTE_CAPABILITY_MAJOR": self.cc[0], "COMPUTE_CAPABILITY_MINOR": self.cc[1],
                 "MAX_THREADS_PER_BLOCK": 1024, "MAX_SHARED_MEMORY_PER_BLOCK": 48 << 10,
                 "MAX_GRID_DIM_X": (1 << 31) - 1, "MAX_GRID_DIM_Y": 65535,
                 "MAX_GRID_DIM_Z": 65535, "MULTIPROCESSOR_COUNT": self.sms,
                 "MAX_REGISTERS_PER_BLOCK": 65536}
        return OK, table[attr.name.replace("CU_DEVICE_ATTRIBUTE_", "")]

    def cuDeviceTotalMem(self, dev):
        return OK, 1 << 30

    def cuDevicePrimaryCtxRetain(self, dev):
        return OK, "context"

    def cuCtxSetCurrent(self, ctx):
        return (OK,)

    # -- modules -------------------------------------------------------------------------
    def cuModuleLoadData(self, image):
        src = ctypes.string_at(image).decode()
        return OK, _Module(src, self.workdir)

    def cuModuleGetFunction(self, module, name):
        if not hasattr(module.lib, name.decode()):
            return _real.CUresult.CUDA_ERROR_NOT_FOUND, None
        whole = "__shared__" in module.src.split(f"{name.decode()}(", 1)[1].split("\n}\n", 1)[0]
        return OK, (module, name.decode(), whole)

    def cuFuncGetAttribute(self, attr, fn):
        return OK, 1024

    def cuModuleUnload(self, module):
        return (OK,)

    # -- memory --------------------------------------------------------------------------
    def _alloc(self, n):
        raw = np.zeros(n + 256, np.uint8)
        p = (raw.ctypes.data + 255) // 256 * 256
        self._mem[p] = raw
        return p

    def cuMemAlloc(self, n):
        return OK, self._alloc(n)

    def cuMemHostAlloc(self, n, flags):
        return OK, self._alloc(n)

    def cuMemFree(self, p):
        self._mem.pop(int(p), None)
        return (OK,)

    cuMemFreeHost = cuMemFree

    def _copy(self, dst, src, n, stream):
        if self._capturing is not None:
            self._capturing.append(("copy", int(dst), int(src), int(n)))
        else:
            ctypes.memmove(int(dst), int(src), int(n))
        return (OK,)

    cuMemcpyHtoDAsync = cuMemcpyDtoHAsync = cuMemcpyDtoDAsync = _copy

    # -- streams, graphs, events ---------------------------------------------------------
    def cuStreamCreate(self, flags):
        return OK, "stream"

    def cuStreamSynchronize(self, stream):
        return (OK,)

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        ptrs = np.frombuffer(ctypes.string_at(params, 8), np.uint64)
        arena = int(np.frombuffer(ctypes.string_at(int(ptrs[0]), 8), np.uint64)[0])
        module, name, whole = fn
        if name == "_ad_set_iteration_words":
            ptrs = np.frombuffer(ctypes.string_at(params, 24), np.uint64)
            c2, c3 = (int(np.frombuffer(ctypes.string_at(int(p), 4), np.uint32)[0])
                      for p in ptrs[1:])
            module.lib.ad_launch_words(ctypes.cast(getattr(module.lib, name), ctypes.c_void_p),
                                       arena, c2, c3)
            return (OK,)
        if name.endswith(COUNTERS_KERNEL):      # arguments: the arena, then the counters
            ptrs = np.frombuffer(ctypes.string_at(params, 8 * (1 + MAX_DEPTH)), np.uint64)
            c = np.array([np.frombuffer(ctypes.string_at(int(p), 4), np.int32)[0]
                          for p in ptrs[1:]], np.int32)
            module.lib.ad_launch_counters(
                ctypes.cast(getattr(module.lib, name), ctypes.c_void_p), arena, c.ctypes.data)
            return (OK,)
        run = (module, name, whole, arena, (gx, gy, gz, bx, by, bz))
        if self._capturing is not None:
            self._capturing.append(run)
        else:
            self._run(run)
        return (OK,)

    def _run(self, run):
        if run[0] == "copy":
            ctypes.memmove(*run[1:])
            return
        module, name, whole, arena, dims = run
        fptr = ctypes.cast(getattr(module.lib, name), ctypes.c_void_p)
        module.lib.ad_launch(fptr, arena, *dims, int(whole))

    def cuStreamBeginCapture(self, stream, mode):
        self._capturing = []
        return (OK,)

    def cuStreamEndCapture(self, stream):
        graph, self._capturing = self._capturing, None
        return OK, graph

    def cuGraphInstantiate(self, graph, flags):
        return OK, list(graph)

    def cuGraphDestroy(self, graph):
        return (OK,)

    cuGraphExecDestroy = cuGraphDestroy

    def cuGraphLaunch(self, exe, stream):
        for run in exe:
            self._run(run)
        return (OK,)

    def cuEventCreate(self, flags):
        return OK, object()

    def cuEventRecord(self, ev, stream):
        return (OK,)

    def cuEventQuery(self, ev):
        return (OK,)

    def cuEventSynchronize(self, ev):
        return (OK,)

    def cuEventDestroy(self, ev):
        return (OK,)
