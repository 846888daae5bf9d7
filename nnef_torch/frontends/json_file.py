"""JSON files of the front ends, read as untrusted input: a size limit, nesting checked before parsing, and every
syntax error reported at its line and column."""
from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import Any

from nnef_torch.errors import ForeignFormatError, Location
from nnef_torch.format.lexer import MAX_INTEGER

MAX_BYTES = 1 << 30  # graph descriptions are small; their weights live in other files
MAX_NESTING = 64  # real graph files nest about five levels
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)
_SPACE = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_SCALAR = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?|true|false|null")


def read_json(path: str | os.PathLike, *, max_bytes: int = MAX_BYTES) -> Any:
    """The parsed document in the file at `path`."""
    where = os.fspath(path)
    try:
        with open(where, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > max_bytes:
                raise ForeignFormatError(f"JSON file of {size:,} bytes is larger than the limit of {max_bytes:,}",
                                         Location(file=where))
            data = handle.read()
    except OSError as error:
        raise ForeignFormatError(f"cannot read file: {error.strerror or error}", Location(file=where)) from None
    return parse_json(data, where)


def parse_json(data: bytes | str, file: str | None = None) -> Any:
    """Parse JSON text (UTF-8 bytes, a BOM allowed)."""
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise ForeignFormatError(f"file is not valid UTF-8: byte 0x{data[error.start]:02x} ({error.reason})",
                                     _position(data[:error.start].decode("utf-8", "replace"), error.start, file,
                                               offset=error.start)) from None
    else:
        text = data
    _check_nesting(text, file)
    try:
        return json.loads(text, parse_int=_integer, parse_constant=_constant)
    except json.JSONDecodeError as error:
        raise ForeignFormatError(f"malformed JSON: {error.msg}", Location(file, error.lineno, error.colno)) from None
    except _Refused as error:
        raise ForeignFormatError(str(error), Location(file)) from None


class _Refused(ValueError):
    pass


def _integer(text: str) -> int:
    digits = text.lstrip("-").lstrip("0") or "0"
    if len(digits) > len(str(MAX_INTEGER)) or int(digits) > MAX_INTEGER:
        raise _Refused(f"JSON integer {text[:30]}{'...' if len(text) > 30 else ''} is out of range "
                       f"(at most {MAX_INTEGER} in magnitude)")
    return int(text)


def _constant(text: str) -> Any:
    raise _Refused(f"JSON has no value {text} (NaN and infinities are not JSON)")


def _check_nesting(text: str, file: str | None) -> None:
    depth = 0
    for match in _BRACKETS.finditer(text):
        char = match.group()
        if char in "[{":
            depth += 1
            if depth > MAX_NESTING:
                raise ForeignFormatError(f"JSON nests more than {MAX_NESTING} levels deep",
                                         _position(text, match.start(), file))
        elif char in "]}":
            depth -= 1


def _position(text: str, index: int, file: str | None, offset: int | None = None) -> Location:
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return Location(file, line, column, offset)


def locate(text: str, path: Sequence[str | int]) -> tuple[int, int]:
    """The 1-based line and column where the value at `path` (object keys and array indexes, outermost first)
    starts in `text`, a valid JSON document. Where a key repeats, its last occurrence counts, as in `json.loads`.
    Scans the text without building the values; raises KeyError or IndexError when `path` leads nowhere."""
    index = _skip_space(text, 0)
    for depth, step in enumerate(path):
        if isinstance(step, str):
            index = _member(text, index, step, path[:depth + 1])
        else:
            index = _element(text, index, step, path[:depth + 1])
    return _line_column(text, index)


def _member(text: str, index: int, key: str, where: Sequence[str | int]) -> int:
    """The start of the value of `key` in the object starting at `index`."""
    if text.startswith("{", index):
        found = None
        index = _skip_space(text, index + 1)
        while text[index] != "}":
            name, index = json.loads(_token(text, index, _STRING)), _skip_value(text, index)
            index = _skip_space(text, _skip_space(text, index) + 1)  # past the colon
            if name == key:
                found = index
            index = _skip_space(text, _skip_value(text, index))
            if text[index] == ",":
                index = _skip_space(text, index + 1)
        if found is not None:
            return found
    raise KeyError(f"JSON text has no value at {list(where)}")


def _element(text: str, index: int, position: int, where: Sequence[str | int]) -> int:
    """The start of item `position` of the array starting at `index`."""
    if text.startswith("[", index):
        index = _skip_space(text, index + 1)
        count = 0
        while text[index] != "]":
            if count == position:
                return index
            index = _skip_space(text, _skip_value(text, index))
            if text[index] == ",":
                index = _skip_space(text, index + 1)
            count += 1
    raise IndexError(f"JSON text has no value at {list(where)}")


def _skip_value(text: str, index: int) -> int:
    """The index just past the value starting at `index`; nested values are walked with a depth count."""
    depth = 0
    while True:
        char = text[index]
        if char in "[{":
            depth += 1
            index += 1
        elif char in "]}":
            depth -= 1
            index += 1
        elif char in ", \t\n\r:":
            index += 1
        else:
            index += len(_token(text, index, _STRING if char == '"' else _SCALAR))
        if depth == 0:
            return index


def _token(text: str, index: int, pattern: re.Pattern[str]) -> str:
    match = pattern.match(text, index)
    if match is None:
        raise ValueError(f"not JSON at character {index}")
    return match.group()


def _skip_space(text: str, index: int) -> int:
    match = _SPACE.match(text, index)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _line_column(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1
