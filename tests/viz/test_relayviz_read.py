"""Reading RelayViz documents: valid ones (Let, If, Bind, nested and recursive Functions, TupleGetItem) become
scenes; each class of bad document is refused with its JSON path and the line and column of the offending value."""
from __future__ import annotations

import json
import math

import pytest
from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

from nnef_torch.errors import ForeignFormatError
from nnef_torch.viz.relayviz_read import json_path, parse_relayviz, read_relayviz, scene_from_relayviz
from nnef_torch.viz.scene import (
    BIND,
    CONSTANT,
    FUNCTION,
    GET_ITEM,
    IF,
    INPUT,
    LET,
    OPERATION,
    OUTPUT,
    TUPLE,
    VARIABLE,
)

# one node per line: node i is on line i + 2
SMALL = """{"format": "relayviz", "version": [1, 0], "nodes": [
  {"node_kind": "Var", "name": "x", "dtype": "float32", "shape": [2, 3]},
  {"node_kind": "Op", "name": "add", "attrs": {}},
  {"node_kind": "Const", "value": 1.5, "dtype": "float32"},
  {"node_kind": "Call", "op": 1, "args": [0, 2]},
  {"node_kind": "Function", "body": 3, "params": [0], "ret_type": {"dtype": "float32", "shape": [2, 3]}}
]}"""

RICH = """{"format": "relayviz", "version": [1, 3], "nodes": [
  {"node_kind": "Var", "name": "x", "dtype": "float32", "shape": [2]},
  {"node_kind": "Var", "name": "t", "dtype": "float32", "shape": [2]},
  {"node_kind": "Op", "name": "add", "attrs": {"note": [1, {"deep": null}]}},
  {"node_kind": "Call", "op": 2, "args": [0, 0]},
  {"node_kind": "Var", "name": "y", "dtype": "float32", "shape": [2]},
  {"node_kind": "Op", "name": "neg"},
  {"node_kind": "Call", "op": 5, "args": [4]},
  {"node_kind": "Function", "body": 6, "params": [4]},
  {"node_kind": "Tuple", "fields": [3, 7]},
  {"node_kind": "TupleGetItem", "tuple_value": 8, "index": 0},
  {"node_kind": "Const", "value": true, "dtype": "bool"},
  {"node_kind": "If", "cond": 10, "true_branch": 9, "false_branch": 1},
  {"node_kind": "Let", "variable": 1, "value": 3, "body": 11},
  {"node_kind": "Bind", "expr": 12, "binds": {"node_1": 3}},
  {"node_kind": "Function", "body": 13, "params": [0], "ret_type": {"dtype": "float32", "shape": [2]}}
]}"""

# f(n) = f(n) + n: the body refers back to its Function
RECURSIVE = """{"format": "relayviz", "version": [1, 0], "nodes": [
  {"node_kind": "Var", "name": "n", "dtype": "int64", "shape": []},
  {"node_kind": "Op", "name": "add"},
  {"node_kind": "Call", "op": 1, "args": [3, 0]},
  {"node_kind": "Function", "body": 2, "params": [0]}
]}"""


def position(text: str, marker: str) -> tuple[int, int]:
    """Line and column of the first `marker` in `text`, counted here."""
    before = text[:text.index(marker)].split("\n")
    return len(before), len(before[-1]) + 1


def test_small_document_is_read_as_written():
    assert parse_relayviz(SMALL) == json.loads(SMALL)
    assert parse_relayviz(("\ufeff" + SMALL).encode()) == json.loads(SMALL)


