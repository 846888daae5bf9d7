"""An ONNX model -> IR graph and NNEF document (see `formats.Converted`).

Float initializers become variables labelled after their names (made safe labels; the file's names kept in
`Converted.names`); other initializers and Constant nodes are arrays known while converting, and so are the
results of rules over them (Shape of a static tensor, the Gather/Concat/Unsqueeze chains of a reshape target).
Graph inputs become externals of static shape; a symbolic extent (a dim_param) is bound by `input_shapes=`, or
by the module's first call (`shapes_at_call`). Unknown operators are listed together before anything is
converted."""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from nnef_torch.errors import ForeignFormatError, Location, NNEFError, NNEFOptionError, NNEFShapeError
from nnef_torch.format.quant_file import print_quantization
from nnef_torch.formats import Converted
from nnef_torch.formats.names import Labels, graph_name
from nnef_torch.formats.onnx import rules  # noqa: F401  (registers the onnx import rules)
from nnef_torch.formats.onnx.module_paths import torch_names
from nnef_torch.formats.onnx.node import OnnxNode, dtype_of
from nnef_torch.formats.onnx.reading import check_model, file_name, load_model, where
from nnef_torch.ir.builder import Builder, Unmappable, fragment_library
from nnef_torch.ir.document import as_nnef, graph_file
from nnef_torch.ir.graph import Ref
from nnef_torch.ir.limits import check_shape
from nnef_torch.ops.registry import import_refusals, import_rules

FORMAT = "onnx"
LIBRARY = ("nnef_torch.stdlib", "extensions.nnef")


def _input_shape(value: Any, given: Mapping[str, Any], file: str) -> tuple[int, ...]:
    if value.name in given:
        return check_shape(f"input_shapes['{value.name}']", [int(e) for e in given[value.name]],
                           Location(file=file), error=NNEFOptionError)
    unknown = _unknown_extents(value)
    if unknown is not None:
        raise ForeignFormatError(f"graph input '{value.name}' {unknown}; give its shape: input_shapes={{"
                                 f"'{value.name}': [...]}}, or load it (nnef_torch.load binds them at the first call)",
                                 Location(file=file))
    return check_shape(f"graph input '{value.name}' shape", [int(dim.dim_value) for dim in
                                                              value.type.tensor_type.shape.dim],
                       Location(file=file), error=ForeignFormatError)


def _unknown_extents(value: Any) -> str | None:
    """What graph input `value` leaves unknown of its shape (its dim_params, '?' for an unnamed extent), or None."""
    if not value.type.tensor_type.HasField("shape"):
        return "has no shape"
    symbolic = [dim.dim_param or "?" for dim in value.type.tensor_type.shape.dim if not dim.HasField("dim_value")]
    return f"has symbolic extents {symbolic}" if symbolic else None


def _unbound(inputs: list[Any], given: Mapping[str, Any]) -> str | None:
    """Why the shapes of `inputs` (graph inputs that are no initializer) are not known, or None when they are."""
    lacking = [f"'{value.name}' {unknown}" for value in inputs if value.name not in given
               for unknown in [_unknown_extents(value)] if unknown is not None]
    return f"graph input(s) {', '.join(lacking)}" if lacking else None


def convert_model(model: Any, opset: int, file: str, input_shapes: Mapping[str, Any] | None,
                  shapes_at_call: bool = False) -> Converted:
    """The model converted for its declared shapes (`input_shapes` binds symbolic ones, or overrides); with
    `shapes_at_call`, a model whose input shapes are not all known gives its inputs (shape `()`) and variables only
    (`Converted.unbound`), converted again when a call says them."""
    import onnx  # lazy: onnx is an optional extra, checked by reading
    from onnx import numpy_helper

    graph = model.graph
    table = import_rules(FORMAT)
    check_operators(graph.node, table, file)
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
    paths = torch_names(graph)  # torch module paths for the initializers torch.onnx named itself
    values: dict[str, Any] = {"": None}
    inputs = [value for value in graph.input if value.name not in initializers]
    unbound = _unbound(inputs, given) if shapes_at_call else None
    for value in inputs:
        elem = value.type.tensor_type.elem_type
        dtype = dtype_of(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem))) if elem else "scalar"
        values[value.name] = builder.external(value.name, dtype,
                                              () if unbound else _input_shape(value, given, file))
    for name, tensor in initializers.items():
        array = numpy_helper.to_array(tensor)
        if array.dtype.kind == "f":
            array = array.astype(np.float32)
            values[name] = builder.variable(labels.label(paths.get(name, name)), "scalar", array.shape or (1,),
                                            array.reshape(array.shape or (1,)))
        else:
            values[name] = array
    if unbound is not None:  # the graph's inputs and variables only, as the outputs of a graph without operations
        declared = [values[value.name] for value in inputs] + [values[name] for name in initializers
                                                               if isinstance(values[name], Ref)]
        ir = builder.graph(builder.fresh(graph_name(file_name(file))), declared)
        document = graph_file(ir, builder.fragments, fragment_library(*LIBRARY), as_nnef(file))
        state = _state(graph, labels, paths)
        return Converted(FORMAT, file, ir, document, dict(builder.data), state, options={"input_shapes": given},
                         names=labels.names(), unbound=unbound)
    convert_nodes(graph.node, values, builder, file, opset, table)
    outputs = []
    taken = {ref.name for ref in builder.externals} | {ref.name for ref in builder.variables}
    for value in graph.output:
        result = values[value.name]
        if isinstance(result, _Hidden):
            raise ForeignFormatError(f"graph output '{value.name}' is output {result.position} of {result.where}, "
                                     "which nnef_torch does not compute", Location(file=file))
        if isinstance(result, list):
            raise ForeignFormatError(f"graph output '{value.name}' is a sequence ({len(result)} item(s)); NNEF "
                                     "graph outputs are tensors", Location(file=file))
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
    state = _state(graph, labels, paths)
    return Converted(FORMAT, file, ir, document, dict(builder.data), state,
                     quant_text=print_quantization(ir.quantization) or None,  # QuantizeLinear & co (rules/quantized.py)
                     options={"input_shapes": given}, names=labels.names())


