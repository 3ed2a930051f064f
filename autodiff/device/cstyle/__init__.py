"""C-style code generation shared by the OpenCL and CUDA devices: one renderer, the dialect
as data (after tinygrad's ``renderer/cstyle.py``).

* :mod:`.dialect`: the :class:`~.dialect.Dialect` base (the fields in which C-style
  languages differ) and the :class:`~.dialect.Body` form of a kernel;
* :mod:`.codegen`: procedural IR kernel statements -> kernel sources;
* :mod:`.kernels`: the templates (register-tiled dot products with fused epilogues, row,
  column and work-group tree reductions, operand packing) and :class:`~.kernels.Source`;
* :mod:`.render`: the op -> C expression table; :mod:`.dtypes`: how each dtype is stored,
  loaded, cast and computed on;
* :mod:`.philox`: the arena words and C call of random draws; :mod:`.target`: vector
  lanes, register tile and reduction form; :mod:`.arena`: lowering, the memory plan and
  the arena layout both devices use.

Each device supplies its dialect table (qualifiers, index builtins, barrier, shared-memory
spelling, warp shuffles), the preamble defining what the templates call (OpenCL:
:mod:`autodiff.device.opencl.render` and ``mathlib``; CUDA: :mod:`autodiff.device.cuda.prelude`),
its launch planning and its runtime.
"""
