"""Import rules of ONNX operators (default domain), registered in the op table's `onnx` facet."""
from nnef_torch.formats.onnx.rules import (  # noqa: F401
    control,
    einsum,
    elementwise,
    indexing,
    nn,
    normalization,
    quantized,
    rearrangement,
    recurrent,
    reductions,
    refused,
    scatter,
    sequences,
    tensor,
)
