"""Dialects: operation sets of other NNEF producers, made visible to the lowerer by the document's `extension`
lines (`extension tract_registry tract_core;`). Each dialect is a subpackage holding its declarations as an
`.nnef` data file and its ops in an op table of its own, layered on the standard one (`nnef_torch.ops.registry`:
`DIALECTS` names the extension line that chooses it, and the lowerer records the choice as `Graph.dialect`)."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nnef_torch.errors import Location, NNEFOptionError
from nnef_torch.format import ast

# A declared extent of a graph input: an integer, the name of a dynamic dimension (tract's `S`), or None (an
# expression of them)
Extent = int | str | None


class UnboundDimensionError(NNEFOptionError):
    """Dynamic dimensions of a dialect (`extension tract_symbol S;`) that no option binds; `symbols` names them.
    `nnef_torch.load` binds them at the module's first call instead."""

    def __init__(self, message: str, location: Location | None = None, symbols: tuple[str, ...] = ()):
        super().__init__(message, location)
        self.symbols = symbols


def apply_dialects(doc: ast.Document, input_shapes: Mapping[str, Any] | None = None, batch_size: int | None = None,
                   batch_axes: Mapping[str, int | None] | None = None
                   ) -> tuple[ast.Document, dict[str, ast.Fragment], dict[str, Callable[..., Any]]]:
    """The document as its dialects read it, the fragment declarations they add, and the lowering rules of the
    standard operations they read otherwise than the spec (all empty for a standard document). The options are
    `lower`'s: they bind a dialect's dynamic dimensions. Raises `NNEFUnsupportedError` for an extension of a
    known producer that is not read, and `NNEFOptionError` for a dynamic dimension left unbound."""
    if not any(name.startswith("tract_") for name in doc.extensions):
        return doc, {}, {}
    from nnef_torch.formats.tract_core import prepare  # lazy: loaded only for tract documents

    return prepare(doc, input_shapes, batch_size, batch_axes)


def dynamic_inputs(doc: ast.Document) -> dict[str, tuple[Extent, ...]]:
    """The declared shape of each graph input of a document whose dialect has dynamic dimensions, by input name:
    integers where the extent is written as one, symbol names, and None for expressions of them; empty for a
    document without dynamic dimensions (a standard one)."""
    if not any(name.startswith("tract_") for name in doc.extensions):
        return {}
    from nnef_torch.formats.tract_core.symbols import declared_inputs  # lazy: loaded only for tract documents

    return declared_inputs(doc)


__all__ = ["Extent", "UnboundDimensionError", "apply_dialects", "dynamic_inputs"]
