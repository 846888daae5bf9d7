"""LightNet's text weight files (`.wts`, the TensorRT weight format that `tools/genwts.pl` writes and
`ln_tensor_table_load_trt_weight_file` reads): pure functions over text.

The file is a line holding the count of arrays, then one line per array: its name (no white space), its type (0:
float32, 2: int8; 1, half, is named by the format but LightNet refuses it), its item count, and that many
hexadecimal words, each the machine bit pattern of one item (`3f800000` is 1.0; an int8 is one byte, `ff` is -1).

API, kept stable for the reader and the writer:

- `read_wts(data, file=None) -> dict[str, np.ndarray]`: `data` is the file's text or bytes; the arrays, one-dimensional,
  float32 (type 0) or int8 (type 2), by name in file order. Raises `ForeignFormatError` located at the line and
  column of the problem (`file` names it in messages): a count or record that is not a number, a truncated file
  (fewer records than the count, fewer words than a record's length), a record with more words than its length, more
  records than the count, a name given twice, an unknown or unsupported type, a word that is no hexadecimal
  number of the type's width.
- `write_wts(arrays) -> str`: the text of a file holding `arrays` (a mapping of name to array-like, in its order),
  as `genwts.pl` writes it: lower-case words of 8 hex digits (float32) or 2 (int8), each record line ending in a
  newline. float32 and int8 arrays are written as they are, bit for bit (NaN payloads and negative zeros included);
  other floating arrays are converted to float32 (rounding float64), others raise `ValueError`: LightNet's
  weights hold only these two types. Shapes are flattened in C order.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from nnef_torch.errors import ForeignFormatError, Location

TYPES = {0: np.dtype("<u4"), 2: np.dtype("u1")}  # type code -> the bit pattern each word holds
_VIEWS = {0: np.dtype("<f4"), 2: np.dtype("i1")}
_DIGITS = {0: 8, 2: 2}
_NAMES = {0: "float32", 1: "half", 2: "int8"}
_WORD = re.compile(r"\S+")
_HEAD = re.compile(r"\s*(\S+)\s+(\S+)\s+(\S+) ")  # name, type and length, then one space
MAX_ITEMS = 1 << 31  # LightNet reads lengths as C ints


def read_wts(data: str | bytes, file: str | None = None) -> dict[str, np.ndarray]:
    """The arrays of a `.wts` file's text (see the module docstring)."""
    text = _text(data, file)
    lines = text.split("\n")
    records = [(number, line) for number, line in enumerate(lines, 1) if line.strip()]
    if not records:
        raise ForeignFormatError("empty weight file: expected a count of arrays on the first line",
                                 Location(file, 1, 1))
    number, line = records[0]
    words = _words(line)
    count = _integer(words[0], "the count of arrays", file, number)
    if len(words) > 1:
        raise ForeignFormatError(f"expected only the count of arrays on this line, found {words[1][1]!r} after it",
                                 Location(file, number, words[1][0]))
    if count < 0:
        raise ForeignFormatError(f"negative count of arrays {count}", Location(file, number, words[0][0]))
    arrays: dict[str, np.ndarray] = {}
    first_line: dict[str, int] = {}
    body = records[1:]
    for index, (number, line) in enumerate(body):
        if index >= count:
            raise ForeignFormatError(f"the file holds more arrays than its count ({count}) says",
                                     Location(file, number, 1))
        name, array = _record(line, number, file)
        if name in arrays:
            raise ForeignFormatError(f"array '{name}' is given twice (first on line {first_line[name]})",
                                     Location(file, number, 1))
        arrays[name] = array
        first_line[name] = number
    if len(body) < count:
        raise ForeignFormatError(f"truncated weight file: its count says {count} arrays, it holds {len(body)}",
                                 Location(file, len(lines), 1))
    return arrays


def write_wts(arrays: Mapping[str, Any]) -> str:
    """The text of a `.wts` file holding `arrays` (see the module docstring)."""
    lines = [f"{len(arrays)}\n"]
    for name, value in arrays.items():
        if not isinstance(name, str) or not name or any(char.isspace() for char in name):
            raise ValueError(f"weight name {name!r} must be a non-empty string without white space")
        array = np.asarray(value)
        if array.dtype == np.int8:
            kind, bits = 2, array.reshape(-1).view(np.uint8)
        elif array.dtype.kind == "f":
            kind, bits = 0, np.ascontiguousarray(array, dtype="<f4").reshape(-1).view("<u4")
        else:
            raise ValueError(f"weight '{name}' is {array.dtype}: a .wts file holds float32 or int8 arrays")
        lines.append(f"{name} {kind} {bits.size} {_hex_words(bits, _DIGITS[kind])}\n")
    return "".join(lines)


