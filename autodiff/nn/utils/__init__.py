"""``autodiff.nn.utils``: gradient clipping and parameter/vector conversion, as
``torch.nn.utils``."""
from .clip_grad import clip_grad_norm_, clip_grad_value_, get_total_norm
from .convert import parameters_to_vector, vector_to_parameters

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "parameters_to_vector",
           "vector_to_parameters"]
