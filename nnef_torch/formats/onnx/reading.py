"""An ONNX file checked before it is converted: its size, the protobuf (parsed and checked by the `onnx` package),
the opset of the default domain, the graph's order (every input defined before it is read, no cycle), and the data
of tensors kept in other files (ONNX external data), read here within the model's folder only."""
from __future__ import annotations

import hashlib
import math
import os
import stat
from collections.abc import Iterator
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
    """The ModelProto of the file at `file`, checked (size, protobuf, opset, graph order), with its external data
    read in."""
    model = parse_model(file)
    opset = opset_of(model, file)
    check_order(model.graph, file)
    inline_external_data(model, file)
    return model, opset


def parse_model(file: str) -> Any:
    """The ModelProto of the file at `file` as parsed (its size checked first), external data left in its files."""
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
    return model


def check_model(model: Any, file: str) -> None:
    """The `onnx` checker's verdict (attribute types, tensor sizes), once our own checks passed. External data is
    inlined by then (`inline_external_data`): the checker would otherwise look for the files it names itself."""
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


# ------------------------------------------------------------------------------------------- external data
EXTERNAL_KEYS = ("location", "offset", "length", "checksum")
PACKED_BITS = {"UINT4": 4, "INT4": 4, "FLOAT4E2M1": 4, "UINT2": 2, "INT2": 2}  # items packed several to a byte


def inline_external_data(model: Any, file: str) -> None:
    """Read into each tensor of `model` (initializers, Constant values, subgraphs' and functions' tensors) the data
    it keeps in another file (`data_location` EXTERNAL: `location`, `offset`, `length`, `checksum`), as its
    `raw_data`. The file must lie in the model's folder, symbolic links resolved (no absolute path, no `..`), and
    hold the bytes the tensor's dims and type say, checked before anything is read."""
    onnx = _onnx(file)
    folder = os.path.realpath(os.path.dirname(os.path.abspath(file)))
    for kind, tensor in _tensors(model):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            tensor.raw_data = _external_bytes(onnx, tensor, f"{kind} '{tensor.name}'", folder, file)
            tensor.data_location = onnx.TensorProto.DEFAULT
            del tensor.external_data[:]


def _tensors(model: Any) -> Iterator[tuple[str, Any]]:
    """Every TensorProto of `model`, with what it is ('initializer' or 'tensor')."""
    graphs = [model.graph]
    nodes = [node for function in model.functions for node in function.node]
    while graphs or nodes:
        if graphs:
            graph = graphs.pop()
            yield from (("initializer", tensor) for tensor in graph.initializer)
            for sparse in graph.sparse_initializer:
                yield from (("initializer", sparse.values), ("initializer", sparse.indices))
            nodes.extend(graph.node)
            continue
        for attribute in nodes.pop().attribute:
            tensors = [attribute.t] * attribute.HasField("t") + list(attribute.tensors)
            for sparse in [attribute.sparse_tensor] * attribute.HasField("sparse_tensor") + \
                    list(attribute.sparse_tensors):
                tensors += [sparse.values, sparse.indices]
            yield from (("tensor", tensor) for tensor in tensors)
            graphs.extend([attribute.g] * attribute.HasField("g") + list(attribute.graphs))


def _external_bytes(onnx: Any, tensor: Any, where: str, folder: str, file: str) -> bytes:
    """The bytes of `tensor` (`where`: what it is) kept in the file its `external_data` names, checked before they
    are read."""

    def fail(message: str) -> ForeignFormatError:
        return ForeignFormatError(f"{where}: external data {message}", Location(file=file))

    entries = {entry.key: entry.value for entry in tensor.external_data}
    unknown = sorted(set(entries) - set(EXTERNAL_KEYS))
    if unknown:
        raise fail(f"has unknown keys {unknown} (known: {list(EXTERNAL_KEYS)})")
    location = entries.get("location", "")
    parts = location.replace("\\", "/").split("/")
    if not location or os.path.isabs(location) or location.startswith(("/", "\\")) or ":" in parts[0] \
            or ".." in parts:
        raise fail(f"location '{location}' must be a path relative to the model's folder, without '..'")
    path = os.path.join(folder, location)
    real = os.path.realpath(path)
    if os.path.commonpath([real, folder]) != folder:
        raise fail(f"file '{location}' lies outside the model's folder {folder} (a symbolic link?)")
    expected = _byte_count(onnx, tensor, fail)
    try:
        offset = int(entries.get("offset", "0"))
        length = int(entries["length"]) if "length" in entries else expected
    except ValueError:
        raise fail(f"offset '{entries.get('offset')}' or length '{entries.get('length')}' is no integer") from None
    if offset < 0 or length != expected:
        raise fail(f"of {length:,} bytes at offset {offset:,} of '{location}': the tensor's dims "
                   f"{list(tensor.dims)} and type need {expected:,} bytes")
    try:
        descriptor = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        raise fail(f"file '{location}' cannot be read: {error.strerror or error}") from None
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(handle.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise fail(f"file '{location}' is not a regular file")
        if offset + length > status.st_size:
            raise fail(f"of {length:,} bytes at offset {offset:,} runs past the end of '{location}' "
                       f"({status.st_size:,} bytes)")
        handle.seek(offset)
        data = handle.read(length)
    if len(data) != length:
        raise fail(f"file '{location}' gave {len(data):,} of {length:,} bytes (changed while read?)")
    checksum = entries.get("checksum")
    if checksum is not None and hashlib.sha1(data).hexdigest() != checksum.lower():
        raise fail(f"in '{location}' does not match its SHA-1 checksum {checksum}")
    return data


def _byte_count(onnx: Any, tensor: Any, fail: Any) -> int:
    """The bytes of raw data the dims and element type of `tensor` say."""
    if any(dim < 0 for dim in tensor.dims):
        raise fail(f"belongs to a tensor of negative dims {list(tensor.dims)}")
    name = onnx.TensorProto.DataType.Name(tensor.data_type) if tensor.data_type in \
        onnx.TensorProto.DataType.values() else str(tensor.data_type)
    items = math.prod(tensor.dims)
    if name in PACKED_BITS:
        return (items * PACKED_BITS[name] + 7) // 8
    try:
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    except (KeyError, ValueError, TypeError):
        itemsize = 0
    if name in ("STRING", "UNDEFINED") or name.startswith("FLOAT6") or not itemsize:
        raise fail(f"of element type {name} is not read (only fixed-size items)")
    return items * itemsize
