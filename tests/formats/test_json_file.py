"""json_file, the JSON reader of the front ends (NNVM, LightNet, RelayViz): what it refuses before json.loads builds
anything (numbers that read as infinities, integers past 64 bits, NaN, unpaired surrogates, documents whose values
would take too much memory), each at its line and column; how it opens files; and the scan behind it, checked at
chunk borders against positions computed here."""
from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

from nnef_torch.errors import ForeignFormatError, NNEFContainerError
from nnef_torch.formats.json_file import locate, parse_json, read_json

RATIO = 20  # the promise: a document takes at most 20 times its size in memory


@contextlib.contextmanager
def chunks_of(size: int) -> Iterator[None]:
    """The scan behind the reader works through chunks of `size` bytes for the block."""
    from nnef_torch.formats import json_scan
    original = json_scan.CHUNK
    json_scan.CHUNK = size
    try:
        yield
    finally:
        json_scan.CHUNK = original


def refused(data: bytes | str) -> ForeignFormatError:
    with pytest.raises(ForeignFormatError) as caught:
        parse_json(data, "f.json")
    return caught.value


def place(error: ForeignFormatError) -> tuple[int | None, int | None]:
    return error.location.line, error.location.column


@pytest.mark.parametrize("text, line, column", [
    ("[1e999]", 1, 2),
    ('{"a": [0.5,\n  -1E+400]}', 2, 3),
    ("[1.7976931348623157e308, 1.7976931348623159e308]", 1, 26),
    ("[" + "9" * 309 + ".5]", 1, 2),
    ("[0.5e310]", 1, 2),
    ("[1" + "0" * 300 + "e9]", 1, 2),
    ('{"value": 1e0000000999}', 1, 11),
], ids=["1e999", "on_line_2", "past_the_largest", "309_digits", "zero_point_5e310", "301_digits_e9",
        "exponent_with_zeros"])
def test_numbers_that_read_as_infinities_are_refused_at_their_place(text, line, column):
    error = refused(text)
    assert "reads as an infinity" in error.message and place(error) == (line, column)


@pytest.mark.parametrize("text", ["[1.7976931348623157e308, -1e308]", "[1e-400, 0e99999, 0.0000001e308]",
                                  "[0." + "0" * 350 + "1e310]", "[1" + "0" * 200 + "e-200]", '["1e999"]'],
                         ids=["largest", "tiny_and_zero", "small_fraction_e310", "201_digits_e-200", "in_a_string"])
def test_numbers_near_the_largest_float_are_read(text):
    assert parse_json(text) == json.loads(text)


NUMBERS = st.builds(
    lambda sign, head, tail, fraction, exponent: sign + head + tail + fraction + exponent,
    st.sampled_from(["", "-"]), st.sampled_from(["0", "1", "9", "17976931348623157", "17976931348623159"]),
    st.sampled_from(["", "0" * 100, "9" * 291, "0" * 292, "5" * 300]),
    st.sampled_from([".0", ".5", "." + "0" * 30 + "1", ".79769313486231581", ""]),
    st.builds(lambda e, sign, zeros, value: e + sign + zeros + str(value), st.sampled_from(["e", "E"]),
              st.sampled_from(["", "+", "-"]), st.sampled_from(["", "00"]),
              st.one_of(st.integers(0, 12), st.integers(280, 320), st.just(99999))) | st.just(""),
).filter(lambda text: (text.lstrip("-")[:1] != "0" or text.lstrip("-")[1:2] in ("", ".", "e", "E"))
         and len(text) <= 400 and any(c in text for c in ".eE"))


@fuzz(300)
@given(st.lists(NUMBERS, min_size=1, max_size=6))
def test_a_number_is_refused_exactly_when_it_reads_as_an_infinity(numbers):
    text = "[" + ",\n ".join(numbers) + "]"
    infinite = [index for index, number in enumerate(numbers) if math.isinf(float(number))]
    if not infinite:
        assert parse_json(text) == json.loads(text)
        return
    error = refused(text)
    assert "reads as an infinity" in error.message
    assert place(error) == (infinite[0] + 1, 2)