def _hex_words(bits: np.ndarray, digits: int) -> str:
    """The items of an unsigned array as zero-padded lower-case hex words separated by spaces (vectorized: a model's
    millions of weights take a moment, not seconds)."""
    if bits.size == 0:
        return ""
    text = np.frombuffer(bits.astype(bits.dtype.newbyteorder(">")).tobytes().hex().encode("ascii"), np.uint8)
    words = np.full((bits.size, digits + 1), ord(" "), np.uint8)
    words[:, :digits] = text.reshape(bits.size, digits)
    return words.tobytes()[:-1].decode("ascii")


def _text(data: str | bytes, file: str | None) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("ascii")
    except UnicodeDecodeError as error:
        before = data[:error.start]
        line = before.count(b"\n") + 1
        column = error.start - (before.rfind(b"\n") + 1) + 1
        raise ForeignFormatError(f"weight file is not ASCII text: byte 0x{data[error.start]:02x}",
                                 Location(file, line, column, error.start)) from None


def _words(line: str) -> list[tuple[int, str]]:
    return [(match.start() + 1, match.group()) for match in _WORD.finditer(line)]


def _integer(word: tuple[int, str], what: str, file: str | None, line: int) -> int:
    column, text = word
    if not re.fullmatch(r"[-+]?\d{1,12}", text):
        raise ForeignFormatError(f"expected {what} (a decimal integer), found {text[:40]!r}",
                                 Location(file, line, column))
    return int(text)


def _canonical_words(rest: str, length: int, digits: int) -> np.ndarray | None:
    """The items of a record written as genwts.pl writes them (`rest`: words of exactly `digits` hex digits, one
    space apart), decoded in one go; None for any other layout, which the word-by-word reading checks and locates."""
    rest = rest.rstrip()
    if length == 0 or len(rest) != length * (digits + 1) - 1:
        return None
    chars = np.frombuffer(rest.encode("ascii"), np.uint8)
    if not (np.all(chars[digits::digits + 1] == ord(" ")) and np.count_nonzero(chars == ord(" ")) == length - 1):
        return None
    try:
        return np.frombuffer(bytes.fromhex(rest), np.dtype(f">u{digits // 2}"))
    except ValueError:
        return None


def _record(line: str, number: int, file: str | None) -> tuple[str, np.ndarray]:
    head = _HEAD.match(line)
    words = [(head.start(i) + 1, head.group(i)) for i in (1, 2, 3)] if head else _words(line)
    if len(words) < 3:
        raise ForeignFormatError("truncated record: expected a name, a type and a length", Location(file, number,
                                                                                                   len(line) + 1))
    name = words[0][1]
    kind = _integer(words[1], f"the type of array '{name}'", file, number)
    length = _integer(words[2], f"the length of array '{name}'", file, number)
    if kind not in TYPES:
        why = "LightNet does not read half-precision weights" if kind == 1 else "types are 0 (float32) and 2 (int8)"
        raise ForeignFormatError(f"array '{name}' has unsupported type {kind} ({why})",
                                 Location(file, number, words[1][0]))
    if not 0 <= length < MAX_ITEMS:
        raise ForeignFormatError(f"array '{name}' has length {length}", Location(file, number, words[2][0]))
    fast = _canonical_words(line[head.end():], length, _DIGITS[kind]) if head else None
    if fast is not None:
        return name, fast.astype(TYPES[kind]).view(_VIEWS[kind])
    words = _words(line)
    items = words[3:]
    if len(items) != length:
        where = items[length][0] if len(items) > length else len(line) + 1
        raise ForeignFormatError(f"array '{name}' says it holds {length} items, its line has {len(items)}",
                                 Location(file, number, where))
    digits = _DIGITS[kind]
    pattern = re.compile(rf"(?:0[xX])?[0-9a-fA-F]{{1,{digits}}}")
    values = np.empty(length, dtype=TYPES[kind])
    for index, (column, word) in enumerate(items):
        if not pattern.fullmatch(word):
            raise ForeignFormatError(f"item {index} of array '{name}' is {word[:40]!r}, not a {_NAMES[kind]} bit "
                                     f"pattern of at most {digits} hexadecimal digits", Location(file, number, column))
        values[index] = int(word, 16)
    return name, values.view(_VIEWS[kind])


__all__ = ["read_wts", "write_wts"]
