"""ONNX models (`.onnx`, a protobuf ModelProto), read with our own conversion: the `onnx` package (an optional
extra, `pip install nnef-torch[onnx]`) only parses and checks the protobuf. `reading` checks the file and the graph
(opsets, names, order), `node` is a node as its rule sees it, `convert` walks the graph with the import rules of
`rules/` (ONNX operator names, default domain, opsets 13 to 21)."""
from __future__ import annotations

from nnef_torch.formats.onnx.convert import FORMAT, read

SHAPES_AT_CALL = True  # a graph input of symbolic extents (dim_param) binds them at the module's first call

__all__ = ["FORMAT", "SHAPES_AT_CALL", "read"]
