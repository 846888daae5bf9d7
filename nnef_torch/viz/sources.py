"""What can be drawn, opened as an IR graph: a model file of any format the reader opens, an exported `Model`,
an imported `NNEFModule`, an `nn.Module` with example inputs, a `ModelData`, or an IR `Graph`.

Graphs are read from their NNEF text, so operations expanded from fragments the document defines keep the
invocation they came from (`Operation.scope`), and graph.quant entries are on their tensors.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import nnef_torch
from nnef_torch.errors import NNEFOptionError
from nnef_torch.format.graph_file import GraphFile
from nnef_torch.ir.document import graph_document
from nnef_torch.ir.graph import Graph
from nnef_torch.reader import ModelData, read_document, read_model


@dataclass(frozen=True)
class Drawable:
    """An IR graph, and its variables' values by label when they were asked for (else None)."""

    graph: Graph
    tensors: Mapping[str, Any] | None = None


def open_drawable(source: Any, *, example_inputs: Any = None, weights: bool = False, format: str | None = None,
                  params: Any = None, inputs: Any = None, outputs: Any = None,
                  input_shapes: Mapping[str, Any] | None = None) -> Drawable:
    """The graph of `source` (see the module docstring); `weights=True` reads the variables' values too."""
    if isinstance(source, Graph):
        return Drawable(source)
    if isinstance(source, ModelData):
        return Drawable(source.graph, _model_data_tensors(source) if weights else None)
    if isinstance(source, (str, os.PathLike)):
        model = read_model(source, load_tensors=weights, format=format, params=params, inputs=inputs,
                           outputs=outputs, input_shapes=input_shapes)
        return Drawable(model.graph, _model_data_tensors(model) if weights else None)
    import torch

    # lazy: keeps torch out of drawing files
    from nnef_torch.exporter.model import Model
    from nnef_torch.importer.module import NNEFModule, tensor_at
    from nnef_torch.importer.relower import module_graph
    if isinstance(source, NNEFModule):
        info = source.nnef
        graph = module_graph(source, "viz", quant=True)  # with the options it was loaded with (batch, shapes, ...)
        tensors = {slot.label: tensor_at(source, slot.path) for slot in info.slots.values()} if weights else None
        return Drawable(graph, tensors)
    if isinstance(source, torch.nn.Module):
        if example_inputs is None:
            raise NNEFOptionError("drawing a torch module traces it: give example_inputs= (a tensor or a tuple)")
        source = nnef_torch.export(source, example_inputs)
    if isinstance(source, Model):
        document = GraphFile(source.text, document=graph_document(source.graph, source.fragments))
        graph = read_document(document, quant_text=source.quant_text)  # its fragments expanded, without parsing
        return Drawable(graph, dict(source.tensors) if weights else None)
    raise TypeError(f"cannot draw a {type(source).__name__}: expected a model path, an nn.Module (with "
                    "example_inputs=), an NNEFModule, an exported Model, a ModelData or an IR Graph")


def _model_data_tensors(model: ModelData) -> dict[str, Any]:
    return {variable.label: model.tensors[variable.key].array for variable in model.graph.signature.variables
            if variable.key in model.tensors}
