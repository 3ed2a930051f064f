"""Neural-network modules and losses, spelled like ``torch.nn``."""
from .layers import Identity, Linear, ReLU, Sequential, Sigmoid, Tanh
from .loss import MSELoss, mse_loss
from .module import Module, Parameter

__all__ = ["Module", "Parameter", "Linear", "ReLU", "Sigmoid", "Tanh", "Identity",
           "Sequential", "MSELoss", "mse_loss"]
