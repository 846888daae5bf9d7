"""Attribute strings of NNVM and MXNet nodes, read as dmlc's parameter parser and nnvm's `tuple.h` read them.

Every value is a string: `"64"`, `"1e-05"`, `"True"` / `"False"` / `"1"` / `"0"`, `"None"` for an unset optional,
tuples as `"(1, 1)"`, `"[3, 3]"`, `"(2L, 2L)"` (Python 2 longs), a bare `"1"` (a tuple of one), `"()"` and nested
tuples `"((0, 0), (1, 1))"`. A `Attributes` object reads them by type for one node, remembers which it read, and
names the node in every error. Numbers must be finite (NNEF has no literal for infinities or NaN); a tuple is read in
one pass and refused past MAX_TUPLE_ITEMS items, a shape past MAX_RANK, before anything larger is built.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from nnef_torch.errors import ForeignFormatError, Location
from nnef_torch.format.lexer import MAX_INTEGER
from nnef_torch.ir.limits import check_shape

REQUIRED: Any = object()
_NOTHING: Any = object()
MAX_TUPLE_NESTING = 8
MAX_TUPLE_ITEMS = 1 << 16  # values and tuples in one attribute string (real ones hold a few, a split a few hundred)
MAX_RANK = 32  # items of a shape (MXNet's and the .params reader's rank limit; numpy's too)
_INT = re.compile(r"[+-]?[0-9]+[lL]?")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fF]?|[+-]?(?:inf|nan|infinity)",
                    re.IGNORECASE)
_TOKEN = re.compile(r"\s*([()\[\],]|[^()\[\],\s]+)")
_TRUE, _FALSE = ("true", "1"), ("false", "0")


def parse_int(text: str) -> int:
    text = text.strip()
    if not _INT.fullmatch(text):
        raise ValueError(f"expected an integer, found {text[:40]!r}")
    digits = text.rstrip("lL")
    magnitude = digits.lstrip("+-").lstrip("0") or "0"
    if len(magnitude) > len(str(MAX_INTEGER)) or abs(int(digits)) > MAX_INTEGER:
        raise ValueError(f"integer {text[:30]!r} is out of range")
    return int(digits)


def parse_float(text: str) -> float:
    """A finite number: NNEF has no literal for infinities or NaN, so neither may reach the graph."""
    text = text.strip()
    if not _FLOAT.fullmatch(text):
        raise ValueError(f"expected a number, found {text[:40]!r}")
    value = float(text if text[-1] in "fF" and text[-2].isalpha() else text.rstrip("fF"))  # 'inf': no suffix
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]!r} is not a finite number (NNEF has no literal for infinities or NaN)")
    return value


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"expected True, False, 1 or 0, found {text[:40]!r}")


def parse_tuple(text: str, max_items: int = MAX_TUPLE_ITEMS) -> tuple[Any, ...]:
    """A tuple string: items are integers, numbers, None or tuples; a bare value is a tuple of one. The text is
    read in one pass, and refused as soon as it holds more than `max_items` values and tuples in all."""
    shown = text[:40] + ("..." if len(text) > 40 else "")
    if text.count(",") >= max_items:  # a cheap bound before anything is built
        raise ValueError(f"tuple {shown!r} has more than {max_items:,} items")
    stack: list[tuple[str, list[Any]]] = []  # the open tuples: closing bracket, items so far
    value: Any = _NOTHING
    expect_item, items, position = True, 0, 0
    for match in _TOKEN.finditer(text):
        if match.start() != position:
            break  # characters the tokens skipped: not a tuple
        position = match.end()
        token = match.group(1)
        if token in "([":
            if not expect_item:
                raise ValueError(f"expected ',' or a closing bracket in {shown!r}, found {token!r}")
            if len(stack) >= MAX_TUPLE_NESTING:
                raise ValueError(f"tuple {shown!r} nests more than {MAX_TUPLE_NESTING} levels")
            stack.append((")" if token == "(" else "]", []))
            continue
        if token in ")]":
            if not stack or token != stack[-1][0]:  # '()' and a trailing comma '(7,)' are fine
                raise ValueError(f"unexpected {token!r} in {shown!r}")
            item: Any = tuple(stack.pop()[1])
        elif token == ",":
            if expect_item or not stack:
                raise ValueError(f"unexpected ',' in {shown!r}")
            expect_item = True
            continue
        elif not expect_item:
            raise ValueError(f"expected ',' or a closing bracket in {shown!r}, found {token[:20]!r}")
        else:
            item = None if token == "None" else parse_int(token) if _INT.fullmatch(token) else parse_float(token)
        items += 1
        if items > max_items:
            raise ValueError(f"tuple {shown!r} has more than {max_items:,} items")
        if stack:
            stack[-1][1].append(item)
            expect_item = False
        elif value is _NOTHING:
            value, expect_item = item, False
        else:
            raise ValueError(f"unexpected {token[:20]!r} after the tuple in {shown!r}")
    if text[position:].strip():
        raise ValueError(f"expected a tuple such as (1, 1), found {shown!r}")
    if stack:
        raise ValueError(f"tuple {shown!r} is not closed")
    if value is _NOTHING:
        raise ValueError("expected a tuple, found an empty string")
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

    def _shown(self, key: str) -> str:
        text = self.values[key]
        return repr(text[:60] + "..." if len(text) > 60 else text)

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
        """A finite number."""
        return self._typed(key, default, parse_float)

    def bool(self, key: str, default: Any = REQUIRED) -> Any:
        return self._typed(key, default, parse_bool)

    def str(self, key: str, default: Any = REQUIRED) -> Any:
        return self._typed(key, default, lambda text: text.strip())

    def choice(self, key: str, choices: Sequence[str], default: Any = REQUIRED) -> Any:
        value = self.str(key, default)
        if value not in choices and value is not default:
            raise self.error(f"attribute '{key}' must be one of {', '.join(choices)}, found {value[:40]!r}")
        return value

    def tuple(self, key: str, default: Any = REQUIRED, *, max_items: int = MAX_TUPLE_ITEMS) -> Any:
        """A tuple of integers, numbers, None or tuples, as written (refused past `max_items` items)."""
        return self._typed(key, default, lambda text: parse_tuple(text, max_items))

    def ints(self, key: str, default: Any = REQUIRED, *, length: int | None = None,
             max_items: int = MAX_TUPLE_ITEMS) -> Any:
        """A tuple of integers (a bare integer is a tuple of one); `length` checks its length."""
        value = self.tuple(key, default, max_items=max_items)
        if value is default:
            return value
        if not all(isinstance(item, int) for item in value):
            raise self.error(f"attribute '{key}' must hold integers, found {self._shown(key)}")
        if length is not None and len(value) != length:
            raise self.error(f"attribute '{key}' must have {length} items, found {self._shown(key)}")
        return value

    def numbers(self, key: str, default: Any = REQUIRED) -> Any:
        """A tuple of numbers (integers or not; a bare number is a tuple of one)."""
        value = self.tuple(key, default)
        if value is not default and not all(isinstance(item, (int, float)) for item in value):
            raise self.error(f"attribute '{key}' must hold numbers, found {self._shown(key)}")
        return value

    def optional_ints(self, key: str, default: Any = REQUIRED) -> Any:
        """A tuple of integers or None (slice bounds)."""
        value = self.tuple(key, default)
        if value is not default and not all(item is None or isinstance(item, int) for item in value):
            raise self.error(f"attribute '{key}' must hold integers or None, found {self._shown(key)}")
        return value

    def shape(self, key: str, default: Any = REQUIRED, *, codes: bool = False) -> Any:
        """A shape: at most MAX_RANK extents (refused while the text is read when it is longer), each from 0 to
        2^63 - 1 with a volume that fits too (`limits.check_shape`). `codes`: Reshape's codes instead, up to
        3 * MAX_RANK integers of any sign (a -4 adds two values per axis), checked by the rule."""
        value = self.ints(key, default, max_items=3 * MAX_RANK if codes else MAX_RANK)
        if value is default or codes:
            return value
        return check_shape(f"{self.where}: attribute '{key}': shape", value, Location(file=self.file),
                           error=ForeignFormatError)

    def unread(self) -> list[str]:
        """Attributes not read that carry meaning (not hidden)."""
        return sorted(key for key in self.values
                      if key not in self.read and not (key.startswith("__") and key.endswith("__")))
