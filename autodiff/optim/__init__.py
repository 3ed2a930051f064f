"""Optimizers, spelled like ``torch.optim``."""
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD"]
from .adam import Adam, AdamW

__all__ += ["Adam", "AdamW"]
