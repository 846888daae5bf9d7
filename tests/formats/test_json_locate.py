"""json_file.locate: the line and column of the value at a JSON path, checked against positions found by searching
the text itself."""
from __future__ import annotations

import json

import pytest

from nnef_torch.formats.json_file import locate


def position(text: str, index: int) -> tuple[int, int]:
    """The 1-based line and column of `text[index]`, counted independently of locate."""
    before = text[:index].split("\n")
    return len(before), len(before[-1]) + 1


NESTED = """{
  "name": "net",
  "nodes": [
    {"op": "null", "inputs": []},
    {"op": "conv", "inputs": [[0, 0], [1, 0]], "attrs": {"kernel": "(3, 3)"}},
    {"op": "relu",
     "inputs": [[1, 0]]}
  ],
  "heads": [[2, 0]]
}"""


@pytest.mark.parametrize("path, marker", [
    ([], '{\n  "name"'),
    (["name"], '"net"'),
    (["nodes"], '[\n    {"op": "null"'),
    (["nodes", 0], '{"op": "null"'),
    (["nodes", 0, "inputs"], '[]}'),
    (["nodes", 1, "inputs", 1], '[1, 0]]'),
    (["nodes", 1, "inputs", 1, 1], '0]], "attrs"'),
    (["nodes", 1, "attrs", "kernel"], '"(3, 3)"'),
    (["nodes", 2, "inputs"], '[[1, 0]]}'),
    (["nodes", 2, "inputs", 0, 0], '1, 0]]}'),
    (["heads", 0, 1], '0]]\n}'),
])
def test_locate_nested(path, marker):
    assert locate(NESTED, path) == position(NESTED, NESTED.index(marker))


def test_locate_skips_strings_with_escapes_and_brackets():
    text = '{"a": "x\\"]}[{,", "b": ["\\u005d", "\\\\", {"c": "}"}], "d": -1.5e+3}'
    json.loads(text)
    assert locate(text, ["b"]) == position(text, text.index('["\\u005d"'))
    assert locate(text, ["b", 1]) == position(text, text.index('"\\\\"'))
    assert locate(text, ["b", 2, "c"]) == position(text, text.index('"}"'))
    assert locate(text, ["d"]) == position(text, text.index("-1.5e+3"))


def test_locate_escaped_key():
    text = '{"a\\"b": 1, "tab\\tkey": [true, false, null, 7]}'
    assert locate(text, ['a"b']) == position(text, text.index("1,"))
    assert locate(text, ["tab\tkey", 3]) == position(text, text.index("7]"))


def test_locate_duplicate_keys_takes_the_last():
    text = '{"k": 1,\n "k": {"k": [5, 6]},\n "j": 0}'
    assert json.loads(text)["k"] == {"k": [5, 6]}
    assert locate(text, ["k"]) == (2, 7)
    assert locate(text, ["k", "k", 1]) == position(text, text.index("6]"))


def test_locate_counts_characters_not_bytes():
    text = '{"ünï": "☃☃", "x": [\n  "𝄞", 3]}'
    assert locate(text, ["x"]) == position(text, text.index("[\n"))
    assert locate(text, ["x", 1]) == (2, 8)
    assert locate(text, ["x", 1]) == position(text, text.index("3]"))


def test_locate_whitespace_everywhere():
    text = ' \r\n\t{ "a" \n :\t[ 1 ,\r\n 2 ] , "b" : { } }  '
    assert locate(text, []) == position(text, text.index("{"))
    assert locate(text, ["a", 1]) == position(text, text.index("2 ]"))
    assert locate(text, ["b"]) == position(text, text.index("{ }"))


def test_locate_agrees_with_a_generated_document():
    document = {"nodes": [{"id": i, "args": list(range(i)), "name": f"n{i}\n\"q\""} for i in range(30)]}
    text = json.dumps(document, indent=2)
    lines = text.split("\n")
    for i in (0, 7, 29):
        line, column = locate(text, ["nodes", i, "name"])
        assert lines[line - 1][column - 1:].startswith(json.dumps(f"n{i}\n\"q\""))
        if i:
            line, column = locate(text, ["nodes", i, "args", i - 1])
            assert lines[line - 1][column - 1:].rstrip(",") == str(i - 1)


@pytest.mark.parametrize("path, error", [(["missing"], KeyError), (["a", 5], IndexError), ([0], IndexError),
                                         (["a", "b"], KeyError)])
def test_locate_missing_path(path, error):
    with pytest.raises(error):
        locate('{"a": [1, 2]}', path)


def test_locate_deepest_nesting_allowed():
    depth = 64
    text = "[" * depth + '"deep"' + "]" * depth
    assert locate(text, [0] * (depth - 1)) == (1, depth)
    assert locate(text, [0] * depth) == (1, depth + 1)