def _state(graph: Any, labels: Labels, paths: Mapping[str, str]) -> frozenset[str]:
    """The labels of the initializers that are module state (BatchNormalization's running statistics)."""
    return frozenset(labels.by_name[paths.get(name, name)] for name in rules.nn.STATE_INPUTS(graph)
                     if paths.get(name, name) in labels.by_name)


def check_operators(nodes: Any, table: Mapping[str, Any], file: str, scope: str = "") -> None:
    """Every node's operator has an import rule; else one error listing each node that has none (with the reason
    for a refused operator), before anything is converted."""
    refused = import_refusals(FORMAT)
    unknown = [scope + where(node, i) + (f": {refused[node.op_type]}" if node.op_type in refused else "")
               for i, node in enumerate(nodes) if node.domain not in ("", "ai.onnx") or node.op_type not in table]
    if unknown:
        raise ForeignFormatError(f"{len(unknown)} node(s) use operators nnef_torch does not read:\n  " +
                                 "\n  ".join(unknown[:100]), Location(file=file))


def convert_nodes(nodes: Any, values: dict[str, Any], builder: Builder, file: str, opset: int,
                  table: Mapping[str, Any], scope: str = "") -> None:
    """Convert `nodes` (NodeProtos in order) with their import rules, reading inputs from and writing outputs into
    the value table `values` (ONNX name -> Ref, known array or None). The main graph and the bodies of If and Loop
    (with the outer names in their table) go through here; `scope` prefixes the node places in messages."""
    import onnx  # lazy: onnx is an optional extra, checked by reading

    check_operators(nodes, table, file, scope)
    for index, proto in enumerate(nodes):
        place = scope + where(proto, index)
        missing = [name for name in proto.input if name not in values]
        if missing:
            raise ForeignFormatError(f"{place} reads {missing}, defined by no input, initializer, earlier node or "
                                     "enclosing graph", Location(file=file))
        if proto.op_type not in rules.sequences.READERS and any(isinstance(values[name], list) for name in proto.input):
            raise ForeignFormatError(f"{place} reads a sequence, which nnef_torch reads only in the sequence "
                                     "operators", Location(file=file))
        node = OnnxNode(proto, place, [values[name] if name else None for name in proto.input], builder, file,
                        opset, onnx.helper.get_attribute_value)
        node.scope = values
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
            if isinstance(value, np.generic):  # numpy folds of 0-d arrays give scalars: keep them arrays
                value = np.asarray(value)
            if isinstance(value, Ref) and value.name in builder.created:
                value = builder.rename(value, name)
            values[name] = value


class _Hidden:
    def __init__(self, where: str, position: int):
        self.where, self.position = where, position


def read(path: str | os.PathLike, *, document: Any = None, params: Any = None,
         input_shapes: Mapping[str, Any] | None = None, shapes_at_call: bool = False) -> Converted:
    """Read an ONNX model file (see `formats.convert`); `params` does not apply (the weights are in the file). With
    `shapes_at_call`, a graph input of symbolic extents that `input_shapes` leaves unbound gives the variables only
    (`Converted.unbound`): `nnef_torch.load` converts the model at the module's first call."""
    file = os.fspath(path)
    if params is not None:
        raise NNEFOptionError("params= does not apply to ONNX models (their weights are initializers)",
                              Location(file=file))
    model, opset = load_model(file)
    return convert_model(model, opset, file, input_shapes, shapes_at_call)
