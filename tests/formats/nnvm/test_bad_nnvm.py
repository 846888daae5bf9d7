"""The bad-input suite of the NNVM / MXNet front end: graph JSON, attribute strings and `.params` files that are
malformed, inconsistent or lying. Each row is one file that must be refused with a `ForeignFormatError` (an
`NNEFError`) naming the file and what is wrong where: line:column for JSON syntax, the node's index and name for
graph problems, the byte offset for `.params` problems."""
from __future__ import annotations

import copy
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import nnef_torch
from nnef_torch.errors import ForeignFormatError, NNEFError, NNEFOptionError, NNEFUnsupportedError
from nnef_torch.formats.nnvm.params import read_ndarray_list
from nnef_torch.reader import read_model

SHAPE = [1, 2, 5, 5]


def graph() -> dict:
    """data -> Convolution(3x3, 3 filters) -> Activation(relu), as MXNet 1.9 writes it."""
    return {
        "nodes": [
            {"op": "null", "name": "data", "inputs": []},
            {"op": "null", "name": "conv_weight", "inputs": []},
            {"op": "null", "name": "conv_bias", "inputs": []},
            {"op": "Convolution", "name": "conv", "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]],
             "attrs": {"kernel": "(3, 3)", "num_filter": "3", "pad": "(1, 1)"}},
            {"op": "Activation", "name": "relu", "inputs": [[3, 0, 0]], "attrs": {"act_type": "relu"}},
        ],
        "arg_nodes": [0, 1, 2],
        "node_row_ptr": [0, 1, 2, 3, 4, 5],
        "heads": [[4, 0, 0]],
        "attrs": {"mxnet_version": ["int", 10901]},
    }


def params() -> dict[str, np.ndarray]:
    rs = np.random.RandomState(0)
    return {"arg:conv_weight": rs.standard_normal((3, 2, 3, 3)).astype(np.float32),
            "arg:conv_bias": rs.standard_normal(3).astype(np.float32)}


def ndarray_v2(array: np.ndarray, flag: int = 0) -> bytes:
    """One dense array as MXNet's NDArray::Save writes it (V2 magic, storage 0, int64 extents, cpu context)."""
    head = struct.pack("<Iii", 0xF993FAC9, 0, array.ndim) + struct.pack(f"<{array.ndim}q", *array.shape)
    return head + struct.pack("<iii", 1, 0, flag) + array.astype("<f4").tobytes()


def params_file(arrays: dict[str, np.ndarray]) -> bytes:
    body = b"".join(ndarray_v2(array) for array in arrays.values())
    names = b"".join(struct.pack("<Q", len(name.encode())) + name.encode() for name in arrays)
    return struct.pack("<QQQ", 0x112, 0, len(arrays)) + body + struct.pack("<Q", len(arrays)) + names


def _load(tmp_path: Path, document: dict | str, data: bytes | dict | Path | None = None, **options):
    """Load `document` with the .params file of `data` (bytes) beside it, or `data` (a mapping or a path) given."""
    symbol = tmp_path / "model-symbol.json"
    symbol.write_text(document if isinstance(document, str) else json.dumps(document))
    if isinstance(data, (dict, Path)):
        options["params"] = data
    else:
        (tmp_path / "model-0000.params").write_bytes(params_file(params()) if data is None else data)
    return nnef_torch.load(symbol, input_shapes={"data": SHAPE}, **options)


def test_the_valid_model_loads_and_computes_its_twin(tmp_path):
    import torch
    model = _load(tmp_path, graph())
    x = torch.randn(SHAPE)
    weights = {name.split(":")[1]: torch.from_numpy(value) for name, value in params().items()}
    expected = torch.relu(torch.conv2d(x, weights["conv_weight"], weights["conv_bias"], padding=1))
    torch.testing.assert_close(model(x), expected)


# --------------------------------------------------------------------------------------------- the graph JSON
@dataclass(frozen=True)
class BadGraph:
    id: str
    edit: Callable[[dict], object]
    message: str  # a piece of the message
    node: str | None = None  # "node 3 'conv'" where the error is about a node


def _set(path: tuple, value: object) -> Callable[[dict], None]:
    def edit(document: dict) -> None:
        target = document
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return edit


