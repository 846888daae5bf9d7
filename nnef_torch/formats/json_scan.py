"""The structure of JSON text, found at C speed (numpy and regular expressions over its UTF-8 bytes) before or without
building its values: where strings are, how deep brackets nest, where the items of an array or the members of an
object begin, and the line and column of a byte offset. Every function here is linear in the length of the text
and allocates a fixed number of bytes per byte of it (the skeleton) plus fixed-size chunks.

The skeleton is the text with the contents of every string blanked (its quotes kept): what is left is brackets,
commas, colons, numbers, literals and whitespace, so a bracket or comma in the skeleton is one of the document's.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

BOM = b"\xef\xbb\xbf"
CHUNK = 1 << 20  # bytes handled by one step of numpy work; its temporaries are a few times this
FILL = ord("_")  # what the contents of strings become in the skeleton
_QUOTE, _COMMA, _COLON = ord('"'), ord(","), ord(":")
_OPENS, _CLOSES = b"[{", b"]}"
_SPACE = re.compile(rb"[ \t\n\r]*")
_BRACKET_CODES = np.zeros(256, np.int8)  # +1 for an opening bracket, -1 for a closing one
_BRACKET_CODES[list(_OPENS)] = 1
_BRACKET_CODES[list(_CLOSES)] = -1


@dataclass
class Skeleton:
    """The skeleton of a text (`buffer`, as long as the text in bytes), with what one pass over it counted."""

    buffer: bytearray
    start: int  # 3 after a byte order mark, else 0
    too_deep: int | None  # the offset of the first bracket that opens one level more than max_depth, if any
    counts: np.ndarray  # occurrences of each byte value in the skeleton
    text_bytes: np.ndarray  # occurrences of each byte value in the text (strings included)

    @property
    def array(self) -> np.ndarray:
        return np.frombuffer(self.buffer, np.uint8)


def skeleton(data: bytes, max_depth: int | None = None) -> Skeleton:
    """The skeleton of UTF-8 JSON text `data`. Backslash escapes are resolved as JSON reads them (a run of
    backslashes pairs up from its left), so an escaped quote never ends a string, even across a chunk border."""
    n = len(data)
    start = 3 if data.startswith(BOM) else 0
    buffer = bytearray(n)
    out = np.frombuffer(buffer, np.uint8)
    counts = np.zeros(256, np.int64)
    text_bytes = np.zeros(256, np.int64)
    quoted = 0  # 1 inside a string at the chunk border
    pending = False  # the chunk before ended in a backslash that escapes this chunk's first byte
    depth, too_deep = 0, None
    view = memoryview(data)
    for offset in range(0, n, CHUNK):
        raw = bytes(view[offset:offset + CHUNK])
        if raw.isascii():
            text_bytes[0] += len(raw)  # only the non-ASCII bytes matter; the total is the length
        else:
            text_bytes += np.bincount(np.frombuffer(raw, np.uint8), minlength=256)
        if pending:
            raw = b"_" + raw[1:]
        clean = raw.replace(b"\\\\", b"__").replace(b'\\"', b"__")
        pending = clean.endswith(b"\\")
        chunk = np.frombuffer(clean, np.uint8)
        quote = chunk == _QUOTE
        parity = np.bitwise_xor.accumulate(quote.view(np.uint8))
        if quoted:
            np.bitwise_xor(parity, 1, out=parity)
        quoted = int(parity[-1])
        target = out[offset:offset + len(chunk)]
        np.copyto(target, chunk)
        np.copyto(target, FILL, where=parity.view(bool) & ~quote)
        if offset == 0 and start:
            target[:start] = ord(" ")
        found = np.bincount(target, minlength=256)
        counts += found
        if max_depth is not None and too_deep is None and depth + int(found[ord("[")] + found[ord("{")]) > max_depth:
            levels = np.cumsum(_BRACKET_CODES[target], dtype=np.int32)
            levels += depth
            if int(levels.max()) > max_depth:
                too_deep = offset + int(np.argmax(levels > max_depth))
        depth += int(found[ord("[")] + found[ord("{")]) - int(found[ord("]")] + found[ord("}")])
    return Skeleton(buffer, start, too_deep, counts, text_bytes)


# number checks: bytes.translate maps a chunk of the skeleton to a few classes, so that bytes.find spots, at C
# speed, the chunks that hold a number worth a closer look (most hold none)
_NUMBER_CHARS = b"-+.0123456789eE"
_DIGITS = bytes(ord("0") if c in b"0123456789" else ord(" ") for c in range(256))
_EXPONENTS = bytes((c if c in b"+-" else ord("e") if c in b"eE" else ord("0") if c in b"0123456789" else ord(" "))
                   for c in range(256))
_NUMBERS = bytes(ord("0") if c in _NUMBER_CHARS else ord(" ") for c in range(256))
_CONTINUED = re.compile(rb"[-+.0-9A-Za-z]{0,512}")  # a chunk of the number pass ends past a number or a word


@dataclass(frozen=True)
class Problem:
    offset: int
    kind: str  # 'long', 'integer', 'infinity', 'constant'
    token: bytes


def number_problem(skeleton: Skeleton, max_chars: int, max_integer: int) -> Problem | None:
    """The first number (outside strings) that json.loads should not be given: one of more than `max_chars`
    characters, an integer beyond `max_integer` in magnitude, one that reads as an infinity, NaN or Infinity."""
    buffer = skeleton.buffer
    begin = 0
    while begin < len(buffer):
        continued = _CONTINUED.match(buffer, min(len(buffer), begin + CHUNK))
        assert continued is not None  # the pattern matches the empty string
        end = continued.end()
        found = _chunk_problem(bytes(buffer[begin:end]), begin, max_chars, max_integer)
        if found is not None:
            return found
        begin = end
    return None


def _chunk_problem(chunk: bytes, offset: int, max_chars: int, max_integer: int) -> Problem | None:
    problems = []
    for word in (b"NaN", b"Infinity"):
        at = chunk.find(word)
        if at >= 0:
            negative = word == b"Infinity" and at > 0 and chunk[at - 1] == ord("-")
            problems.append(Problem(offset + at - negative, "constant", b"-" * negative + word))
    at = chunk.translate(_NUMBERS).find(b"0" * (max_chars + 1))
    if at >= 0:
        problems.append(Problem(offset + at, "long", chunk[at:at + 40]))
    digits = chunk.translate(_DIGITS)
    exponents = chunk.translate(_EXPONENTS)
    if (digits.find(b"0" * len(str(max_integer))) >= 0 or exponents.find(b"e000") >= 0
            or exponents.find(b"e+000") >= 0):
        found = _numbers(np.frombuffer(chunk, np.uint8), offset, max_integer)
        if found is not None:
            problems.append(found)
    return min(problems, key=lambda problem: problem.offset) if problems else None


_IS_DIGIT = np.zeros(256, bool)
_IS_DIGIT[list(b"0123456789")] = True
_IS_NUMBER = np.zeros(256, bool)
_IS_NUMBER[list(_NUMBER_CHARS)] = True
_IS_E = np.zeros(256, bool)
_IS_E[list(b"eE")] = True
_IS_SIGN = np.zeros(256, bool)
_IS_SIGN[list(b"+-")] = True
_LARGEST = 308  # the decimal exponent of the largest float: from 1e309 on, every number reads as an infinity
_EXPONENT_DIGITS = 6  # exponents written with more digits are read by float() (they may have leading zeros)


def _float(text: bytes) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0


def _runs(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The starts and ends of the runs of True in `mask`."""
    edges = np.diff(mask.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    return np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)


