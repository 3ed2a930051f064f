"""Errors of the CUDA device."""
from __future__ import annotations

#: how to get what the CUDA device needs besides an NVIDIA GPU and its driver
INSTALL = "pip install 'autodiff[cuda]' (cuda-bindings and nvidia-cuda-nvrtc)"


class CUDAUnavailable(RuntimeError):
    """The CUDA device cannot run here: the ``[cuda]`` extra is not installed, the NVIDIA
    driver library is missing, or no GPU is visible (the message says which and how to get
    it). Raised before anything is compiled or run; never a silent fallback."""


class CUDABuildError(RuntimeError):
    """NVRTC rejected the generated program.

    Attributes:
        path: file holding the generated CUDA source.
        log: NVRTC's log.
    """

    def __init__(self, path: str, log: str):
        self.path, self.log = path, log
        super().__init__(f"CUDA program build failed (NVRTC); generated source: {path}\n{log}")

    def __reduce__(self):               # picklable: raised in compile worker processes
        return type(self), (self.path, self.log)


class CUDAError(RuntimeError):
    """A CUDA driver call failed while compiling or running.

    Attributes:
        call: the driver function.
        code: the ``CUresult`` name (``CUDA_ERROR_...``).
    """

    def __init__(self, call: str, code: str, message: str = ""):
        self.call, self.code = call, code
        super().__init__(f"{call} failed: {code}" + (f" ({message})" if message else ""))