def test_rich_document_becomes_a_scene():
    scene = scene_from_relayviz(parse_relayviz(RICH), name="rich")
    kinds = {node.id: node.kind for node in scene.nodes.values()}
    assert kinds == {0: INPUT, 1: VARIABLE, 3: OPERATION, 4: INPUT, 6: OPERATION, 7: FUNCTION, 8: TUPLE,
                     9: GET_ITEM, 10: CONSTANT, 11: IF, 12: LET, 13: BIND, 14: FUNCTION, 15: OUTPUT}
    assert len(scene.edges) == 19 and scene.name == "rich"
    into = {node_id: sorted((edge.label, edge.source) for edge in scene.edges if edge.target == node_id)
            for node_id in kinds}
    assert into[3] == [("args[0]", 0), ("args[1]", 0)]
    assert into[7] == [("body", 6), ("params[0]", 4)]
    assert into[9] == [("tuple_value", 8)]
    assert into[11] == [("cond", 10), ("false_branch", 1), ("true_branch", 9)]
    assert into[12] == [("body", 11), ("value", 3), ("variable", 1)]
    assert into[13] == [("expr", 12), ("node_1", 3)]
    assert into[15] == [("", 14)]
    call = scene.nodes[3]
    assert (call.name, call.op, call.attrs, call.outputs) == ("add#3", "add", {"note": [1, {"deep": None}]}, [])
    assert scene.nodes[6].attrs == {}
    assert scene.nodes[9].name == ".0" and scene.nodes[9].attrs == {"index": 0}
    assert scene.nodes[10].value is True and scene.nodes[10].outputs[0].dtype == "bool"
    assert scene.nodes[0].outputs[0].describe() == "float32[2]" and scene.nodes[0].attrs == {"shape": [2]}
    assert scene.nodes[7].outputs == []  # only the outermost Function shows its type
    assert [t.describe() for t in scene.nodes[14].outputs] == ["float32[2]"]
    assert [t.describe() for t in scene.nodes[15].outputs] == ["float32[2]"]


def test_recursion_through_a_function_body_is_accepted():
    scene = scene_from_relayviz(parse_relayviz(RECURSIVE))
    assert [node.kind for node in scene.nodes.values()] == [INPUT, OPERATION, FUNCTION, OUTPUT]
    labels = sorted((edge.source, edge.target, edge.label) for edge in scene.edges)
    assert labels == [(0, 2, "args[1]"), (0, 3, "params[0]"), (2, 3, "body"), (3, 2, "args[0]"), (3, 4, "")]


def test_functions_nobody_uses_each_feed_an_output():
    document = {"format": "relayviz", "version": [1, 0], "nodes": [
        {"node_kind": "Var", "name": "a", "dtype": "float32", "shape": [1]},
        {"node_kind": "Function", "body": 0, "params": [0],
         "ret_type": [{"dtype": "float32", "shape": [1]}, {"dtype": "int64", "shape": []}]},
        {"node_kind": "Function", "body": 0, "params": []}]}
    scene = scene_from_relayviz(parse_relayviz(json.dumps(document)))
    outputs = [node for node in scene.nodes.values() if node.kind == OUTPUT]
    assert [(node.id, node.name) for node in outputs] == [(3, "output#1"), (4, "output#2")]
    assert [t.describe() for t in outputs[0].outputs] == ["float32[1]", "int64[]"]
    assert scene.nodes[0].kind == INPUT


def test_an_op_passed_as_a_value_is_drawn():
    document = {"format": "relayviz", "version": [1, 0], "nodes": [
        {"node_kind": "Op", "name": "nn.relu"}, {"node_kind": "Tuple", "fields": [0]},
        {"node_kind": "Function", "body": 1, "params": []}]}
    scene = scene_from_relayviz(document)
    assert scene.nodes[0].kind == OPERATION and scene.nodes[0].op == "nn.relu"
    assert [(edge.source, edge.target, edge.label) for edge in scene.edges] == [(0, 1, "fields[0]"), (1, 2, "body"),
                                                                                 (2, 3, "")]


