"""Import rules of ONNX operators (default domain), registered in the op table's `onnx` facet."""
from nnef_torch.formats.onnx.rules import elementwise, nn, tensor  # noqa: F401
