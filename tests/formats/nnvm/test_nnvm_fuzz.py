"""Fuzzing the NNVM / MXNet front end: mutated graph JSON documents and `.params` files (a small hand-made model,
the files MXNet wrote in fixtures/, and every NNVM operator's rows) are converted or refused with a located
`NNEFError`; nothing else escapes. Renamed to any text, a model still loads and computes what it did.
(`NNEF_TORCH_FUZZ_SCALE` scales the example counts.)"""
from __future__ import annotations

import copy
import json
import struct
from pathlib import Path

import numpy as np
from fuzzing import fuzz
from hypothesis import given, reject
from hypothesis import strategies as st

from formats.nnvm.test_bad_nnvm import SHAPE, graph, params, params_file
from nnef_torch.errors import NNEFError
from nnef_torch.formats.nnvm.params import read_ndarray_list
from nnef_torch.reader import read_model

VALUES = st.one_of(st.none(), st.booleans(), st.integers(-3, 12), st.integers(-(2 ** 70), 2 ** 70),
                   st.text(max_size=12), st.sampled_from(["(1, 1)", "(3, 3)", "[2L, 2L]", "None", "1e-05", "((0,0))",
                                                          "True", "0", "-1", "()", "relu", "max", "full"]),
                   st.lists(st.integers(-2, 9), max_size=4))
KEYS = st.sampled_from(["op", "name", "inputs", "attrs", "attr", "param", "control_deps", "kernel", "num_filter",
                        "pad", "stride", "no_bias", "act_type", "num_group", "dilate", "layout", "__shape__"])
OPS = st.sampled_from(["null", "Convolution", "Activation", "Pooling", "Reshape", "Concat", "BatchNorm", "Flatten",
                       "FullyConnected", "SliceChannel", "elemwise_add", "RNN", "Dropout", "softmax", "dense",
                       "conv2d", "transpose", "_plus_scalar", "LeakyReLU"])


@st.composite
def mutated_graphs(draw) -> dict:
    document = graph()
    for _ in range(draw(st.integers(1, 4))):
        where = draw(st.sampled_from(["node_key", "attr", "op", "entry", "list", "drop"]))
        node = document["nodes"][draw(st.integers(0, len(document["nodes"]) - 1))]
        if where == "node_key":
            node[draw(KEYS)] = draw(VALUES)
        elif where == "attr":
            if not isinstance(node.get("attrs"), dict):
                node["attrs"] = {}
            node["attrs"][draw(KEYS)] = draw(st.sampled_from(["(1, 1)", "(2, 2)", "0", "-4", "1e9",
                                                                           "None", "(1, 1, 1)", "x", ""]))
        elif where == "op":
            node["op"] = draw(OPS)
        elif where == "entry":
            node["inputs"] = draw(st.lists(st.lists(st.integers(-1, 6), min_size=1, max_size=4), max_size=3))
        elif where == "list":
            key = draw(st.sampled_from(["arg_nodes", "heads", "node_row_ptr"]))
            document[key] = draw(st.one_of(VALUES, st.lists(st.lists(st.integers(-1, 6), max_size=3), max_size=3)))
        else:
            key = draw(st.sampled_from(["attrs", "node_row_ptr", "arg_nodes"]))
            document.pop(key, None)
    return document


@fuzz(400)
@given(mutated_graphs())
def test_mutated_graph_is_converted_or_refused_cleanly(tmp_path_factory, document):
    folder = tmp_path_factory.mktemp("graph")
    symbol = folder / "m-symbol.json"
    symbol.write_text(json.dumps(copy.deepcopy(document)))
    arrays = {name.split(":")[1]: value for name, value in params().items()}
    try:
        read_model(symbol, format="nnvm", params=arrays, input_shapes={"data": SHAPE})
    except NNEFError:
        pass


