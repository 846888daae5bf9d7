"""The op table: one entry per NNEF operation, keyed by its NNEF name, shared by import and export.

Each facet of an entry (shape rule now; torch implementation and export rules later) is added by a decorator,
and adding the same facet twice for one op raises, so every op has exactly one definition of each.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

Shape = tuple[int, ...]


@dataclass
class OpEntry:
    name: str
    shape: Callable[..., Any] | None = None  # shape rule: (*input shapes, **attributes) -> result shape(s)


_TABLE: dict[str, OpEntry] = {}


def entry(name: str) -> OpEntry | None:
    return _TABLE.get(name)


def _register(name: str, facet: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    op = _TABLE.setdefault(name, OpEntry(name))
    if getattr(op, facet) is not None:
        raise RuntimeError(f"op {name!r} already has a {facet} rule ({getattr(op, facet).__qualname__})")
    setattr(op, facet, fn)
    return fn


def shape_rule(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the shape rule of NNEF op `name`.

    The rule keeps the NNEF signature: tensor inputs positionally (a shape tuple each; a list of shapes for a
    tensor-array input; `()` for a literal), then the attributes as keywords with their NNEF names (a name that is
    a Python keyword gets a trailing underscore: selu's `lambda_`). It returns the
    result shape, a tuple of shapes for several results, or a list of shapes for an array result, and raises
    `NNEFShapeError` (without location; the caller adds it) when argument validity fails.
    """
    return lambda fn: _register(name, "shape", fn)


def shape_rules() -> dict[str, Callable[..., Any]]:
    return {name: op.shape for name, op in _TABLE.items() if op.shape is not None}
