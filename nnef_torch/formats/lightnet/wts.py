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
  records than the count (or than `MAX_ARRAYS`), a name given twice or longer than LightNet's names, an unknown or
  unsupported type, a word that is no hexadecimal number of the type's width, text that is not ASCII.
- `scan_wts(data, file=None, wanted=None) -> WtsContents`: the same reading, keeping only the arrays `wanted` names
  (all of them for None) and counting the others; `data` may also be a read-only `mmap` of the file, whose pages are
  let go behind the reading. The whole file is checked before any array is decoded, in chunks: the memory a file
  costs is that of the arrays kept, plus a few MB.
- `write_wts(arrays) -> str`: the text of a file holding `arrays` (a mapping of name to array-like, in its order),
  as `genwts.pl` writes it: lower-case words of 8 hex digits (float32) or 2 (int8), each record line ending in a
  newline. float32 and int8 arrays are written as they are, bit for bit (NaN payloads and negative zeros included);
  other floating arrays are converted to float32 (rounding float64), others raise `ValueError`: LightNet's
  weights hold only these two types. Shapes are flattened in C order.
"""
from __future__ import annotations

import binascii
import mmap
import re
from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnef_torch.errors import ForeignFormatError, Location

TYPES = {0: np.dtype("<u4"), 2: np.dtype("u1")}  # type code -> the bit pattern each word holds
_VIEWS = {0: np.dtype("<f4"), 2: np.dtype("i1")}
_DIGITS = {0: 8, 2: 2}
_NAMES = {0: "float32", 1: "half", 2: "int8"}
MAX_ITEMS = 1 << 31  # LightNet reads lengths as C ints
MAX_ARRAYS = 1 << 14  # arrays of one file (a model has hundreds): bounds the work and memory per record
MAX_NAME = 511  # LightNet reads a name into a buffer of LN_MAX_NAME_LEN (512) bytes
MAX_LOOSE_ITEMS = 1 << 24  # items of a file not laid out as genwts.pl writes them (slower to read)
SHOWN = 10  # names of arrays not kept that `scan_wts` remembers, for messages

_CHUNK = 1 << 16  # bytes examined at a time: temporaries stay small however long a line is
_SHORT = 256  # lines of items up to this many bytes are read word by word (quicker than a block for them)
_HEX_OR_SPACE = b"0123456789abcdefABCDEF "
_TOKEN = re.compile(rb"[^ \t\n\v\f\r]+")
_PATTERNS = {kind: re.compile(rb"(?:0[xX])?[0-9a-fA-F]{1,%d}" % digits) for kind, digits in _DIGITS.items()}
_BLANKS = re.compile(rb"[ \t\n\v\f\r]*")
_SPACES = re.compile(rb"[ \t\v\f\r]*")  # white space inside a line
_WORD = re.compile(rb"[^ \t\n\v\f\r]*")
_NOT_ASCII = re.compile(rb"[^\x00-\x7f]")
_DECIMAL = re.compile(r"[-+]?[0-9]{1,12}")


@dataclass(frozen=True)
class WtsContents:
    arrays: dict[str, np.ndarray]  # the arrays kept, by name in file order
    others: int = 0  # how many arrays the file holds besides
    other_names: tuple[str, ...] = ()  # the first SHOWN of them


def read_wts(data: str | bytes, file: str | None = None) -> dict[str, np.ndarray]:
    """The arrays of a `.wts` file's text (see the module docstring)."""
    return scan_wts(data, file).arrays


