"""JSON files of the front ends, read as untrusted input. Before any value is built, one linear pass over the bytes
(`json_scan.skeleton`) checks the nesting, the numbers (integers within 64 bits, no number that reads as an
infinity, no NaN) and what the values will take in memory; the values are then built by `json.loads`. Every problem
is a ForeignFormatError at its line and column; nothing is quoted from the file beyond a short token."""
from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from typing import IO, Any

from nnef_torch.errors import ForeignFormatError, Location, NNEFContainerError, NNEFError
from nnef_torch.format.container.reading import open_regular as _open_regular
from nnef_torch.format.lexer import MAX_INTEGER
from nnef_torch.formats import json_scan
from nnef_torch.gc_pause import paused

MAX_BYTES = 64 << 20  # graph descriptions are small; their weights live in other files
MAX_NESTING = 64  # real graph files nest about five levels
MAX_NUMBER_CHARS = 400  # writers use at most 25 or so
# The values a document builds may take at most MEMORY_RATIO times its size in memory (past MEMORY_FLOOR), and never
# more than MAX_MEMORY: the bytes, their text and the values together.
MEMORY_RATIO = 20
MEMORY_FLOOR = 8 << 20
MAX_MEMORY = 400 << 20
SHOWN_CHARS = 24  # a refused token is quoted up to this many characters


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
# an escaped high surrogate not followed by an escaped low one, an escaped low one not after a high one
_LONE_HIGH = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})")
_LONE_LOW = re.compile(rb"\\u(?<!\\u[dD][89abAB][0-9a-fA-F]{2}\\u)[dD][c-fC-F][0-9a-fA-F]{2}")
_NUMBER = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_PROBLEMS = {"long": f"JSON number {{}} is longer than {MAX_NUMBER_CHARS} characters",
             "integer": f"JSON integer {{}} is out of range (at most {MAX_INTEGER} in magnitude)",
             "infinity": "JSON number {} is out of range (it reads as an infinity, which JSON has not)",
             "constant": "JSON has no value {} (NaN and infinities are not JSON)"}


def open_regular(path: str | os.PathLike, what: str = "file", error: type[NNEFError] = ForeignFormatError,
                 max_bytes: int | None = None) -> IO[bytes]:
    """`path` opened for binary reading once it is known to be a regular file (`reading.open_regular`: a FIFO, a
    device or a folder is refused before it is opened, so nothing blocks) of at most `max_bytes`. Every problem is
    an `error` (ForeignFormatError for the front ends' files) located at the file; `what` names it in messages."""
    where = os.fspath(path)
    try:
        handle = _open_regular(where, where, what)
    except FileNotFoundError:
        raise error(f"cannot read {what}: no such file", Location(file=where)) from None
    except NNEFContainerError as failure:
        raise error(failure.message, failure.location) from None
    try:
        size = os.fstat(handle.fileno()).st_size
    except OSError as failure:
        handle.close()
        raise error(f"cannot read {what}: {failure.strerror or failure}", Location(file=where)) from None
    if max_bytes is not None and size > max_bytes:
        handle.close()
        raise error(f"{what} of {size:,} bytes is larger than the limit of {max_bytes:,}", Location(file=where))
    return handle


def read_bytes(path: str | os.PathLike, *, max_bytes: int = MAX_BYTES) -> bytes:
    """The bytes of the JSON file at `path`, refused past `max_bytes` before they are read."""
    where = os.fspath(path)
    with open_regular(where, "JSON file", max_bytes=max_bytes) as handle:
        try:
            data = handle.read(max_bytes + 1)
        except OSError as error:
            raise ForeignFormatError(f"cannot read JSON file: {error.strerror or error}",
                                     Location(file=where)) from None
    if len(data) > max_bytes:  # it grew since it was opened
        raise ForeignFormatError(f"JSON file is larger than the limit of {max_bytes:,} bytes", Location(file=where))
    return data


def read_json(path: str | os.PathLike, *, max_bytes: int = MAX_BYTES) -> Any:
    """The parsed document in the file at `path`."""
    where = os.fspath(path)
    return parse_json(read_bytes(where, max_bytes=max_bytes), where, max_bytes=max_bytes)


def parse_json(data: bytes | str, file: str | None = None, *, max_bytes: int = MAX_BYTES) -> Any:
    """Parse JSON text (UTF-8 bytes, a BOM allowed)."""
    raw = _encoded(data, file) if isinstance(data, str) else bytes(data)
    if len(raw) > max_bytes:
        raise ForeignFormatError(f"JSON text of {len(raw):,} bytes is larger than the limit of {max_bytes:,}",
                                 Location(file))
    _check(raw, file)
    if isinstance(data, str):
        text = data
    else:
        start = 3 if raw.startswith(json_scan.BOM) else 0
        try:
            text = str(memoryview(raw)[start:], "utf-8")
        except UnicodeDecodeError as error:
            at = start + error.start
            raise ForeignFormatError(f"file is not valid UTF-8: byte 0x{raw[at]:02x} ({error.reason})",
                                     _location(raw, at, file, offset=at)) from None
    del raw
    try:
        with paused():
            return json.loads(text, parse_constant=_constant)
    except json.JSONDecodeError as error:
        raise ForeignFormatError(f"malformed JSON: {error.msg}", Location(file, error.lineno, error.colno)) from None
    except RecursionError:
        raise ForeignFormatError(f"JSON nests more than {MAX_NESTING} levels deep", Location(file)) from None
    except ValueError as error:  # a constant refused by _constant (the scan finds those first)
        raise ForeignFormatError(str(error), Location(file)) from None


