"""Import rules of NNVM and MXNet operators, registered in the op table's `nnvm` facet."""
from nnef_torch.formats.nnvm.rules import (  # noqa: F401
    elementwise,
    nn,
    nnvm_tensor,
    nnvm_top,
    pooling,
    rearrange,
    rnn,
    spatial,
    statistics,
    tensor,
)
