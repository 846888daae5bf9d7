"""Fuzzing json_file.parse_json with mutated JSON bytes (escapes, surrogates, numbers at the edge of the float and
integer ranges, brackets, byte order marks, broken UTF-8), at several chunk sizes of the scan behind it.

The reader is checked against json.loads: it returns what json.loads returns, or raises a located
ForeignFormatError; where json.loads would accept the text, the refusal must be one the project makes on purpose,
and the value json.loads builds must show why (an infinity, NaN, an integer past 64 bits, an unpaired surrogate,
nesting past 64 levels, a number past 400 characters)."""
from __future__ import annotations

import json
import math
from typing import Any

from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

from formats.test_json_file import chunks_of
from nnef_torch.errors import ForeignFormatError
from nnef_torch.format.lexer import MAX_INTEGER
from nnef_torch.formats.json_file import MAX_NESTING, parse_json

SNIPPETS = [b"\\", b'"', b'\\"', b"\\\\", b"\\u", b"\\ud800", b"\\udc00", b"\\ud83d\\ude00", b"e999", b"1e999",
            b"-1.5e308", b"1.8e308", b"-", b".", b"NaN", b"-Infinity", b"[", b"]", b"{", b"}", b",", b":", b" ",
            b"\n", b"\xef\xbb\xbf", b"\xff", b"\xc3", b"\xe2\x98\x83", b"\xf0\x9d\x84\x9e", b"0" * 25,
            b"9223372036854775808", b"-9223372036854775807", b"true", b"null", b"[" * 66, b"]" * 66, b'"\\"',
            b"1" + b"0" * 400, b"0." + b"0" * 350 + b"1e309", b"1e0000308", b"17976931348623159e292"]
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 70), 2 ** 70), st.floats(allow_nan=False,
                   allow_infinity=False), st.text(st.sampled_from('a"\\/\n\u00e9\u2603\U0001d11e[]{},:\ud800'),
                                                  max_size=5))
VALUES = st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=4) |
                      st.dictionaries(st.text(st.sampled_from('k"\\'), max_size=2), inner, max_size=3), max_leaves=10)
EDITS = st.lists(st.tuples(st.sampled_from(["insert", "replace", "delete"]), st.floats(0, 1),
                           st.sampled_from(SNIPPETS), st.integers(1, 4)), max_size=3)


def mutated(data: bytes, edits: list[tuple[str, float, bytes, int]]) -> bytes:
    for action, where, snippet, length in edits:
        at = int(where * len(data))
        if action == "insert":
            data = data[:at] + snippet + data[at:]
        elif action == "replace":
            data = data[:at] + snippet + data[at + length:]
        else:
            data = data[:at] + data[at + length:]
    return data


def reasons(value: Any, depth: int = 1) -> set[str]:
    """What makes the project refuse a value json.loads built, found by walking it."""
    found: set[str] = set()
    if depth > MAX_NESTING and isinstance(value, (list, dict)):
        found.add("nests")
    if isinstance(value, float) and math.isinf(value):
        found.add("infinity")
    elif isinstance(value, float) and math.isnan(value):
        found.add("no value")
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INTEGER:
        found.add("out of range")
    elif isinstance(value, str) and any(0xD800 <= ord(char) <= 0xDFFF for char in value):
        found.add("surrogate")
    elif isinstance(value, list):
        for item in value:
            found |= reasons(item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            found |= reasons(key, depth) | reasons(item, depth + 1)
    return found


def check(data: bytes) -> None:
    try:
        text = data[3:].decode("utf-8") if data.startswith(b"\xef\xbb\xbf") else data.decode("utf-8")
        reference = json.loads(text)
    except (ValueError, RecursionError):
        reference = ValueError
    try:
        result = parse_json(data, "f.json")
    except ForeignFormatError as error:
        assert error.location is not None and error.location.file == "f.json"
        assert len(error.message) < 300
        if reference is ValueError:
            return
        message = error.message
        why = reasons(reference)
        if "longer than" in message:  # a number of more than 400 characters
            assert any(len(token) > 400 for token in text.replace(",", " ").replace("]", " ").split()), message
        elif "reads as an infinity" in message:
            assert "infinity" in why, message
        elif "no value" in message:
            assert "no value" in why or "infinity" in why, message
        elif "out of range" in message:
            assert "out of range" in why, message
        elif "surrogate" in message:
            assert "surrogate" in why, message
        elif "nests" in message:
            assert "nests" in why, message
        else:
            assert "would take about" in message, message
        return
    assert reference is not ValueError, "accepted what json.loads refuses"
    assert not reasons(reference)
    assert result == reference


@fuzz(200)
@given(VALUES, EDITS, st.sampled_from([1 << 20, 1, 2, 3, 7]), st.booleans())
def test_mutated_json_is_read_as_json_loads_reads_it_or_refused_for_a_reason(value, edits, chunk, bom):
    data = json.dumps(value, ensure_ascii=bool(edits) and edits[0][3] % 2 == 0).encode("utf-8", "surrogatepass")
    data = (b"\xef\xbb\xbf" if bom else b"") + mutated(data, edits)
    with chunks_of(chunk):
        check(data)


@fuzz(200)
@given(st.lists(st.sampled_from(SNIPPETS + [b"0", b"1", b"2.5", b'"a"', b"[]", b"{}", b'{"a":', b"e", b"E+"]),
                max_size=12), st.sampled_from([1 << 20, 1, 2, 5]))
def test_json_made_of_snippets_is_read_or_refused_for_a_reason(pieces, chunk):
    with chunks_of(chunk):
        check(b"".join(pieces))
        check(b"[" + b",".join(pieces) + b"]")
