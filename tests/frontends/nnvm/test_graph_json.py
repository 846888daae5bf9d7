"""The NNVM graph JSON container as the real loaders accept it: the node keys `attrs`, `attr` and `param` (and
pre-0.9 MXNet's `backward_source_id`), entries of 2 or 3 items, `control_deps`, typed graph attributes with the
inferred `shape` and `dtype` lists, hidden node attributes, and detection by content; each checked on a small
graph against a hand-written torch twin."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.errors import ForeignFormatError
from nnef_torch.frontends import detect
from nnef_torch.reader import read_model

RS = np.random.RandomState(5)
WEIGHT, BIAS = RS.standard_normal((4, 6)).astype(np.float32), RS.standard_normal(4).astype(np.float32)
PARAMS = {"fc_weight": WEIGHT, "fc_bias": BIAS}


def _fc_graph(attr_key: str = "attrs", entry: list[int] | None = None) -> dict:
    entry = entry or [0, 0, 0]
    return {"nodes": [{"op": "null", "name": "data", "inputs": []},
                      {"op": "null", "name": "fc_weight", "inputs": []},
                      {"op": "null", "name": "fc_bias", "inputs": []},
                      {"op": "FullyConnected", "name": "fc", attr_key: {"num_hidden": "4"},
                       "inputs": [entry, [1, 0], [2, 0, 0]]},
                      {"op": "Activation", "name": "act", attr_key: {"act_type": "tanh"}, "inputs": [[3, 0]]}],
            "arg_nodes": [0, 1, 2], "heads": [[4, 0]]}


def _twin(x: np.ndarray) -> np.ndarray:
    return np.tanh(x @ WEIGHT.T + BIAS)


def _write(tmp_path: Path, document: dict, name: str = "g.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


@pytest.mark.parametrize("attr_key", ["attrs", "attr", "param"])
def test_attribute_keys_of_every_writer(tmp_path, attr_key):
    module = nnef_torch.load(_write(tmp_path, _fc_graph(attr_key)), params=PARAMS, input_shapes={"data": [3, 6]})
    x = RS.standard_normal((3, 6)).astype(np.float32)
    np.testing.assert_allclose(module(torch.from_numpy(x)).detach().numpy(), _twin(x), rtol=1e-5, atol=1e-6)


def test_pre_0_9_mxnet_nodes_with_backward_source_id(tmp_path):
    document = _fc_graph("param")
    for node in document["nodes"]:
        node["backward_source_id"] = -1
    read_model(_write(tmp_path, document), params=PARAMS, input_shapes={"data": [3, 6]})


def test_control_deps_and_hidden_attributes_are_accepted(tmp_path):
    document = _fc_graph()
    document["nodes"][4]["control_deps"] = [3]
    document["nodes"][1]["attrs"] = {"__shape__": "(4, 6)", "__init__": "xavier", "__lr_mult__": "2.0",
                                     "__wd_mult__": "0", "__storage_type__": "0", "__dtype__": "0"}
    document["nodes"][3]["attrs"]["__layout__"] = "NC"
    read_model(_write(tmp_path, document), params=PARAMS, input_shapes={"data": [3, 6]})


def test_inferred_shape_and_dtype_in_graph_attributes_declare_the_input(tmp_path):
    document = _fc_graph()
    document["node_row_ptr"] = [0, 1, 2, 3, 4, 5]
    document["attrs"] = {"shape": ["list_shape", [[2, 6], [4, 6], [4], [2, 4], [2, 4]]],
                         "dtype": ["list_int", [0, 0, 0, 0, 0]], "mxnet_version": ["int", 10901],
                         "storage_id": ["list_int", [0, 1, 2, 3, 4]], "device_index": ["list_int", [1, 1, 1, 1, 1]]}
    model = read_model(_write(tmp_path, document), params=PARAMS)
    (external,) = model.graph.signature.externals
    assert (external.name, external.dtype, external.shape) == ("data", "scalar", (2, 6))


def test_input_shape_from_the_shape_attribute_of_the_argument(tmp_path):
    document = _fc_graph()
    document["nodes"][0]["attrs"] = {"__shape__": "(5, 6)"}
    model = read_model(_write(tmp_path, document), params=PARAMS)
    assert model.graph.signature.externals[0].shape == (5, 6)


def test_an_integer_input_dtype_is_kept(tmp_path):
    document = {"nodes": [{"op": "null", "name": "ids", "inputs": [], "attrs": {"__dtype__": "4",
                                                                                "__shape__": "(3,)"}},
                          {"op": "null", "name": "table", "inputs": []},
                          {"op": "Embedding", "name": "emb", "inputs": [[0, 0], [1, 0]],
                           "attrs": {"input_dim": "5", "output_dim": "2"}}],
                "arg_nodes": [0, 1], "heads": [[2, 0]]}
    model = read_model(_write(tmp_path, document), params={"table": np.eye(5, 2, dtype=np.float32)})
    assert model.graph.signature.externals[0].dtype == "integer"


def test_npz_parameters(tmp_path):
    np.savez(tmp_path / "weights.npz", **{"arg:fc_weight": WEIGHT, "arg:fc_bias": BIAS})
    module = nnef_torch.load(_write(tmp_path, _fc_graph()), params=tmp_path / "weights.npz",
                             input_shapes={"data": [3, 6]}, dtype=torch.float64)
    x = RS.standard_normal((3, 6))
    np.testing.assert_allclose(module(torch.from_numpy(x)).detach().numpy(), _twin(x), rtol=1e-6)
    assert module.get_parameter("fc_weight").dtype == torch.float64


def test_detection_by_content(tmp_path):
    graph = _write(tmp_path, _fc_graph(), "model.txt")
    assert detect(graph)[0] == "nnvm"
    from nnef_torch.cli import demo_model_path
    assert detect(demo_model_path())[0] == "nnef"
    other = _write(tmp_path, {"layers": []}, "other.json")
    with pytest.raises(ForeignFormatError, match="no graph format nnef_torch reads .*found layers"):
        nnef_torch.load(other)
    with pytest.raises(ValueError, match="unknown format 'onnx'"):
        nnef_torch.load(graph, format="onnx")


def test_forcing_nnef_on_a_json_file_reads_it_as_nnef_text(tmp_path):
    with pytest.raises(nnef_torch.NNEFError):
        nnef_torch.load(_write(tmp_path, _fc_graph()), format="nnef")
