"""The `tract_core` dialect: the operations of tract's NNEF registry (sonos/tract, `tract_core`) that
torch_to_nnef's `TractNNEF` target writes.

A document that declares `extension tract_registry tract_core;` sees the declarations of `declarations.nnef`.
Ops with a standard form are written as standard operations while lowering (`lowering.py`, `scan.py`), so an
imported module saves back as standard NNEF; the others keep their `tract_core_*` name and have a torch
implementation and a shape rule (`ops.py`). All of them are in the dialect's op table, layered on the standard
one (`registry.entry(name, dialect="tract_core")`): a graph read from such a document records it
(`Graph.dialect`), and a standard document does not see them. Saving is in `document.py` and `rewrite.py`.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

from nnef_torch.errors import NNEFSemanticError, NNEFUnsupportedError
from nnef_torch.format import ast
from nnef_torch.format.parser import CONDITION_EXTENSION, parse_fragments
from nnef_torch.formats.tract_core import relaxed
from nnef_torch.formats.tract_core.ast_map import map_expr
from nnef_torch.formats.tract_core.lowering import nnef_kind
from nnef_torch.formats.tract_core.symbols import bind_symbols, substitute
from nnef_torch.ir.checker import FRAGMENT_EXTENSION, OPERATOR_EXTENSION
from nnef_torch.ops.registry import LAYERED_ON, dialect_of, require

DECLARATIONS_FILE = "declarations.nnef"
RECURRENCE_FILE = "recurrence.nnef"  # recurrent layers as tract_core_scan, written by the exporter's tract target
REGISTRIES = ("tract_core", "tract_transformers")  # `extension tract_registry NAME;` read (the second: the
# tract_transformers dialect, layered on this one, `nnef_torch.formats.tract_transformers`)
# metadata fragments tract writes and never invokes
METADATA = ("tract_core_properties",)


@lru_cache(maxsize=1)
def declarations() -> dict[str, ast.Fragment]:
    require("dialect:tract_core")  # the dialect's ops in its op table
    text = resources.files(__package__).joinpath(DECLARATIONS_FILE).read_text(encoding="utf-8")
    return {fragment.name: fragment for fragment in parse_fragments(text, DECLARATIONS_FILE)}


@lru_cache(maxsize=1)
def recurrence_fragments() -> dict[str, ast.Fragment]:
    """The fragments the exporter's tract target defines for recurrent layers (`recurrence.nnef`): each layer a
    `tract_core_scan` over its step fragment. Parsed only: the standard checker refuses tract_core_scan's mixed
    tuples, so they are checked where the exported text is read back as tract's dialect (`symbolic.verify_text`)."""
    text = resources.files(__package__).joinpath(RECURRENCE_FILE).read_text(encoding="utf-8")
    return {fragment.name: fragment for fragment in parse_fragments(text, RECURRENCE_FILE)}


def registries(doc: ast.Document) -> tuple[list[str], list[str]]:
    """The tract registries and the tract symbols (dynamic dimensions) `doc` declares; raises for tract
    extensions this reader does not read."""
    names = list(doc.extensions)
    found: list[str] = []
    symbols: list[str] = []
    i = 0
    while i < len(names):
        name = names[i]
        if name == "tract_registry" and i + 1 < len(names):
            registry = names[i + 1]
            if registry not in REGISTRIES:
                raise NNEFUnsupportedError(f"'extension tract_registry {registry};' is not read: of tract's "
                                           f"registries only {', '.join(REGISTRIES)} are (re-export without "
                                           f"{registry} operations)", doc.loc)
            found.append(registry)
            i += 2
            continue
        if name == "tract_symbol" and i + 1 < len(names):
            symbols.append(names[i + 1])
            i += 2
            continue
        if name == CONDITION_EXTENSION and i + 1 < len(names):  # a range of a symbol: what tract may assume
            i += 2
            continue
        if name.startswith("tract_"):
            raise NNEFUnsupportedError(f"'extension {name}' (a tract extension) is not read; only "
                                       "'tract_registry tract_core', 'tract_registry tract_transformers', "
                                       "'tract_symbol' and 'tract_assert' are", doc.loc)
        i += 1
    return found, symbols


