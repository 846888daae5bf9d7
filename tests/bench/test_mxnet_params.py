"""The benchmark's MXNet helpers without MXNet: bench/mxnet_params.py writes what nnef_torch's `.params` reader reads
back (names, prefixes, dtypes, shapes, items), and the ResNet-50 twin of bench/mxnet_models.py names exactly the
symbol's arguments. (That `mx.nd.load` reads the writer's files, and that they equal `mx.nd.save`'s byte for byte, is
checked in MXNet's scratch venv by bench/make_mxnet_resnet50.py.)"""
from __future__ import annotations

import gzip
import importlib
import json
import sys
from pathlib import Path

import numpy as np

from nnef_torch.formats.nnvm.params import load_parameters, read_ndarray_list

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _bench_module(name: str):
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)


def test_written_file_reads_back_with_nnef_torchs_reader(tmp_path):
    writer = _bench_module("mxnet_params")
    rs = np.random.default_rng(0)
    arrays = {"arg:conv_weight": rs.standard_normal((4, 3, 2, 2)).astype(np.float32),
              "arg:dense_bias": rs.standard_normal(5).astype(np.float64),
              "aux:bn_running_var": rs.random((3,), dtype=np.float32) + 0.5,
              "arg:half": rs.standard_normal((2, 3)).astype(np.float16),
              "arg:ints": np.arange(-6, 6, dtype=np.int32).reshape(3, 4),
              "arg:bytes": np.arange(7, dtype=np.uint8), "arg:int8": np.arange(-3, 3, dtype=np.int8),
              "arg:int64": np.arange(4, dtype=np.int64)[::-1], "arg:empty_rows": np.zeros((0, 3), np.float32)}
    path = tmp_path / "net-0000.params"
    size = writer.write_ndarray_list(str(path), arrays)
    assert size == path.stat().st_size
    read = list(read_ndarray_list(path.read_bytes(), str(path)))
    assert [name for name, _ in read] == list(arrays)
    for (name, array), expected in zip(read, arrays.values()):
        assert array.dtype == expected.dtype and array.shape == expected.shape, name
        np.testing.assert_array_equal(array, expected, err_msg=name)
    parameters = load_parameters(str(path), None)
    assert parameters.aux == {"bn_running_var"} and "conv_weight" in parameters


def test_seeded_arrays_are_reproducible_and_variances_positive():
    writer = _bench_module("mxnet_params")
    shapes = {"x_weight": (8, 4, 3, 3), "x_running_var": (8,), "x_gamma": (8,), "x_beta": (8,)}
    first = writer.seeded_params(shapes, {"x_running_var"}, seed=3)
    again = writer.seeded_params(dict(reversed(shapes.items())), {"x_running_var"}, seed=3)
    assert list(first) == ["arg:x_weight", "aux:x_running_var", "arg:x_gamma", "arg:x_beta"]
    for name, array in first.items():
        assert array.dtype == np.float32
        np.testing.assert_array_equal(array, again[name])  # each array has its own stream
    assert first["aux:x_running_var"].min() >= 0.5 and first["arg:x_gamma"].min() >= 0.5


def test_the_twin_names_the_symbols_arguments():
    models = _bench_module("mxnet_models")
    with gzip.open(models.SYMBOL_GZ, "rt", encoding="utf-8") as handle:
        graph = json.load(handle)
    arguments = [graph["nodes"][i]["name"] for i in graph["arg_nodes"]]
    twin = models.GluonResNet50V1()
    names = twin.gluon_names()
    assert sorted(arguments) == sorted(["data", *names])
    state = twin.state_dict()
    for index in graph["arg_nodes"]:  # Gluon records each parameter's shape, 0 for extents inferred later
        node = graph["nodes"][index]
        if node["name"] == "data" or "__shape__" not in node.get("attrs", {}):
            continue
        extents = [int(e) for e in node["attrs"]["__shape__"].strip("()").split(",") if e.strip()]
        actual = tuple(state[names[node["name"]]].shape)
        assert len(extents) == len(actual) and all(e in (0, a) for e, a in zip(extents, actual)), node["name"]
