"""Neural-network modules and losses, spelled like ``torch.nn``."""
from .layers import Identity, Linear, ReLU, Sequential, Sigmoid, Tanh
from .loss import MSELoss, mse_loss
from .module import Module, Parameter

__all__ = ["Module", "Parameter", "Linear", "ReLU", "Sigmoid", "Tanh", "Identity",
           "Sequential", "MSELoss", "mse_loss"]

from . import functional
from .activation import GELU, LogSoftmax, Softmax
from .attention import MultiheadAttention
from .dropout import Dropout
from .embedding import Embedding
from .loss import CrossEntropyLoss
from .normalization import LayerNorm
from .transformer import ModuleList, TransformerEncoder, TransformerEncoderLayer

__all__ += ["functional", "GELU", "Softmax", "LogSoftmax", "MultiheadAttention", "Dropout",
            "Embedding", "CrossEntropyLoss", "LayerNorm", "ModuleList", "TransformerEncoder",
            "TransformerEncoderLayer"]