def prepare(doc: ast.Document, input_shapes: Mapping[str, Any] | None = None, batch_size: int | None = None,
            batch_axes: Mapping[str, int | None] | None = None) -> tuple[ast.Document, dict[str, ast.Fragment],
                                                                          dict[str, Callable[..., Any]]]:
    """`doc` as the tract_core dialect reads it: tract enables fragment definitions and operator expressions
    without saying so, its metadata fragment is dropped, and its symbols take the integers the options bind
    (`symbols.py`). Returns the document, the dialect's declarations (with the relaxed standard ones of
    `relaxed.py`), and the relaxed lowering rules by standard op name."""
    found, symbols = registries(doc)
    if "tract_transformers" in found and "tract_core" not in found:
        raise NNEFUnsupportedError("'extension tract_registry tract_transformers;' is read with 'extension "
                                   "tract_registry tract_core;' (its ops are layered on tract_core's)", doc.loc)
    if not found:
        if symbols:
            raise NNEFUnsupportedError("'extension tract_symbol' is read with 'extension tract_registry tract_core;' "
                                       "only", doc.loc)
        return doc, {}, {}
    values = bind_symbols(doc, symbols, input_shapes, batch_size, batch_axes) if symbols else {}
    doc = substitute(doc, values)
    kept = tuple(doc.extensions)  # the tract names stay: `is_dialect` reads them on the lowered graph
    extensions = kept + tuple(e for e in (FRAGMENT_EXTENSION, OPERATOR_EXTENSION) if e not in kept)
    fragments = tuple(dataclasses.replace(f, body=_statements(f.body)) if f.body is not None else f
                      for f in doc.fragments if f.name not in METADATA)
    graph = dataclasses.replace(doc.graph, body=_statements(doc.graph.body)) if doc.graph is not None else None
    prepared = dataclasses.replace(doc, extensions=extensions, fragments=fragments, graph=graph)
    declared = {**declarations(), **relaxed.declarations()}
    if "tract_transformers" in found:
        from nnef_torch.formats import tract_transformers  # lazy: loaded only for its documents

        declared.update(tract_transformers.declarations())
    return prepared, declared, dict(relaxed.RULES)


def _statements(body: tuple[ast.Assignment, ...]) -> tuple[ast.Assignment, ...]:
    return tuple(_statement(assignment) for assignment in body)


def _statement(assignment: ast.Assignment) -> ast.Assignment:
    """Two statement forms of tract's, read as standard ones: `x = tract_core_external(shape, datum_type)` is
    `x = external<type>(shape)` (a graph input), and `(a, b) = tract_core_scan(...)` unpacks its array result.
    `tract_core_cast(x, to = 'i64')` gets the generic type its `to` names, so the checker types its result."""
    rhs = map_expr(assignment.rhs, _typed_cast)
    if rhs is not assignment.rhs:
        assignment = dataclasses.replace(assignment, rhs=rhs)
    if not isinstance(rhs, ast.Invocation):
        return assignment
    if rhs.name == "tract_core_external":
        return dataclasses.replace(assignment, rhs=_external(rhs))
    if rhs.name == "tract_core_scan" and isinstance(assignment.lhs, ast.TupleExpr):
        return dataclasses.replace(assignment, lhs=ast.ArrayExpr(assignment.lhs.items, assignment.lhs.loc))
    return assignment


def _typed_cast(node: Any) -> Any:
    if not (isinstance(node, ast.Invocation) and node.name == "tract_core_cast" and node.generic is None):
        return node
    to = next((arg.value for arg in node.args if arg.name == "to"), None)
    if not isinstance(to, ast.Literal) or not isinstance(to.value, str):
        return node
    kind = nnef_kind(to.value, "to", "tract_core_cast", to.loc)
    return dataclasses.replace(node, generic=ast.PrimitiveType(kind))


def _external(rhs: ast.Invocation) -> ast.Invocation:
    args = {arg.name: arg for arg in rhs.args}
    if set(args) != {"shape", "datum_type"} or not isinstance(args["datum_type"].value, ast.Literal):
        raise NNEFSemanticError("tract_core_external takes shape = [...] and datum_type = '...' by name",
                                rhs.loc)
    kind = nnef_kind(args["datum_type"].value.value, "datum_type", "tract_core_external", rhs.loc)
    return ast.Invocation("external", ast.PrimitiveType(kind), (args["shape"],), rhs.loc)


def is_dialect(extensions: tuple[str, ...] | list[str]) -> bool:
    """The `extensions` of a document (or of the graph read from it) choose the tract_core op table, or that of
    a dialect layered on it (tract_transformers)."""
    dialect = dialect_of(extensions)
    return dialect == "tract_core" or LAYERED_ON.get(dialect or "") == "tract_core"


__all__ = ["declarations", "is_dialect", "prepare", "recurrence_fragments", "registries"]