def _numbers(chunk: np.ndarray, offset: int, max_integer: int) -> Problem | None:
    """The first integer out of range or number that reads as an infinity in `chunk` (a skeleton chunk that starts
    and ends outside numbers), found with vector operations over its runs of digits."""
    starts, ends = _runs(_IS_DIGIT[chunk])
    lengths = ends - starts
    padded = np.concatenate([np.frombuffer(b"  ", np.uint8), chunk, np.frombuffer(b" ", np.uint8)])
    before, second, after = padded[starts + 1], padded[starts], padded[ends + 2]
    exponent = _IS_E[before] | (_IS_SIGN[before] & _IS_E[second])
    integer = ~exponent & (before != ord(".")) & ~(_IS_E[after] | (after == ord(".")))
    problems = []
    bound = str(max_integer).encode()
    wide = np.flatnonzero(integer & (lengths > len(bound)))
    first = int(starts[wide[0]]) if len(wide) else None
    equal = np.flatnonzero(integer & (lengths == len(bound)))
    if len(equal):
        windows = chunk[starts[equal][:, None] + np.arange(len(bound))]
        limit = np.frombuffer(bound, np.uint8)
        differs = windows != limit
        column = np.argmax(differs, axis=1)
        greater = differs.any(axis=1) & (windows[np.arange(len(equal)), column] > limit[column])
        if greater.any():
            at = int(starts[equal[np.argmax(greater)]])
            first = at if first is None else min(first, at)
    if first is not None:
        first -= first > 0 and chunk[first - 1] == ord("-")
        window = _IS_NUMBER[chunk[first:first + 64]]
        length = len(window) if window.all() else int(np.argmin(window))
        problems.append(Problem(offset + first, "integer", bytes(chunk[first:first + length])))
    infinite = _infinity(chunk, starts, lengths, exponent, integer, before)
    if infinite is not None:
        problems.append(Problem(offset + infinite[0], "infinity", infinite[1]))
    return min(problems, key=lambda problem: problem.offset) if problems else None