def _delete(*path: object) -> Callable[[dict], None]:
    def edit(document: dict) -> None:
        target = document
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return edit


def _attr(key: str, value: str) -> Callable[[dict], None]:
    return _set(("nodes", 3, "attrs", key), value)


GRAPH_ROWS = [
    BadGraph("no_heads", _delete("heads"), "has no heads"),
    BadGraph("nodes_not_a_list", _set(("nodes",), {"op": "null"}), "'nodes' must be a non-empty list"),
    BadGraph("node_without_op", _delete("nodes", 3, "op"), "node 3 has no 'op' string"),
    BadGraph("node_with_unknown_key", _set(("nodes", 3, "outputs"), []), "unknown keys ['outputs']", "node 3 'conv'"),
    BadGraph("entry_of_one_item", _set(("nodes", 4, "inputs"), [[3]]), "must be an entry [node, output]",
             "node 4 'relu'"),
    BadGraph("entry_with_string", _set(("nodes", 4, "inputs"), [["3", 0, 0]]), "must be an entry", "node 4 'relu'"),
    BadGraph("entry_out_of_range", _set(("nodes", 4, "inputs"), [[-1, 0, 0]]), "out of range", "node 4 'relu'"),
    BadGraph("entry_reads_a_later_node", _set(("nodes", 3, "inputs"), [[4, 0, 0], [1, 0, 0], [2, 0, 0]]),
             "not in topological order, or they form a cycle", "node 3 'conv'"),
    BadGraph("entry_reads_itself", _set(("nodes", 4, "inputs"), [[4, 0, 0]]), "form a cycle", "node 4 'relu'"),
    BadGraph("entry_reads_a_missing_output", _set(("nodes", 4, "inputs"), [[3, 2, 0]]),
             "reads output 2 of node 3 'conv' (Convolution), which has 1 output(s)", "node 4 'relu'"),
    BadGraph("head_out_of_range", _set(("heads",), [[9, 0, 0]]), "head 0 reads node 9, which is out of range"),
    BadGraph("head_reads_a_missing_output", _set(("heads",), [[4, 1, 0]]), "a head reads output 1 of node 4"),
    BadGraph("arg_node_is_an_operator", _set(("arg_nodes",), [0, 1, 2, 3]), "arg_nodes names node 3 'conv'"),
    BadGraph("argument_not_in_arg_nodes", _set(("arg_nodes",), [0, 1]), "arg_nodes does not list it",
             "node 2 'conv_bias'"),
    BadGraph("argument_with_inputs", _set(("nodes", 2, "inputs"), [[0, 0, 0]]), "has inputs", "node 2 'conv_bias'"),
    BadGraph("row_ptr_too_short", _set(("node_row_ptr",), [0, 1, 2]), "node_row_ptr has 3 items"),
    BadGraph("row_ptr_not_the_running_sum", _set(("node_row_ptr",), [0, 1, 2, 3, 4, 6]),
             "node_row_ptr[5] - node_row_ptr[4] is 2, but node 4 'relu' (Activation) has 1 output(s)"),
    BadGraph("row_ptr_as_dfs_order", _set(("node_row_ptr",), [0, 1, 2, 3, 5, 6]), "node 3 'conv'"),
    BadGraph("graph_attr_untyped", _set(("attrs", "mxnet_version"), 10901), "graph attribute 'mxnet_version'"),
    BadGraph("graph_attr_wrong_type", _set(("attrs", "shape"), ["list_shape", [[1, "2"]]]),
             "not a valid list_shape"),
    BadGraph("attr_value_not_a_string", _set(("nodes", 3, "attrs", "num_filter"), 3),
             "'attrs' must map attribute names to strings", "node 3 'conv'"),
    BadGraph("attr_tuple_with_a_word", _attr("kernel", "(3, x)"), "attribute 'kernel'", "node 3 'conv'"),
    BadGraph("attr_tuple_not_closed", _attr("kernel", "(3, 3"), "attribute 'kernel'", "node 3 'conv'"),
    BadGraph("attr_integer_with_fraction", _attr("num_filter", "3.5"), "attribute 'num_filter'", "node 3 'conv'"),
    BadGraph("attr_integer_huge", _attr("num_filter", "9" * 40), "out of range", "node 3 'conv'"),
    BadGraph("attr_bool_maybe", _attr("no_bias", "maybe"), "expected True, False, 1 or 0", "node 3 'conv'"),
    BadGraph("attr_missing", _delete("nodes", 3, "attrs", "num_filter"), "attribute 'num_filter' is missing",
             "node 3 'conv'"),
    BadGraph("attr_unknown", _attr("kernal", "(3, 3)"), "attributes ['kernal'] are not understood", "node 3 'conv'"),
    BadGraph("attr_choice_unknown", _set(("nodes", 4, "attrs", "act_type"), "swish"),
             "attribute 'act_type' must be one of", "node 4 'relu'"),
    BadGraph("kernel_of_wrong_rank", lambda d: d["nodes"][3]["attrs"].update(kernel="(3, 3, 3)", pad="(1, 1, 1)"),
             "a 3-D kernel needs a rank-5 input, found shape [1, 2, 5, 5]", "node 3 'conv'"),
    BadGraph("pad_of_wrong_rank", _attr("pad", "(1, 1, 1)"), "attribute 'pad' has 3 items; the kernel has 2",
             "node 3 'conv'"),
    BadGraph("tuple_nests_too_deeply", _attr("pad", "(" * 20 + ")" * 20), "nests more than", "node 3 'conv'"),
    BadGraph("subgraphs", _set(("nodes", 4, "subgraphs"), [{}]), "subgraphs (control flow)", "node 4 'relu'"),
    # NNEF has no literal for infinities: refused where the attribute is read, naming it
    BadGraph("attr_number_not_finite", _set(("nodes", 4), {"op": "LeakyReLU", "name": "relu", "inputs": [[3, 0, 0]],
                                                           "attrs": {"act_type": "leaky", "slope": "1e999"}}),
             "attribute 'slope': '1e999' is not a finite number", "node 4 'relu' (LeakyReLU)"),
    BadGraph("attr_tuple_item_not_finite", _attr("pad", "(1, -inf)"), "attribute 'pad': '-inf' is not a finite",
             "node 3 'conv'"),
    # every field of the wrong JSON type is a located refusal
    BadGraph("graph_attr_type_not_a_string", _set(("attrs", "mxnet_version"), [["int"], 10901]),
             "graph attribute 'mxnet_version' must be [type, value]"),
    BadGraph("graph_attr_shape_of_another_type", _set(("attrs", "shape"), ["str", "[1, 2]"]),
             "graph attribute 'shape' must be a list_shape, found a str"),
    BadGraph("attr_tuple_past_the_item_limit", _attr("kernel", "(" + "3, " * 70_000 + "3)"),
             "attribute 'kernel': tuple '(3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, ...' has more than 65,536 items",
             "node 3 'conv'"),
    BadGraph("heads_past_the_limit", _set(("heads",), [[4, 0, 0]] * 5000),
             "'heads' (the graph's outputs) gives 5,000, more than the limit of 4,096"),
]