@pytest.mark.parametrize("text, line, column", [
    ("[9223372036854775808]", 1, 2),
    ("[1,\n -9223372036854775808]", 2, 2),
    ('{"a": 12345678901234567890123}', 1, 7),
    ("[" + "7" * 5000 + "]", 1, 2),
], ids=["2_to_the_63", "minus_2_to_the_63", "23_digits", "5000_digits"])
def test_integers_beyond_64_bits_are_refused_at_their_place(text, line, column):
    error = refused(text)
    assert ("out of range" in error.message or "longer than" in error.message) and place(error) == (line, column)
    assert len(error.message) < 200


def test_integers_within_64_bits_and_long_fractions_are_read():
    text = "[9223372036854775807, -9223372036854775807, 0.12345678901234567890123, 1.5e-5, 9223372036854775808.0]"
    assert parse_json(text) == json.loads(text)


def test_numbers_past_the_length_limit_are_refused():
    error = refused("[0." + "1" * 500 + "]")
    assert "longer than 400 characters" in error.message and place(error) == (1, 2)


@pytest.mark.parametrize("text, column, shown", [("[1, NaN]", 5, "NaN"), ('{"a": -Infinity}', 7, "-Infinity"),
                                                 ("[Infinity]", 2, "Infinity")])
def test_nan_and_infinities_are_refused_at_their_place(text, column, shown):
    error = refused(text)
    assert f"no value {shown} " in error.message and place(error) == (1, column)


@pytest.mark.parametrize("text, column", [('["a\\ud800"]', 4), ('["\\udc00\\ud800"]', 3), ('["\\ud83d\\ud83d\\ude00"]', 3),
                                          ('["\\\\\\udfff"]', 5)])
def test_unpaired_surrogates_are_refused(text, column):
    error = refused(text)
    assert "unpaired surrogate" in error.message and place(error) == (1, column)


def test_paired_and_escaped_surrogates_are_read():
    text = '["\\ud83d\\ude00", "\\\\ud800", "\\\\\\\\udc00"]'
    assert parse_json(text) == json.loads(text)


@pytest.mark.parametrize("data, line, column, offset", [
    (b"\xef\xbb\xbf\xff", 1, 1, 3),
    (b"\xef\xbb\xbf[\"\xc3\xa9\xff\"]", 1, 4, 7),
    (b"\xef\xbb\xbf[1,\n \"\xe2\x98\x83\xc3\"]", 2, 4, 12),
])
def test_invalid_utf8_after_a_byte_order_mark_is_located_by_characters(data, line, column, offset):
    error = refused(data)
    assert "not valid UTF-8" in error.message
    assert (error.location.line, error.location.column, error.location.offset) == (line, column, offset)


def test_invalid_utf8_after_a_byte_order_mark_in_nnef_text_is_located_by_characters(tmp_path):
    from nnef_torch.format.container import open_model
    (tmp_path / "graph.nnef").write_bytes(b"\xef\xbb\xbfversion 1.0;\xff")
    with pytest.raises(NNEFContainerError) as caught:
        open_model(tmp_path)
    where = caught.value.location
    assert (where.line, where.column, where.offset) == (1, 13, 15)


def test_errors_after_a_byte_order_mark_count_columns_without_it():
    assert place(refused(b"\xef\xbb\xbf[1e999]")) == (1, 2)
    assert place(refused(b"\xef\xbb\xbf[1, ]")) == (1, 5)
    assert locate(b"\xef\xbb\xbf[1, 2]", [1]) == (1, 5)


def test_nesting_past_the_limit_is_refused_at_the_bracket():
    error = refused("[" * 40 + "{\"a\":\n" + "[" * 30 + "]" * 30 + "}" + "]" * 40)
    assert "nests more than 64" in error.message and place(error) == (2, 24)


def test_documents_whose_values_take_too_much_memory_are_refused_before_parsing():
    error = refused("[" + ",".join(["{}"] * 400_000) + "]")
    assert "would take about" in error.message and error.location.file == "f.json"


