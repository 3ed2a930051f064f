"""Neural-network modules and losses, spelled like ``torch.nn``."""
from . import functional, init, parameter, utils
from .activation import (CELU, ELU, GELU, GLU, SELU, Hardshrink, Hardsigmoid, Hardswish,
                         Hardtanh, LeakyReLU, LocalResponseNorm, LogSigmoid, LogSoftmax, Mish,
                         PReLU, ReLU6, RReLU, SiLU, Softmax, Softmax2d, Softmin, Softplus,
                         Softshrink, Softsign, Tanhshrink, Threshold)
from .attention import MultiheadAttention
from .containers import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .dropout import (AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d,
                      FeatureAlphaDropout)
from .fold import Fold, Unfold
from .embedding import Embedding, EmbeddingBag
from .layers import Bilinear, Flatten, Identity, Linear, ReLU, Sigmoid, Tanh, Unflatten
from .loss import (BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss, CosineSimilarity,
                   CrossEntropyLoss, GaussianNLLLoss, HingeEmbeddingLoss, HuberLoss, KLDivLoss,
                   L1Loss, MarginRankingLoss, MSELoss, MultiLabelSoftMarginLoss,
                   MultiMarginLoss, NLLLoss, PairwiseDistance, PoissonNLLLoss, SmoothL1Loss,
                   SoftMarginLoss, TripletMarginLoss, mse_loss)
from .loss import CTCLoss, MultiLabelMarginLoss, TripletMarginWithDistanceLoss
from .module import Module, Parameter
from .normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm1d,
                            InstanceNorm2d, InstanceNorm3d, LayerNorm, RMSNorm)
from .parameter import UninitializedBuffer, UninitializedParameter
from .lazy import (LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyConv1d, LazyConv2d,
                   LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d,
                   LazyInstanceNorm1d, LazyInstanceNorm2d, LazyInstanceNorm3d, LazyLinear)
from .padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d,
                      ConstantPad2d, ConstantPad3d, ReflectionPad1d, ReflectionPad2d,
                      ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d,
                      ZeroPad1d, ZeroPad2d, ZeroPad3d)
from .pooling import ChannelShuffle, LPPool1d, LPPool2d, LPPool3d
from .pooling import (AdaptiveAvgPool3d, AdaptiveMaxPool3d, AvgPool3d, MaxPool3d, MaxUnpool1d,
                      MaxUnpool2d, MaxUnpool3d)
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool1d,
                      AdaptiveMaxPool2d, AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d,
                      PixelShuffle, PixelUnshuffle, Upsample, UpsamplingBilinear2d,
                      UpsamplingNearest2d)
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNCell
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,
                          TransformerEncoder, TransformerEncoderLayer)

__all__ = ["Module", "Parameter", "Linear", "ReLU", "Sigmoid", "Tanh", "Identity",
           "Sequential", "ModuleList", "MSELoss", "mse_loss", "functional", "GELU", "Softmax",
           "LogSoftmax", "MultiheadAttention", "Dropout", "Embedding", "CrossEntropyLoss",
           "LayerNorm", "TransformerEncoder", "TransformerEncoderLayer"]
# -- model coverage (issue 16) ------------------------------------------------------------
__all__ += ["init", "utils", "ModuleDict", "ParameterList", "ParameterDict", "Conv1d",
            "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "Dropout1d", "Dropout2d",
            "Dropout3d", "Bilinear", "Flatten", "Unflatten", "BatchNorm1d", "BatchNorm2d",
            "BatchNorm3d", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "RMSNorm",
            "CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d",
            "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d",
            "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
            "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d",
            "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AvgPool1d", "AvgPool2d", "MaxPool1d",
            "MaxPool2d", "PixelShuffle", "PixelUnshuffle", "Upsample", "UpsamplingBilinear2d",
            "UpsamplingNearest2d", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell",
            "CELU", "ELU", "GLU", "SELU", "Hardsigmoid", "Hardswish", "Hardtanh", "LeakyReLU",
            "LogSigmoid", "Mish", "PReLU", "ReLU6", "SiLU", "Softmax2d", "Softmin", "Softplus",
            "Softsign"]
__all__ += ["Threshold", "Tanhshrink", "Softshrink", "Hardshrink", "RReLU", "LocalResponseNorm",
            "L1Loss", "NLLLoss", "KLDivLoss", "BCELoss", "BCEWithLogitsLoss", "HuberLoss",
            "SmoothL1Loss", "SoftMarginLoss", "HingeEmbeddingLoss", "MultiLabelSoftMarginLoss",
            "CosineEmbeddingLoss", "MarginRankingLoss", "MultiMarginLoss", "TripletMarginLoss",
            "PoissonNLLLoss", "GaussianNLLLoss", "CosineSimilarity", "PairwiseDistance"]
__all__ += ["Transformer", "TransformerDecoder", "TransformerDecoderLayer"]
__all__ += ["ChannelShuffle", "LPPool1d", "LPPool2d"]
__all__ += ["EmbeddingBag"]
__all__ += ["MultiLabelMarginLoss", "TripletMarginWithDistanceLoss", "CTCLoss"]
__all__ += ["Conv3d", "ConvTranspose3d", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d",
            "AdaptiveMaxPool3d", "LPPool3d", "InstanceNorm3d", "Fold", "Unfold", "MaxUnpool1d",
            "MaxUnpool2d", "MaxUnpool3d", "AlphaDropout", "FeatureAlphaDropout", "parameter",
            "UninitializedParameter", "UninitializedBuffer", "LazyLinear", "LazyConv1d",
            "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
            "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d",
            "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d"]
