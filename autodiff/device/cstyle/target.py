"""Code-generation choices for one device: vector lanes, matmul register tile, reduction
form.

Kernel templates (:mod:`.kernels`, :mod:`.codegen`) are written once; a :class:`Target`
says how wide and how blocked to render them. Each device derives it from what the device
reports (:func:`autodiff.device.opencl.device.for_device`; the CUDA device's is fixed,
:data:`autodiff.device.cuda.dialect.TARGET`), as measured on PoCL 3.1:

* a CPU device vectorises explicit vectors only (PoCL does not vectorise a work-item's own
  loop, and builtins such as ``exp`` stay scalar library calls across work-items: 0.13
  Gelem/s as one work-item per element against 1.5 as ``float16``, PoCL 3.1, one core), so
  elementwise and reduction kernels get ``vector`` = the native float width lanes per
  work-item (8 with AVX2: exp 1.7 Gelem/s as ``float8``, 1.5 as ``float16``, erf 0.61 and
  0.38: wider vectors spill the 16 registers; 16 with AVX-512);
* the matmul register tile fills the vector register file without spilling: with 16
  registers of 8 floats (AVX2), 6 rows x two ``float8`` accumulators (12 registers, the
  BLIS Haswell micro-kernel shape) ran 2.5-3x faster than 8 rows x one ``float16`` (16
  registers of accumulators: spills); with 32 registers of 16 floats (AVX-512), 8 rows x
  two ``float16`` (16 accumulators, 32 columns: 145 GFLOP/s against 116-121 for 8 x one
  ``float16``, whose 9 loads per 8 FMAs bound it; BLIS's Skylake-X micro-kernel shape);
* a GPU gets one point per work-item (``vector`` = 1) and work-group tree reductions.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

#: register tiles ``(rows, vector width, vectors per row)`` by the device's native float
#: vector width (floats per register)
TILES = {8: (6, 8, 2), 16: (8, 16, 2)}
DEFAULT_TILE = (8, 16, 1)


@dataclass(frozen=True)
class Target:
    """How kernels are rendered for a device.

    Attributes:
        vector: lanes per work-item of elementwise and reduction kernels (a power of two up
            to 16; 1 renders one point per work-item).
        tile: matmul register tile ``(rows, width, vectors)``: each work-item accumulates
            ``rows`` rows of ``vectors`` ``float{width}`` registers (``width * vectors``
            columns: 16, or 32 for two 16-float panels).
        reductions: ``"row"`` (a work-item per row or column block: CPU devices) or
            ``"tree"`` (a work-group per row: GPU devices).
        micro: matmuls from packed panels call one shared tile loop per tile shape
            (:func:`.kernels.micro_kernel`) instead of inlining it in every kernel: less
            code for a JIT that compiles every kernel body (PoCL); off where the compiler
            should specialise each product (GPUs, CUDA).
    """
    vector: int = 1
    tile: tuple[int, int, int] = DEFAULT_TILE
    reductions: str = "row"
    micro: bool = False

    def __post_init__(self):
        if self.reductions not in ("row", "tree"):
            raise ValueError(f"codegen target: reductions must be 'row' or 'tree', not "
                             f"{self.reductions!r}")
        if self.vector not in (1, 2, 4, 8, 16):
            raise ValueError(f"codegen target: vector must be 1, 2, 4, 8 or 16, not "
                             f"{self.vector!r}")
        rows, width, vectors = self.tile
        if width * vectors not in (16, 32) or rows < 1:
            raise ValueError(f"codegen target: tile {self.tile} must cover 16 or 32 "
                             f"columns")

    def with_options(self, **options) -> "Target":
        """A copy with the given fields replaced (``None`` values ignored)."""
        return replace(self, **{k: v for k, v in options.items() if v is not None})