def _infinity(chunk: np.ndarray, starts: np.ndarray, lengths: np.ndarray, exponent: np.ndarray,
              integer: np.ndarray, before: np.ndarray) -> tuple[int, bytes] | None:
    """The offset and text of the first float in `chunk` that reads as an infinity. A number's decimal exponent
    (that of its first digit) tells most apart without reading it: below 308 it is finite, above it infinite; float()
    reads only those at 308 (and those whose integer part is 0 or whose exponent has many digits)."""
    token_starts, token_ends = _runs(_IS_NUMBER[chunk])
    # the integer part of each number: the run of digits its token starts with (after a minus sign)
    heads = np.flatnonzero(~exponent & (before != ord(".")))
    head_token = np.searchsorted(token_starts, starts[heads], side="right") - 1
    magnitude = lengths[heads].astype(np.int64) - 1
    zero = (lengths[heads] == 1) & (chunk[starts[heads]] == ord("0"))
    # add the exponents to the numbers that have one
    exponents = np.flatnonzero(exponent)
    value = np.zeros(len(exponents), np.int64)
    digits = np.minimum(lengths[exponents], _EXPONENT_DIGITS)
    padded = np.concatenate([chunk, np.zeros(_EXPONENT_DIGITS, np.uint8)])
    for place in range(_EXPONENT_DIGITS):
        inside = place < digits
        value = np.where(inside, value * 10 + padded[starts[exponents] + place].astype(np.int64) - ord("0"), value)
    value = np.where(before[exponents] == ord("-"), -value, value)
    unknown = lengths[exponents] > _EXPONENT_DIGITS
    exponent_token = np.searchsorted(token_starts, starts[exponents], side="right") - 1
    slot = np.minimum(np.searchsorted(head_token, exponent_token), max(len(heads) - 1, 0))
    matched = head_token[slot] == exponent_token if len(heads) else np.zeros(len(exponents), bool)
    extra = np.zeros(len(heads), np.int64)
    extra[slot[matched]] = value[matched]
    vague = np.zeros(len(heads), bool)
    vague[slot[matched]] = unknown[matched]
    magnitude += extra
    certain = ~zero & ~vague & ~integer[heads] & (magnitude > _LARGEST)
    doubtful = ~integer[heads] & (vague | (zero & (magnitude >= _LARGEST + 1)) | (~zero & (magnitude == _LARGEST)))
    found: tuple[int, bytes] | None = None
    if certain.any():
        token = int(head_token[np.argmax(certain)])
        found = (int(token_starts[token]), bytes(chunk[token_starts[token]:token_ends[token]]))
    if doubtful.any():  # numbers near the largest float: read them
        tokens = head_token[doubtful]
        tokens = tokens[np.concatenate([[True], tokens[1:] != tokens[:-1]])]  # one each (a malformed one has two)
        marks = np.zeros(len(chunk) + 1, np.int8)
        marks[token_starts[tokens]] = 1
        marks[token_ends[tokens]] = -1
        kept = np.where(np.cumsum(marks[:-1]) > 0, chunk, np.uint8(ord(" "))).astype(np.uint8).tobytes().split()
        values = np.array([_float(text) for text in kept]) if len(kept) < 64 else \
            np.fromiter(map(_float, kept), float, len(kept))
        infinite = np.flatnonzero(np.isinf(values))
        if len(infinite):
            token = int(tokens[infinite[0]])
            if found is None or token_starts[token] < found[0]:
                found = (int(token_starts[token]), kept[infinite[0]])
    return found


def skip_space(skeleton: Skeleton, index: int) -> int:
    match = _SPACE.match(skeleton.buffer, index)
    assert match is not None  # the pattern matches the empty string
    return match.end()


