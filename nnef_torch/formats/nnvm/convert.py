"""NNVM graph JSON or an MXNet symbol, with its parameters, -> IR graph and NNEF text (see `formats.Converted`).

Arguments (op 'null' nodes) are parameters when the parameters hold their name (`arg:` ones become Parameters, `aux:`
ones buffers), and inputs otherwise, in `arg_nodes` order; an argument read where an operator expects a parameter
but absent from them is a missing parameter. Every operator's import rule (the op table's `nnvm` facet) writes NNEF
operations through a `Builder`; the heads are the outputs. Problems are reported together where they can be:
unsupported operators before anything is converted, parameters (missing, extra, wrongly shaped) after.
"""
from __future__ import annotations

import numbers
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from nnef_torch.errors import (
    ForeignFormatError,
    Location,
    NNEFError,
    NNEFOptionError,
    NNEFShapeError,
    NNEFUnsupportedError,
)
from nnef_torch.format.graph_file import GraphFile
from nnef_torch.formats import Converted
from nnef_torch.formats.json_file import read_json
from nnef_torch.formats.names import Labels, graph_name
from nnef_torch.formats.nnvm import rules  # noqa: F401  (registers the nnvm import rules)
from nnef_torch.formats.nnvm.attrs import MAX_RANK, Attributes
from nnef_torch.formats.nnvm.graph_json import GraphJSON, Node, check_row_pointers, parse_graph
from nnef_torch.formats.nnvm.node import Budget, Hidden, Missing, OpNode, ParameterProblem
from nnef_torch.formats.nnvm.params import TYPE_FLAGS, Parameters, load_parameters
from nnef_torch.formats.nnvm.rules.common import LIBRARY, dtype_of
from nnef_torch.ir.builder import Builder, Unmappable, fragment_library
from nnef_torch.ir.document import as_nnef, graph_file
from nnef_torch.ir.graph import Graph, Ref
from nnef_torch.ir.limits import check_shape
from nnef_torch.ops.registry import import_refusals, import_rules

FORMAT = "nnvm"
MAX_LISTED = 100  # problems listed in one error (the count says how many there are)


