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

from nnef_torch.reader import read_graph, read_model
from nnef_torch.tensors import read_tensor, write_tensor

__version__ = "0.1.0"