def _encoded(text: str, file: str | None) -> bytes:
    """The UTF-8 bytes of `text`; a str with an unpaired surrogate is no Unicode text, refused where it is."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        line = text.count("\n", 0, error.start) + 1
        column = error.start - (text.rfind("\n", 0, error.start) + 1) + 1
        raise ForeignFormatError(f"JSON text holds the unpaired surrogate U+{ord(text[error.start]):04X} (it is not "
                                 "Unicode text)", Location(file, line, column)) from None


def _check(raw: bytes, file: str | None) -> None:
    """Refuse, at its place, what json.loads should not be given: nesting past MAX_NESTING, numbers out of range or
    too long, NaN and infinities, unpaired surrogates; and a document whose values would take too much memory."""
    scan = json_scan.skeleton(raw, MAX_NESTING)
    if scan.too_deep is not None:
        raise ForeignFormatError(f"JSON nests more than {MAX_NESTING} levels deep",
                                 _location(raw, scan.too_deep, file))
    need, allowed = memory(scan), min(MAX_MEMORY, max(MEMORY_FLOOR, MEMORY_RATIO * len(raw)))
    if need > allowed:
        raise ForeignFormatError(f"JSON document of {len(raw):,} bytes would take about {need >> 20:,} MB in memory "
                                 f"as Python values, more than the limit of {allowed >> 20:,} MB", Location(file))
    problem = json_scan.number_problem(scan, MAX_NUMBER_CHARS, MAX_INTEGER)
    if problem is not None and problem.kind == "infinity" and not _NUMBER.fullmatch(problem.token):
        problem = None  # a malformed number: json.loads refuses the text, and says where
    if problem is not None:
        raise ForeignFormatError(_PROBLEMS[problem.kind].format(_token(problem.token)),
                                 _location(raw, problem.offset, file))
    if _SURROGATE_ESCAPE.search(raw) is not None:
        paired = raw.replace(b"\\\\", b"__")  # each backslash left starts an escape
        found = [match for match in (_LONE_HIGH.search(paired), _LONE_LOW.search(paired)) if match is not None]
        if found:
            first = min(found, key=lambda match: match.start())
            raise ForeignFormatError(f"JSON string holds the unpaired surrogate {first.group().decode()} (it is not "
                                     "Unicode text)", _location(raw, first.start(), file))


def memory(scan: json_scan.Skeleton) -> int:
    """About the most memory parsing the scanned text takes, in bytes: the bytes, their text (a str) and the values
    json.loads builds (objects, arrays, numbers and strings as CPython lays them out; object keys are shared)."""
    counts, text_bytes = scan.counts, scan.text_bytes
    size = int(text_bytes.sum())
    objects, arrays = int(counts[ord("{")]), int(counts[ord("[")])
    commas, colons = int(counts[ord(",")]), int(counts[ord(":")])
    strings = int(counts[ord('"')]) // 2
    digits = int(counts[ord("0"):ord("9") + 1].sum())
    continuation = int(text_bytes[0x80:0xC0].sum())
    width = 4 if text_bytes[0xF0:].any() else 2 if text_bytes[0xC4:0xF0].any() else 1
    text = 80 + (size - continuation) * width
    slots = commas + arrays + 1  # at most: each value follows '[' or ',' or is the document (',' in objects too)
    literals = int(counts[ord("t")] + counts[ord("f")] + counts[ord("n")])  # true, false, null (4 or 5 letters)
    numbers = max(0, slots + colons - max(0, strings - colons) - objects - arrays - literals // 4)
    values = (objects * 176 + arrays * 72 + colons * 48 + slots * 10 + max(0, strings - colons) * 48
              + int(counts[json_scan.FILL]) * (1 if width == 1 else 4) + min(numbers * 32, digits * 16))
    return size + text + values


def _token(found: bytes) -> str:
    text = found.decode("utf-8", "replace")
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS - 3] + "..."


def _constant(text: str) -> Any:
    raise ValueError(f"JSON has no value {text} (NaN and infinities are not JSON)")


def _location(raw: bytes, index: int, file: str | None, offset: int | None = None) -> Location:
    line, column = json_scan.line_column(raw, index)
    return Location(file, line, column, offset)


def locate(text: str | bytes, path: Sequence[str | int]) -> tuple[int, int]:
    """The 1-based line and column where the value at `path` (object keys and array indexes, outermost first)
    starts in `text`, a valid JSON document (a str, or its UTF-8 bytes). Where a key repeats, its last occurrence
    counts, as in `json.loads`. Scans the text without building the values, in time linear in its length; raises
    KeyError or IndexError when `path` leads nowhere, ValueError where the text is not laid out as JSON."""
    data = _utf8(text)
    scan = json_scan.skeleton(data)
    return json_scan.line_column(data, json_scan.value_at(scan, data, path))


def item_positions(text: str | bytes, path: Sequence[str | int]) -> list[tuple[int, int]]:
    """The line and column where each item of the array at `path` starts (as `locate` finds them), in one pass."""
    data = _utf8(text)
    scan = json_scan.skeleton(data)
    return json_scan.line_columns(data, json_scan.elements(scan, json_scan.value_at(scan, data, path)))


def _utf8(text: str | bytes) -> bytes:
    if isinstance(text, str):
        return text.encode("utf-8", "surrogatepass")
    return bytes(text)