def convert_graph(graph: GraphJSON, parameters: Parameters, input_shapes: Mapping[str, Any] | None,
                  name: str, shapes_at_call: bool = False
                  ) -> tuple[Graph, GraphFile, dict[str, np.ndarray], frozenset[str], dict[str, str], str | None]:
    """The IR graph, its NNEF document (printed when asked for), the variables' values by label, the labels of
    state (aux) variables, the parameters' own names by label where a label cannot hold them (see `Labels`), and
    None. With `shapes_at_call`, a graph that does not say its input shapes gives instead the graph of its inputs
    (of unknown shape, `()`) and its variables only, and last why it is not converted (`Converted.unbound`)."""
    table = import_rules(FORMAT)
    refused = import_refusals(FORMAT)
    unsupported = [node for node in graph.nodes if node.op != "null" and node.op not in table]
    if unsupported:
        listed = "\n".join(f"  {node.where}" + (f": {refused[node.op]}" if node.op in refused else "")
                           for node in unsupported)
        ops = sorted({node.op for node in unsupported})
        raise NNEFUnsupportedError(f"{len(unsupported)} node(s) use operators nnef_torch does not read "
                                   f"({', '.join(ops)}):\n{listed}", Location(file=graph.file))
    kinds = _classify(graph, parameters, table)
    library = fragment_library(*LIBRARY)
    builder = Builder(library)
    try:
        shapes = _input_shapes(graph, kinds, input_shapes)
    except _MissingShapes as missing:
        if not shapes_at_call or kinds.missing or parameters.extra(graph):
            raise
        return _variables_only(graph, kinds, parameters, library, table, name) + \
            (f"the graph does not say the shape of input(s) {missing.lacking}",)
    values: list[tuple[Any, ...] | None] = [None] * len(graph.nodes)
    counts: list[tuple[int, int]] = [(1, 1)] * len(graph.nodes)
    problems: list[str] = [f"'{node.name}' ({what}) is not in the parameters" for node, what in kinds.missing]
    labels = Labels()
    budget = Budget()
    for node in graph.nodes:
        if node.op == "null":
            value = _argument(builder, node, graph, kinds, parameters, shapes, labels)
            values[node.index] = (None,) if node.index in kinds.unused else None if value is None else (value,)
            continue
        if any(values[entry.node] is None for entry in node.inputs):
            continue  # it depends on a node skipped for a parameter problem
        inputs = [_read(values, entry, node, graph) for entry in node.inputs]
        op = OpNode(node, inputs, builder, graph.file, frozenset(table[node.op].params),
                    [graph.nodes[e.node].name if graph.nodes[e.node].op == "null" else None for e in node.inputs],
                    graph.mxnet_version, budget)
        builder.begin(node.name)
        try:
            result = table[node.op].fn(builder, op)
        except ParameterProblem:
            problems.extend(op.problems)
            continue
        except Unmappable as error:
            raise NNEFUnsupportedError(f"{node.where}: {error}", Location(file=graph.file)) from None
        except NNEFShapeError as error:
            raise ForeignFormatError(f"{node.where}: {error.message}", Location(file=graph.file)) from None
        except (ZeroDivisionError, OverflowError, ValueError) as error:  # attribute values no rule foresaw
            if isinstance(error, NNEFError):
                raise
            raise ForeignFormatError(f"{node.where}: invalid attributes ({error})", Location(file=graph.file)) \
                from None
        unread = op.attrs.unread()
        if unread:
            raise op.fail(f"attributes {unread} are not understood by nnef_torch's rule for {node.op}")
        outputs = result if isinstance(result, tuple) else (result,)
        values[node.index] = _named(builder, outputs, node)
        counts[node.index] = (len(outputs), len(outputs) + op.optional_outputs)
    problems += [f"'{extra}' matches no argument of the graph" for extra in parameters.extra(graph)]
    if problems:
        listed = problems[:MAX_LISTED] + ([f"... and {len(problems) - MAX_LISTED:,} more"]
                                          if len(problems) > MAX_LISTED else [])
        raise ForeignFormatError(f"{len(problems)} parameter problem(s):\n" + "\n".join(f"  {p}" for p in listed),
                                 Location(file=parameters.file or graph.file))
    check_row_pointers(graph, counts)
    if not builder.externals:
        raise ForeignFormatError("the graph reads no input (its arguments are all parameters, or unused); an NNEF "
                                 "graph takes at least one", Location(file=graph.file))
    outputs = []
    # an output must be a tensor of its own: not a literal, an argument, or another output again
    taken = {ref.name for ref in builder.externals} | {ref.name for ref in builder.variables}
    for i, head in enumerate(graph.heads):
        value = _read(values, head, None, graph)
        if not isinstance(value, Ref) or value.name in taken:
            builder.begin(graph.nodes[head.node].name)
            value = builder.op("copy", value, out_name=f"output{i}")
        taken.add(value.name)
        outputs.append(value)
    ir = builder.graph(builder.fresh(graph_name(name)), outputs)
    state = _state_labels(graph, parameters, table, labels)
    document = graph_file(ir, builder.fragments, library, as_nnef(graph.file))
    return ir, document, dict(builder.data), state, labels.names(), None


def _state_labels(graph: GraphJSON, parameters: Parameters, table: Mapping[str, Any],
                  labels: Labels) -> frozenset[str]:
    """The labels of the variables that are state: aux parameters, and what operators update (their `state`)."""
    state_names = set(parameters.aux) | {graph.nodes[node.inputs[p].node].name for node in graph.nodes
                                         if node.op != "null" for p in table[node.op].state if p < len(node.inputs)}
    return frozenset(labels.by_name[arg] for arg in state_names if arg in labels.by_name)


def _variables_only(graph: GraphJSON, kinds: _Kinds, parameters: Parameters, library: Any, table: Mapping[str, Any],
                    name: str) -> tuple[Graph, GraphFile, dict[str, np.ndarray], frozenset[str], dict[str, str]]:
    """`convert_graph`'s results for a graph whose input shapes are not known: its inputs (shape `()`) and its
    variables, labelled as the conversion labels them, as the outputs of a graph without operations (what a module
    plans its Parameters from)."""
    builder = Builder(library)
    labels = Labels()
    declared = []
    for node in graph.nodes:
        if node.op != "null" or node.index in kinds.unused:
            continue
        if node.index in kinds.params:
            declared.append(_argument(builder, node, graph, kinds, parameters, {}, labels))
        else:
            declared.append(builder.external(node.name, _input_dtype(node, graph), ()))
    ir = builder.graph(builder.fresh(graph_name(name)), declared)
    document = graph_file(ir, builder.fragments, library, as_nnef(graph.file))
    return ir, document, dict(builder.data), _state_labels(graph, parameters, table, labels), labels.names()

