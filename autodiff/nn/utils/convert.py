"""``parameters_to_vector`` / ``vector_to_parameters``, as ``torch.nn.utils``."""
from __future__ import annotations

from ...graph.tensor import Tensor, concat
from ...graph.trace import no_grad


def parameters_to_vector(parameters) -> Tensor:
    """Every parameter flattened and concatenated in order, as
    ``torch.nn.utils.parameters_to_vector``: a traced 1-D tensor of their total size
    (gradients flow back to the parameters)."""
    return concat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vec: Tensor, parameters) -> None:
    """Copy consecutive slices of ``vec`` into the parameters, in place (traced, without
    gradient tracking).

    Raises:
        TypeError: ``vec`` is not a tensor (PyTorch's message).
        ValueError: ``vec`` is not 1-D or its length differs from the parameters' total.
    """
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    ps = list(parameters)
    if vec.ndim != 1 or vec.shape[0] != sum(p.numel() for p in ps):
        raise ValueError(f"vector_to_parameters: expected a vector of "
                         f"{sum(p.numel() for p in ps)} values, got {list(vec.shape)}")
    at = 0
    with no_grad():                      # like PyTorch's ``param.data = ...``
        for p in ps:
            n = p.numel()
            p.copy_(vec.index(0, at, at + n).reshape(*p.shape))
            at += n
