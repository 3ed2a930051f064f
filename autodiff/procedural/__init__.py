"""The procedural IR (second IR) and the lowering into it from the graph IR.

* :mod:`.ir`: buffers, value expressions, kernels, ``For`` blocks, :class:`~.ir.Program`.
* :mod:`.access`: access expressions (index algebra) and their simplifier.
* :mod:`.lower`: graph IR -> procedural IR (:func:`~.lower.lower`).
* :mod:`.printer`: the text listing.
"""
from .ir import (BLOCKS, Acc, Apply, Buffer, BufferKind, Const, Copy, DotProduct,
                 Elementwise, FeederWrite, For, FusedKernel, Gather, If, IndexValue, Kernel,
                 Load, Local, Output, Program, ReceiverRead, Reduce, ScatterAdd, Select, Stmt,
                 While)

from .lower import lower

__all__ = ["BLOCKS", "If", "IndexValue", "While", "Acc", "Apply", "Buffer", "BufferKind", "Const", "Copy", "DotProduct",
           "Elementwise", "FeederWrite", "For", "FusedKernel", "Gather", "Kernel", "Load", "Local",
           "Output", "Program", "ReceiverRead", "Reduce", "ScatterAdd", "Select", "Stmt",
           "lower"]