# documents of about 1 MB, each of one shape of value: those json.loads would build in more than RATIO times
# their size are refused, the others take at most that (tracemalloc counts the values; the bytes and text are added)
SHAPES = {"empty objects": "{}", "empty arrays": "[]", "one-key objects": '{"a":0}', "short lists": "[0]",
          "nested arrays": "[[[]]]", "objects of strings": '{"a":"xy"}', "zeros": "0", "floats": "0.5",
          "integers": "1000", "short strings": '"ab"', "escapes": '"\\u1234"', "astral strings": '"\U0001f600"',
          "relayviz nodes": '{"node_kind":"Tuple","fields":[0]}', "booleans": "true"}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_memory_of_accepted_documents_stays_within_the_ratio(shape):
    item = SHAPES[shape]
    text = "[" + ",".join([item] * ((1 << 20) // (len(item.encode()) + 1))) + "]"
    data = text.encode()
    try:
        parse_json(data)
    except ForeignFormatError as error:
        assert "would take about" in error.message
        return
    tracemalloc.start()
    try:
        json.loads(text)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak + len(data) + sys.getsizeof(text) <= RATIO * len(data), shape


@pytest.mark.parametrize("shape", ["empty objects", "empty arrays", "one-key objects", "short lists", "nested arrays"])
def test_documents_of_tiny_containers_are_refused(shape):
    item = SHAPES[shape]
    assert "would take about" in refused("[" + ",".join([item] * ((1 << 20) // (len(item) + 1))) + "]").message


def test_duplicate_keys_are_located_at_the_key_that_counts():
    from nnef_torch.formats.json_file import item_positions
    text = '{"ops": [1, 2],\n "ops": [\n  3,\n  4], "other": [5]}'
    assert json.loads(text)["ops"] == [3, 4]
    assert item_positions(text, ["ops"]) == [(3, 3), (4, 3)]
    assert locate(text, ["ops", 1]) == (4, 3)


def test_lightnet_ops_of_a_duplicated_key_are_located_in_the_array_that_counts():
    from nnef_torch.formats.lightnet.ir_json import op_positions
    ops = [{"name": "a", "optype": "relu"}, {"name": "b", "optype": "relu"}]
    text = '{"ops": [\n' + json.dumps(ops[0]) + '],\n"ops": [\n\n' + json.dumps(ops[0]) + ',\n  ' + \
        json.dumps(ops[1]) + "]}"
    assert op_positions(text) == [(5, 1), (6, 3)]


def test_read_json_refuses_a_fifo_without_blocking(tmp_path):
    fifo = tmp_path / "model.json"
    os.mkfifo(fifo)
    code = ("import sys\nfrom nnef_torch.formats.json_file import read_json\nfrom nnef_torch.errors import NNEFError"
            "\ntry:\n    read_json(sys.argv[1])\nexcept NNEFError as error:\n    print(type(error).__name__, error)")
    child = subprocess.run([sys.executable, "-c", code, str(fifo)], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert child.stdout.startswith("ForeignFormatError") and "not a regular file" in child.stdout, child.stderr


@pytest.mark.parametrize("kind", ["folder", "missing"])
def test_read_json_refuses_what_is_no_file(tmp_path, kind):
    path = tmp_path / ("sub" if kind == "folder" else "absent.json")
    if kind == "folder":
        path.mkdir()
    with pytest.raises(ForeignFormatError) as caught:
        read_json(path)
    assert caught.value.location.file == str(path)


def test_file_past_the_size_limit_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "big.json"
    path.write_bytes(b"[" + b" " * 100 + b"]")
    with pytest.raises(ForeignFormatError, match="larger than the limit of 50"):
        read_json(path, max_bytes=50)


# ---- the scan, with tiny chunks so that every string, escape and number straddles a chunk border ----

def positions(text: str) -> dict[tuple, tuple[int, int]]:
    """The line and column of every value of a document, by its path, found by a small tokenizer written here."""
    found: dict[tuple, tuple[int, int]] = {}
    decoder = json.JSONDecoder()
    lines = [0]
    for index, char in enumerate(text):
        if char == "\n":
            lines.append(index + 1)

    def where(index: int) -> tuple[int, int]:
        line = max(number for number, start in enumerate(lines) if start <= index)
        return line + 1, index - lines[line] + 1

    def value(index: int, path: tuple) -> int:
        index = skip(index)
        found[path] = where(index)
        if text[index] == "[":
            index, count = skip(index + 1), 0
            while text[index] != "]":
                index = skip(value(index, path + (count,)))
                count += 1
                if text[index] == ",":
                    index = skip(index + 1)
            return index + 1
        if text[index] == "{":
            index = skip(index + 1)
            while text[index] != "}":
                key, index = decoder.raw_decode(text, index)
                index = skip(value(skip(index) + 1, path + (key,)))
                if text[index] == ",":
                    index = skip(index + 1)
            return index + 1
        return decoder.raw_decode(text, index)[1]

    def skip(index: int) -> int:
        while index < len(text) and text[index] in " \t\r\n":
            index += 1
        return index

    value(0, ())
    return found


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10 ** 12, 10 ** 12) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.sampled_from('a"\\/\b\n\u00e9\u2603\U0001d11e[]{},:'), max_size=6),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(st.sampled_from('k"\\]'), max_size=3), inner,
                                                                  max_size=4),
    max_leaves=12)


@fuzz(80)
@given(JSON_VALUES, st.sampled_from([2, 3, 7, 64]), st.sampled_from([None, 0, 1, 2]), st.booleans())
def test_locate_agrees_with_a_tokenizer_at_any_chunk_size(document, chunk, indent, ascii_only):
    text = json.dumps(document, indent=indent, ensure_ascii=ascii_only)
    if len(set(map(str, _keys(document)))) != len(_keys(document)):
        return  # duplicate keys after dumping are covered elsewhere
    expected = positions(text)
    with chunks_of(chunk):
        for path, place_found in expected.items():
            assert locate(text, list(path)) == place_found, path
            assert locate(text.encode(), list(path)) == place_found, path
        assert parse_json(text.encode()) == document


def _keys(value: object) -> list:
    if isinstance(value, dict):
        return [(id(value), key) for key in value] + [k for item in value.values() for k in _keys(item)]
    if isinstance(value, list):
        return [k for item in value for k in _keys(item)]
    return []


def too_deep(text: str, limit: int = 64) -> int | None:
    """The index of the first bracket that opens level limit + 1, counted here outside strings."""
    depth, quoted, escaped = 0, False, False
    for index, char in enumerate(text):
        if quoted:
            quoted, escaped = (not (char == '"' and not escaped), char == "\\" and not escaped)
        elif char == '"':
            quoted = True
        elif char in "[{":
            depth += 1
            if depth > limit:
                return index
        elif char in "]}":
            depth -= 1
    return None


@fuzz(100)
@given(st.lists(st.sampled_from(['"\\\\"', '"\\""', '"\\\\\\""', '"\\\\\\\\"', '"]"', '"["', "[]", "{}", "1e5",
                                 '"\\u005d"', "0", '"[[[[[[[[[["']), min_size=1, max_size=30),
       st.sampled_from([1, 2, 3, 4, 7]), st.integers(55, 70))
def test_nesting_is_counted_outside_strings_at_any_chunk_size(items, chunk, depth):
    text = "[" * depth + "[" + ",".join(items) + "]" + "]" * depth
    deep = too_deep(text)
    with chunks_of(chunk):
        if deep is None:
            assert parse_json(text) == json.loads(text)
        else:
            error = refused(text)
            assert "nests more than 64" in error.message and place(error) == (1, deep + 1)


def test_text_with_an_unpaired_surrogate_is_refused_where_it_is():
    error = refused('[1,\n "a\ud800"]')
    assert "unpaired surrogate" in error.message and place(error) == (2, 4)
