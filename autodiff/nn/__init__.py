"""Neural-network modules and losses, spelled like ``torch.nn``."""
from . import functional
from .activation import GELU, LogSoftmax, Softmax
from .attention import MultiheadAttention
from .dropout import Dropout
from .embedding import Embedding
from .layers import Identity, Linear, ModuleList, ReLU, Sequential, Sigmoid, Tanh
from .loss import CrossEntropyLoss, MSELoss, mse_loss
from .module import Module, Parameter
from .normalization import LayerNorm
from .transformer import TransformerEncoder, TransformerEncoderLayer

__all__ = ["Module", "Parameter", "Linear", "ReLU", "Sigmoid", "Tanh", "Identity",
           "Sequential", "ModuleList", "MSELoss", "mse_loss", "functional", "GELU", "Softmax",
           "LogSoftmax", "MultiheadAttention", "Dropout", "Embedding", "CrossEntropyLoss",
           "LayerNorm", "TransformerEncoder", "TransformerEncoderLayer"]