def _level(skeleton: Skeleton, index: int, separator: int) -> Iterator[np.ndarray | int]:
    """The offsets of `separator` (comma or colon) at the top level of the container opening at `index`, chunk by
    chunk (arrays); last, the offset of the bracket that closes it (an int). ValueError where it never closes."""
    array = skeleton.array
    depth = 0
    for offset in range(index, len(array), CHUNK):
        chunk = array[offset:offset + CHUNK]
        levels = np.cumsum(_BRACKET_CODES[chunk], dtype=np.int32)
        levels += depth
        closed = np.flatnonzero(levels <= 0)
        stop = int(closed[0]) if len(closed) else len(chunk)
        yield offset + np.flatnonzero((chunk[:stop] == separator) & (levels[:stop] == 1))
        if len(closed):
            yield offset + stop
            return
        depth = int(levels[-1])
    raise ValueError(f"the container at byte {index} is not closed")


def element(skeleton: Skeleton, index: int, position: int) -> int:
    """The offset where item `position` of the array opening at `index` begins; IndexError where there is none."""
    buffer = skeleton.buffer
    if not (0 <= index < len(buffer) and buffer[index] == ord("[")) or position < 0:
        raise IndexError(f"no array item {position} at byte {index}")
    first = skip_space(skeleton, index + 1)
    if position == 0:
        if first < len(buffer) and buffer[first] != ord("]"):
            return first
        raise IndexError(f"no array item {position} at byte {index}")
    seen = 0
    for found in _level(skeleton, index, _COMMA):
        if isinstance(found, int):
            break
        if seen + len(found) >= position:
            return skip_space(skeleton, int(found[position - 1 - seen]) + 1)
        seen += len(found)
    raise IndexError(f"no array item {position} at byte {index}")


def elements(skeleton: Skeleton, index: int) -> list[int]:
    """The offsets where the items of the array opening at `index` begin."""
    buffer = skeleton.buffer
    if not (0 <= index < len(buffer) and buffer[index] == ord("[")):
        raise IndexError(f"no array at byte {index}")
    first = skip_space(skeleton, index + 1)
    if first >= len(buffer) or buffer[first] == ord("]"):
        return []
    starts = [first]
    for found in _level(skeleton, index, _COMMA):
        if not isinstance(found, int):
            starts.extend(skip_space(skeleton, int(comma) + 1) for comma in found)
    return starts


def member(skeleton: Skeleton, data: bytes, index: int, key: str) -> int:
    """The offset where the value of `key` in the object opening at `index` begins; where the key repeats, the
    last one (the one json.loads keeps). KeyError where there is none."""
    buffer = skeleton.buffer
    if not (0 <= index < len(buffer) and buffer[index] == ord("{")):
        raise KeyError(f"no object at byte {index}")
    plain = json.dumps(key, ensure_ascii=False).encode("utf-8", "surrogatepass")
    found = None
    for colons in _level(skeleton, index, _COLON):
        if isinstance(colons, int):
            break
        for colon in colons.tolist():
            close = buffer.rfind(b'"', index, colon)
            begin = buffer.rfind(b'"', index, close)
            if begin < 0:
                continue
            raw = data[begin:close + 1]
            if raw == plain or (b"\\" in raw and _decoded(raw) == key):
                found = colon
    if found is None:
        raise KeyError(f"no member {key!r} at byte {index}")
    return skip_space(skeleton, found + 1)


def _decoded(raw: bytes) -> str | None:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def value_at(skeleton: Skeleton, data: bytes, path: Sequence[str | int]) -> int:
    """The offset where the value at `path` (object keys and array indexes, outermost first) begins."""
    index = skip_space(skeleton, skeleton.start)
    for step in path:
        if isinstance(step, str):
            index = member(skeleton, data, index, step)
        else:
            index = element(skeleton, index, step)
    return index


def chars(data: bytes, begin: int, end: int) -> int:
    """The characters in data[begin:end] (UTF-8 continuation bytes do not count)."""
    count = end - begin
    array = np.frombuffer(data, np.uint8)
    for offset in range(begin, end, CHUNK):
        chunk = array[offset:min(end, offset + CHUNK)]
        count -= int(np.count_nonzero((chunk & 0xC0) == 0x80))
    return count


def line_column(data: bytes, offset: int) -> tuple[int, int]:
    """The 1-based line and column (in characters; a byte order mark does not count) of byte `offset`."""
    return line_columns(data, [offset])[0]


def line_columns(data: bytes, offsets: Sequence[int]) -> list[tuple[int, int]]:
    """line_column of each of `offsets` (ascending), in one pass over the text."""
    start = 3 if data.startswith(BOM) else 0
    found = []
    line, line_start, at, column = 1, start, start, 1
    for offset in offsets:
        offset = max(offset, start)
        newlines = data.count(b"\n", at, offset)
        if newlines:
            line += newlines
            line_start = data.rfind(b"\n", at, offset) + 1
            at, column = line_start, 1
        column += chars(data, at, offset)
        at = offset
        found.append((line, column))
    return found