def scan_wts(data: str | bytes | mmap.mmap, file: str | None = None,
             wanted: Container[str] | None = None) -> WtsContents:
    """The arrays of a `.wts` file that `wanted` names (every one for None), once the whole file is checked; the
    others counted (see the module docstring)."""
    text = _Text(_ascii(data, file), file)
    lines = text.lines()
    first = next(lines, None)
    if first is None:
        raise ForeignFormatError("empty weight file: expected a count of arrays on the first line",
                                 Location(file, 1, 1))
    count = _count_line(text, *first)
    seen: dict[str, int] = {}
    loose = MAX_LOOSE_ITEMS
    kept: list[tuple[str, int, int, int, int]] = []  # name, type, length, where the items begin and end
    others: list[str] = []
    other_count = 0
    for index, (number, start, end) in enumerate(lines):
        if index >= count:
            raise ForeignFormatError(f"the file holds more arrays than its count ({count}) says",
                                     Location(file, number, 1))
        name, kind, length, begin = _head(text, number, start, end)
        loose -= _items(text, number, start, begin, end, name, kind, length, loose)
        if name in seen:
            raise ForeignFormatError(f"array '{name}' is given twice (first on line {seen[name]})",
                                     Location(file, number, 1))
        seen[name] = number
        if wanted is None or name in wanted:
            kept.append((name, kind, length, begin, end))
        else:
            other_count += 1
            if len(others) < SHOWN:
                others.append(name)
    if len(seen) < count:
        raise ForeignFormatError(f"truncated weight file: its count says {count} arrays, it holds {len(seen)}",
                                 Location(file, text.last_line, 1))
    arrays: dict[str, np.ndarray] = {}
    for name, kind, length, begin, end in kept:  # checked: decoded now, into arrays of `length`
        values = np.empty(length, TYPES[kind])
        _decode(text, begin, end, kind, values)
        arrays[name] = values.view(_VIEWS[kind])
    return WtsContents(arrays, other_count, tuple(others))


def write_wts(arrays: Mapping[str, Any]) -> str:
    """The text of a `.wts` file holding `arrays` (see the module docstring)."""
    lines = [f"{len(arrays)}\n"]
    for name, value in arrays.items():
        if not isinstance(name, str) or not name or not name.isascii() or len(name) > MAX_NAME or \
                any(char.isspace() for char in name):
            raise ValueError(f"weight name {name!r} must be a non-empty ASCII string of at most {MAX_NAME} "
                             "characters without white space (what LightNet reads)")
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


def _ascii(data: str | bytes | mmap.mmap, file: str | None) -> bytes | mmap.mmap:
    """The file's bytes, once they are known to be ASCII (what LightNet's names and hexadecimal words are)."""
    if isinstance(data, str):
        if data.isascii():
            return data.encode("ascii")
        found = re.search(r"[^\x00-\x7f]", data)
        assert found is not None
        index = found.start()
        line = data.count("\n", 0, index) + 1
        column = index - (data.rfind("\n", 0, index) + 1) + 1
        raise ForeignFormatError(f"weight text is not ASCII: character {ascii(data[index])}",
                                 Location(file, line, column))
    if isinstance(data, bytes) and data.isascii():
        return data
    text = _Text(data, file)
    for at in range(0, len(data), _CHUNK):
        if bytes(data[at:at + _CHUNK]).isascii():
            text.release(at, at + _CHUNK)
            continue
        found = _NOT_ASCII.search(data, at, min(len(data), at + _CHUNK))
        assert found is not None
        index = found.start()
        line = text.newlines(0, index) + 1
        column = index - (data.rfind(b"\n", 0, index) + 1) + 1
        raise ForeignFormatError(f"weight file is not ASCII text: byte 0x{data[index]:02x}",
                                 Location(file, line, column, index))
    return data


