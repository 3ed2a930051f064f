"""``weight_norm`` and ``spectral_norm`` as parametrizations, as
``torch.nn.utils.parametrizations`` (PyTorch's ``state_dict`` keys:
``parametrizations.weight.original0`` / ``original1`` for weight norm,
``parametrizations.weight.original`` and the buffers ``parametrizations.weight.0._u`` /
``_v`` for spectral norm)."""
from __future__ import annotations

import numpy as np

from ...graph.tensor import Tensor, default_rng
from ...graph.trace import no_grad
from ..module import Module
from . import parametrize

__all__ = ["weight_norm", "spectral_norm"]


# -- weight norm ---------------------------------------------------------------------------
def norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """The 2-norm of ``v`` over every dim but ``dim`` (kept, size 1), as
    ``torch.norm_except_dim(v, 2, dim)``; ``dim == -1``: the norm of all of ``v`` (0-d),
    PyTorch's convention (another negative ``dim`` counts from the end)."""
    if dim == -1:
        return (v * v).sum().sqrt()
    d = dim % v.ndim
    axes = [a for a in range(v.ndim) if a != d]
    return (v * v).sum(axes, keepdim=True).sqrt() if axes else v.abs()


class _WeightNorm(Module):
    """``g * v / ||v||`` (the norm over every dim but ``dim``): ``forward(g, v)``;
    ``right_inverse(w) = (||w||, w)``."""

    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_v * (weight_g / norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight: Tensor):
        return norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Weight normalisation (Salimans and Kingma, 2016) of ``module.<name>`` as a
    parametrization, as ``torch.nn.utils.parametrizations.weight_norm``: the weight is
    ``g * v / ||v||``, the norm over every dim but ``dim`` (``None``: over all dims, ``g``
    a 0-d tensor). ``g`` is ``module.parametrizations.<name>.original0`` (the norms, shape
    of ``v`` with size 1 on every dim but ``dim``), ``v`` is ``...original1`` (the weight's
    shape), both initialised from the current weight so the module's output is unchanged.
    They are new parameters: build the optimizer after this call.

    Returns:
        ``module``.

    Raises:
        ValueError: ``module`` has no parameter or buffer ``name``.
    """
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)
    return module


# -- spectral norm ---------------------------------------------------------------------------
def _np_normalize(x: np.ndarray, eps: float) -> np.ndarray:
    return (x / max(float(np.sqrt((x * x).sum(dtype=np.float32))), eps)).astype(np.float32)


class _SpectralNorm(Module):
    """``weight / sigma``, ``sigma`` the largest singular value of the weight (as a matrix
    ``[weight.shape[dim], -1]``) estimated by power iteration; the singular vector estimates
    are the buffers ``_u`` ``[h]`` and ``_v`` ``[w]``, refined by ``n_power_iterations``
    steps at each training-mode forward (in place: inside an ``ir_for`` loop they are
    loop-carried, like BatchNorm's running statistics)."""

    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0,
                 eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError("Dimension out of range (expected to be in range of "
                             f"[-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            w = parametrize.host_value(weight)
            if w is None:
                raise RuntimeError("spectral_norm: the weight's value must be known when "
                                   "registering (call it outside an ir_for body)")
            mat = self._np_matrix(w)
            h, wd = mat.shape
            rng = default_rng()
            u = _np_normalize(rng.standard_normal(h).astype(np.float32), eps)
            v = _np_normalize(rng.standard_normal(wd).astype(np.float32), eps)
            u, v = self._np_power(mat, u, v, 15)
            self.register_buffer("_u", Tensor(u))
            self.register_buffer("_v", Tensor(v))

    def _np_matrix(self, w: np.ndarray) -> np.ndarray:
        w = np.asarray(w, np.float32)
        if self.dim != 0:
            w = np.moveaxis(w, self.dim, 0)
        return w.reshape(w.shape[0], -1)

    def _np_power(self, mat, u, v, n):
        for _ in range(n):
            u = _np_normalize(mat @ v, self.eps)
            v = _np_normalize(mat.T @ u, self.eps)
        return u, v

    def _matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.ndim) if d != self.dim])
        return weight.flatten(1)

    def _normalize(self, x: Tensor) -> Tensor:
        return x / (x * x).sum().sqrt().clamp(min=self.eps)

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return self._normalize(weight)
        mat = self._matrix(weight)
        u, v = self._u, self._v
        if self.training:
            w = parametrize.host_value(weight) if parametrize._registering[0] else None
            if w is not None:                  # the registration's check: on the host
                nu, nv = self._np_power(self._np_matrix(w), u.numpy(), v.numpy(),
                                        self.n_power_iterations)
                self._u._var.value, self._v._var.value = nu, nv
            else:
                with no_grad():
                    m = mat.detach()
                    for _ in range(self.n_power_iterations):
                        u = self._normalize(m.mv(v))
                        v = self._normalize(m.T.mv(u))
                    self._u.copy_(u)
                    self._v.copy_(v)
                u, v = u.detach(), v.detach()
        sigma = (u * mat.mv(v)).sum()
        return weight / sigma

    def _host_forward(self, w: np.ndarray) -> np.ndarray | None:
        """:meth:`forward` on the host (the power iteration in training mode updating the
        buffers at once), or None when the buffers' values are not known while tracing."""
        w = np.asarray(w, np.float32)
        if w.ndim == 1:
            return (w / max(float(np.sqrt((w * w).sum(dtype=np.float32))), self.eps)) \
                .astype(np.float32)
        u, v = parametrize.host_value(self._u), parametrize.host_value(self._v)
        if u is None or v is None:
            return None
        mat = self._np_matrix(w)
        if self.training:
            u, v = self._np_power(mat, u, v, self.n_power_iterations)
            self._u._var.value, self._v._var.value = u, v
        return (w / np.float32(u @ (mat @ v))).astype(np.float32)

    def right_inverse(self, value: Tensor) -> Tensor:
        return value

    def _host_right_inverse(self, value: np.ndarray) -> np.ndarray:
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1,
                  eps: float = 1e-12, dim: int | None = None) -> Module:
    """Spectral normalisation (Miyato et al., 2018) of ``module.<name>`` as a
    parametrization, as ``torch.nn.utils.parametrizations.spectral_norm``: the weight is
    divided by its largest singular value ``sigma = u . (W v)``, ``W`` the weight as a
    ``[shape[dim], -1]`` matrix, ``u``/``v`` estimated by power iteration.

    ``module.parametrizations.<name>.original`` is the old parameter (the same variable);
    the buffers ``parametrizations.<name>.0._u`` ``[h]`` and ``._v`` ``[w]`` start from
    normalised random vectors (:func:`autodiff.manual_seed`'s generator, not PyTorch's: load
    a PyTorch ``state_dict`` to start from the same vectors) refined by 15 iterations plus
    the one of the registration check, as PyTorch. Each read of ``module.<name>`` in
    training mode runs ``n_power_iterations`` more and writes them back (in an ``ir_for``
    body: every iteration, loop-carried); in eval mode the stored vectors are used. A 1-D
    weight is simply normalised.

    Args:
        dim: the output dim (default 0, 1 for ``ConvTranspose*``).

    Returns:
        ``module``.

    Raises:
        ValueError: ``module`` has no parameter or buffer ``name``, or
            ``n_power_iterations <= 0``.
        IndexError: ``dim`` out of range.
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        from ..conv import _ConvTranspose
        dim = 1 if isinstance(module, _ConvTranspose) else 0
    parametrize.register_parametrization(module, name,
                                         _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
