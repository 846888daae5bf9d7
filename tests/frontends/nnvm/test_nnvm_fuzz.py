"""Fuzzing the NNVM / MXNet front end: mutated graph JSON documents and `.params` files are converted or refused
with a located `NNEFError`; nothing else escapes (`NNEF_TORCH_FUZZ_SCALE` scales the example counts)."""
from __future__ import annotations

import copy
import json
import struct

from fuzzing import fuzz
from hypothesis import given
from hypothesis import strategies as st

from frontends.nnvm.test_bad_nnvm import SHAPE, graph, params, params_file
from nnef_torch.errors import NNEFError
from nnef_torch.frontends.nnvm.params import read_ndarray_list
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