class _Kinds:
    """What each argument node is: a parameter, an input, or a parameter the files lack."""

    def __init__(self) -> None:
        self.params: set[int] = set()
        self.inputs: list[int] = []
        self.missing: list[tuple[Node, str]] = []
        self.unused: set[int] = set()  # read only where training reads (loss labels): no input of the graph


def _classify(graph: GraphJSON, parameters: Parameters, table: Mapping[str, Any]) -> _Kinds:
    read_as_param: dict[int, str] = {}
    read_otherwise: set[int] = {head.node for head in graph.heads}
    for node in graph.nodes:
        if node.op == "null":
            continue
        rule = table[node.op]
        for position, entry in enumerate(node.inputs):
            source = graph.nodes[entry.node]
            if source.op != "null":
                continue
            if position in rule.params:
                read_as_param.setdefault(source.index, f"input {position} of {node.where}")
            if position not in rule.unused:
                read_otherwise.add(source.index)
    kinds = _Kinds()
    for index in graph.arg_nodes:
        node = graph.nodes[index]
        if node.name in parameters:
            kinds.params.add(index)
        elif index in read_as_param:
            kinds.missing.append((node, read_as_param[index]))
        elif index not in read_otherwise:
            kinds.unused.add(index)
        else:
            kinds.inputs.append(index)
    return kinds


def _input_shapes(graph: GraphJSON, kinds: _Kinds, given: Mapping[str, Any] | None) -> dict[int, tuple[int, ...]]:
    """Each input's shape: from `input_shapes`, else its `__shape__` attribute, else the graph's inferred shapes."""
    given = dict(given or {})
    names = {graph.nodes[index].name: index for index in kinds.inputs}
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise NNEFOptionError(f"input_shapes names {unknown}, which are not inputs of the graph "
                              f"(inputs: {list(names)})", Location(file=graph.file))
    inferred = graph.attrs.get("shape")
    shapes: dict[int, tuple[int, ...]] = {}
    lacking = []
    for name, index in names.items():
        node = graph.nodes[index]
        error: type[NNEFError] = ForeignFormatError
        if name in given:
            shape, error = _given_shape(name, given[name], graph.file), NNEFOptionError
        elif "__shape__" in node.attrs:
            shape = _attr_shape(node, graph.file)
        elif inferred is not None and graph.row_ptr is not None and graph.row_ptr[index] < len(inferred):
            shape = tuple(inferred[graph.row_ptr[index]])
        else:
            lacking.append(name)
            continue
        if not shape or len(shape) > MAX_RANK or any(extent <= 0 for extent in shape):
            raise error(f"{node.where}: input shape {_shown_shape(shape)} is not fully known, or has more than "
                        f"{MAX_RANK} axes (give input_shapes={{'{name}': [...]}})", Location(file=graph.file))
        shapes[index] = check_shape(f"{node.where}: input shape", shape, Location(file=graph.file), error=error)
    if lacking:
        example = ", ".join(f"'{name}': [1, 3, 224, 224]" for name in lacking[:2])
        raise _MissingShapes(f"the graph does not say the shape of input(s) {lacking}; give them: "
                             f"input_shapes={{{example}}} (command line: --input-shape NAME=1,3,224,224)",
                             Location(file=graph.file), lacking)
    return shapes


class _MissingShapes(ForeignFormatError):
    """Inputs whose shapes neither the file nor `input_shapes` says (`lacking`, by name)."""

    def __init__(self, message: str, location: Location, lacking: list[str]):
        super().__init__(message, location)
        self.lacking = lacking


def _given_shape(name: str, shape: Any, file: str | None) -> tuple[int, ...]:
    """An input's shape from `input_shapes=`: a sequence of integers."""
    try:
        extents = list(shape)
    except TypeError:
        extents = None
    if extents is None or not all(isinstance(extent, numbers.Integral) and not isinstance(extent, bool)
                                  for extent in extents):
        raise NNEFOptionError(f"input_shapes['{name}'] must be a sequence of integers, found {shape!r}"[:200],
                              Location(file=file))
    return tuple(int(extent) for extent in extents)