def test_large_constants_are_not_shown():
    document = {"format": "relayviz", "version": [1, 0], "nodes": [
        {"node_kind": "Const", "value": {"array_value": list(range(16)), "array_shape": [4, 4]}, "dtype": "int64"},
        {"node_kind": "Const", "value": {"array_value": [0.5] * 17, "array_shape": [17]}, "dtype": "float32"}]}
    scene = scene_from_relayviz(document)
    assert scene.nodes[0].value == list(range(16)) and scene.nodes[0].attrs == {"shape": [4, 4]}
    assert scene.nodes[1].value is None and scene.nodes[1].outputs[0].describe() == "float32[17]"
    assert not any(node.kind == OUTPUT for node in scene.nodes.values())


def test_scene_checks_documents_in_memory():
    with pytest.raises(ForeignFormatError, match=r"nodes\[0\]\.op: expected a node id"):
        scene_from_relayviz({"format": "relayviz", "version": [1, 0],
                             "nodes": [{"node_kind": "Call", "op": "add", "args": []}]})


def test_errors_of_files_name_the_file(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(SMALL.replace('"shape": [2, 3]}', '"shape": [2, 3.0]}', 1), encoding="utf-8")
    with pytest.raises(ForeignFormatError) as caught:
        read_relayviz(path)
    assert caught.value.location.file == str(path)
    assert (caught.value.location.line, caught.value.location.column) == (2, 70)
    assert "nodes[0].shape[1]: expected a dimension (a non-negative integer), found 3.0" in str(caught.value)


def test_malformed_json_is_reported_by_the_json_reader():
    with pytest.raises(ForeignFormatError, match="malformed JSON") as caught:
        parse_relayviz(SMALL.replace("[0, 2]", "[0, 2,]"), "doc.json")
    assert caught.value.location.line == 5


def test_long_values_are_shortened():
    text = SMALL.replace('"dtype": "float32"}', '"dtype": "' + "f" * 200 + '", "extra": ' + json.dumps(list(range(100)))
                         + "}", 1)
    with pytest.raises(ForeignFormatError) as caught:
        parse_relayviz(text)
    message = caught.value.message
    assert message.startswith("nodes[2].extra: Const node has no field 'extra'") and message.endswith("...")
    assert len(message) < 200


# (what is wrong, the replacement made in SMALL, the JSON path reported, the text at the reported position)
BAD = [
    ("format", ('"relayviz"', '"relayvis"'), "format", '"relayvis"'),
    ("format type", ('"relayviz"', "1"), "format", "1, "),
    ("version major", ("[1, 0]", "[2, 0]"), "version", "[2, 0]"),
    ("version minor", ("[1, 0]", "[1, -1]"), "version", "[1, -1]"),
    ("version of bools", ("[1, 0]", "[true, 0]"), "version", "[true, 0]"),
    ("version length", ("[1, 0]", "[1, 0, 0]"), "version", "[1, 0, 0]"),
    ("version string", ("[1, 0]", '"1.0"'), "version", '"1.0"'),
    ("root field missing", ('"version": [1, 0], ', ""), "the document", '{"format"'),
    ("root field unknown", ('"version": [1, 0], ', '"version": [1, 0], "author": "me", '), "author", '"me"'),
    ("nodes type", (SMALL, '{"format": "relayviz", "version": [1, 0], "nodes": {"a": []}}'), "nodes", '{"a"'),
    ("node type", ('{"node_kind": "Op", "name": "add", "attrs": {}}', "[1]"), "nodes[1]", "[1]"),
    ("node kind missing", ('{"node_kind": "Op", ', "{"), "nodes[1]", '{"name": "add"'),
    ("node kind unknown", ('"Op"', '"Lambda"'), "nodes[1].node_kind", '"Lambda"'),
    ("node kind type", ('"Op"', "null"), "nodes[1].node_kind", "null"),
    ("field missing", (', "args": [0, 2]', ""), "nodes[3]", '{"node_kind": "Call"'),
    ("field unknown", ('"shape": [2, 3]}', '"shape": [2, 3], "label": "w"}'), "nodes[0].label", '"w"'),
    ("string type", ('"name": "x"', '"name": 7'), "nodes[0].name", "7,"),
    ("dtype type", ('"dtype": "float32"}', '"dtype": ["float32"]}'), "nodes[2].dtype", '["float32"]'),
    ("shape type", ('"shape": [2, 3]}', '"shape": "2x3"}'), "nodes[0].shape", '"2x3"'),
    ("negative dimension", ("[2, 3]}", "[2, -3]}"), "nodes[0].shape[1]", "-3]"),
    ("bool as id", ("[0, 2]", "[0, true]"), "nodes[3].args[1]", "true]"),
    ("float as id", ('"op": 1', '"op": 1.0'), "nodes[3].op", "1.0"),
    ("string as id", ('"body": 3', '"body": "3"'), "nodes[4].body", '"3"'),
    ("id out of range", ('"body": 3', '"body": 5'), "nodes[4].body", '5, "params"'),
    ("negative id", ('"params": [0]', '"params": [-1]'), "nodes[4].params[0]", "-1]"),
    ("ids type", ('"params": [0]', '"params": 0'), "nodes[4].params", '0, "ret_type"'),
    ("call op not an Op", ('"op": 1', '"op": 0'), "nodes[3].op", '0, "args"'),
    ("param not a Var", ('"params": [0]', '"params": [2]'), "nodes[4].params[0]", '2], "ret_type"'),
    ("attrs type", ('"attrs": {}', '"attrs": []'), "nodes[1].attrs", "[]"),
    ("const value type", ('"value": 1.5', '"value": "1.5"'), "nodes[2].value", '"1.5"'),
    ("const value null", ('"value": 1.5', '"value": null'), "nodes[2].value", "null"),
    ("array length", ('"value": 1.5', '"value": {"array_value": [1, 2, 3], "array_shape": [2, 2]}'),
     "nodes[2].value.array_value", "[1, 2, 3]"),
    ("array item", ('"value": 1.5', '"value": {"array_value": [1, "2"], "array_shape": [2]}'),
     "nodes[2].value.array_value[1]", '"2"]'),
    ("array nested", ('"value": 1.5', '"value": {"array_value": [[1, 2]], "array_shape": [1, 2]}'),
     "nodes[2].value.array_value[0]", "[1, 2]]"),
    ("array shape negative", ('"value": 1.5', '"value": {"array_value": [], "array_shape": [-1]}'),
     "nodes[2].value.array_shape[0]", "-1]"),
    ("array field missing", ('"value": 1.5', '"value": {"array_value": [1]}'), "nodes[2].value",
     '{"array_value"'),
    ("array field unknown", ('"value": 1.5', '"value": {"array_value": [], "array_shape": [0], "order": "C"}'),
     "nodes[2].value.order", '"C"'),
    ("ret_type field missing", ('{"dtype": "float32", "shape": [2, 3]}}', '{"dtype": "float32"}}'),
     "nodes[4].ret_type", '{"dtype": "float32"}}'),
    ("ret_type list item", ('{"dtype": "float32", "shape": [2, 3]}}', '[{"dtype": "float32", "shape": [2, 3]}, 7]}'),
     "nodes[4].ret_type[1]", "7]"),
    ("ret_type shape", ('"shape": [2, 3]}}', '"shape": [2, 3.5]}}'), "nodes[4].ret_type.shape[1]", "3.5]"),
    ("cycle", ("[0, 2]", "[0, 3]"), "nodes[3].args[1]", '3]},\n  {"node_kind": "Function"'),
    ("cycle through tuples", ('{"node_kind": "Const", "value": 1.5, "dtype": "float32"}',
                              '{"node_kind": "Tuple", "fields": [0, 3]}'), "nodes[3].args[1]", "2]},"),
    ("duplicate key keeps the last", ('"op": 1', '"op": 1, "op": 0'), "nodes[3].op", '0, "args"'),
]


@pytest.mark.parametrize("problem, change, path, marker", BAD, ids=[row[0] for row in BAD])
def test_bad_documents_are_refused_where_the_problem_is(problem, change, path, marker):
    old, new = change
    assert old in SMALL
    text = SMALL.replace(old, new, 1)
    with pytest.raises(ForeignFormatError) as caught:
        parse_relayviz(text, "doc.json")
    error = caught.value
    line, column = position(text, marker)
    assert (error.location.file, error.location.line, error.location.column) == ("doc.json", line, column)
    assert error.message.startswith(f"{path}: ")
    assert str(error).startswith(f"doc.json:{line}:{column}: error: {path}: ")


@pytest.mark.parametrize("change, expected", [
    (('"relayviz"', '"relayvis"'), 'doc.json:1:12: error: format: expected the format "relayviz", found "relayvis"'),
    (("[1, 0]", "[2, 0]"), "doc.json:1:35: error: version: expected version [1, minor] (this reader knows RelayViz "
                           "1.x), found [2, 0]"),
    (("[0, 2]", "[0, true]"), "doc.json:5:46: error: nodes[3].args[1]: expected a node id (an integer from 0 to 4), "
                              "found true"),
    ((', "args": [0, 2]', ""), "doc.json:5:3: error: nodes[3]: Call node lacks the field 'args'"),
    (('"op": 1', '"op": 0'), "doc.json:5:31: error: nodes[3].op: expected the id of an Op node (node 0 is a Var), "
                             "found 0"),
    (("[0, 2]", "[0, 3]"), "doc.json:5:46: error: nodes[3].args[1]: reference 3 closes a cycle of references "
                           "(3 -> 3); only a Function's body may lead back"),
    (('"value": 1.5', '"value": {"array_value": [1, 2, 3], "array_shape": [2, 2]}'),
     "doc.json:4:51: error: nodes[2].value.array_value: expected 4 values (the product of array_shape [2, 2]), "
     "found 3 values: [1, 2, 3]"),
])
def test_messages_by_hand(change, expected):
    with pytest.raises(ForeignFormatError) as caught:
        parse_relayviz(SMALL.replace(*change, 1), "doc.json")
    assert str(caught.value) == expected


def test_every_kind_checks_its_fields():
    kinds = {"Bind": ({"expr": 0, "binds": {"a": 0}}, "binds", {"a": "0"}, "binds.a"),
             "Let": ({"variable": 0, "value": 0, "body": 0}, "value", None, "value"),
             "If": ({"cond": 0, "true_branch": 0, "false_branch": 0}, "cond", [0], "cond"),
             "TupleGetItem": ({"tuple_value": 0, "index": 0}, "index", -1, "index"),
             "Tuple": ({"fields": [0]}, "fields", [False], "fields[0]")}
    for kind, (fields, field, bad, path) in kinds.items():
        nodes = [{"node_kind": "Var", "name": "v", "dtype": "bool", "shape": []}, {"node_kind": kind, **fields}]
        document = {"format": "relayviz", "version": [1, 0], "nodes": nodes}
        parse_relayviz(json.dumps(document))
        nodes[1][field] = bad
        with pytest.raises(ForeignFormatError) as caught:
            parse_relayviz(json.dumps(document))
        assert caught.value.message.startswith(f"nodes[1].{path}: expected"), kind


def test_let_variable_must_be_a_var():
    document = {"format": "relayviz", "version": [1, 0], "nodes": [
        {"node_kind": "Const", "value": 1, "dtype": "int64"},
        {"node_kind": "Let", "variable": 0, "value": 0, "body": 0}]}
    with pytest.raises(ForeignFormatError, match=r"nodes\[1\]\.variable: expected the id of a Var node"):
        parse_relayviz(json.dumps(document))


def test_bind_names_that_are_not_identifiers_are_quoted_in_paths():
    assert json_path(("nodes", 2, "binds", "a b")) == 'nodes[2].binds["a b"]'
    assert json_path(()) == "the document"
    document = {"format": "relayviz", "version": [1, 0], "nodes": [
        {"node_kind": "Bind", "expr": 0, "binds": {"a b": 3}}]}
    text = json.dumps(document)
    with pytest.raises(ForeignFormatError) as caught:
        parse_relayviz(text)
    assert caught.value.message.startswith('nodes[0].binds["a b"]: expected a node id (an integer from 0 to 0)')
    assert caught.value.location.column == text.index("3}") + 1


def test_empty_document_is_valid():
    document = parse_relayviz('{"format": "relayviz", "version": [1, 0], "nodes": []}')
    scene = scene_from_relayviz(document)
    assert scene.nodes == {} and scene.edges == []


# ---- hostile documents: fields of the wrong JSON type, values without a JSON form, long names, large graphs ----

@pytest.mark.parametrize("kind", [["Var"], {"Var": 1}, 3, 2.5, True])
def test_node_kind_of_another_json_type_is_refused_at_it(kind):
    text = SMALL.replace('"node_kind": "Op"', f'"node_kind": {json.dumps(kind)}', 1)
    with pytest.raises(ForeignFormatError) as caught:
        parse_relayviz(text, "doc.json")
    assert caught.value.message.startswith("nodes[1].node_kind: expected a node_kind among")
    assert (caught.value.location.line, caught.value.location.column) == position(text, json.dumps(kind) + ",")


@pytest.mark.parametrize("value, marker", [("1e999", "1e999"), ("-1E+400", "-1E+400"),
                                           ('{"array_value": [1, 1e400], "array_shape": [2]}', "1e400")])
def test_constant_that_reads_as_an_infinity_is_refused_at_it(value, marker):
    text = SMALL.replace('"value": 1.5', f'"value": {value}', 1)
    with pytest.raises(ForeignFormatError, match="reads as an infinity") as caught:
        parse_relayviz(text, "doc.json")
    assert (caught.value.location.line, caught.value.location.column) == position(text, marker)


def _in_memory(**changes: object) -> dict:
    document = json.loads(SMALL)
    for field, value in changes.items():
        node, key = field.split("__")
        document["nodes"][int(node[1:])][key] = value
    return document


@pytest.mark.parametrize("changes, path", [
    ({"n2__value": math.inf}, "nodes[2].value"),
    ({"n2__value": {"array_value": [1.0, math.nan], "array_shape": [2]}}, "nodes[2].value.array_value[1]"),
    ({"n1__attrs": {"a": [1, {"b": -math.inf}]}}, "nodes[1].attrs.a[1].b"),
    ({"n1__attrs": {"a": {1, 2}}}, "nodes[1].attrs.a"),
    ({"n1__attrs": {"a": {3: 1}}}, "nodes[1].attrs.a"),
    ({"n1__attrs": {"a": 2 ** 64}}, "nodes[1].attrs.a"),
    ({"n0__shape": [2, 2 ** 70]}, "nodes[0].shape[1]"),
    ({"n2__value": 10 ** 30}, "nodes[2].value"),
])
def test_documents_in_memory_hold_only_what_json_holds(changes, path):
    document = _in_memory(**changes)
    with pytest.raises(ForeignFormatError) as caught:
        scene_from_relayviz(document)
    assert caught.value.message.startswith(f"{path}: ")


def test_attrs_nesting_past_the_limit_in_memory_is_refused():
    deep: list = []
    for _ in range(200):
        deep = [deep]
    with pytest.raises(ForeignFormatError, match="nests more than 64 levels"):
        scene_from_relayviz(_in_memory(n1__attrs={"deep": deep}))


def test_names_from_the_document_are_shortened_in_messages():
    long = "k" * 10_000
    text = SMALL.replace('"shape": [2, 3]}', f'"shape": [2, 3], "{long}": 1' + "}", 1)
    with pytest.raises(ForeignFormatError) as caught:
        parse_relayviz(text)
    assert len(caught.value.message) < 300 and "kkk..." in caught.value.message
    document = {"format": "relayviz", "version": [1, 0], "nodes": [
        {"node_kind": "Bind", "expr": 0, "binds": {long + " x": 5}}]}
    with pytest.raises(ForeignFormatError) as caught:
        parse_relayviz(json.dumps(document))
    assert len(caught.value.message) < 300


def test_array_shape_of_a_huge_volume_is_refused_without_computing_it():
    shape = [2 ** 62] * 20_000
    text = SMALL.replace('"value": 1.5', '"value": {"array_value": [1], "array_shape": ' + json.dumps(shape) + "}", 1)
    with pytest.raises(ForeignFormatError) as caught:
        parse_relayviz(text)
    assert "expected more than 9223372036854775807 values" in caught.value.message
    assert len(caught.value.message) < 300


def test_deep_chain_of_functions_is_drawn():
    nodes = [{"node_kind": "Var", "name": "x", "dtype": "float32", "shape": [1]}]
    nodes += [{"node_kind": "Function", "body": index, "params": [0]} for index in range(5000)]
    scene = scene_from_relayviz({"format": "relayviz", "version": [1, 0], "nodes": nodes})
    assert [node.id for node in scene.nodes.values() if node.kind == OUTPUT] == [len(nodes)]
    assert scene.edges[-1].source == len(nodes) - 1


def outermost_by_reach(nodes: list[dict]) -> list[int]:
    """The Functions whose every referrer is reached from them (the definition, walked from each Function)."""
    from nnef_torch.viz.relayviz_read import references
    referrers: dict[int, list[int]] = {}
    for index, node in enumerate(nodes):
        for _, target in references(node):
            referrers.setdefault(target, []).append(index)
    found = []
    for index, node in enumerate(nodes):
        if node["node_kind"] != "Function":
            continue
        inside, pending = {index}, [index]
        while pending:
            for _, target in references(nodes[pending.pop()]):
                if target not in inside:
                    inside.add(target)
                    pending.append(target)
        if all(referrer in inside for referrer in referrers.get(index, [])):
            found.append(index)
    return found


@fuzz(60)
@given(st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 11), max_size=3)), min_size=1, max_size=12))
def test_outermost_functions_are_those_every_referrer_lies_inside(shape):
    """Functions (body and params) and Tuples over a random reference graph; cycles must pass through a body."""
    count = len(shape) + 1
    nodes: list[dict] = [{"node_kind": "Var", "name": "v", "dtype": "float32", "shape": []}]
    for index, (function, targets) in enumerate(shape, start=1):
        targets = [target % count for target in targets]
        if function:
            nodes.append({"node_kind": "Function", "body": targets[0] if targets else 0, "params": [0]})
        else:
            nodes.append({"node_kind": "Tuple", "fields": [target for target in targets if target < index]})
    document = {"format": "relayviz", "version": [1, 0], "nodes": nodes}
    try:
        scene = scene_from_relayviz(document)
    except ForeignFormatError:
        return
    outputs = sorted(edge.source for edge in scene.edges if scene.nodes[edge.target].kind == OUTPUT)
    assert outputs == outermost_by_reach(nodes)


@pytest.mark.parametrize("changes, path", [({"n0__name": "x\udc80"}, "nodes[0].name"),
                                           ({"n1__attrs": {"k\ud800": 1}}, "nodes[1].attrs"),
                                           ({"n1__attrs": {"k": ["\ud800"]}}, "nodes[1].attrs.k[0]")])
def test_strings_in_memory_must_be_unicode_text(changes, path):
    from nnef_torch.viz.relayviz_write import format_relayviz
    document = _in_memory(**changes)
    for checked in (scene_from_relayviz, format_relayviz):
        with pytest.raises(ForeignFormatError) as caught:
            checked(document)
        assert caught.value.message.startswith(f"{path}: ")