class _Text:
    """The bytes of a weight file (bytes, or a read-only mmap whose pages are let go behind the reading) walked in
    chunks of `_CHUNK`, so that no line, however long, is copied or scanned whole."""

    def __init__(self, data: bytes | mmap.mmap, file: str | None):
        self.data, self.file, self.size = data, file, len(data)
        self.last_line = 1  # the number of the file's last line, once `lines` has run
        self._advise = getattr(data, "madvise", None) if isinstance(data, mmap.mmap) else None

    def release(self, start: int, end: int) -> None:
        """Let go of the mapped pages of `[start, end)`, just read (they are read again from the file if need be)."""
        if self._advise is not None:
            first, last = start // mmap.PAGESIZE * mmap.PAGESIZE, min(end, self.size) // mmap.PAGESIZE * mmap.PAGESIZE
            if last > first:
                self._advise(mmap.MADV_DONTNEED, first, last - first)

    def newlines(self, start: int, end: int) -> int:
        if isinstance(self.data, bytes):
            return self.data.count(b"\n", start, end)
        total = 0
        for at in range(start, end, _CHUNK):
            total += int(np.count_nonzero(self.chars(at, min(end, at + _CHUNK)) == 10))
            self.release(at, at + _CHUNK)
        return total

    def chars(self, start: int, end: int) -> np.ndarray:
        return np.frombuffer(self.data, np.uint8, end - start, start)

    def string(self, start: int, end: int, limit: int = 40) -> str:
        return bytes(self.data[start:min(end, start + limit)]).decode("ascii")

    def span(self, pattern: re.Pattern[bytes], start: int, end: int) -> int:
        """Where the run of `pattern` (a repeated character class) that begins at `start` ends, before `end`."""
        while start < end:
            stop = min(end, start + _CHUNK)
            found = pattern.match(self.data, start, stop).end()  # type: ignore[union-attr]
            self.release(start, found)
            if found < stop:
                return found
            start = stop
        return end

    def line_end(self, start: int) -> int:
        while start < self.size:
            stop = min(self.size, start + _CHUNK)
            found = self.data.find(b"\n", start, stop)
            if found >= 0:
                return found
            self.release(start, stop)
            start = stop
        return self.size

    def lines(self) -> Iterator[tuple[int, int, int]]:
        """(number, start, end) of each line that holds more than white space, `end` at its newline."""
        position, number = 0, 1
        while position <= self.size:
            first = self.span(_BLANKS, position, self.size)
            number += self.newlines(position, first)
            if first >= self.size:
                self.last_line = number
                return
            newline = self.data.rfind(b"\n", position, first)
            start = position if newline < 0 else newline + 1
            end = self.line_end(first)
            yield number, start, end
            self.last_line = number
            position, number = end + 1, number + 1

    def words(self, begin: int, end: int) -> Iterator[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                                          bool]]:
        """The words of `[begin, end)` (a record's items) in blocks: (start, characters, which are white space, where
        words start, where they end, whether the last word goes on past the block). Blocks end at white space,
        unless a word is longer than a block (so longer than any item): its end is then the block's, and the rest
        of it is skipped. Runs of white space are skipped without a block."""
        start = begin
        while True:
            start = self.span(_SPACES, start, end)
            if start >= end:
                return
            stop = min(end, start + _CHUNK)
            chars = self.chars(start, stop)
            white = _white(chars)
            if stop < end:
                last = chars.size - 1 - int(np.argmax(white[::-1]))
                if white[last]:
                    stop = start + last
                    chars, white = chars[:last], white[:last]
            going_on = stop < end and not white[-1] and not _white(self.chars(stop, stop + 1))[0]
            steps = white.view(np.int8)  # +1 where white space begins (a word ends), -1 where a word begins
            edges = np.empty(steps.size + 1, np.int8)
            edges[0], edges[-1] = steps[0] - 1, (not going_on) - steps[-1]
            np.subtract(steps[1:], steps[:-1], out=edges[1:-1])
            starts, ends = np.flatnonzero(edges == -1), np.flatnonzero(edges == 1)
            if going_on:
                ends = np.append(ends, chars.size)
            yield start, chars, white, starts, ends, going_on
            self.release(start, stop)
            start = self.span(_WORD, stop, end) if going_on else stop


def _white(chars: np.ndarray) -> np.ndarray:
    """Which characters are white space (C's isspace: space, and tab to carriage return)."""
    return (chars == ord(" ")) | (chars - np.uint8(9) < 5)


def _count_line(text: _Text, number: int, start: int, end: int) -> int:
    first = text.span(_SPACES, start, end)
    last = text.span(_WORD, first, end)
    count = _integer(text, number, start, first, last, "the count of arrays")
    after = text.span(_SPACES, last, end)
    if after < end:
        found = text.string(after, text.span(_WORD, after, end))
        raise ForeignFormatError(f"expected only the count of arrays on this line, found {found!r} after it",
                                 Location(text.file, number, after - start + 1))
    if count < 0:
        raise ForeignFormatError(f"negative count of arrays {count}", Location(text.file, number, first - start + 1))
    if count > MAX_ARRAYS:
        raise ForeignFormatError(f"the count of arrays ({count:,}) is more than the limit of {MAX_ARRAYS:,}",
                                 Location(text.file, number, first - start + 1))
    return count


