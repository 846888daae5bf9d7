"""The document of a graph read from a tract_core document: standard NNEF by default (the dialect's ops with a
standard form were lowered into standard ops when it was read, the others are rewritten by `rewrite.py`), or,
with `dialect='tract_core'`, a document for tract that keeps them (`extension tract_registry tract_core;`). The NNEF
writer (`nnef_torch.writers.nnef`) applies it."""
from __future__ import annotations

import numpy as np

from nnef_torch.errors import NNEFOptionError, NNEFUnsupportedError
from nnef_torch.formats.tract_core import declarations
from nnef_torch.formats.tract_core.rewrite import to_dialect, to_standard
from nnef_torch.ir.document import graph_text
from nnef_torch.ir.graph import Graph

DIALECTS = (None, "tract_core")
HEADER = "extension tract_registry tract_core;"


def document(graph: Graph, dialect: str | None = None) -> tuple[str, dict[str, np.ndarray]]:
    """Standard NNEF text of `graph` (`rewrite.to_standard`), or tract_core text with `dialect='tract_core'`
    (`rewrite.to_dialect`), and the data of the variables the rewrite added, by label."""
    if dialect not in DIALECTS:
        raise NNEFOptionError(f"dialect must be one of {DIALECTS}, not {dialect!r}")
    if dialect == "tract_core":
        graph, data = to_dialect(graph)
        library, header = declarations(), HEADER
        if graph.dialect == "tract_transformers":  # layered on tract_core: both registries
            from nnef_torch.formats import tract_transformers  # lazy: loaded only for its documents

            library = {**library, **tract_transformers.declarations()}
            header = f"{HEADER}\n{tract_transformers.HEADER}"
        text = graph_text(graph, library=library)
        first, rest = text.split("\n", 1)
        return f"{first}\n{header}\n{rest}", data
    graph, fragments, library = to_standard(graph)
    kept = [op for op in graph.operations if op.name in declarations() or op.name.startswith("tract_")]
    if kept:  # a dialect op without a rewrite (none today: the refusals of the rewrites come first)
        where = "; ".join(f"'{op.name}' at {op.location}" for op in kept)
        raise NNEFUnsupportedError(f"{len(kept)} operation(s) have no standard NNEF form: {where}; save with "
                                   "dialect='tract_core' to keep them for tract", kept[0].location)
    return graph_text(graph, fragments, library={**declarations(), **library}), {}


def document_text(graph: Graph, dialect: str | None = None) -> str:
    """The text of `document` (for graphs without constant tensors to move into variables)."""
    return document(graph, dialect)[0]


__all__ = ["document"]
