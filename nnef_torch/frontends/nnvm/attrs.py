"""Attribute strings of NNVM and MXNet nodes, read as dmlc's parameter parser and nnvm's `tuple.h` read them.

Every value is a string: `"64"`, `"1e-05"`, `"True"` / `"False"` / `"1"` / `"0"`, `"None"` for an unset optional,
tuples as `"(1, 1)"`, `"[3, 3]"`, `"(2L, 2L)"` (Python 2 longs), a bare `"1"` (a tuple of one), `"()"` and nested
tuples `"((0, 0), (1, 1))"`. A `Attributes` object reads them by type for one node, remembers which it read, and
names the node in every error.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from nnef_torch.errors import ForeignFormatError, Location
from nnef_torch.format.lexer import MAX_INTEGER

REQUIRED: Any = object()
MAX_TUPLE_NESTING = 8
_INT = re.compile(r"[+-]?[0-9]+[lL]?")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fF]?|[+-]?(?:inf|nan|infinity)",
                    re.IGNORECASE)
_TOKEN = re.compile(r"\s*([()\[\],]|None|[^()\[\],\s]+)")
_TRUE, _FALSE = ("true", "1"), ("false", "0")


def parse_int(text: str) -> int:
    text = text.strip()
    if not _INT.fullmatch(text):
        raise ValueError(f"expected an integer, found {text!r}")
    digits = text.rstrip("lL")
    magnitude = digits.lstrip("+-").lstrip("0") or "0"
    if len(magnitude) > len(str(MAX_INTEGER)) or abs(int(digits)) > MAX_INTEGER:
        raise ValueError(f"integer {text[:30]!r} is out of range")
    return int(digits)


def parse_float(text: str) -> float:
    text = text.strip()
    if not _FLOAT.fullmatch(text):
        raise ValueError(f"expected a number, found {text!r}")
    return float(text.rstrip("fF"))


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"expected True, False, 1 or 0, found {text!r}")


def parse_tuple(text: str) -> tuple[Any, ...]:
    """A tuple string: items are integers, numbers, None or tuples; a bare value is a tuple of one."""
    tokens = [match.group(1) for match in _TOKEN.finditer(text)]
    if "".join(tokens) != re.sub(r"\s+", "", text):
        raise ValueError(f"expected a tuple such as (1, 1), found {text!r}")
    if not tokens:
        raise ValueError("expected a tuple, found an empty string")
    position = 0

    def item(depth: int) -> Any:
        nonlocal position
        token = tokens[position]
        if token in "([":
            if depth >= MAX_TUPLE_NESTING:
                raise ValueError(f"tuple {text[:40]!r} nests more than {MAX_TUPLE_NESTING} levels")
            closing = ")" if token == "(" else "]"
            position += 1
            items = []
            while position < len(tokens) and tokens[position] != closing:
                items.append(item(depth + 1))
                if position < len(tokens) and tokens[position] == ",":
                    position += 1
                elif position < len(tokens) and tokens[position] != closing:
                    raise ValueError(f"expected ',' or {closing!r} in {text!r}, found {tokens[position]!r}")
            if position >= len(tokens):
                raise ValueError(f"tuple {text!r} is not closed")
            position += 1
            return tuple(items)
        position += 1
        if token == "None":
            return None
        if _INT.fullmatch(token):
            return parse_int(token)
        return parse_float(token)

    value = item(0)
    if position != len(tokens):
        raise ValueError(f"unexpected {tokens[position]!r} after the tuple in {text!r}")
    return value if isinstance(value, tuple) else (value,)


class Attributes:
    """The attributes of one node, read by type. Names starting and ending with '__' are hidden attributes
    (`__shape__`, `__init__`, `__lr_mult__`, ...): never required to be read."""

    def __init__(self, values: Mapping[str, str], where: str, file: str | None):
        self.values = dict(values)
        self.where = where  # "node 3 'conv0' (Convolution)"
        self.file = file
        self.read: set[str] = set()

    def error(self, message: str) -> ForeignFormatError:
        return ForeignFormatError(f"{self.where}: {message}", Location(file=self.file))

    def has(self, key: str) -> bool:
        return key in self.values and self.values[key].strip() != "None"

    def raw(self, key: str, default: Any = REQUIRED) -> Any:
        self.read.add(key)
        if key not in self.values:
            if default is REQUIRED:
                raise self.error(f"attribute '{key}' is missing")
            return default
        return self.values[key]

    def _typed(self, key: str, default: Any, parse: Any, none_ok: bool = True) -> Any:
        text = self.raw(key, REQUIRED if default is REQUIRED else None)
        if text is None or (none_ok and text.strip() == "None"):
            if default is REQUIRED:
                raise self.error(f"attribute '{key}' is missing")
            return default
        try:
            return parse(text)
        except ValueError as error:
            raise self.error(f"attribute '{key}': {error}") from None

    def int(self, key: str, default: Any = REQUIRED) -> Any:
        return self._typed(key, default, parse_int)

    def float(self, key: str, default: Any = REQUIRED) -> Any:
        value = self._typed(key, default, parse_float)
        if isinstance(value, float) and math.isnan(value):
            raise self.error(f"attribute '{key}' is NaN")
        return value

    def bool(self, key: str, default: Any = REQUIRED) -> Any:
        return self._typed(key, default, parse_bool)

    def str(self, key: str, default: Any = REQUIRED) -> Any:
        return self._typed(key, default, lambda text: text.strip())

    def choice(self, key: str, choices: Sequence[str], default: Any = REQUIRED) -> Any:
        value = self.str(key, default)
        if value not in choices and value is not default:
            raise self.error(f"attribute '{key}' must be one of {', '.join(choices)}, found {value!r}")
        return value

    def tuple(self, key: str, default: Any = REQUIRED) -> Any:
        """A tuple of integers, numbers, None or tuples, as written."""
        return self._typed(key, default, parse_tuple)

    def ints(self, key: str, default: Any = REQUIRED, *, length: int | None = None) -> Any:
        """A tuple of integers (a bare integer is a tuple of one); `length` checks its length."""
        value = self.tuple(key, default)
        if value is default:
            return value
        if not all(isinstance(item, int) for item in value):
            raise self.error(f"attribute '{key}' must hold integers, found {self.values[key]!r}")
        if length is not None and len(value) != length:
            raise self.error(f"attribute '{key}' must have {length} items, found {self.values[key]!r}")
        return value

    def unread(self) -> list[str]:
        """Attributes not read that carry meaning (not hidden)."""
        return sorted(key for key in self.values
                      if key not in self.read and not (key.startswith("__") and key.endswith("__")))
