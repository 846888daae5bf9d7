"""The NNVM graph JSON container as the real loaders accept it: the node keys `attrs`, `attr` and `param` (and
pre-0.9 MXNet's `backward_source_id`), entries of 2 or 3 items, `control_deps`, typed graph attributes with the
inferred `shape` and `dtype` lists, hidden node attributes, and detection by content; each checked on a small
graph against a hand-written torch twin."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.errors import ForeignFormatError
from nnef_torch.formats import detect
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
    with pytest.raises(ForeignFormatError, match="not a valid ONNX protobuf"):
        nnef_torch.load(graph, format="onnx")


def test_forcing_nnef_on_a_json_file_reads_it_as_nnef_text(tmp_path):
    with pytest.raises(nnef_torch.NNEFError):
        nnef_torch.load(_write(tmp_path, _fc_graph()), format="nnef")


def test_names_beyond_ascii_are_read_and_kept_as_state_dict_keys(tmp_path):
    """MXNet takes any name; NNEF identifiers and labels are ASCII: the graph gets identifiers made of them (unique),
    the labels ASCII spellings, and the module the names themselves."""
    names = {"data": "données", "fc_weight": "é_weight", "fc_bias": "É_weight", "fc": "全连接", "act": "全连接"}
    document = _fc_graph()
    for node in document["nodes"]:
        node["name"] = names[node["name"]]
    path = tmp_path / "model.json"
    path.write_text(json.dumps(document, ensure_ascii=False, indent=1), encoding="utf-8")
    assert detect(path)[0] == "nnvm"
    module = nnef_torch.load(path, params={"é_weight": WEIGHT, "É_weight": BIAS}, input_shapes={"données": [3, 6]})
    assert sorted(module.state_dict()) == ["É_weight", "é_weight"]
    x = RS.standard_normal((3, 6)).astype(np.float32)
    np.testing.assert_allclose(module(torch.from_numpy(x)).detach().numpy(), _twin(x), rtol=1e-5, atol=1e-6)
    labels = {module.label_of(key) for key in module.state_dict()}
    assert len(labels) == 2 and all(label.isascii() for label in labels)


def test_detection_skips_white_space_and_refuses_a_fifo(tmp_path):
    padded = tmp_path / "padded.json"
    padded.write_text("\ufeff" + " \n" * 40_000 + json.dumps(_fc_graph()), encoding="utf-8")
    assert detect(padded)[0] == "nnvm"
    fifo = tmp_path / "model.json"
    os.mkfifo(fifo)
    with pytest.raises(nnef_torch.NNEFError, match="not a regular file"):
        detect(fifo)  # refused before it is opened: nothing blocks


def test_nodes_sharing_one_name_are_named_in_linear_work():
    """The builder names the n tensors made after one node name with about n lookups, not n^2 / 2 (MXNet does not
    make node names unique)."""
    from nnef_torch.ir.builder import Builder

    class Counting(set):
        lookups = 0

        def __contains__(self, item: object) -> bool:
            Counting.lookups += 1
            return super().__contains__(item)

    builder = Builder()
    builder._used = Counting(builder._used)
    names = [builder.fresh("act") for _ in range(3000)]
    assert len(set(names)) == 3000
    assert Counting.lookups < 4 * 3000
