"""Launch geometry: the block and grid of every kernel, from its index space and the
device's limits.

A template's :class:`~autodiff.device.cstyle.kernels.Source` gives its NDRange as OpenCL
sees it: a global size (work-items per axis, padded) and the local size it was written for.
On CUDA a kernel whose body shares nothing between threads (every template but the
work-group tree reduction) is rendered as a ``__device__`` body of its global index and
launched through a :func:`wrapper` that guards the padded space, so its block can take any
shape: :func:`block_for` picks one per kernel. A complete work-group kernel
(``Source.whole``: shared memory and barriers) keeps the local size it was written for.

Blocks hold at most :data:`MAX_BLOCK` threads (the register tiles of the matmul templates
use up to ~200 registers a thread, and 256 threads x 255 registers still fit the 64 K
registers of a multiprocessor, so every launch is possible whatever ptxas allocates; each
wrapper carries ``__launch_bounds__`` with its block). Small index spaces get smaller
blocks, down to a warp, so that they spread over more multiprocessors.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..cstyle.dialect import body_name
from ..cstyle.kernels import Source

WARP = 32
#: bytes: the arena's alignment (cuMemAlloc returns 256-byte aligned memory)
ALIGN = 256
#: most threads per block of a body kernel
MAX_BLOCK = 256


@dataclass(frozen=True)
class Limits:
    """What a device allows a launch (read from the driver at start, or :data:`ARCH` for a
    compile without a GPU).

    Attributes:
        name: device or architecture name.
        cc: compute capability as ``(major, minor)``.
        max_threads: threads per block.
        max_shared: static shared memory per block (bytes).
        max_grid: blocks per grid along x, y, z.
        multiprocessors: streaming multiprocessors (SMs).
        registers: 32-bit registers per multiprocessor (and per block).
        max_registers: registers per thread.
    """
    name: str
    cc: tuple[int, int]
    max_threads: int = 1024
    max_shared: int = 48 << 10
    max_grid: tuple[int, int, int] = ((1 << 31) - 1, 65535, 65535)
    multiprocessors: int = 108
    registers: int = 65536
    max_registers: int = 255

    @property
    def arch(self) -> str:
        """``sm_XY``."""
        return f"sm_{self.cc[0]}{self.cc[1]}"


#: architectures the compile checks target without a GPU (A100-, H100-class limits)
ARCH = {"sm_80": Limits("sm_80 (A100-class)", (8, 0), multiprocessors=108),
        "sm_90": Limits("sm_90 (H100-class)", (9, 0), multiprocessors=132)}


class LaunchError(ValueError):
    """A kernel's index space or block does not fit the device's launch limits."""


@dataclass
class Geometry:
    """One launch: ``grid`` blocks of ``block`` threads (x, y, z), ``extent`` the global
    size the wrapper guards (None for a complete work-group kernel)."""
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    extent: tuple[int, int, int] | None

    @property
    def threads(self) -> int:
        return math.prod(self.block)


def _pad3(t) -> tuple[int, int, int]:
    t = tuple(int(x) for x in t) + (1,) * (3 - len(t))
    return t[:3]


def _pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def block_for(extent, limits: Limits) -> tuple[int, int, int]:
    """Block shape for a body kernel over ``extent`` threads (x, y, z): at most
    ``min(MAX_BLOCK, limits.max_threads)`` threads, x first (consecutive threads touch
    consecutive columns), halved down to a warp while the grid would have fewer blocks
    than the device has multiprocessors."""
    g = _pad3(extent)
    total = math.prod(g)
    cap = max(1, min(MAX_BLOCK, limits.max_threads))
    while cap > WARP and -(-total // cap) < limits.multiprocessors:
        cap //= 2
    bx = min(_pow2(g[0]), cap)
    by = min(_pow2(g[1]), cap // bx)
    bz = min(_pow2(g[2]), cap // (bx * by))
    return bx, by, bz


def geometry(src: Source, limits: Limits) -> Geometry:
    """The launch of ``src`` on a device with ``limits``.

    Raises:
        LaunchError: a work-group kernel's block exceeds the device, or the grid exceeds
            ``limits.max_grid``.
    """
    g = _pad3(src.global_size)
    if src.whole:
        block = _pad3(src.local_size)
        if math.prod(block) > limits.max_threads:
            raise LaunchError(f"cuda: kernel {src.name} needs {math.prod(block)} threads per "
                              f"block; {limits.name} allows {limits.max_threads}")
        grid = tuple(-(-a // b) for a, b in zip(g, block))
        extent = None
    else:
        block = block_for(g, limits)
        grid = tuple(-(-a // b) for a, b in zip(g, block))
        extent = g
    if any(a > m for a, m in zip(grid, limits.max_grid)):
        raise LaunchError(f"cuda: kernel {src.name}: grid {grid} exceeds {limits.name}'s "
                          f"limits {limits.max_grid} (index space {g})")
    return Geometry(grid, block, extent)


def wrapper(body: Source, geo: Geometry, d, guard: str | None = None) -> str:
    """The ``__global__`` kernel running ``body`` (rendered with the body dialect) for
    every point of its global size, one thread each; threads past the extent return, and
    every thread returns unless the C condition ``guard`` holds (a branch decided on the
    device, :mod:`autodiff.device.opencl.control`)."""
    e = geo.extent
    axes = "xyz"
    lines = [f'extern "C" __global__ void __launch_bounds__({geo.threads}) '
             f"{body.name}({d.pointer()} restrict arena) {{",
             f"  {d.pointer()} buf = static_cast<float*>(__builtin_assume_aligned(arena, {ALIGN}));"]
    for i in range(3):
        if e[i] == 1:
            lines.append(f"  const int g{i} = 0;")
        else:
            a = axes[i]
            lines.append(f"  const int g{i} = (int)(blockIdx.{a}*blockDim.{a}+threadIdx.{a});")
    branch, guard = guard, " || ".join(f"g{i} >= {e[i]}" for i in range(3) if e[i] > 1)
    if guard:
        lines.append(f"  if ({guard}) return;")
    if branch:
        lines.append(f"  if (!({branch})) return;")
    lines.append(f"  {body_name(body.name)}(buf, g0, g1, g2);")
    lines.append("}")
    return "\n".join(lines)


def bounded(name: str, text: str, geo: Geometry) -> str:
    """Complete work-group kernel ``name`` 's source ``text`` with ``__launch_bounds__`` of
    its block."""
    return text.replace(f"void {name}(", f"void __launch_bounds__({geo.threads}) {name}(", 1)
