"""Read a whole model: container -> graph text -> IR graph, graph.quant attached, every .dat checked.

Only composes the format layer: the container module does the file access, the rest are pure functions.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from nnef_torch.errors import NNEFError, NNEFQuantizationError
from nnef_torch.format import container, tensor_file
from nnef_torch.format.parser import parse_document
from nnef_torch.format.quant_file import QuantSpec, read_quantization
from nnef_torch.format.tensor_file import TensorData
from nnef_torch.ir.graph import Graph, Variable
from nnef_torch.ir.lower import Atomic, lower
from nnef_torch.stdlib import standard_fragments

_KINDS = {"scalar": ("float", "quantized"), "integer": ("integer",), "logical": ("logical",)}


@dataclass(frozen=True)
class ModelData:
    """A model read from disk: its IR graph and the decoded data of each variable, by lower-case label."""

    source: str
    graph: Graph
    tensors: dict[str, TensorData]

    def tensor(self, variable: Variable) -> TensorData:
        return self.tensors[variable.key]


def read_graph(text: str, *, file: str = "graph.nnef", quant_text: str | None = None, quant_file: str = "graph.quant",
               atomic: Atomic = None, custom_shapes: Mapping[str, Callable[..., Any]] | None = None,
               input_shapes: Mapping[str, Any] | None = None) -> Graph:
    """Parse, check and flatten graph text (with optional graph.quant text) into an IR graph."""
    doc = parse_document(text, file)
    graph = lower(doc, atomic=atomic, custom_shapes=custom_shapes, input_shapes=input_shapes, text=text)
    if quant_text is None:
        return graph
    fragments = dict(standard_fragments())
    fragments.update({fragment.name: fragment for fragment in doc.fragments})
    specs = read_quantization(quant_text, fragments, quant_file)
    return attach_quantization(graph, specs, quant_text, quant_file)


def attach_quantization(graph: Graph, specs: Mapping[str, QuantSpec], text: str | None = None,
                        file: str | None = None) -> Graph:
    """A new graph whose tensors carry `specs`; every key must name a tensor of the graph."""
    for name, spec in specs.items():
        if name not in graph.tensors:
            error = NNEFQuantizationError(f"graph.quant names '{name}', which is not a tensor of the graph "
                                          "(keys are tensor identifiers, not variable labels)", spec.location)
            raise error.with_source(text, file)
    return dataclasses.replace(graph, quantization=dict(specs))


def read_model(path: str | os.PathLike, *, load_tensors: bool = True, atomic: Atomic = None,
               custom_shapes: Mapping[str, Callable[..., Any]] | None = None,
               input_shapes: Mapping[str, Any] | None = None) -> ModelData:
    """Open a model folder, graph.nnef path or archive, and check everything in it (spec chapter 6)."""
    with container.open_model(path) as files:
        graph_file = member_path(files.source, "graph.nnef")
        graph = read_graph(files.graph_text, file=graph_file, quant_text=files.quant_text,
                           quant_file=member_path(files.source, "graph.quant"), atomic=atomic,
                           custom_shapes=custom_shapes, input_shapes=input_shapes)
        tensors: dict[str, TensorData] = {}
        if load_tensors:
            for key, variables in graph.shared_variables().items():
                tensors[key] = read_variable(files, variables[0])
        return ModelData(str(path), graph, tensors)


def read_variable(files: container.ModelFiles, variable: Variable) -> TensorData:
    """Decode the .dat of `variable`, checking its shape and item kind against the graph's declaration before its
    data is read."""
    where = files.tensor_path(variable.label)
    check = tensor_file.header_check(file=where, expected_shape=variable.shape, kinds=_KINDS.get(variable.dtype, ()),
                                     declared=f"variable '{variable.name}' is declared {variable.dtype}")
    return tensor_file.decode(files.tensor_bytes(variable.label, check), file=where)


def member_path(source: str, name: str) -> str:
    """How to name a file of the container in messages: a path, or 'archive:member'."""
    if os.path.isdir(source):
        return os.path.join(source, name)
    if source.endswith(".nnef"):
        return source if name == "graph.nnef" else source[:-len(".nnef")] + ".quant"
    return f"{source}:{name}"


__all__ = ["ModelData", "NNEFError", "attach_quantization", "member_path", "read_graph", "read_model", "read_variable"]