@pytest.mark.parametrize("row", GRAPH_ROWS, ids=[row.id for row in GRAPH_ROWS])
def test_bad_graph_is_refused_naming_file_and_node(tmp_path, row: BadGraph):
    document = copy.deepcopy(graph())
    row.edit(document)
    with pytest.raises(ForeignFormatError) as caught:
        _load(tmp_path, document, format="nnvm")
    text = str(caught.value)
    assert row.message in text
    assert "model-symbol.json" in text
    if row.node is not None:
        assert row.node in text


def test_malformed_json_is_refused_at_its_line_and_column(tmp_path):
    lines = json.dumps(graph(), indent=1).split("\n")
    line = next(i for i, text in enumerate(lines) if '"act_type": "relu"' in text)
    lines[line] = lines[line].replace('"relu"', "relu")  # a bare word: JSON has no such value
    with pytest.raises(ForeignFormatError) as caught:
        _load(tmp_path, "\n".join(lines))
    location = caught.value.location
    assert "malformed JSON" in caught.value.message
    assert (location.line, location.column) == (line + 1, lines[line].index("relu") + 1)
    assert location.file.endswith("model-symbol.json")


@pytest.mark.parametrize("text, message", [
    ('{"nodes": [' * 100, "nests more than 64 levels"),
    ('{"nodes": [], "arg_nodes": [], "heads": [1' + "0" * 30 + "]}", "out of range"),
    ('{"nodes": [], "arg_nodes": [], "heads": [NaN]}', "NaN and infinities are not JSON"),
    (b'\xff\xfe{"nodes": []}', "not valid UTF-8"),
], ids=["deep_nesting", "huge_integer", "nan", "utf16"])
def test_hostile_json_is_refused_before_it_costs(tmp_path, text, message):
    symbol = tmp_path / "model-symbol.json"
    symbol.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(NNEFError) as caught:
        nnef_torch.load(symbol, format="nnvm", params={})
    assert message in str(caught.value)