@fuzz(400)
@given(st.data())
def test_mutated_params_file_is_read_or_refused_cleanly(data):
    good = bytearray(params_file(params()))
    for _ in range(data.draw(st.integers(1, 4))):
        how = data.draw(st.sampled_from(["byte", "word", "cut", "insert"]))
        if how == "byte" and good:
            good[data.draw(st.integers(0, len(good) - 1))] = data.draw(st.integers(0, 255))
        elif how == "word" and len(good) >= 8:
            at = data.draw(st.integers(0, len(good) - 8))
            struct.pack_into("<q", good, at, data.draw(st.sampled_from([-1, 0, 1, 7, 1 << 31, 1 << 62, -(1 << 62)])))
        elif how == "cut":
            del good[data.draw(st.integers(0, len(good))):]
        else:
            at = data.draw(st.integers(0, len(good)))
            good[at:at] = data.draw(st.binary(min_size=1, max_size=16))
    try:
        list(read_ndarray_list(bytes(good), "m.params"))
    except NNEFError as error:
        assert error.location is not None and error.location.offset is not None


# ---------------------------------------------------------------------------------------- mutated fixture files
# The files MXNet 1.9.1 wrote (fixtures/), each with its input shapes: one of them is mutated (its JSON as a
# document or as text, its .params bytes, its input shapes), then read with its parameters.
FIXTURES = Path(__file__).resolve().parent / "fixtures"
CASES = sorted(json.loads((FIXTURES / "ops" / "manifest.json").read_text())) + ["training/cnn"]
STRINGS = ["0", "1", "-1", "2", "-4", "1e999", "-inf", "nan", "1e-30", "1e30", "2147483648", "9223372036854775807",
           "9223372036854775808", "None", "True", "x", "", "()", "(0,)", "(1, 1)", "(2, 2)", "(3, 3)", "(1, 2, 3)",
           "(-4, -1, 2)", "((1, 1), (1, 1))", "(1,) * 3", "1e38", "(-3.5e38, 1e38)", "(" + "1, " * 40 + "1)",
           "(65536,)", "(1000000, 1000000)",
           "[2L, 2L]", "(None, 2)", "é", "(1.5,)", "((((((((((1))))))))))", "4194305", "65537"]
# what breaks readers most often, drawn as often as all the rest
ATTR_VALUES = st.one_of(st.sampled_from(["1e999", "-inf", "nan", "(1, -1e999)", "1e38", "4194305", "(65536,)"]),
                        st.sampled_from(STRINGS))
JSON_VALUES = st.one_of(st.sampled_from(STRINGS), st.integers(-3, 9), st.sampled_from([2 ** 31, 2 ** 62, -2 ** 62]),
                        st.none(), st.booleans(), st.lists(st.integers(-2, 6), max_size=4),
                        st.text(max_size=8), st.dictionaries(st.sampled_from(STRINGS[:6]), st.sampled_from(STRINGS)))


def _fixture(case: str) -> tuple[str, bytes, dict[str, list[int]]]:
    folder, name = case.split("/") if "/" in case else ("ops", case)
    with np.load(FIXTURES / folder / f"{name}.npz") as arrays:
        if folder == "ops":
            inputs = json.loads((FIXTURES / "ops" / "manifest.json").read_text())[name]["inputs"]
        else:
            inputs = ["data"]
        shapes = {input_name: list(arrays[input_name].shape) for input_name in inputs}
    return ((FIXTURES / folder / f"{name}-symbol.json").read_text(),
            (FIXTURES / folder / f"{name}-0000.params").read_bytes(), shapes)


_FIXTURE_CACHE: dict[str, tuple[str, bytes, dict[str, list[int]]]] = {}


def fixture(case: str) -> tuple[str, bytes, dict[str, list[int]]]:
    if case not in _FIXTURE_CACHE:
        _FIXTURE_CACHE[case] = _fixture(case)
    return _FIXTURE_CACHE[case]


