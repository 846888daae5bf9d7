"""Rewrite the expressions of a syntax tree bottom-up, keeping every unchanged node as it is."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from nnef_torch.format import ast


def map_expr(expr: Any, fn: Callable[[Any], Any]) -> Any:
    """`expr` with `fn` applied to each node after its children (`fn` returns the node itself to keep it)."""
    if isinstance(expr, tuple):
        items = tuple(map_expr(item, fn) for item in expr)
        return expr if all(new is old for new, old in zip(items, expr)) else items
    if isinstance(expr, ast.NumberItems) or not dataclasses.is_dataclass(expr) or isinstance(expr, ast.Location):
        return expr
    changes = {}
    for field in dataclasses.fields(expr):
        value = getattr(expr, field.name)
        new = map_expr(value, fn)
        if new is not value:
            changes[field.name] = new
    return fn(dataclasses.replace(expr, **changes) if changes else expr)


__all__ = ["map_expr"]
