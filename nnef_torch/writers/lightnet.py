"""The LightNet writer: LightNet's JSON IR, with the weights in a .wts file of the same stem beside it (or inline).

An imported module is written from its graph lowered with the operations LightNet has a rule for kept whole, and
its current weights (a model opened from disk likewise, with its stored values); an exported module from its
trace, read back from its text (the trace's fragments are expanded where LightNet has no rule for them). LightNet
has no quantization: graph.quant entries are not written.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from nnef_torch.format.graph_file import GraphFile
from nnef_torch.formats.lightnet.write import LightNetModel, lightnet_rules, save_lightnet
from nnef_torch.importer.relower import module_graph
from nnef_torch.ir.graph import Graph
from nnef_torch.reader import read_document
from nnef_torch.writers.source import Source

# progress: accepted for a uniform call (LightNet writes two files at once); fold_batch_norm: how a module is traced
OPTIONS = ("weights", "progress", "fold_batch_norm")


def write(source: Source, path: str | os.PathLike, *, weights: str | None = None,
          progress: bool | None = None) -> LightNetModel:
    if source.imported is not None:
        rules = lightnet_rules()
        graph = module_graph(source.imported, "lightnet", lambda name: name in rules)
    elif source.opened is not None:
        opened = source.opened
        shapes = opened.options.shapes if opened.format == "nnef" else None
        graph = lightnet_graph(opened.document, input_shapes=shapes)
    else:
        graph = lightnet_graph(GraphFile(source.model.text))
    return save_lightnet(path, graph, source.value, weights=weights or "file", located=source.located)


def lightnet_graph(document: GraphFile, *, input_shapes: Mapping[str, Any] | None = None) -> Graph:
    """The IR of a graph.nnef for the LightNet back end: compound operations stay whole where a LightNet rule
    writes them and are expanded into their definitions otherwise (the fragments of the exporter and of the front
    ends included). graph.quant is not read: LightNet has no quantization."""
    rules = lightnet_rules()
    return read_document(document, atomic=lambda name: name in rules, input_shapes=input_shapes)