def _one_op(tmp_path: Path, op: str, attrs: dict[str, str], shape: str | None = "(2, 3)"):
    """Read data (of `shape`, given as its __shape__) -> one node `op` with `attrs`; no input where `shape` is None."""
    document = {"nodes": [{"op": "null", "name": "data", "inputs": [], "attrs": {"__shape__": shape or "(1,)"}},
                          {"op": op, "name": "node", "inputs": [[0, 0, 0]] if shape else [], "attrs": attrs}],
                "arg_nodes": [0], "heads": [[1, 0, 0]]}
    symbol = tmp_path / "one-symbol.json"
    symbol.write_text(json.dumps(document))
    return read_model(symbol, params={})


@pytest.mark.parametrize("op, attrs, shape, message", [
    # an input's shape is checked as a shape, naming its node
    ("relu", {}, "(4294967296, 4294967296, 4294967296)", "node 0 'data': input shape [4294967296,4294967296,"
                                                         "4294967296] has a volume beyond 2^63 - 1"),
    ("relu", {}, "(" + "1, " * 40 + "1)", "node 0 'data': attribute '__shape__': tuple '(1, 1, 1"),
    # shapes longer than a rank are refused while the text is read
    ("Reshape", {"shape": "(" + "1, " * 200 + "1)"}, "(2, 3)", "attribute 'shape': tuple '(1, 1, 1"),
    ("_zeros", {"shape": "(" + "1, " * 40 + "1)"}, None, "has more than 32 items"),
    ("_zeros", {"shape": "(4294967296, 4294967296, 4294967296)"}, None,
     "attribute 'shape': shape [4294967296,4294967296,4294967296] has a volume beyond 2^63 - 1"),
    # counts from attributes are checked before the lists they make
    ("expand_dims", {"axis": "0", "num_newaxis": str(1 << 40)}, "(2, 3)", "num_newaxis 1099511627776 must be"),
    ("SliceChannel", {"num_outputs": str(1 << 40), "axis": "0"}, f"({1 << 40}, 1)",
     "num_outputs gives 1,099,511,627,776, more than the limit of 4,096"),
    ("one_hot", {"depth": str(1 << 31)}, "(2, 3)", "one_hot positions (depth) (items computed while reading) gives "
                                                   "2,147,483,648, more than the limit of 4,194,304"),
    ("resize", {"size": f"({1 << 40}, 3)"}, "(1, 1, 2, 2)", "resizing axis 2 to 1,099,511,627,776 items"),
    # tuples of the wrong kind of items
    ("multibox_prior", {"sizes": "(None,)"}, "(1, 1, 2, 2)", "attribute 'sizes' must hold numbers"),
    ("slice", {"begin": "(0.5,)", "end": "(1,)"}, "(2, 3)", "attribute 'begin' must hold integers or None"),
    # values computed from finite attributes that overflow float32 (NNEF has no literal for infinities)
    ("_arange", {"start": "1e38", "stop": "1e39", "step": "1e38"}, None, "gives values beyond the range of float32"),
    ("multibox_prior", {"sizes": "(1e39,)"}, "(1, 1, 2, 2)", "give anchors beyond the range of float32"),
], ids=["input_volume", "input_rank", "reshape_codes", "zeros_rank", "zeros_volume", "expand_dims_count",
        "split_count", "one_hot_depth", "resize_extent", "prior_sizes_none", "slice_begin_fraction", "arange_overflow",
        "prior_overflow"])
