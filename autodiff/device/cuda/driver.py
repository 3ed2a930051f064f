"""The CUDA driver API (``cuda.bindings.driver``): availability, device choice and limits,
and the mapping of failed driver calls to the project's errors.

Every driver call returns ``(CUresult, *values)``; :func:`call` returns the values or raises
the error :data:`ERRORS` maps the result to. What is missing is told apart before anything
compiles (:func:`require`): the ``[cuda]`` extra (``cuda-bindings`` not importable), the
NVIDIA driver library (``libcuda`` not found: ``cuInit`` raises while loading it), or a GPU
(``CUDA_ERROR_NO_DEVICE``, or ``AUTODIFF_CUDA_DEVICE`` naming none of them).
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from .errors import CUDAError, CUDAUnavailable, INSTALL
from .launch import Limits

DRIVER_HINT = ("install the NVIDIA driver for the GPU (it provides libcuda.so); inside a "
               "container, start it with the GPU exposed (e.g. docker run --gpus all)")


class CUDAOutOfMemory(MemoryError):
    """A device allocation failed (the arena, parameters or staging do not fit)."""


#: CUresult name -> (exception class, what it means for the user); others -> CUDAError
ERRORS = {
    "CUDA_ERROR_NO_DEVICE": (CUDAUnavailable, "no CUDA-capable GPU is visible to the driver "
                             "(check nvidia-smi and CUDA_VISIBLE_DEVICES)"),
    "CUDA_ERROR_INSUFFICIENT_DRIVER": (CUDAUnavailable, "the NVIDIA driver is older than the "
                                       "CUDA version cuda-bindings needs; update the driver"),
    "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": (CUDAUnavailable, "the CUDA forward-"
                                                  "compatibility driver does not support this GPU"),
    "CUDA_ERROR_OUT_OF_MEMORY": (CUDAOutOfMemory, "the GPU is out of memory"),
    "CUDA_ERROR_INVALID_PTX": (CUDAError, "the driver rejected the PTX NVRTC produced "
                               "(NVRTC newer than the driver: update the driver)"),
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": (CUDAError, "the PTX is newer than the driver "
                                           "supports: update the driver"),
    "CUDA_ERROR_NO_BINARY_FOR_GPU": (CUDAError, "the module has no code for this GPU"),
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": (CUDAError, "a kernel needs more registers or "
                                           "shared memory than its block allows"),
    "CUDA_ERROR_ILLEGAL_ADDRESS": (CUDAError, "a kernel accessed memory outside the arena "
                                   "(a bug in the generated program; the context is lost)"),
}


def error(call_name: str, code: str) -> Exception:
    """The exception for driver call ``call_name`` failing with ``CUresult`` ``code``."""
    cls, what = ERRORS.get(code, (CUDAError, ""))
    if cls is CUDAError:
        return CUDAError(call_name, code, what)
    return cls(f"{call_name} failed: {code}: {what}")


def bindings():
    """``cuda.bindings.driver``.

    Raises:
        CUDAUnavailable: the ``[cuda]`` extra is not installed.
    """
    try:
        from cuda.bindings import driver
    except ImportError as e:
        raise CUDAUnavailable(f"the cuda device needs the [cuda] extra: {INSTALL}") from e
    return driver


def call(fn, *args):
    """``fn(*args)`` for a driver function: its values (one, a tuple, or None).

    Raises:
        The mapped error (:func:`error`) when the result is not ``CUDA_SUCCESS``.
    """
    res = fn(*args)
    err, rest = (res[0], res[1:]) if isinstance(res, tuple) else (res, ())
    if int(err) != 0:
        raise error(fn.__name__, err.name if hasattr(err, "name") else str(err))
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else rest


@functools.lru_cache(maxsize=None)
def init() -> None:
    """``cuInit`` once per process.

    Raises:
        CUDAUnavailable: no extra, no driver library, or no GPU (the message says which).
    """
    cu = bindings()
    try:
        call(cu.cuInit, 0)
    except CUDAUnavailable:
        raise
    except CUDAError as e:
        raise CUDAUnavailable(f"the NVIDIA driver failed to initialise ({e.code}); "
                              f"{DRIVER_HINT}") from e
    except Exception as e:      # cuda.pathfinder's DynamicLibNotFoundError, OSError
        raise CUDAUnavailable(f"no NVIDIA driver library (libcuda.so) on this machine: "
                              f"{DRIVER_HINT}. ({type(e).__name__}: {e})") from e


@dataclass(frozen=True)
class Device:
    """A GPU as the driver reports it.

    Attributes:
        ordinal: the driver's device index.
        name: marketing name (e.g. ``NVIDIA H100 80GB HBM3``).
        cc: compute capability ``(major, minor)``.
        memory: total device memory (bytes).
        limits: launch limits read from the device (:class:`~.launch.Limits`).
    """
    ordinal: int
    name: str
    cc: tuple[int, int]
    memory: int
    limits: Limits


def _attr(cu, dev, name: str) -> int:
    return int(call(cu.cuDeviceGetAttribute, getattr(cu.CUdevice_attribute, name), dev))


@functools.lru_cache(maxsize=None)
def devices() -> tuple[Device, ...]:
    """Every GPU the driver sees.

    Raises:
        CUDAUnavailable: see :func:`init`; or the driver sees no GPU.
    """
    init()
    cu = bindings()
    n = int(call(cu.cuDeviceGetCount))
    if n == 0:
        raise CUDAUnavailable("the NVIDIA driver is installed but sees no GPU (check "
                              "nvidia-smi and CUDA_VISIBLE_DEVICES)")
    out = []
    for i in range(n):
        dev = call(cu.cuDeviceGet, i)
        name = call(cu.cuDeviceGetName, 256, dev).split(b"\0")[0].decode()
        a = functools.partial(_attr, cu, dev)
        cc = (a("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
              a("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"))
        limits = Limits(
            name, cc,
            max_threads=a("CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"),
            max_shared=a("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK"),
            max_grid=(a("CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X"),
                      a("CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y"),
                      a("CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z")),
            multiprocessors=a("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
            registers=a("CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK"))
        out.append(Device(i, name, cc, int(call(cu.cuDeviceTotalMem, dev)), limits))
    return tuple(out)


def select(spec: str | None = None) -> Device:
    """The GPU to run on: ``spec`` (else ``AUTODIFF_CUDA_DEVICE``), an ordinal or a
    case-insensitive substring of the name; by default the first GPU.

    Raises:
        CUDAUnavailable: no GPU, or none matches ``spec`` (the message lists them).
    """
    devs = devices()
    spec = spec if spec is not None else os.environ.get("AUTODIFF_CUDA_DEVICE")
    if not spec:
        return devs[0]
    if str(spec).isdigit():
        hit = [d for d in devs if d.ordinal == int(spec)]
    else:
        hit = [d for d in devs if str(spec).lower() in d.name.lower()]
    if not hit:
        raise CUDAUnavailable(f"no CUDA device matches {spec!r}; found: "
                              + "; ".join(f"{d.ordinal}: {d.name}" for d in devs))
    return hit[0]


def missing() -> str | None:
    """Why the cuda device cannot run here (what is missing and how to get it), or None."""
    try:
        select()
    except CUDAUnavailable as e:
        return str(e)
    return None
