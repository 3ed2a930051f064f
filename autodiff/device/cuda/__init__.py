"""The CUDA device: procedural IR -> the shared C-style kernel templates in the CUDA dialect
-> one CUDA program compiled by NVRTC -> each loop iteration one CUDA graph launch.

``compile(graph)`` renders the program (:mod:`.program`: lowering, fusion, arena plan and
kernel templates of :mod:`autodiff.device.cstyle`, shared with the OpenCL device, rendered
with :class:`.dialect.CUDA` and the :mod:`.prelude`; block sizes per kernel from :mod:`.launch` and the GPU's limits),
compiles it once with NVRTC for the GPU's compute capability (:mod:`.nvrtc`: CUBIN, or PTX
for a GPU newer than NVRTC; cached on disk by source hash), loads it, and returns an
:class:`~.runtime.Executable` whose host loop launches each segment of a loop body between
host boundaries as one captured CUDA graph (:mod:`.runtime`).

Needs the ``[cuda]`` extra (``cuda-bindings``, ``nvidia-cuda-nvrtc``), an NVIDIA driver and
a GPU; without them ``execute(device="cuda")`` raises :class:`CUDAUnavailable` saying what
is missing, before anything is traced away or compiled. Rendering and NVRTC compilation
need no GPU (:func:`render`, :func:`build`): the test suite compiles every program it
builds for ``sm_80`` and ``sm_90`` that way.
"""
from __future__ import annotations

import time

from . import driver, nvrtc
from .errors import CUDABuildError, CUDAError, CUDAUnavailable
from .launch import ARCH, Limits, LaunchError
from .program import Rendered, render

__all__ = ["compile", "require", "render", "build", "CUDAUnavailable", "CUDABuildError",
           "CUDAError", "LaunchError", "ARCH", "Limits", "Rendered"]


def require(cuda_device: str | None = None, **options) -> None:
    """Check that a GPU is usable (``execute()`` calls it before compiling).

    Raises:
        CUDAUnavailable: the ``[cuda]`` extra, the NVIDIA driver or a GPU is missing (the
            message names which and how to get it), or nothing matches ``cuda_device`` /
            ``AUTODIFF_CUDA_DEVICE``.
    """
    driver.select(cuda_device)
    nvrtc.version()


def build(graph, arch: str = "sm_90", **options) -> tuple[Rendered, nvrtc.Binary]:
    """Render ``graph`` and compile it with NVRTC for ``arch`` without a GPU (limits of
    :data:`~.launch.ARCH` ``[arch]``, else those of an ``sm_90`` device).

    Raises:
        CUDABuildError: NVRTC rejected the program (source path and log).
        CUDAUnavailable: cuda-bindings or the NVRTC library is missing.
    """
    limits = ARCH.get(arch, ARCH["sm_90"])
    rendered = render(graph, limits, **options)
    return rendered, nvrtc.compile(rendered.source, arch)


def compile(graph, report=None, cuda_device: str | None = None, **options):
    """Compile ``graph`` for the GPU.

    Args:
        graph: the (optimized) graph IR program.
        report: the ``execute()`` report; ``report.stats["cuda"]`` gets the GPU name and
            compute capability, the kernel count, the graph segments and what one iteration
            launches (``per_iteration``), the source size and path, the seconds spent
            lowering, fusing, planning, rendering, compiling (NVRTC) and loading, the
            arena size; ``report.stats["memory"]`` the memory plan.
        cuda_device: GPU ordinal or name substring (else ``AUTODIFF_CUDA_DEVICE``, else
            GPU 0).
        options: ``fuse=False`` skips fusion; others are ignored here.

    Returns:
        An :class:`~.runtime.Executable`.

    Raises:
        CUDAUnavailable: no ``[cuda]`` extra, driver or GPU.
        CUDABuildError: NVRTC rejected the program (source path and NVRTC log).
        LaunchError: a kernel does not fit the GPU's launch limits.
        CUDAOutOfMemory: the arena does not fit the GPU.
        NotImplementedError: a statement with no kernel template or host step.
    """
    from .runtime import Executable
    t_all = time.perf_counter()
    dev = driver.select(cuda_device)
    rendered = render(graph, dev.limits, **options)
    st = rendered.stats
    st.update(device=dev.name, compute_capability=f"{dev.cc[0]}.{dev.cc[1]}")
    if report is not None and rendered.plan is not None:
        report.stats["memory"] = rendered.plan.stats()
    kind, arch = nvrtc.target(dev.cc)
    binary = nvrtc.compile(rendered.source, arch)
    st.update(arch=arch, binary=kind, nvrtc_s=binary.seconds, nvrtc_cached=binary.cached,
              source_path=binary.path)
    exe = Executable(dev, rendered, binary)
    st["compile_s"] = time.perf_counter() - t_all
    if report is not None:
        report.stats["cuda"] = st
    return exe