def test_sizes_from_attributes_are_checked_before_anything_is_built(tmp_path, op, attrs, shape, message):
    with pytest.raises(ForeignFormatError) as caught:
        _one_op(tmp_path, op, attrs, shape)
    assert message in str(caught.value)
    assert "one-symbol.json" in str(caught.value)
    assert "node 1 'node'" in str(caught.value) or "node 0 'data'" in str(caught.value)


@pytest.mark.parametrize("op, attrs, shape", [
    ("resize", {"size": "(4, 9)"}, "(1,)"),
    ("avg_pool2d", {"pool_size": "(3, 3)", "padding": "(1, 1)"}, "(1, 2, 6, 6, 2)"),
], ids=["resize_of_a_vector", "pool_of_rank_5"])
def test_input_of_another_rank_than_its_layout_is_refused(tmp_path, op, attrs, shape):
    with pytest.raises(ForeignFormatError, match=r"node 1 'node' \(\w+\): layout N\w+ has 4 axes but the tensor has"):
        _one_op(tmp_path, op, attrs, shape)


def _arange(name: str, stop: int) -> dict:
    return {"op": "_arange", "name": name, "inputs": [], "attrs": {"stop": str(stop)}}


DATA = {"op": "null", "name": "data", "inputs": [], "attrs": {"__shape__": "(2000, 1, 1)"}}


@pytest.mark.parametrize("nodes, message", [
    # what one node's rule makes one by one, and what a graph's rules compute, is bounded
    ([DATA, {"op": "null", "name": "p", "inputs": []},
      {"op": "null", "name": "s", "inputs": [], "attrs": {"__shape__": "(1, 1, 1)"}},
      {"op": "RNN", "name": "rnn", "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]],
       "attrs": {"mode": "rnn_tanh", "state_size": "1", "num_layers": "1"}}],
     "node 3 'rnn' (RNN): cell steps (time steps x layers x directions) gives 2,000, more than the limit of 1,024"),
    ([{**DATA, "attrs": {"__shape__": "(5000, 1)"}},
      {"op": "SliceChannel", "name": "split", "inputs": [[0, 0, 0]], "attrs": {"num_outputs": "5000", "axis": "0"}}],
     "node 1 'split' (SliceChannel): num_outputs gives 5,000, more than the limit of 4,096"),
    ([DATA, _arange("a", 200_000), _arange("b", 200_000),
      {"op": "elemwise_add", "name": "sum", "inputs": [[1, 0, 0], [2, 0, 0]]},
      {"op": "broadcast_add", "name": "out", "inputs": [[0, 0, 0], [3, 0, 0]]}],
     "node 2 'b' (_arange): arange (with the items computed for the graph before) gives 400,000, more than the "
     "limit of 262,144"),
    # NNEF graphs take an input
    ([DATA, _arange("a", 10)], "the graph reads no input"),
], ids=["rnn_steps", "split_outputs", "computed_items_of_the_graph", "no_input"])
def test_what_a_graph_expands_into_is_bounded(tmp_path, nodes, message):
    document = {"nodes": nodes, "arg_nodes": [i for i, node in enumerate(nodes) if node["op"] == "null"],
                "heads": [[len(nodes) - 1, 0, 0]]}
    symbol = tmp_path / "g-symbol.json"
    symbol.write_text(json.dumps(document))
    with pytest.raises(ForeignFormatError) as caught:
        read_model(symbol, params={"p": np.zeros(4, np.float32)} if nodes[1]["name"] == "p" else {})
    assert message in str(caught.value)


def test_input_shapes_option_of_the_wrong_type_is_an_option_error(tmp_path):
    symbol = tmp_path / "model-symbol.json"
    symbol.write_text(json.dumps(graph()))
    for shape in (["a"], [1.5, 2], [[2], 3]):
        with pytest.raises(NNEFOptionError, match=r"input_shapes\['data'\] must be a sequence of integers"):
            nnef_torch.load(symbol, params={n.split(":")[1]: v for n, v in params().items()}, input_shapes={"data": shape})


