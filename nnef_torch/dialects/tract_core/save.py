"""Save a module imported from a tract_core document: standard NNEF by default (the dialect's ops with a
standard form were lowered into standard ops when it was read, the others are rewritten by `rewrite.py`), or,
with `dialect='tract_core'`, a document for tract that keeps them (`extension tract_registry tract_core;`)."""
from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from nnef_torch.dialects.tract_core import declarations
from nnef_torch.dialects.tract_core.rewrite import to_dialect, to_standard
from nnef_torch.errors import NNEFOptionError, NNEFUnsupportedError
from nnef_torch.format import container, tensor_file
from nnef_torch.importer.module import NNEFModule, tensor_at
from nnef_torch.importer.save import _tensors, current_quantization
from nnef_torch.ir.document import graph_text
from nnef_torch.ir.graph import Graph
from nnef_torch.reader import open_source, read_graph
from nnef_torch.stdlib import standard_fragments

DIALECTS = (None, "tract_core")
HEADER = "extension tract_registry tract_core;"


def dialect_graph(text: str, file: str = "graph.nnef", constants: Any = None,
                  input_shapes: Mapping[str, Any] | None = None) -> Graph:
    """The flat graph of a tract_core document: standard ops, and the dialect ops that have no standard form.
    constants: the data of a variable passed as an attribute (see `reader.read_graph`); input_shapes: the shapes
    the module was read with (they bind tract's symbols)."""
    standard, dialect = standard_fragments(), declarations()
    return read_graph(text, file=file, atomic=lambda name: name in standard or name in dialect, constants=constants,
                      input_shapes=input_shapes or None)


def _constants(module: NNEFModule) -> Any:
    """A variable's current value in the module, or its data in the files it was read from."""
    info = module.nnef

    def read(variable: Any) -> Any:
        slot = info.slots.get(variable.key)
        if slot is not None:
            return tensor_at(module, slot.path).detach().cpu().numpy()
        with open_source(info.source) as source:
            return source.read_variable(variable).array
    return read


def document(graph: Graph, dialect: str | None = None) -> tuple[str, dict[str, np.ndarray]]:
    """Standard NNEF text of `graph` (`rewrite.to_standard`), or tract_core text with `dialect='tract_core'`
    (`rewrite.to_dialect`), and the data of the variables the rewrite added, by label."""
    if dialect not in DIALECTS:
        raise NNEFOptionError(f"dialect must be one of {DIALECTS}, not {dialect!r}")
    if dialect == "tract_core":
        graph, data = to_dialect(graph)
        text = graph_text(graph, library=declarations())
        first, rest = text.split("\n", 1)
        return f"{first}\n{HEADER}\n{rest}", data
    graph, fragments, library = to_standard(graph)
    kept = [op for op in graph.operations if op.name in declarations()]
    if kept:  # a dialect op without a rewrite (none today: the refusals of the rewrites come first)
        where = "; ".join(f"'{op.name}' at {op.location}" for op in kept)
        raise NNEFUnsupportedError(f"{len(kept)} operation(s) have no standard NNEF form: {where}; save with "
                                   "dialect='tract_core' to keep them for tract", kept[0].location)
    return graph_text(graph, fragments, library={**declarations(), **library}), {}


def document_text(graph: Graph, dialect: str | None = None) -> str:
    """The text of `document` (for graphs without constant tensors to move into variables)."""
    return document(graph, dialect)[0]


def save_tract(module: NNEFModule, path: str | os.PathLike, *, dialect: str | None = None,
               compress: bool | None = None, progress: bool | None = None) -> None:
    """Write `module` (imported from a tract_core document) with its current weights; see `document`."""
    info = module.nnef
    graph = dialect_graph(info.graph_text, constants=_constants(module),
                          input_shapes=info.options.get("input_shapes"))
    text, data = document(graph, dialect)
    tensors = itertools.chain(_tensors(module, current_quantization(module), progress),
                              ((label, _encoder(array)) for label, array in data.items()))
    container.write_model(path, text, tensors, None, compress=compress)


def _encoder(array: np.ndarray) -> Any:
    return lambda: tensor_file.encode(array)


__all__ = ["dialect_graph", "document", "document_text", "save_tract"]
