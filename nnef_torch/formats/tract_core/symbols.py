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
from nnef_torch.formats.dialects import Extent, UnboundDimensionError
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
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise NNEFOptionError(f"tract_symbol {symbol} must be bound to a non-negative integer, {where} gives "
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
            elif _linear(item, symbols) is not None:
                example.setdefault(_linear(item, symbols)[0], (name, axis))
        if name in shapes:
            given = list(shapes[name])
            if len(given) != len(items):
                continue  # the lowerer reports the rank: the given shape replaces the declared one
            for axis, item in enumerate(items):
                where = f"input_shapes['{name}'][{axis}]"
                if isinstance(item, ast.Identifier) and item.name in symbols:
                    bind(item.name, given[axis], where, loc)
                elif _linear(item, symbols) is not None:  # `2*h`: h is the extent's inverse image
                    symbol, scale, offset = _linear(item, symbols)
                    value = given[axis]
                    if not isinstance(value, int) or (value - offset) % scale:
                        raise NNEFOptionError(f"{where} is {value!r}, but the input's extent there is declared "
                                              f"as an affine expression of {symbol} that never takes that value", loc)
                    bind(symbol, (value - offset) // scale, where, loc)
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
        raise UnboundDimensionError(f"{shown} {what}, which this reader needs bound to an integer when loading; "
                                    f"bind {'; '.join(hints)}", doc.loc, tuple(unbound))
    return values


def _linear(item: ast.Expr, symbols: list[str]) -> tuple[str, int, int] | None:
    """(symbol, scale, offset) of an extent declared `scale*S + offset` (a positive integer scale), else None."""
    found: set[str] = set()

    def value(expr: ast.Expr, at: int) -> int | None:
        if isinstance(expr, ast.Literal) and isinstance(expr.value, int) and not isinstance(expr.value, bool):
            return expr.value
        if isinstance(expr, ast.Identifier) and expr.name in symbols:
            found.add(expr.name)
            return at
        if isinstance(expr, ast.UnaryExpr) and expr.op == "-":
            inner = value(expr.operand, at)
            return None if inner is None else -inner
        if isinstance(expr, ast.BinaryExpr) and expr.op in ("+", "-", "*"):
            left, right = value(expr.left, at), value(expr.right, at)
            if left is None or right is None:
                return None
            return left + right if expr.op == "+" else left - right if expr.op == "-" else left * right
        return None
    if isinstance(item, (ast.Literal, ast.Identifier)):
        return None
    points = [value(item, at) for at in (0, 1, 2)]
    if None in points or len(found) != 1:
        return None
    offset, scale = points[0], points[1] - points[0]
    if scale < 1 or points[2] != offset + 2 * scale:
        return None
    return found.pop(), scale, offset


def declared_inputs(doc: ast.Document) -> dict[str, tuple[Extent, ...]]:
    """Each graph input's declared shape (`dialects.dynamic_inputs`) where the document declares tract symbols."""
    from nnef_torch.formats.tract_core import registries  # cycle: the package imports this module

    symbols = set(registries(doc)[1])
    if not symbols:
        return {}

    def extent(item: ast.Expr) -> Extent:
        if isinstance(item, ast.Literal) and isinstance(item.value, int) and not isinstance(item.value, bool):
            return item.value
        if isinstance(item, ast.Identifier) and item.name in symbols:
            return item.name
        return None
    return {name: tuple(extent(item) for item in items) for name, items, _ in _external_shapes(doc)}


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


__all__ = ["bind_symbols", "declared_inputs", "substitute"]
