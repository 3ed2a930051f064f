"""Benchmarks of autodiff against PyTorch and JAX: same math, same machine, same run.

``python -m bench`` (or ``python bench/run.py``); ``--quick`` for everyday use. See
BENCHMARKS.md for the latest figures and :mod:`bench.run` for the options.
"""
