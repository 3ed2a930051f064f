"""Platform and device choice for the OpenCL backend.

``execute(device="opencl")`` takes the first GPU of any platform, else the first CPU
device. ``AUTODIFF_OPENCL_DEVICE`` (or the ``opencl_device`` option) overrides the choice
with a substring matched, case-insensitively, against ``"<platform name> <device name>"``.
On PoCL the disk cache of compiled kernels stays on (``POCL_CACHE_DIR`` if set, else PoCL's
own directory under the user's cache dir, ``~/.cache/pocl/kcache``).

A process that may run on one core only (its CPU affinity, e.g. ``taskset -c 0``) gets
PoCL's ``basic`` driver, which runs each kernel in the calling thread, instead of
``pthread``, whose worker thread would share that core with the host thread and switch
with it at every command (W1 on one pinned core: 0.074 -> 0.060 ms/step, W4 0.33 -> 0.30
ms of CPU per step, PoCL 3.1). This sets ``POCL_DEVICES=basic`` before PoCL is first
loaded, and only when ``POCL_DEVICES`` is unset: a value the user set is kept.
"""
from __future__ import annotations

import functools
import os
import sys

from ..cstyle.target import DEFAULT_TILE, TILES, Target

INSTALL = ("apt-get update && apt-get install -y pocl-opencl-icd ocl-icd-libopencl1 "
           "&& pip install pyopencl")


class OpenCLUnavailable(RuntimeError):
    """No usable OpenCL platform or device (the message names the install command)."""


def _cl():
    os.environ.setdefault("POCL_KERNEL_CACHE", "1")
    if "pyopencl" not in sys.modules and one_core():
        os.environ.setdefault("POCL_DEVICES", "basic")     # before PoCL reads it
    try:
        import pyopencl as cl
    except ImportError as e:
        raise OpenCLUnavailable(f"the opencl device needs pyopencl and an OpenCL platform; "
                                f"install them with: {INSTALL}") from e
    return cl


def one_core() -> bool:
    """Whether this process may run on one core only (its CPU affinity)."""
    from .prejit import usable_cores
    return usable_cores() == 1


def candidates() -> list:
    """Every OpenCL device of every platform, GPUs first, as ``(label, cl.Device)``.

    Raises:
        OpenCLUnavailable: pyopencl is missing or no platform/device exists.
    """
    cl = _cl()
    try:
        platforms = cl.get_platforms()
    except cl.Error as e:       # the ICD loader reports "no platforms" as an error
        platforms = []
        why = str(e)
    else:
        why = "no platform found"
    devs = [(f"{p.name} {d.name}", d) for p in platforms for d in p.get_devices()]
    if not devs:
        raise OpenCLUnavailable(f"no OpenCL platform/device ({why}); on a CPU machine "
                                f"install PoCL with: {INSTALL}")
    gpu = [x for x in devs if x[1].type & cl.device_type.GPU]
    return gpu + [x for x in devs if x not in gpu]


def select(spec: str | None = None):
    """The ``cl.Device`` to run on.

    Args:
        spec: substring of ``"<platform> <device>"``; ``None`` reads
            ``AUTODIFF_OPENCL_DEVICE``, and if that is unset takes the first GPU, else the
            first device.

    Raises:
        OpenCLUnavailable: no platform, or no device matches ``spec`` (the message lists
            the devices found).
    """
    devs = candidates()
    spec = spec if spec is not None else os.environ.get("AUTODIFF_OPENCL_DEVICE")
    if not spec:
        return devs[0][1]
    hit = [d for label, d in devs if spec.lower() in label.lower()]
    if not hit:
        raise OpenCLUnavailable(f"no OpenCL device matches {spec!r}; found: "
                                + "; ".join(label for label, _ in devs))
    return hit[0]


@functools.lru_cache(maxsize=None)
def _context(device):
    cl = _cl()
    return cl.Context([device])


def context(spec: str | None = None):
    """``(cl.Context, cl.Device)`` for :func:`select`'s device; one context per device per
    process (building a context costs milliseconds, a program's kernels are per context)."""
    dev = select(spec)
    return _context(dev), dev


def is_gpu(device) -> bool:
    """Whether ``device`` is a GPU (selects GPU idioms such as work-group reductions)."""
    return bool(device.type & _cl().device_type.GPU)


def for_device(device) -> Target:
    """How to render kernels for a ``pyopencl.Device``: a GPU gets one point per work-item
    and work-group tree reductions; a CPU device its native float vector width in lanes,
    the register tile that fills its vector registers, and a work-item per row
    (:mod:`autodiff.device.cstyle.target` gives the measurements)."""
    cl = _cl()
    if not device.type & cl.device_type.CPU:
        return Target(vector=1, tile=DEFAULT_TILE, reductions="tree")
    native = int(getattr(device, "native_vector_width_float", 8) or 8)
    native = native if native in (4, 8, 16) else 8
    return Target(vector=native, tile=TILES.get(native, DEFAULT_TILE), reductions="row",
                  micro=True)