def _mutate_document(data, document: dict) -> None:
    nodes = document["nodes"]
    operators = [node for node in nodes if node.get("op") != "null"]
    node = data.draw(st.sampled_from(operators)) if operators and data.draw(st.integers(0, 4)) else \
        nodes[data.draw(st.integers(0, len(nodes) - 1))]
    how = data.draw(st.sampled_from(["attr"] * 6 + ["attr_new"] * 3 + ["graph_attr"] * 2 +
                                    ["op", "name", "entry", "heads", "row_ptr", "duplicate", "drop_node", "shape"]))
    if not isinstance(node.get("attrs"), dict):
        node["attrs"] = {}
    attrs = node["attrs"]
    if how == "attr" and attrs:
        attrs[data.draw(st.sampled_from(sorted(attrs)))] = data.draw(ATTR_VALUES)
    elif how == "attr_new":
        attrs[data.draw(st.sampled_from(["axis", "shape", "num_outputs", "depth", "reps", "kernel", "pad", "stride",
                                         "num_filter", "scale", "size", "begin", "end", "__shape__", "eps",
                                         "num_newaxis", "sections", "indices", "repeat", "stop"]))] = \
            data.draw(ATTR_VALUES)
    elif how == "op":
        node["op"] = data.draw(st.sampled_from(["null", "Convolution", "Reshape", "SliceChannel", "one_hot",
                                                "_arange", "tile", "RNN", "Pooling", "expand_dims", "_zeros",
                                                "UpSampling", "repeat", "_split_v2", "Embedding", "transpose"]))
    elif how == "name":
        node["name"] = data.draw(st.sampled_from(["data", "é", "a b", "1x", "", "conv0_weight", nodes[0]["name"]]))
    elif how == "entry" and isinstance(node.get("inputs"), list) and node["inputs"]:
        entry = node["inputs"][data.draw(st.integers(0, len(node["inputs"]) - 1))]
        if isinstance(entry, list) and entry:
            entry[data.draw(st.integers(0, len(entry) - 1))] = data.draw(JSON_VALUES)
    elif how == "heads":
        document["heads"] = data.draw(st.lists(st.lists(st.integers(-1, len(nodes)), min_size=2, max_size=3),
                                               min_size=1, max_size=4))
    elif how == "row_ptr":
        document["node_row_ptr"] = data.draw(JSON_VALUES)
    elif how == "graph_attr":
        document.setdefault("attrs", {})[data.draw(st.sampled_from(["shape", "dtype", "mxnet_version"]))] = \
            data.draw(st.one_of(JSON_VALUES, st.tuples(st.sampled_from(["int", "list_shape", "list_int", "str"]),
                                                       JSON_VALUES).map(list),
                                st.tuples(st.one_of(st.lists(st.sampled_from(["int", "str"]), max_size=2),
                                                    st.dictionaries(st.sampled_from(["int"]), JSON_VALUES),
                                                    JSON_VALUES), JSON_VALUES).map(list)))
    elif how == "duplicate":
        nodes.append(copy.deepcopy(node))
        document["heads"] = [*document["heads"], [len(nodes) - 1, 0, 0]] if isinstance(document["heads"], list) \
            else [[len(nodes) - 1, 0, 0]]
    elif how == "drop_node" and len(nodes) > 1:
        del nodes[data.draw(st.integers(0, len(nodes) - 1))]
    elif how == "shape":
        attrs["__shape__"] = data.draw(st.sampled_from(STRINGS))
    else:
        node[data.draw(KEYS)] = data.draw(JSON_VALUES)


def _mutate_text(data, text: str) -> str:
    at = data.draw(st.integers(0, len(text)))
    how = data.draw(st.sampled_from(["delete", "insert", "replace_digit", "duplicate"]))
    if how == "delete":
        return text[:at] + text[at + data.draw(st.integers(1, 40)):]
    if how == "insert":
        return text[:at] + data.draw(st.sampled_from(['"', ",", "[", "]", "{", "}", "0", "-", "1e999", "é", "\\u0000",
                                                      " ", "null", '"x": 1,'])) + text[at:]
    if how == "replace_digit":
        digits = [i for i, c in enumerate(text) if c.isdigit()]
        if digits:
            i = data.draw(st.sampled_from(digits))
            return text[:i] + data.draw(st.sampled_from(["9", "99999", "4294967296", "-1", "0"])) + text[i + 1:]
        return text
    end = min(len(text), at + data.draw(st.integers(1, 200)))
    return text[:end] + text[at:end] + text[end:]


