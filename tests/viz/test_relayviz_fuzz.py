"""Fuzzing the RelayViz reader and writer with mutated documents: fields deleted or given values of other JSON types
(huge and non-finite numbers, deep nesting, strings, objects), references out of range or closing cycles, nodes
replaced, and text edits on top (NaN, 1e999, unpaired surrogates, brackets, byte order marks, broken UTF-8).

Whatever the document, reading it gives a checked document or a located NNEFError; a document that is read is
drawn as a scene and written again by `format_relayviz` into text that reads back equal. Documents in memory go
the same way through `scene_from_relayviz` and `format_relayviz`. Nothing else may escape."""
from __future__ import annotations

import copy
import json
import math
import re
from typing import Any

from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

from nnef_torch.errors import ForeignFormatError, NNEFError
from nnef_torch.viz.relayviz_read import FIELDS, parse_relayviz, scene_from_relayviz
from nnef_torch.viz.relayviz_write import format_relayviz
from viz.test_relayviz_read import RECURSIVE, RICH, SMALL

ARRAYS = json.dumps({"format": "relayviz", "version": [1, 2], "nodes": [
    {"node_kind": "Const", "value": {"array_value": [1.5, -2, True, 0.25], "array_shape": [2, 2]}, "dtype": "float32"},
    {"node_kind": "Var", "name": "v", "dtype": "int64", "shape": [2, 2]},
    {"node_kind": "Op", "name": "add", "attrs": {"axes": [0, 1], "mode": "x", "scale": 0.5, "nested": {"k": None}}},
    {"node_kind": "Call", "op": 2, "args": [0, 1]},
    {"node_kind": "Tuple", "fields": [3, 3]},
    {"node_kind": "TupleGetItem", "tuple_value": 4, "index": 1},
    {"node_kind": "Function", "body": 5, "params": [1], "ret_type": [{"dtype": "float32", "shape": [2, 2]}]}]})
BASES = [json.loads(text) for text in (SMALL, RICH, RECURSIVE, ARRAYS)]


def _deep(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 20), st.sampled_from([2 ** 63, -(2 ** 63) - 1, 10 ** 30, 2 ** 62]),
    st.floats(), st.text(max_size=4), st.sampled_from(["\ud800", "a\udfff", "\U0001f600"]),
    st.lists(st.integers(-2, 20), max_size=3),
    st.lists(st.sampled_from([2 ** 62, 2 ** 63, 0, 7]), max_size=40),
    st.dictionaries(st.sampled_from(["dtype", "shape", "array_value", "array_shape", "a"]),
                    st.one_of(st.integers(-1, 4), st.lists(st.integers(-1, 4), max_size=3), st.text(max_size=3),
                              st.just("\udc80")),
                    max_size=3),
    st.builds(_deep, st.sampled_from([3, 63, 64, 70, 1500])))
FIELD_NAMES = sorted({field for spec in FIELDS.values() for field in spec} | {"node_kind", "extra"})
MUTATIONS = st.lists(st.one_of(
    st.tuples(st.just("delete"), st.integers(0, 20), st.sampled_from(FIELD_NAMES)),
    st.tuples(st.just("set"), st.integers(0, 20), st.sampled_from(FIELD_NAMES), VALUES),
    st.tuples(st.just("reference"), st.integers(0, 20), st.integers(-2, 25)),
    st.tuples(st.just("node"), st.integers(0, 20), VALUES),
    st.tuples(st.just("root"), st.sampled_from(["format", "version", "nodes", "extra"]), VALUES),
    st.tuples(st.just("drop"), st.integers(0, 20))), max_size=3)
TEXT_EDITS = st.lists(st.tuples(st.sampled_from(["insert", "number"]), st.floats(0, 1), st.sampled_from(
    ["1e999", "NaN", "-Infinity", "\\ud800", '"', "\\", "[" * 70, "]", "}", ",", "\ufeff", "\udcff", " " * 5,
     "9223372036854775808", "1.8e308", "-1e400", "1e308", '"node_kind": "Var", ', "{}"])), max_size=2)
_NUMBER = re.compile(r"(?<=[\[ ])-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?(?=[,\]}])")


def mutate(document: dict, mutations: list[tuple]) -> dict:
    document = copy.deepcopy(document)
    nodes = document["nodes"]
    for mutation in mutations:
        kind = mutation[0]
        if kind == "root":
            document[mutation[1]] = mutation[2]
            continue
        if not isinstance(nodes, list) or not nodes:
            continue
        index = mutation[1] % len(nodes)
        node = nodes[index]
        if kind == "drop":
            del nodes[index]
        elif kind == "node":
            nodes[index] = mutation[2]
        elif not isinstance(node, dict):
            continue
        elif kind == "delete":
            node.pop(mutation[2], None)
        elif kind == "set":
            node[mutation[2]] = mutation[3]
        else:  # point one reference elsewhere
            for field, value in node.items():
                if isinstance(value, int) and not isinstance(value, bool) and field != "index":
                    node[field] = mutation[2]
                    break
                if isinstance(value, list) and value and field in ("args", "params", "fields"):
                    value[0] = mutation[2]
                    break
    return document


def text_of(document: dict, edits: list[tuple[str, float, str]]) -> bytes:
    """The JSON text of `document` with `edits`: a snippet inserted, or a number replaced by one."""
    try:
        text = json.dumps(document)  # infinities and NaN are written as Infinity and NaN
    except (ValueError, RecursionError):
        text = json.dumps(json.loads(SMALL))
    for action, where, snippet in edits:
        numbers = list(_NUMBER.finditer(text))
        if action == "number" and numbers:
            found = numbers[int(where * len(numbers)) % len(numbers)]
            text = text[:found.start()] + snippet + text[found.end():]
        else:
            at = int(where * len(text))
            text = text[:at] + snippet + text[at:]
    return text.encode("utf-8", "surrogatepass")


def read_draw_write(data: bytes | dict) -> None:
    """Read (or check), draw and write a document; what is written reads back equal."""
    try:
        if isinstance(data, dict):
            scene_from_relayviz(data)
            document = data
        else:
            document = parse_relayviz(data, "f.json")
            scene_from_relayviz(document)
    except NNEFError as error:
        if not isinstance(data, dict):
            assert isinstance(error, ForeignFormatError) and error.location is not None
            assert error.location.file == "f.json"
        assert len(error.message) < 400
        return
    written = format_relayviz(document)
    assert parse_relayviz(written.encode("utf-8")) == document


@fuzz(150)
@given(st.sampled_from(BASES), MUTATIONS, TEXT_EDITS)
def test_mutated_documents_are_read_drawn_and_written_or_refused_with_a_location(base, mutations, edits):
    read_draw_write(text_of(mutate(base, mutations), edits))


@fuzz(150)
@given(st.sampled_from(BASES), MUTATIONS)
def test_mutated_documents_in_memory_are_drawn_and_written_or_refused(base, mutations):
    document = mutate(base, mutations)
    read_draw_write(document)
    try:
        format_relayviz(document)
    except NNEFError:
        pass


def test_bases_are_valid():
    for base in BASES:
        read_draw_write(json.dumps(base).encode())
        assert not any(isinstance(value, float) and math.isinf(value) for value in json.loads(json.dumps(base)))
