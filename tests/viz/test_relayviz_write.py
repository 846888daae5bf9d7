"""IR graphs -> RelayViz documents: valid against a JSON Schema written from the RelayViz proposal, read back equal,
and every Call's arguments checked against the IR graph (which node stands for which tensor is worked out here
from the documents alone, not with the writer's bookkeeping)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.cli import demo_model_path
from nnef_torch.errors import NNEFOptionError, NNEFUnsupportedError
from nnef_torch.ir.graph import Ref
from nnef_torch.reader import read_graph
from nnef_torch.viz.relayviz_read import parse_relayviz, read_relayviz
from nnef_torch.viz.relayviz_write import format_relayviz, relayviz_document, write_relayviz
from viz.corpus import FRAGMENTS_TEXT, torch_models

SCHEMA = json.loads((Path(__file__).parent / "relayviz.schema.json").read_text())
SOURCES = ("external", "variable", "constant")
DTYPES = {"scalar": "float32", "integer": "int64", "logical": "bool"}


ARRAYS_TEXT = """version 1.0;
graph G( x, flag ) -> ( a, b, k, z, m, s, x )
{
    x = external<scalar>(shape = [2, 6]);
    flag = external<logical>(shape = [2, 2]);
    [p, q, r] = split(x, axis = 1, ratios = [1, 1, 1]);
    a = concat([p, r, q, p], axis = 1);
    b = add(q, 1.0);
    k = constant<scalar>(shape = [2, 3], value = [0.5]);
    m = constant<integer>(shape = [1], value = [3]);
    c = constant<scalar>(shape = [3], value = [1.0, 2.0, 3.0]);
    z = select(flag, b, 0.0);
    s, t = moments(x, axes = [1]);
    u = select(true, q, r);
}
"""


def _exported(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]):
    model = nnef_torch.export(module, inputs)
    return model.graph, model.tensors


@pytest.fixture(scope="module")
def corpus():
    demo = nnef_torch.read_model(demo_model_path())
    models = {name: _exported(*model) for name, model in torch_models().items()}
    return {
        "demo": (demo.graph, demo.tensors),
        **models,
        "fragments": (read_graph(FRAGMENTS_TEXT), {"w": np.arange(144, dtype=np.float32).reshape(4, 4, 3, 3)}),
        "fragments_whole": (read_graph(FRAGMENTS_TEXT, atomic=lambda name: name in ("pair", "unit")), None),
        "arrays": (read_graph(ARRAYS_TEXT), None),
    }


NAMES = ["demo", "cnn", "transformer", "lstm", "fragments", "fragments_whole", "arrays"]


def _documents(corpus, name):
    """The document without values, and with values where the corpus has them."""
    graph, tensors = corpus[name]
    documents = [relayviz_document(graph)]
    if tensors is not None:
        documents.append(relayviz_document(graph, tensors))
    return graph, tensors, documents


def _references(node):
    for key in ("body", "op", "tuple_value", "expr", "variable", "value", "cond", "true_branch", "false_branch"):
        if isinstance(node.get(key), int) and not isinstance(node.get(key), bool):
            yield node[key]
    for key in ("params", "args", "fields"):
        yield from node.get(key, [])
    yield from node.get("binds", {}).values()


def _value_array(node):
    value = node["value"]
    if isinstance(value, dict):
        return np.array(value["array_value"]).reshape(value["array_shape"])
    return np.array(value)


class Meaning:
    """What the nodes of a document stand for in the IR graph, worked out from the document: the k-th Call is the
    k-th ordinary operation, a TupleGetItem one of its flattened outputs, a Var the tensor it names."""

    def __init__(self, graph, tensors, document):
        self.graph, self.tensors, self.nodes = graph, tensors, document["nodes"]
        ordinary = [op for op in graph.operations if op.name not in SOURCES]
        calls = [i for i, node in enumerate(self.nodes) if node["node_kind"] == "Call"]
        assert len(calls) == len(ordinary)
        self.op_of = dict(zip(calls, ordinary))
        self.source_of = {ref.name: op for op in graph.operations for ref in op.output_refs()}

    def check(self, node_id, value, where):
        """Node `node_id` is the argument `value` (a Ref, a list for a tensor array, or a literal)."""
        node = self.nodes[node_id]
        if isinstance(value, list):
            assert node["node_kind"] == "Tuple" and len(node["fields"]) == len(value), where
            for field, item in zip(node["fields"], value):
                self.check(field, item, where)
            return
        if not isinstance(value, Ref):
            assert node["node_kind"] == "Const" and node["value"] == value, where
            assert type(node["value"]) is type(value), where
            return
        source = self.source_of[value.name]
        if source.name == "external" or (source.name == "variable" and self.tensors is None):
            assert node == {"node_kind": "Var", "name": value.name, "dtype": DTYPES[source.dtype],
                            "shape": list(source.attribs["shape"])}, where
        elif source.name == "variable":
            assert node["node_kind"] == "Const", where
            expected = _tensor(self.tensors, source.attribs["label"])
            assert node["dtype"] == str(expected.dtype)
            assert np.array_equal(_value_array(node), expected), where
        elif source.name == "constant":
            assert node["node_kind"] == "Const" and node["dtype"] == DTYPES[source.dtype], where
            shape, values = source.attribs["shape"], source.attribs["value"]
            assert np.array_equal(np.broadcast_to(_value_array(node), shape),
                                  np.broadcast_to(np.array(values), shape)), where
        else:
            outputs = [ref.name for ref in source.output_refs()]
            if len(outputs) == 1:
                assert self.op_of.get(node_id) is source, where
            else:
                assert node["node_kind"] == "TupleGetItem", where
                assert self.op_of[node["tuple_value"]] is source, where
                assert outputs[node["index"]] == value.name, where


def _tensor(tensors, label):
    value = tensors[label] if label in tensors else tensors[label.lower()]
    value = getattr(value, "array", value)
    return value.detach().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


@pytest.mark.parametrize("name", NAMES)
def test_documents_are_valid_relayviz(corpus, name):
    _, _, documents = _documents(corpus, name)
    for document in documents:
        jsonschema.validate(document, SCHEMA, cls=jsonschema.Draft202012Validator)


@pytest.mark.parametrize("name", NAMES)
def test_documents_read_back_equal(corpus, name, tmp_path):
    graph, tensors, documents = _documents(corpus, name)
    for document in documents:
        assert parse_relayviz(json.dumps(document)) == document
        assert parse_relayviz(format_relayviz(document).encode()) == document
        assert json.loads(format_relayviz(document)) == document
    write_relayviz(graph, tmp_path / "graph.json", tensors)
    assert read_relayviz(tmp_path / "graph.json") == documents[-1]


@pytest.mark.parametrize("name", NAMES)
def test_one_call_per_operation_and_one_var_per_input_and_variable(corpus, name):
    graph, tensors, documents = _documents(corpus, name)
    ordinary = [op for op in graph.operations if op.name not in SOURCES]
    for document in documents:
        kinds = [node["node_kind"] for node in document["nodes"]]
        assert kinds.count("Call") == kinds.count("Op") == len(ordinary)
        assert [node["name"] for node in document["nodes"] if node["node_kind"] == "Op"] == \
            [op.name for op in ordinary]
        variables = len(graph.signature.variables) if document is documents[0] else 0
        assert kinds.count("Var") == len(graph.inputs) + variables
        assert kinds.count("Function") == 1 and kinds[-1] == "Function"


@pytest.mark.parametrize("name", NAMES)
def test_call_arguments_are_the_producers_of_the_operation_inputs(corpus, name):
    graph, tensors, documents = _documents(corpus, name)
    for document, values in zip(documents, [None, tensors]):
        meaning = Meaning(graph, values, document)
        nodes = document["nodes"]
        for call, op in meaning.op_of.items():
            head = nodes[nodes[call]["op"]]
            assert nodes[call]["op"] == call - 1 and head["node_kind"] == "Op"
            assert head["attrs"] == json.loads(json.dumps(op.attribs))
            assert len(nodes[call]["args"]) == len(op.inputs)
            for arg, (param, value) in zip(nodes[call]["args"], op.inputs.items()):
                meaning.check(arg, value, f"{op.name} {param}")


@pytest.mark.parametrize("name", NAMES)
def test_function_takes_the_inputs_and_returns_the_outputs(corpus, name):
    graph, tensors, documents = _documents(corpus, name)
    for document, values in zip(documents, [None, tensors]):
        meaning = Meaning(graph, values, document)
        function = document["nodes"][-1]
        assert [document["nodes"][p]["name"] for p in function["params"]] == list(graph.inputs)
        outputs = [Ref(name) for name in graph.outputs]
        types = [{"dtype": DTYPES.get(graph.tensors[n].dtype, "unknown"), "shape": list(graph.tensors[n].shape or [])}
                 for n in graph.outputs]  # a fragment kept whole may have no shape rule
        if len(outputs) == 1:
            meaning.check(function["body"], outputs[0], "body")
            assert function["ret_type"] == types[0]
        else:
            meaning.check(function["body"], outputs, "body")
            assert function["ret_type"] == types


@pytest.mark.parametrize("name", NAMES)
def test_ids_are_topological_and_deterministic(corpus, name):
    graph, tensors, documents = _documents(corpus, name)
    for document in documents:
        for index, node in enumerate(document["nodes"]):
            assert all(0 <= target < index for target in _references(node)), (index, node)
    assert relayviz_document(graph) == documents[0]


def test_embedded_weights_are_the_dat_values():
    model = nnef_torch.read_model(demo_model_path())
    document = relayviz_document(model.graph, model.tensors)
    by_name = {}
    for node in document["nodes"]:
        if node["node_kind"] == "Call":
            break
    consts = [node for node in document["nodes"] if node["node_kind"] == "Const"]
    variables = model.graph.signature.variables
    assert len(consts) == len(variables) == 6
    for node, variable in zip(consts, variables):
        expected = model.tensors[variable.key].array
        by_name[variable.label] = node
        assert node["dtype"] == "float32" and node["value"]["array_shape"] == list(variable.shape)
        assert np.array_equal(np.array(node["value"]["array_value"], dtype=np.float32).reshape(variable.shape),
                              expected)
    assert len(by_name) == 6


def test_exported_torch_values_are_embedded_by_label(corpus):
    graph, tensors = corpus["cnn"]
    document = relayviz_document(graph, tensors)
    consts = {tuple(node["value"]["array_shape"]): node for node in document["nodes"]
              if node["node_kind"] == "Const" and isinstance(node["value"], dict)}
    weight = tensors["0/weight"].detach().numpy()
    assert np.array_equal(_value_array(consts[weight.shape]), weight)


def test_split_outputs_are_read_through_tuple_get_item_once(corpus):
    graph, _ = corpus["arrays"]
    nodes = relayviz_document(graph)["nodes"]
    items = [(i, node) for i, node in enumerate(nodes) if node["node_kind"] == "TupleGetItem"]
    split = next(i for i, node in enumerate(nodes) if node["node_kind"] == "Op" and node["name"] == "split") + 1
    moments = next(i for i, node in enumerate(nodes) if node["node_kind"] == "Op" and node["name"] == "moments") + 1
    from_split = sorted(node["index"] for _, node in items if node["tuple_value"] == split)
    assert from_split == [0, 1, 2]  # p is used twice by concat and by nobody else: one item
    assert [node["index"] for _, node in items if node["tuple_value"] == moments] == [0]  # t is unused
    concat = next(node for node in nodes if node["node_kind"] == "Op" and node["name"] == "concat")
    call = nodes[nodes.index(concat) + 1]
    (array,) = call["args"]
    assert nodes[array]["node_kind"] == "Tuple" and len(nodes[array]["fields"]) == 4
    assert nodes[array]["fields"][0] == nodes[array]["fields"][3]


def test_literal_arguments_are_const_nodes(corpus):
    graph, _ = corpus["arrays"]
    nodes = relayviz_document(graph)["nodes"]
    literals = [(node["value"], node["dtype"]) for node in nodes
                if node["node_kind"] == "Const" and not isinstance(node["value"], dict)]
    assert (1.0, "float32") in literals and (0.0, "float32") in literals and (True, "bool") in literals


def test_constants_repeat_a_single_value_to_their_shape(corpus):
    graph, _ = corpus["arrays"]
    consts = [node for node in relayviz_document(graph)["nodes"] if node["node_kind"] == "Const"]
    assert {"node_kind": "Const", "value": {"array_value": [0.5] * 6, "array_shape": [2, 3]}, "dtype": "float32"} \
        in consts
    assert {"node_kind": "Const", "value": 3, "dtype": "int64"} in consts  # volume 1: a scalar
    assert {"node_kind": "Const", "value": {"array_value": [1.0, 2.0, 3.0], "array_shape": [3]},
            "dtype": "float32"} in consts


def test_huge_constant_keeps_its_single_value():
    graph = read_graph("version 1.0;\ngraph G( x ) -> ( y ) {\n  x = external(shape = [4000, 1000]);\n"
                       "  c = constant(shape = [4000, 1000], value = [0.25]);\n  y = add(x, c);\n}\n")
    document = relayviz_document(graph)
    const = next(node for node in document["nodes"] if node["node_kind"] == "Const")
    assert const == {"node_kind": "Const", "value": 0.25, "dtype": "float32"}
    assert parse_relayviz(json.dumps(document)) == document


def test_output_that_is_an_input_is_its_var():
    graph = read_graph("version 1.0;\ngraph G( x ) -> ( x, y ) {\n  x = external(shape = [2]);\n"
                       "  y = neg(x);\n}\n")
    nodes = relayviz_document(graph)["nodes"]
    function = nodes[-1]
    body = nodes[function["body"]]
    assert body["node_kind"] == "Tuple" and body["fields"][0] == function["params"][0] == 0


def test_bfloat16_values_are_written_as_float32():
    graph = read_graph("version 1.0;\ngraph G( x ) -> ( y ) {\n  x = external(shape = [2]);\n"
                       "  w = variable(shape = [2], label = 'w');\n  y = mul(x, w);\n}\n")
    document = relayviz_document(graph, {"w": torch.tensor([0.5, -2.0], dtype=torch.bfloat16)})
    const = next(node for node in document["nodes"] if node["node_kind"] == "Const")
    assert const == {"node_kind": "Const", "value": {"array_value": [0.5, -2.0], "array_shape": [2]},
                     "dtype": "float32"}


VALUES_TEXT = ("version 1.0;\ngraph G( x ) -> ( y ) {\n  x = external(shape = [2]);\n"
               "  w = variable(shape = [2], label = 'w');\n  v = variable(shape = [1, 2], label = 'v');\n"
               "  t = add(x, w);\n  y = mul(t, v);\n}\n")


def test_missing_and_misshapen_values_are_all_reported():
    graph = read_graph(VALUES_TEXT)
    with pytest.raises(NNEFOptionError) as caught:
        relayviz_document(graph, {"v": np.zeros(2, np.float32)})
    message = str(caught.value)
    assert "no values for variable 'w'" in message and "'v' have shape [2]" in message and "[1, 2]" in message


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_values_without_a_json_form_are_refused(bad):
    graph = read_graph(VALUES_TEXT)
    with pytest.raises(NNEFUnsupportedError, match="variable 'w'"):
        relayviz_document(graph, {"w": np.array([1.0, bad], np.float32), "v": np.ones((1, 2), np.float32)})


def test_written_file_has_one_node_per_line(tmp_path):
    graph = read_graph(VALUES_TEXT)
    write_relayviz(graph, tmp_path / "g.json")
    lines = (tmp_path / "g.json").read_text().splitlines()
    document = relayviz_document(graph)
    assert len(lines) == len(document["nodes"]) + 2
    assert [json.loads(line.strip().rstrip(",")) for line in lines[1:-1]] == document["nodes"]


@pytest.mark.parametrize("values, problem", [
    ([[1.0, 2.0], [3.0]], "not an array of numbers"),
    (np.array(["a", "b"]), "dtype <U1, not numbers"),
    (np.array([1 + 2j, 3j]), "dtype complex128, not numbers"),
    (np.array([object(), object()]), "dtype object, not numbers"),
])
def test_values_that_are_not_arrays_of_numbers_are_refused(values, problem):
    graph = read_graph(VALUES_TEXT)
    with pytest.raises(NNEFOptionError, match=problem):
        relayviz_document(graph, {"w": values, "v": np.ones((1, 2), np.float32)})


def test_tensors_must_be_a_mapping():
    with pytest.raises(NNEFOptionError, match="mapping"):
        relayviz_document(read_graph(VALUES_TEXT), [np.ones(2)])


def test_integers_past_64_bits_are_refused():
    graph = read_graph(VALUES_TEXT)
    with pytest.raises(NNEFUnsupportedError, match="beyond 2\\^63 - 1"):
        relayviz_document(graph, {"w": np.array([1, 2 ** 64 - 1], np.uint64), "v": np.ones((1, 2), np.float32)})


@pytest.mark.parametrize("value, path", [(math.inf, "nodes[0].value"), ({"k": [math.nan]}, "nodes[1].attrs.k[0]"),
                                         (2 ** 70, "nodes[0].value")])
def test_documents_without_a_json_form_are_refused_before_writing(value, path):
    from nnef_torch.errors import ForeignFormatError
    nodes = [{"node_kind": "Const", "value": 1.0, "dtype": "float32"}, {"node_kind": "Op", "name": "add", "attrs": {}}]
    if path.startswith("nodes[0]"):
        nodes[0]["value"] = value
    else:
        nodes[1]["attrs"] = value
    with pytest.raises(ForeignFormatError) as caught:
        format_relayviz({"format": "relayviz", "version": [1, 0], "nodes": nodes})
    assert caught.value.message.startswith(f"{path}: ")