def _shown_shape(shape: Sequence[int]) -> str:
    if len(shape) <= MAX_RANK:
        return str(list(shape))
    return f"[{', '.join(map(str, shape[:8]))}, ...] ({len(shape)} axes)"


def _attr_shape(node: Node, file: str | None) -> tuple[int, ...]:
    return tuple(Attributes(node.attrs, node.where, file).ints("__shape__", max_items=MAX_RANK))


def _input_dtype(node: Node, graph: GraphJSON) -> str:
    """An input's NNEF type: from its `__dtype__` attribute, else the graph's inferred `dtype` list, else scalar."""
    flag = None
    if "__dtype__" in node.attrs:
        flag = Attributes(node.attrs, node.where, graph.file).int("__dtype__")
    elif isinstance(graph.attrs.get("dtype"), list) and graph.row_ptr is not None \
            and graph.row_ptr[node.index] < len(graph.attrs["dtype"]):
        flag = graph.attrs["dtype"][graph.row_ptr[node.index]]
    if flag is None or flag == -1:  # -1: not inferred
        return "scalar"
    if flag not in TYPE_FLAGS:
        raise ForeignFormatError(f"{node.where}: unknown type flag {flag}", Location(file=graph.file))
    return dtype_of(np.dtype(TYPE_FLAGS[flag] if TYPE_FLAGS[flag] != "bfloat16" else "float32"))


def _argument(builder: Builder, node: Node, graph: GraphJSON, kinds: _Kinds, parameters: Parameters,
              shapes: Mapping[int, tuple[int, ...]], labels: Labels) -> Any:
    if node.index in kinds.params:
        array = parameters[node.name]
        label = labels.label(node.name)
        return builder.variable(label, dtype_of(array.dtype), array.shape or (1,), array.reshape(array.shape or (1,)))
    if node.index in shapes:
        return builder.external(node.name, _input_dtype(node, graph), shapes[node.index])
    return Missing(node.name)  # a missing parameter (reported): rules check the rest around it


def _read(values: Sequence[tuple[Any, ...] | None], entry: Any, node: Node | None, graph: GraphJSON) -> Any:
    produced = values[entry.node]
    source = graph.nodes[entry.node]
    reader = node.where if node is not None else "a head"
    if produced is None:
        raise ForeignFormatError(f"{reader} reads {source.where}, which has no value", Location(file=graph.file))
    if entry.index >= len(produced):
        raise ForeignFormatError(f"{reader} reads output {entry.index} of {source.where}, which has "
                                 f"{len(produced)} output(s)", Location(file=graph.file))
    value = produced[entry.index]
    if isinstance(value, Hidden):
        raise ForeignFormatError(f"{reader} reads output {entry.index} of {source.where}, its {value.what}, which "
                                 "nnef_torch does not compute", Location(file=graph.file))
    return value


def _named(builder: Builder, outputs: Sequence[Any], node: Node) -> tuple[Any, ...]:
    """Name a node's results after the node, where the rule made them (a rule may return one tensor twice)."""
    renamed: dict[str, Ref] = {}
    named = []
    for index, value in enumerate(outputs):
        if isinstance(value, Ref) and value.name in renamed:
            value = renamed[value.name]
        elif isinstance(value, Ref) and value.name in builder.created:
            renamed[value.name] = builder.rename(value, node.name if index == 0 else f"{node.name}_output{index}")
            value = renamed[value.name]
        named.append(value)
    return tuple(named)



def read(path: str | os.PathLike, *, document: Any = None, params: Any = None,
         input_shapes: Mapping[str, Any] | None = None, shapes_at_call: bool = False) -> Any:
    """Read an NNVM graph or MXNet symbol file and its parameters (see `formats.convert`); with `shapes_at_call`,
    a symbol that does not say its input shapes gives its variables only (`Converted.unbound`)."""
    file = os.fspath(path)
    graph = parse_graph(document if document is not None else read_json(file), file)
    parameters = load_parameters(params, file)
    stem = os.path.basename(file)
    stem = stem[:-len("-symbol.json")] if stem.endswith("-symbol.json") else os.path.splitext(stem)[0]
    ir, document, tensors, state, names, unbound = convert_graph(graph, parameters, input_shapes, stem, shapes_at_call)
    return Converted(FORMAT, file, ir, document, tensors, state,
                     options={"params": parameters.origin, "input_shapes": dict(input_shapes or {})}, names=names,
                     unbound=unbound)
