"""Rewrite the expressions of a syntax tree bottom-up, keeping every unchanged node as it is."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from functools import cache
from typing import Any

from nnef_torch.format import ast


@cache
def _fields(kind: Any) -> tuple[str, ...] | None:
    """The fields of a syntax-tree node type; None for leaves (numbers, strings, NumberItems, locations)."""
    if not isinstance(kind, type) or not dataclasses.is_dataclass(kind) or issubclass(kind, ast.Location):
        return None
    return tuple(field.name for field in dataclasses.fields(kind))


def _children(node: Any) -> tuple[Any, ...] | None:
    """The children of a tuple or a node (an array of names is its identifiers); None for a leaf."""
    if type(node) is tuple:
        return node
    if isinstance(node, ast.NameItems):
        return tuple(node)
    names = _fields(type(node))
    return None if names is None else tuple(getattr(node, name) for name in names)


def map_expr(expr: Any, fn: Callable[[Any], Any]) -> Any:
    """`expr` with `fn` applied to each node after its children (`fn` returns the node itself to keep it). Walked
    with a stack of its own, not recursively: an expression may be a chain of any length (`x + 1.0 + 1.0 ...`)."""
    children = _children(expr)
    if children is None:
        return expr
    stack: list[tuple[Any, tuple[Any, ...], list[Any]]] = [(expr, children, [])]
    while True:
        node, children, done = stack[-1]
        deeper: tuple[Any, tuple[Any, ...], list[Any]] | None = None
        while len(done) < len(children):
            child = children[len(done)]
            grandchildren = _children(child)
            if grandchildren is not None:
                deeper = (child, grandchildren, [])
                break
            done.append(child)
        if deeper is not None:
            stack.append(deeper)
            continue
        stack.pop()
        if type(node) is tuple or isinstance(node, ast.NameItems):
            result = node if all(new is old for new, old in zip(done, children)) else tuple(done)
        else:
            names = _fields(type(node)) or ()
            changes = {name: new for name, new, old in zip(names, done, children) if new is not old}
            result = fn(dataclasses.replace(node, **changes) if changes else node)
        if not stack:
            return result
        stack[-1][2].append(result)


__all__ = ["map_expr"]
