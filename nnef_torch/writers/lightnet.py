"""The LightNet writer: LightNet's JSON IR, with the weights in a .wts file of the same stem beside it (or inline).

An imported module is written from its graph lowered with the operations LightNet has a rule for kept whole, and
its current weights (a model opened from disk likewise, with its stored values); an exported module from its
trace, read back from its text (the trace's fragments are expanded where LightNet has no rule for them). LightNet
has no quantization: graph.quant entries are not written.
"""
from __future__ import annotations

import os

from nnef_torch.formats.lightnet.write import LightNetModel, lightnet_graph, lightnet_rules, save_lightnet
from nnef_torch.importer.relower import module_graph
from nnef_torch.writers.source import Source

OPTIONS = ("weights", "progress")  # progress: accepted for a uniform call; LightNet writes two files at once


def write(source: Source, path: str | os.PathLike, *, weights: str | None = None,
          progress: bool | None = None) -> LightNetModel:
    if source.imported is not None:
        rules = lightnet_rules()
        graph = module_graph(source.imported, "lightnet", lambda name: name in rules)
    elif source.opened is not None:
        opened = source.opened
        graph = lightnet_graph(opened.graph_text, file=opened.graph_file,
                               input_shapes=opened.options.shapes if opened.format == "nnef" else None)
    else:
        graph = lightnet_graph(source.model.text)
    return save_lightnet(path, graph, source.value, weights=weights or "file", located=source.located)