def test_unsupported_operators_are_listed_together_with_index_and_name(tmp_path):
    document = graph()
    document["nodes"][3]["op"] = "Convolution_v9"
    document["nodes"][4]["op"] = "_contrib_Fancy"
    with pytest.raises(NNEFUnsupportedError) as caught:
        _load(tmp_path, document)
    text = str(caught.value)
    assert "2 node(s) use operators nnef_torch does not read (Convolution_v9, _contrib_Fancy)" in text
    assert "node 3 'conv' (Convolution_v9)" in text and "node 4 'relu' (_contrib_Fancy)" in text


# --------------------------------------------------------------------------------------------- parameters
def test_missing_extra_and_misshapen_parameters_are_named_in_one_error(tmp_path):
    arrays = params()
    arrays["arg:conv_weight"] = arrays["arg:conv_weight"][:, :1]  # (3, 1, 3, 3): wrong shape
    del arrays["arg:conv_bias"]
    arrays["arg:fc_weight"] = np.zeros((2, 2), np.float32)  # matches no argument
    with pytest.raises(ForeignFormatError) as caught:
        _load(tmp_path, graph(), params_file(arrays))
    text = str(caught.value)
    assert "3 parameter problem(s)" in text
    assert "'conv_weight' (weight of node 3 'conv' (Convolution)) has shape [3, 1, 3, 3], expected [3, 2, 3, 3]" in text
    assert "'conv_bias' (input 2 of node 3 'conv' (Convolution)) is not in the parameters" in text
    assert "'fc_weight' matches no argument of the graph" in text


def test_parameter_of_an_integer_type_is_named(tmp_path):
    arrays = params()
    arrays["arg:conv_weight"] = arrays["arg:conv_weight"].astype(np.int32)
    with pytest.raises(ForeignFormatError) as caught:
        _load(tmp_path, graph(), {name.split(":")[1]: value for name, value in arrays.items()})
    assert "'conv_weight' (weight of node 3 'conv' (Convolution)) has dtype int32, expected a floating point type" \
        in str(caught.value)


@pytest.mark.parametrize("weight", [np.array([object()] * 2), [[1.0], [2.0, 3.0]], "weights", np.zeros(2, complex)],
                         ids=["objects", "ragged", "string", "complex"])
def test_parameter_mapping_of_other_things_is_an_option_error(tmp_path, weight):
    arrays = {"conv_weight": weight, "conv_bias": params()["arg:conv_bias"]}
    with pytest.raises(NNEFOptionError, match=r"params\['conv_weight'\] must be a numeric array"):
        _load(tmp_path, graph(), arrays)


def test_parameters_that_are_neither_a_path_nor_a_mapping_are_an_option_error(tmp_path):
    symbol = tmp_path / "model-symbol.json"
    symbol.write_text(json.dumps(graph()))
    with pytest.raises(NNEFOptionError, match="params= must be a path"):
        nnef_torch.load(symbol, params=5, input_shapes={"data": SHAPE})


def test_npz_whose_header_claims_more_than_its_member_is_refused_before_reading(tmp_path):
    import io
    import zipfile
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, np.zeros(4, np.float32))
    member = bytearray(buffer.getvalue())
    header = member.index(b"(4,)")
    member[header:header + 4] = b"(9,)"  # 9 items claimed, 4 stored
    archive = tmp_path / "weights.npz"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.writestr("conv_bias.npy", bytes(member))
    with pytest.raises(ForeignFormatError, match="array 'conv_bias' claims shape \\[9\\] of float32, more than"):
        _load(tmp_path, graph(), archive)


