"""An ONNX file checked before it is converted: its size, the protobuf (parsed and checked by the `onnx` package),
the opset of the default domain, and the graph's order (every input defined before it is read, no cycle)."""
from __future__ import annotations

import os
from typing import Any

from nnef_torch.errors import ForeignFormatError, Location
from nnef_torch.formats.json_file import open_regular

MAX_BYTES = 2 << 30  # protobuf's own limit on a message
OPSETS = (13, 21)  # the default domain's opsets these rules follow


def _onnx(file: str) -> Any:
    try:
        import onnx
    except ImportError:
        raise ForeignFormatError("reading ONNX models needs the onnx package: pip install nnef-torch[onnx]",
                                 Location(file=file)) from None
    return onnx


def load_model(file: str) -> Any:
    """The ModelProto of the file at `file`, checked (size, protobuf, opset, graph order)."""
    onnx = _onnx(file)
    with open_regular(file, "ONNX file", max_bytes=MAX_BYTES) as handle:
        data = handle.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ForeignFormatError(f"ONNX file is larger than the limit of {MAX_BYTES:,} bytes", Location(file=file))
    try:
        model = onnx.load_model_from_string(data)
    except Exception as error:  # protobuf's DecodeError and its relatives
        raise ForeignFormatError(f"not a valid ONNX protobuf (truncated or damaged?): {error}"[:300],
                                 Location(file=file)) from None
    opset = opset_of(model, file)
    check_order(model.graph, file)
    return model, opset


def check_model(model: Any, file: str) -> None:
    """The `onnx` checker's verdict (attribute types, tensor sizes), once our own checks passed."""
    try:
        _onnx(file).checker.check_model(model)
    except Exception as error:  # onnx.checker.ValidationError: its message names the node
        raise ForeignFormatError(f"the ONNX checker refuses the model: {str(error).strip()}"[:600],
                                 Location(file=file)) from None


def opset_of(model: Any, file: str) -> int:
    versions = {entry.domain: entry.version for entry in model.opset_import}
    opset = versions.get("", versions.get("ai.onnx"))
    if opset is None:
        raise ForeignFormatError("the model imports no opset of the default ONNX domain", Location(file=file))
    if not OPSETS[0] <= opset <= OPSETS[1]:
        raise ForeignFormatError(f"opset {opset} of the default domain is not read: nnef_torch reads opsets "
                                 f"{OPSETS[0]} to {OPSETS[1]} (onnx.version_converter can upgrade it)",
                                 Location(file=file))
    return opset


def where(node: Any, index: int) -> str:
    name = node.name or (node.output[0] if node.output else str(index))
    return f"node {index} '{name}' ({node.op_type})"


def check_order(graph: Any, file: str) -> None:
    """Every node input is a graph input, an initializer or an earlier node's output; a node reading a later
    node's output is a cycle (the ONNX format requires topological order) or a missing tensor."""
    defined = {value.name for value in graph.input} | {tensor.name for tensor in graph.initializer} | {""}
    later = {name for node in graph.node for name in node.output}
    for index, node in enumerate(graph.node):
        for name in node.input:
            if name not in defined:
                problem = "a later node's output (a cycle, or nodes out of order)" if name in later else \
                    "no graph input, initializer or node output (a missing input or initializer)"
                raise ForeignFormatError(f"{where(node, index)} reads '{name}', {problem}", Location(file=file))
        defined.update(node.output)
    for value in graph.output:
        if value.name not in defined:
            raise ForeignFormatError(f"graph output '{value.name}' is computed by no node", Location(file=file))


def file_name(path: str | os.PathLike) -> str:
    return os.path.splitext(os.path.basename(os.fspath(path)))[0]