def _mutate_params(data, good: bytes) -> bytes:
    mutated = bytearray(good)
    for _ in range(data.draw(st.integers(1, 3))):
        how = data.draw(st.sampled_from(["byte", "word", "cut", "insert"]))
        if how == "byte" and mutated:
            mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
        elif how == "word" and len(mutated) >= 8:
            at = data.draw(st.integers(0, len(mutated) - 8))
            struct.pack_into("<q", mutated, at, data.draw(st.sampled_from([-1, 0, 1, 2, 7, 1 << 31, 1 << 62,
                                                                           0xF993FACA, 0x112])))
        elif how == "cut":
            del mutated[data.draw(st.integers(0, len(mutated))):]
        else:
            at = data.draw(st.integers(0, len(mutated)))
            mutated[at:at] = data.draw(st.binary(min_size=1, max_size=16))
    return bytes(mutated)


def _read_fixture(folder: Path, text: str, params_bytes: bytes, shapes: dict[str, list[int]]) -> None:
    symbol = folder / "m-symbol.json"
    symbol.write_text(text, encoding="utf-8")
    (folder / "m-0000.params").write_bytes(params_bytes)
    try:
        read_model(symbol, input_shapes=shapes)
    except NNEFError as error:
        assert error.location is not None and error.location.file is not None


@fuzz(60)
@given(st.data())
def test_mutated_fixture_graph_is_read_or_refused_cleanly(tmp_path_factory, data):
    text, params_bytes, shapes = fixture(data.draw(st.sampled_from(CASES)))
    if data.draw(st.booleans()):
        document = json.loads(text)
        for _ in range(data.draw(st.integers(1, 3))):
            _mutate_document(data, document)
        text = json.dumps(document, ensure_ascii=data.draw(st.booleans()))
    else:
        for _ in range(data.draw(st.integers(1, 3))):
            text = _mutate_text(data, text)
    if data.draw(st.integers(0, 4)) == 0 and shapes:
        name = data.draw(st.sampled_from(sorted(shapes)))
        shapes = {**shapes, name: data.draw(st.sampled_from([[], [0], [1 << 40, 1 << 40], [1] * 40,
                                                             shapes[name] + [1], [1 << 20] + shapes[name][1:]]))}
    _read_fixture(tmp_path_factory.mktemp("fixture"), text, params_bytes, shapes)


@fuzz(60)
@given(st.data())
def test_mutated_fixture_params_are_read_or_refused_cleanly(tmp_path_factory, data):
    with_params = [case for case in CASES if len(fixture(case)[1]) > 64]
    text, params_bytes, shapes = fixture(data.draw(st.sampled_from(with_params)))
    _read_fixture(tmp_path_factory.mktemp("fixture"), text, _mutate_params(data, params_bytes), shapes)


# ------------------------------------------------------------------------------------------- any names at all
NAMES = st.one_of(st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=6),
                  st.sampled_from(["forward", "training", "graph", "class", "__init__", "a.b", "a/b", "a\\b", ".",
                                   "..", "/", "x y", "é", "1", "relu", "conv", "output0", "data", "weight"]))


def _float_arrays(case: str) -> dict[str, np.ndarray] | None:
    arrays = dict(read_ndarray_list(fixture(case)[1]))
    return arrays if all(array.dtype == np.float32 for array in arrays.values()) else None


@fuzz(8)
@given(st.data())
def test_fixture_with_any_node_names_loads_and_computes_the_same(tmp_path_factory, data):
    """MXNet takes any node name: renamed (to any text, unique), a model loads, computes what it did, and keeps
    its parameters under their new names wherever those can name a module's tensors."""
    import torch

    import nnef_torch

    case = data.draw(st.sampled_from([case for case in CASES if _float_arrays(case) is not None
                                      and json.loads(fixture(case)[0])["nodes"][0]["name"] == "data"]))
    text, _, shapes = fixture(case)
    document = json.loads(text)
    names = data.draw(st.lists(NAMES, min_size=len(document["nodes"]), max_size=len(document["nodes"]),
                               unique_by=str.lower))  # unique ignoring case, as parameter files need
    renamed = {node["name"]: name for node, name in zip(document["nodes"], names)}
    for node, name in zip(document["nodes"], names):
        node["name"] = name
    arrays = _float_arrays(case)
    folder = tmp_path_factory.mktemp("renamed")
    symbol = folder / "m.json"
    symbol.write_text(json.dumps(document, ensure_ascii=data.draw(st.booleans())), encoding="utf-8")
    (folder / "m.params").write_bytes(params_file({f"{key[:4]}{renamed[key[4:]]}": value
                                                   for key, value in arrays.items()}))
    original = FIXTURES / ("ops" if "/" not in case else case.split("/")[0]) / f"{case.split('/')[-1]}-symbol.json"
    with np.load(original.with_name(original.name.replace("-symbol.json", ".npz"))) as stored:
        inputs = [torch.from_numpy(stored[name]) for name in shapes]
    try:
        expected = nnef_torch.load(original, input_shapes=shapes).eval()
    except NNEFError:  # a case nnef_torch refuses (test_mxnet_fixtures.REFUSED)
        reject()
    module = nnef_torch.load(symbol, params=folder / "m.params",
                             input_shapes={renamed[name]: shape for name, shape in shapes.items()}).eval()
    with torch.no_grad():
        before, after = expected(*inputs), module(*inputs)
    for old, new in zip(before if isinstance(before, tuple) else (before,),
                        after if isinstance(after, tuple) else (after,)):
        torch.testing.assert_close(new, old, equal_nan=True)
    old_state, new_state = expected.state_dict(), module.state_dict()
    assert len(new_state) == len(old_state)
    for old, name in renamed.items():
        if old in old_state and name.isidentifier():  # kept as its name, or with a '_' where a module uses it
            torch.testing.assert_close(new_state[name if name in new_state else name + "_"], old_state[old])