def test_npz_that_inflates_far_past_its_size_is_refused_before_reading(tmp_path):
    """A compressed .npz of 128 MiB of zeros (a few hundred KiB on disk): its arrays may take at most 20 times the
    archive's size, and the refusal comes before the data is inflated."""
    import io
    import tracemalloc
    import zipfile

    from nnef_torch.formats.nnvm.params import load_parameters
    archive, items = tmp_path / "bomb.npz", 32 << 20
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (items,)})
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        with zipped.open("conv_bias.npy", "w", force_zip64=True) as member:
            member.write(header.getvalue())
            for _ in range(items * 4 // (1 << 22)):
                member.write(bytes(1 << 22))
    tracemalloc.start()
    with pytest.raises(ForeignFormatError, match="past 20 times the size of the archive"):
        load_parameters(archive, None)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 16 << 20


def test_parameters_given_twice_are_refused(tmp_path):
    with pytest.raises(ForeignFormatError, match="parameter 'conv_bias' is given twice"):
        _load(tmp_path, graph(), params_file({**params(), "aux:conv_bias": np.zeros(3, np.float32)}))


def test_several_parameter_files_beside_the_symbol_are_listed(tmp_path):
    (tmp_path / "model-0007.params").write_bytes(params_file(params()))
    with pytest.raises(ForeignFormatError) as caught:
        _load(tmp_path, graph())
    assert "model-0000.params, model-0007.params" in str(caught.value)
    assert "pass params=" in str(caught.value)


def test_no_parameter_file_beside_the_symbol_is_explained(tmp_path):
    symbol = tmp_path / "model-symbol.json"
    symbol.write_text(json.dumps(graph()))
    with pytest.raises(ForeignFormatError, match="no model-NNNN.params beside this symbol file"):
        nnef_torch.load(symbol, input_shapes={"data": SHAPE})


def _good() -> bytes:
    return params_file(params())


def _patch(offset: int, fmt: str, value: int) -> Callable[[], bytes]:
    def make() -> bytes:
        data = bytearray(_good())
        struct.pack_into(fmt, data, offset, value)
        return bytes(data)
    return make


# byte offsets in the valid file: header 24, then array 0 (conv_weight): magic 24, storage 28, rank 32,
# extents 36..68, context 68, type flag 76, data 80
PARAMS_ROWS = [
    ("wrong_magic", _patch(0, "<Q", 0x113), "not an MXNet parameter file: magic 0x113", 0),
    ("truncated_header", lambda: _good()[:12], "the file header needs 16 bytes but 12 are left", 0),
    ("truncated_count", lambda: _good()[:20], "the number of arrays needs 8 bytes but 4 are left", 16),
    ("array_count_lies", _patch(16, "<Q", 1 << 40), "the number of arrays is 1,099,511,627,776", 16),
    ("rank_lies", _patch(32, "<i", 1 << 30), "array 0 has rank 1073741824", 32),
    ("extent_lies", _patch(36, "<q", 1 << 20), "the data of array 0", None),
    ("extent_beyond_any_array", _patch(36, "<q", 1 << 50), "beyond 1,099,511,627,776 items", 32),
    ("negative_extent", _patch(36, "<q", -3), "negative extent", 32),
    ("unknown_type_flag", _patch(76, "<i", 99), "unknown type flag 99", 76),
    ("sparse_storage", _patch(28, "<i", 1), "row_sparse (sparse) array", 24),
    ("truncated_data", lambda: _good()[:120], "the data of array 0", None),
    ("name_count_lies", lambda: _good()[:-(8 + 14 + 8 + 12)] + struct.pack("<Q", 1 << 60), "the number of names",
     None),
    ("trailing_bytes", lambda: _good() + b"\0" * 5, "5 unexpected bytes after the names", None),
    ("names_and_arrays_differ", lambda: _good()[:-(8 + 14 + 8 + 12)] + struct.pack("<QQ", 1, 14) + b"arg:conv_bias",
     "", None),
]


@pytest.mark.parametrize("name, make, message, offset", PARAMS_ROWS, ids=[row[0] for row in PARAMS_ROWS])
def test_bad_params_file_is_refused_at_its_byte(tmp_path, name, make, message, offset):
    data = make()
    with pytest.raises(ForeignFormatError) as caught:
        _load(tmp_path, graph(), data)
    error = caught.value
    assert message in error.message
    assert error.location.file.endswith("model-0000.params")
    assert error.location.offset is not None
    if offset is not None:
        assert error.location.offset == offset


def test_params_reader_reads_what_it_is_given_and_allocates_nothing_for_lies():
    import tracemalloc
    data = bytearray(_good())
    struct.pack_into("<q", data, 36, 1 << 40)  # conv_weight claims 2^40 x 2 x 3 x 3 items
    tracemalloc.start()
    with pytest.raises(ForeignFormatError):
        list(read_ndarray_list(bytes(data), "x.params"))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 1 << 20
    arrays = dict(read_ndarray_list(_good(), "x.params"))
    for name, value in params().items():
        np.testing.assert_array_equal(arrays[name], value)
