"""nnef_torch: a PyTorch-native, trainable bridge for the Khronos NNEF format."""
from nnef_torch.errors import (
    Location,
    NNEFContainerError,
    NNEFError,
    NNEFQuantizationError,
    NNEFSemanticError,
    NNEFShapeError,
    NNEFSyntaxError,
    NNEFTensorFileError,
    NNEFTypeError,
    NNEFUnsupportedError,
)

__version__ = "0.1.0"