# -------------------------------------------------------------------------------------- mutated operator rows
# Each NNVM operator's rows (nnvm_op_rows.py: one valid one-node graph per attribute setting), with attributes
# replaced, added or dropped, inputs of other shapes and parameters of other shapes or types.
ROW_VALUES = ["0", "1", "2", "-1", "3", "-2", "-4", "None", "True", "False", "()", "(0,)", "(1,)", "(2,)", "(-1,)",
              "(1, 1)", "(2, 2)", "(3, 3)", "(1, 2)", "(0, 0)", "(2, -1)", "((1, 1), (1, 1))", "(1, 2, 3, 4)",
              "(0, 0, 0, 0, 1, 1, 1, 1)", "(1.5,)", "(None, 2)", "1e-5", "0.5", "3.5", "1e38", "-1e38", "x", "",
              "NCHW", "NHWC", "NCHW4c", "OIHW", "float32", "int32", "bool", "(100000,)", "4097", "65536",
              "2147483648"]


@fuzz(150)
@given(st.data())
def test_mutated_operator_row_is_read_or_refused_cleanly(tmp_path_factory, data):
    from formats.nnvm.nnvm_op_rows import ROWS
    from formats.nnvm.test_nnvm_ops import graph_json

    row = data.draw(st.sampled_from(ROWS))
    document = graph_json(row)
    attrs = next(node for node in document["nodes"] if node["op"] != "null").setdefault("attrs", {})
    keys = sorted({key for other in ROWS if other.op == row.op for key in other.attrs} | set(attrs))
    for _ in range(data.draw(st.integers(1, 3))):
        if keys and data.draw(st.integers(0, 3)):
            attrs[data.draw(st.sampled_from(keys))] = data.draw(st.sampled_from(ROW_VALUES))
        elif attrs:
            del attrs[data.draw(st.sampled_from(sorted(attrs)))]
    shapes = {name: list(value.shape) for name, value in row.inputs}
    if data.draw(st.integers(0, 3)) == 0:
        name = data.draw(st.sampled_from(sorted(shapes)))
        shape = shapes[name]
        shapes[name] = data.draw(st.sampled_from([[1], [7], shape + [2], shape[1:] or [3], [3 * e for e in shape],
                                                  [1 << 20] + shape[1:], [65536, 1]]))
    arrays = dict(row.params)
    if arrays and data.draw(st.integers(0, 3)) == 0:
        name = data.draw(st.sampled_from(sorted(arrays)))
        arrays[name] = data.draw(st.sampled_from([arrays[name].astype(np.int32), arrays[name].reshape(-1),
                                                  np.zeros((2, 2), np.float32), np.zeros((0,), np.float32)]))
    symbol = tmp_path_factory.mktemp("row") / "model.json"
    symbol.write_text(json.dumps(document))
    try:
        read_model(symbol, params=arrays, input_shapes=shapes)
    except NNEFError as error:
        assert error.location is not None and error.location.file is not None
