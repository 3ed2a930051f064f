"""The CUDA device (work in progress)."""
