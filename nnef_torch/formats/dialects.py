"""Dialects: operation sets of other NNEF producers, made visible to the lowerer by the document's `extension`
lines (`extension tract_registry tract_core;`). Each dialect is a subpackage holding its declarations as an
`.nnef` data file and its ops in the op table (`nnef_torch.ops.registry`)."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from nnef_torch.format import ast


def apply_dialects(doc: ast.Document, input_shapes: Mapping[str, Any] | None = None, batch_size: int | None = None,
                   batch_axes: Mapping[str, int | None] | None = None
                   ) -> tuple[ast.Document, dict[str, ast.Fragment], dict[str, Callable[..., Any]]]:
    """The document as its dialects read it, the fragment declarations they add, and the lowering rules of the
    standard operations they read otherwise than the spec (all empty for a standard document). The options are
    `lower`'s: they bind a dialect's dynamic dimensions. Raises `NNEFUnsupportedError` for an extension of a
    known producer that is not read, and `NNEFOptionError` for a dynamic dimension left unbound."""
    if not any(name.startswith("tract_") for name in doc.extensions):
        return doc, {}, {}
    from nnef_torch.formats.tract_core import prepare

    return prepare(doc, input_shapes, batch_size, batch_axes)


__all__ = ["apply_dialects"]
