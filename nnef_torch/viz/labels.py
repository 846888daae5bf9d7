"""Attributes in a drawing: which are worth showing (those differing from the standard default), written short as
NNEF values."""
from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from nnef_torch.ir.builder import default_value
from nnef_torch.stdlib import standard_fragments

LIST_ITEMS = 8  # a longer list shows its first items and its length
VALUE_CHARS = 48  # a longer value is cut


@lru_cache(maxsize=1)
def _standard_defaults() -> dict[str, dict[str, Any]]:
    return {name: {param.name: default_value(param.default) for param in fragment.params
                   if param.default is not None}
            for name, fragment in standard_fragments().items()}


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def shown_attributes(op: str | None, attrs: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The attributes of a standard op that differ from their declared default (all of them for other ops)."""
    defaults = _standard_defaults().get(op or "", {})
    return [(name, value) for name, value in attrs.items()
            if not (name in defaults and _same(value, defaults[name]))]


def value_text(value: Any, limit: int = VALUE_CHARS) -> str:
    """A value written as in NNEF (`[(1, 1), (1, 1)]`, `'ignore'`, `true`), long lists and texts shortened."""
    text = _literal(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _scalar(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, (list, tuple)):
        items = [_literal(item) for item in value[:LIST_ITEMS if len(value) <= LIST_ITEMS else LIST_ITEMS - 2]]
        if len(value) > LIST_ITEMS:
            items.append(f"… {len(value)} items")
        inner = ", ".join(items)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    if value is None:
        return "none"
    return str(value)


def _scalar(value: float) -> str:
    if not math.isfinite(value):
        return str(value)
    text = repr(value)
    mantissa, _, exponent = text.partition("e")
    if "." not in mantissa:
        mantissa += ".0"
    return f"{mantissa}e{exponent}" if exponent else mantissa
