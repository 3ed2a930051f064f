"""``autodiff.nn.utils``: gradient clipping, parameter/vector conversion, weight norm and
the ``rnn``, ``parametrize`` and ``parametrizations`` submodules, as ``torch.nn.utils``."""
from . import parametrizations, parametrize, rnn
from .clip_grad import clip_grad_norm_, clip_grad_value_, get_total_norm
from .convert import parameters_to_vector, vector_to_parameters
from .weight_norm import remove_weight_norm, weight_norm

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "parameters_to_vector",
           "vector_to_parameters", "weight_norm", "remove_weight_norm", "parametrizations",
           "parametrize", "rnn"]
