"""tract's dynamic dimensions (`extension tract_symbol S;`), bound to integers when the document is read.

tract keeps a symbol such as `S` in shapes (`tract_core_external(shape = [1, S], ...)`) and in expressions; this
reader has static shapes only, so the user binds each symbol when loading: through `input_shapes=` (the extent
given at a position where an input's declared shape is the symbol) or `batch_size=` (at the batch axis of each
input, axis 0 or as `batch_axes=` says). Every use of the symbol in the graph body then reads as that integer.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from nnef_torch.errors import NNEFOptionError
from nnef_torch.format import ast
from nnef_torch.formats.tract_core.ast_map import map_expr

EXTERNALS = ("tract_core_external", "external")


def _external_shapes(doc: ast.Document) -> list[tuple[str, list[ast.Expr], ast.Location]]:
    """(input name, declared shape items, location) of each graph input declared with a shape array."""
    found = []
    for assignment in doc.graph.body:
        rhs = assignment.rhs
        if not (isinstance(assignment.lhs, ast.Identifier) and isinstance(rhs, ast.Invocation)
                and rhs.name in EXTERNALS):
            continue
        shape = next((arg.value for arg in rhs.args if arg.name == "shape"), None)
        if shape is None and rhs.args and rhs.args[0].name is None:
            shape = rhs.args[0].value
        if isinstance(shape, ast.ArrayExpr):
            found.append((assignment.lhs.name, list(shape.items), assignment.loc))
    return found


def bind_symbols(doc: ast.Document, symbols: list[str], input_shapes: Mapping[str, Any] | None,
                 batch_size: int | None, batch_axes: Mapping[str, int | None] | None) -> dict[str, int]:
    """The integer of each symbol, from the options given to `load` / `read_model`; raises `NNEFOptionError`
    naming the symbols left unbound and how to bind them."""
    values: dict[str, int] = {}
    sources: dict[str, str] = {}
    example: dict[str, tuple[str, int]] = {}  # symbol -> an (input, axis) where it is declared

    def bind(symbol: str, value: Any, where: str, loc: ast.Location) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise NNEFOptionError(f"tract_symbol {symbol} must be bound to a positive integer, {where} gives "
                                  f"{value!r}", loc)
        if symbol in values and values[symbol] != value:
            raise NNEFOptionError(f"tract_symbol {symbol} is bound to {values[symbol]} ({sources[symbol]}) and to "
                                  f"{value} ({where})", loc)
        values[symbol], sources[symbol] = value, where

    shapes = dict(input_shapes or {})
    axes = dict(batch_axes or {})
    for name, items, loc in _external_shapes(doc):
        for axis, item in enumerate(items):
            if isinstance(item, ast.Identifier) and item.name in symbols:
                example.setdefault(item.name, (name, axis))
        if name in shapes:
            given = list(shapes[name])
            if len(given) != len(items):
                continue  # the lowerer reports the rank: the given shape replaces the declared one
            for axis, item in enumerate(items):
                if isinstance(item, ast.Identifier) and item.name in symbols:
                    bind(item.name, given[axis], f"input_shapes['{name}'][{axis}]", loc)
        elif batch_size is not None:
            axis = axes.get(name, 0)
            if axis is not None and -len(items) <= axis < len(items):
                item = items[axis]
                if isinstance(item, ast.Identifier) and item.name in symbols:
                    bind(item.name, batch_size, f"batch_size at axis {axis} of '{name}'", loc)
    unbound = [symbol for symbol in symbols if symbol not in values]
    if unbound:
        hints = []
        for symbol in unbound:
            if symbol in example:
                name, axis = example[symbol]
                hints.append(f"{symbol}: input_shapes={{'{name}': [...]}} (its extent at axis {axis}) or "
                             f"batch_size=N" + (f", batch_axes={{'{name}': {axis}}}" if axis else ""))
            else:
                hints.append(f"{symbol}: no graph input declares it, so it cannot be bound")
        shown = ", ".join(f"'extension tract_symbol {symbol};'" for symbol in unbound)
        what = "declares a dynamic dimension" if len(unbound) == 1 else "declare dynamic dimensions"
        raise NNEFOptionError(f"{shown} {what}, which this reader needs bound to an integer when loading; bind "
                              f"{'; '.join(hints)}", doc.loc)
    return values


def substitute(doc: ast.Document, values: Mapping[str, int]) -> ast.Document:
    """The document with each use of a bound symbol in the graph body read as its integer."""
    if not values:
        return doc
    body = tuple(dataclasses.replace(a, rhs=_replace(a.rhs, values)) for a in doc.graph.body)
    return dataclasses.replace(doc, graph=dataclasses.replace(doc.graph, body=body))


def _replace(expr: Any, values: Mapping[str, int]) -> Any:
    def bound(node: Any) -> Any:
        if isinstance(node, ast.Identifier) and node.name in values:
            return ast.Literal(values[node.name], "integer", node.loc)
        return node
    return map_expr(expr, bound)


__all__ = ["bind_symbols", "substitute"]
