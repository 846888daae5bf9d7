"""Functions and variables -> a checked network: the IR rebuilt from what a pass left, printed as NNEF text and read
back, so that a pass that breaks the graph fails with a located error, as a bad file does."""
from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from nnef_torch.errors import NNEFSemanticError
from nnef_torch.graph_def.proto import BUFFER, INPUT, PARAMETER, ProtoFunction, ProtoVariable
from nnef_torch.ir.builder import is_tensor_param
from nnef_torch.ir.document import graph_file
from nnef_torch.ir.graph import External, Graph, Operation, Ref, Signature
from nnef_torch.reader import read_document
from nnef_torch.stdlib import standard_fragments


def operation_of(function: ProtoFunction, library: Mapping[str, Any]) -> Operation:
    """The IR operation of a function as it is now: its type, its inputs (by position, in the structure of the
    operation it came from, or one tensor per tensor parameter), its attributes and outputs."""
    decl = standard_fragments().get(function.type) or library.get(function.type)
    if decl is None:
        raise NNEFSemanticError(f"function '{function.name}': unknown operation type '{function.type}'",
                                function.location)
    names = _Names(function)
    original = function.operation if function.operation is not None and function.operation.name == function.type \
        else None
    inputs: dict[str, Any] = {}
    attribs: dict[str, Any] = {}
    for param in decl.params:
        if is_tensor_param(param.type):
            if param.name in function.attributes and not _has_ref(function.attributes[param.name]):
                inputs[param.name] = function.attributes[param.name]  # a literal given for a tensor
            elif original is not None and param.name in original.inputs:
                inputs[param.name] = _refill(original.inputs[param.name], names)
            elif param.default is None or names.left():
                inputs[param.name] = Ref(names.take(param.name))
        elif param.name in function.attributes:
            attribs[param.name] = function.attributes[param.name]
    left = names.rest()
    if left:
        raise NNEFSemanticError(f"function '{function.name}' ({function.type}) has {len(left)} input(s) more "
                                f"than its operation takes: {left}", function.location)
    outputs = _Names(function, function.outputs)
    results: dict[str, Any] = {}
    for result in decl.results:
        if original is not None and result.name in original.outputs:
            results[result.name] = _refill(original.outputs[result.name], outputs)
        else:
            results[result.name] = Ref(outputs.take(result.name))
    dtype = original.dtype if original is not None else None
    return Operation(function.type, inputs, attribs, results, dtype, function.location)


class _Names:
    """The tensor names of a function, taken in order."""

    def __init__(self, function: ProtoFunction, names: list[str] | None = None):
        self.function = function
        self.names = list(function.inputs if names is None else names)
        self.index = 0

    def left(self) -> bool:
        return self.index < len(self.names)

    def take(self, param: str) -> str:
        if not self.left():
            raise NNEFSemanticError(f"function '{self.function.name}' ({self.function.type}) has no tensor for "
                                    f"'{param}'", self.function.location)
        self.index += 1
        return self.names[self.index - 1]

    def rest(self) -> list[str]:
        return self.names[self.index:]


def _refill(value: Any, names: _Names) -> Any:
    """`value` with each Ref replaced by the next name of `names` (the same structure)."""
    if isinstance(value, Ref):
        return Ref(names.take("?"))
    if isinstance(value, list):
        return [_refill(item, names) for item in value]
    if isinstance(value, tuple):
        return tuple(_refill(item, names) for item in value)
    return value


def _has_ref(value: Any) -> bool:
    if isinstance(value, Ref):
        return True
    return isinstance(value, (list, tuple)) and any(_has_ref(item) for item in value)


def checked_graph(name: str, variables: Iterable[ProtoVariable], functions: Iterable[ProtoFunction],
                  inputs: list[str], outputs: list[str], library: Mapping[str, Any],
                  quantization: Mapping[str, Any], fragments_used: list[str] | None = None) -> Graph:
    """The graph of these parts, made a document and read back (types and shapes checked; errors located in its
    text, whose file is '<name> (promoted)')."""
    sources: list[Operation] = []
    by_name = {variable.name: variable for variable in variables}
    for name_ in inputs:
        variable = by_name[name_]
        sources.append(Operation("external", {}, {"shape": list(variable.shape or ())},
                                 {"output": Ref(name_)}, variable.dtype or "scalar"))
    for variable in by_name.values():
        if variable.kind in (PARAMETER, BUFFER):
            sources.append(Operation("variable", {}, {"shape": list(variable.shape or ()), "label": variable.label},
                                     {"output": Ref(variable.name)}, variable.dtype or "scalar"))
    operations = sources + [operation_of(function, library) for function in functions]
    standard = standard_fragments()
    used = fragments_used if fragments_used is not None else list(dict.fromkeys(
        op.name for op in operations if op.name not in standard))
    externals = tuple(External(op.outputs["output"].name, op.dtype or "scalar", tuple(op.attribs["shape"]))
                      for op in sources if op.name == "external")
    graph = Graph(name, "1.0", (), {}, tuple(operations), Signature(externals, (), (), tuple(outputs)))
    document = graph_file(graph, used, dict(library), f"{name} (promoted)")
    kept = set(used)
    produced = {ref.name for op in operations for ref in op.output_refs()}
    quant = {key: spec for key, spec in quantization.items() if key in produced}
    checked = read_document(document, atomic=lambda op: op in standard or op in kept)
    return dataclasses.replace(checked, quantization=quant) if quant else checked


__all__ = ["INPUT", "checked_graph", "operation_of"]