def _integer(text: _Text, number: int, line_start: int, start: int, end: int, what: str) -> int:
    word = text.string(start, end, 41)
    if end - start > 13 or not _DECIMAL.fullmatch(word):
        raise ForeignFormatError(f"expected {what} (a decimal integer), found {word[:40]!r}",
                                 Location(text.file, number, start - line_start + 1))
    return int(word)


def _head(text: _Text, number: int, start: int, end: int) -> tuple[str, int, int, int]:
    """The name, type and length of a record, and where its items begin."""
    spans = []
    at = start
    for _ in range(3):
        first = text.span(_SPACES, at, end)
        at = text.span(_WORD, first, end)
        if first == at:
            raise ForeignFormatError("truncated record: expected a name, a type and a length",
                                     Location(text.file, number, end - start + 1))
        spans.append(first)
        spans.append(at)
    if spans[1] - spans[0] > MAX_NAME:
        raise ForeignFormatError(f"array name {text.string(spans[0], spans[1])!r}... is longer than LightNet's names "
                                 f"({MAX_NAME} characters)", Location(text.file, number, spans[0] - start + 1))
    name = text.string(spans[0], spans[1], MAX_NAME)
    kind = _integer(text, number, start, spans[2], spans[3], f"the type of array '{name}'")
    length = _integer(text, number, start, spans[4], spans[5], f"the length of array '{name}'")
    if kind not in TYPES:
        why = "LightNet does not read half-precision weights" if kind == 1 else "types are 0 (float32) and 2 (int8)"
        raise ForeignFormatError(f"array '{name}' has unsupported type {kind} ({why})",
                                 Location(text.file, number, spans[2] - start + 1))
    if not 0 <= length < MAX_ITEMS:
        raise ForeignFormatError(f"array '{name}' has length {length}",
                                 Location(text.file, number, spans[4] - start + 1))
    return name, kind, length, at


def _items(text: _Text, number: int, line_start: int, begin: int, end: int, name: str, kind: int, length: int,
           loose: int) -> int:
    """Check the `length` items of a record, in `[begin, end)` of its line; the number of them not laid out as
    genwts.pl writes them, which may be `loose` at most (the work they take is some 30 times that of the others)."""
    digits = _DIGITS[kind]
    if end - begin <= _SHORT:
        _short_items(text, number, line_start, begin, end, name, kind, length, None)
        return 0
    if _canonical(text, begin, end, length, digits, None):
        return 0
    if length > loose:
        raise ForeignFormatError(f"array '{name}' holds {length:,} items not laid out as genwts.pl writes them "
                                 f"(words of {digits} hexadecimal digits, one space apart): nnef_torch reads "
                                 f"{MAX_LOOSE_ITEMS:,} items of a file in other layouts",
                                 Location(text.file, number, 1))
    count, extra, bad, said = 0, -1, None, ""
    for start, chars, _, starts, ends, going_on in text.words(begin, end):
        if bad is None:
            wrong = _wrong(chars, starts, ends, digits)
            wrong[-1:] |= going_on
            if wrong.any():
                at = int(np.argmax(wrong))
                bad = (count + at, start + int(starts[at]), start + int(ends[at]))
        if count + starts.size > length:  # too many: the rest is not counted
            extra = start + int(starts[length - count])
            said = "at least " if going_on or text.span(_SPACES, start + chars.size, end) < end else ""
            count += starts.size
            break
        count += starts.size
    if count != length:
        said += str(count)
        raise ForeignFormatError(f"array '{name}' says it holds {length} items, its line has {said}",
                                 Location(text.file, number, (extra if count > length else end) - line_start + 1))
    if bad is not None:
        index, first, last = bad
        raise ForeignFormatError(f"item {index} of array '{name}' is {text.string(first, last)!r}, not a "
                                 f"{_NAMES[kind]} bit pattern of at most {digits} hexadecimal digits",
                                 Location(text.file, number, first - line_start + 1))
    return length


