"""An ONNX model -> IR graph and NNEF document (see `formats.Converted`).

Float initializers become variables labelled after their names (made safe labels; the file's names kept in
`Converted.names`); other initializers and Constant nodes are arrays known while converting, and so are the
results of rules over them (Shape of a static tensor, the Gather/Concat/Unsqueeze chains of a reshape target).
Graph inputs become externals of static shape (a symbolic extent needs `input_shapes=`). Unknown operators are
listed together before anything is converted."""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from nnef_torch.errors import ForeignFormatError, Location, NNEFError, NNEFOptionError, NNEFShapeError
from nnef_torch.formats import Converted
from nnef_torch.formats.names import Labels, graph_name
from nnef_torch.formats.onnx import rules  # noqa: F401  (registers the onnx import rules)
from nnef_torch.formats.onnx.node import OnnxNode, dtype_of
from nnef_torch.formats.onnx.reading import check_model, file_name, load_model, where
from nnef_torch.ir.builder import Builder, Unmappable, fragment_library
from nnef_torch.ir.document import as_nnef, graph_file
from nnef_torch.ir.graph import Ref
from nnef_torch.ir.limits import check_shape
from nnef_torch.ops.registry import import_rules

FORMAT = "onnx"
LIBRARY = ("nnef_torch.stdlib", "extensions.nnef")


def _input_shape(value: Any, given: Mapping[str, Any], file: str) -> tuple[int, ...]:
    if value.name in given:
        return check_shape(f"input_shapes['{value.name}']", [int(e) for e in given[value.name]],
                           Location(file=file), error=NNEFOptionError)
    dims = value.type.tensor_type.shape.dim
    if not value.type.tensor_type.HasField("shape"):
        raise ForeignFormatError(f"graph input '{value.name}' has no shape; give input_shapes={{'{value.name}': "
                                 "[...]}", Location(file=file))
    symbolic = [dim.dim_param or "?" for dim in dims if not dim.HasField("dim_value")]
    if symbolic:
        raise ForeignFormatError(f"graph input '{value.name}' has symbolic extents {symbolic}; give its shape: "
                                 f"input_shapes={{'{value.name}': [...]}}", Location(file=file))
    return check_shape(f"graph input '{value.name}' shape", [int(dim.dim_value) for dim in dims],
                       Location(file=file), error=ForeignFormatError)


def convert_model(model: Any, opset: int, file: str, input_shapes: Mapping[str, Any] | None) -> Converted:
    import onnx  # lazy: onnx is an optional extra, checked by reading
    from onnx import numpy_helper

    graph = model.graph
    table = import_rules(FORMAT)
    unknown = [where(node, i) for i, node in enumerate(graph.node)
               if node.domain not in ("", "ai.onnx") or node.op_type not in table]
    if unknown:
        raise ForeignFormatError(f"{len(unknown)} node(s) use operators nnef_torch does not read:\n  " +
                                 "\n  ".join(unknown[:100]), Location(file=file))
    check_model(model, file)
    given = dict(input_shapes or {})
    initializers = {tensor.name: tensor for tensor in graph.initializer}
    names = [value.name for value in graph.input if value.name not in initializers]
    extra = sorted(set(given) - set(names))
    if extra:
        raise NNEFOptionError(f"input_shapes names {extra}, which are not inputs of the graph (inputs: {names})",
                              Location(file=file))
    builder = Builder(fragment_library(*LIBRARY))
    labels = Labels()
    values: dict[str, Any] = {"": None}
    for value in graph.input:
        if value.name in initializers:
            continue
        elem = value.type.tensor_type.elem_type
        dtype = dtype_of(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem))) if elem else "scalar"
        values[value.name] = builder.external(value.name, dtype, _input_shape(value, given, file))
    for name, tensor in initializers.items():
        array = numpy_helper.to_array(tensor)
        if array.dtype.kind == "f":
            array = array.astype(np.float32)
            values[name] = builder.variable(labels.label(name), "scalar", array.shape or (1,),
                                            array.reshape(array.shape or (1,)))
        else:
            values[name] = array
    for index, proto in enumerate(graph.node):
        place = where(proto, index)
        node = OnnxNode(proto, place, [values[name] if name else None for name in proto.input], builder, file,
                        opset, onnx.helper.get_attribute_value)
        builder.begin(proto.name or proto.op_type)
        try:
            result = table[proto.op_type].fn(builder, node)
        except Unmappable as error:
            raise ForeignFormatError(f"{place}: {error}", Location(file=file)) from None
        except NNEFShapeError as error:
            raise ForeignFormatError(f"{place}: {error.message}", Location(file=file)) from None
        except (ZeroDivisionError, OverflowError, ValueError, IndexError) as error:
            if isinstance(error, NNEFError):
                raise
            raise ForeignFormatError(f"{place}: invalid attributes or inputs ({error})", Location(file=file)) \
                from None
        unread = node.unread()
        if unread:
            raise node.fail(f"attribute(s) {unread} are not read by nnef_torch's rule for {proto.op_type}")
        outputs = result if isinstance(result, tuple) else (result,)
        for position, name in enumerate(proto.output):
            if not name:
                continue
            if position >= len(outputs) or outputs[position] is None:
                values[name] = _Hidden(place, position)
                continue
            value = outputs[position]
            if isinstance(value, Ref) and value.name in builder.created:
                value = builder.rename(value, name)
            values[name] = value
    outputs = []
    taken = {ref.name for ref in builder.externals} | {ref.name for ref in builder.variables}
    for value in graph.output:
        result = values[value.name]
        if isinstance(result, _Hidden):
            raise ForeignFormatError(f"graph output '{value.name}' is output {result.position} of {result.where}, "
                                     "which nnef_torch does not compute", Location(file=file))
        builder.begin(value.name)
        if isinstance(result, np.ndarray) or not isinstance(result, Ref) or result.name in taken:
            probe = OnnxNode(graph.node[0], "graph output", [], builder, file, opset, None) if graph.node else None
            result = probe.as_tensor(result) if probe is not None and isinstance(result, np.ndarray) else result
            result = builder.op("copy", result, out_name=value.name)
        taken.add(result.name)
        outputs.append(result)
    if not builder.externals:
        raise ForeignFormatError("the graph reads no input; an NNEF graph takes at least one", Location(file=file))
    ir = builder.graph(builder.fresh(graph_name(file_name(file))), outputs)
    library = fragment_library(*LIBRARY)
    document = graph_file(ir, builder.fragments, library, as_nnef(file))
    state = frozenset(labels.by_name[name] for name in rules.nn.STATE_INPUTS(graph) if name in labels.by_name)
    return Converted(FORMAT, file, ir, document, dict(builder.data), state,
                     options={"input_shapes": given}, names=labels.names())


class _Hidden:
    def __init__(self, where: str, position: int):
        self.where, self.position = where, position


def read(path: str | os.PathLike, *, document: Any = None, params: Any = None,
         input_shapes: Mapping[str, Any] | None = None) -> Converted:
    """Read an ONNX model file (see `formats.convert`); `params` does not apply (the weights are in the file)."""
    file = os.fspath(path)
    if params is not None:
        raise NNEFOptionError("params= does not apply to ONNX models (their weights are initializers)",
                              Location(file=file))
    model, opset = load_model(file)
    return convert_model(model, opset, file, input_shapes)