def _short_items(text: _Text, number: int, line_start: int, begin: int, end: int, name: str, kind: int,
                 length: int, out: np.ndarray | None) -> None:
    """`_items` (and `_decode`, into `out`) of a short line, word by word: quicker than blocks for a few words."""
    words = [(found.start(), found.group()) for found in _TOKEN.finditer(text.data, begin, end)]
    if len(words) != length:
        where = words[length][0] if len(words) > length else end
        raise ForeignFormatError(f"array '{name}' says it holds {length} items, its line has {len(words)}",
                                 Location(text.file, number, where - line_start + 1))
    pattern = _PATTERNS[kind]
    for index, (start, word) in enumerate(words):
        if not pattern.fullmatch(word):
            raise ForeignFormatError(f"item {index} of array '{name}' is {word[:40].decode('ascii')!r}, not a "
                                     f"{_NAMES[kind]} bit pattern of at most {_DIGITS[kind]} hexadecimal digits",
                                     Location(text.file, number, start - line_start + 1))
    if out is not None:
        out[:] = [int(word, 16) for _, word in words]


def _decode(text: _Text, begin: int, end: int, kind: int, out: np.ndarray) -> None:
    """Decode the checked items of a record, in `[begin, end)` of its line, into `out`."""
    digits = _DIGITS[kind]
    if end - begin <= _SHORT:
        _short_items(text, 0, 0, begin, end, "", kind, out.size, out)
        return
    if _canonical(text, begin, end, out.size, digits, out):
        return
    index = 0
    for _, chars, white, starts, ends, _ in text.words(begin, end):
        out[index:index + starts.size] = _decoded(chars, white, starts, ends, digits)
        index += starts.size


def _wrong(chars: np.ndarray, starts: np.ndarray, ends: np.ndarray, digits: int) -> np.ndarray:
    """Which words (`chars[starts[i]:ends[i]]`, white space after each) are no hexadecimal number of at most
    `digits` digits, a `0x` before them allowed (as `fscanf("%x")` reads them)."""
    hexadecimal = (chars - np.uint8(ord("0")) < 10) | ((chars | np.uint8(0x20)) - np.uint8(ord("a")) < 6)
    prefixed = (ends - starts >= 3) & (chars[starts] == ord("0")) & \
        (chars[np.minimum(starts + 1, chars.size - 1)] | 0x20 == ord("x"))
    count = ends - starts - 2 * prefixed
    found = np.add.reduceat(hexadecimal, starts, dtype=np.int32) if starts.size else np.zeros(0, np.int32)
    return (count < 1) | (count > digits) | (found != count + prefixed)


def _decoded(chars: np.ndarray, white: np.ndarray, starts: np.ndarray, ends: np.ndarray, digits: int) -> np.ndarray:
    """The bit patterns of checked words: right-aligned in rows of `digits` + 2 characters ('0' before them, the
    'x' of a prefix as '0'), whose last `digits` decode in one go."""
    width = digits + 2
    lengths = ends - starts
    rows = np.full(starts.size * width, ord("0"), np.uint8)
    positions = np.flatnonzero(~white)
    rows[positions - np.repeat(ends - np.arange(1, starts.size + 1) * width, lengths)] = chars[positions]
    rows[rows | 0x20 == ord("x")] = ord("0")
    bits = binascii.unhexlify(np.ascontiguousarray(rows.reshape(-1, width)[:, 2:]))
    return np.frombuffer(bits, np.dtype(f">u{digits // 2}"))


def _canonical(text: _Text, begin: int, end: int, length: int, digits: int, out: np.ndarray | None) -> bool:
    """Check (and decode into `out`) the items of a record written as genwts.pl writes them: one space after the
    length, then words of exactly `digits` hex digits one space apart (white space may end the line), in blocks
    that decode in one go. False for any other layout, which `_items` checks and locates word by word."""
    step = digits + 1
    stop = begin + length * step
    if length == 0 or stop > end or text.data[begin] != ord(" ") or text.span(_SPACES, stop, end) != end:
        return False
    per = max(1, _CHUNK // step)
    for index in range(0, length, per):
        count = min(per, length - index)
        at = begin + index * step
        block = bytes(text.data[at:at + count * step])
        if block.translate(None, _HEX_OR_SPACE) or block.count(b" ") != count or \
                block[::step].count(b" ") != count:
            return False
        if out is not None:
            bits = binascii.unhexlify(block.replace(b" ", b""))
            out[index:index + count] = np.frombuffer(bits, np.dtype(f">u{digits // 2}"))
        text.release(at, at + count * step)
    return True


__all__ = ["MAX_ARRAYS", "WtsContents", "read_wts", "scan_wts", "write_wts"]
