"""ONNX inputs of symbolic extents (dim_param): a loaded module binds them at each call's shapes, `input_shapes=`
binds them at load, and a save for tract keeps them as tract symbols. onnxruntime running the same file is the
oracle; tract runs what is saved for it."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.errors import ExportError, ForeignFormatError, NNEFOptionError
from nnef_torch.formats import convert

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
FIXTURES = Path(__file__).parent / "fixtures" / "symbolic"
ALL = ["mlp_batch", "mlp_dynamo", "cnn_N", "attention_batch", "attention_seq"]
SAVED_FOR_TRACT = {"mlp_batch": ["batch"], "mlp_dynamo": ["batch"], "cnn_N": ["N"], "attention_batch": ["batch"]}


def _input(path: Path, batch: int, seq: int = 7) -> np.ndarray:
    """An input for `path` with its first symbolic extent at `batch` and any other at `seq`."""
    declared = ort.InferenceSession(str(path)).get_inputs()[0].shape
    symbolic = [axis for axis, extent in enumerate(declared) if not isinstance(extent, int)]
    shape = [batch if axis == symbolic[0] else seq if axis in symbolic else extent
             for axis, extent in enumerate(declared)]
    return np.random.RandomState(batch * 10 + seq).randn(*shape).astype(np.float32)


def _expected(path: Path, x: np.ndarray) -> np.ndarray:
    return _expected_of(path, {"x": x})


def _expected_of(path: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    return ort.InferenceSession(str(path)).run(None, feeds)[0]


def _edited(tmp_path: Path, edit) -> Path:
    model = onnx.load(str(FIXTURES / "mlp_batch.onnx"))
    edit(model.graph.input[0].type.tensor_type.shape.dim[0])
    path = tmp_path / "edited.onnx"
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.parametrize("name", ALL)
def test_loaded_module_runs_at_each_call_shapes(name):
    path = FIXTURES / f"{name}.onnx"
    module = nnef_torch.load(path)
    assert module.nnef.unbound is not None  # bound at the first call
    for batch, seq in ((2, 7), (5, 3), (2, 7), (1, 4)):
        x = _input(path, batch, seq)
        got = module(torch.from_numpy(x)).detach().numpy()
        np.testing.assert_allclose(got, _expected(path, x), rtol=1e-4, atol=1e-5)


def test_input_shapes_binds_them_at_load():
    path = FIXTURES / "attention_seq.onnx"
    module = nnef_torch.load(path, input_shapes={"x": [3, 4, 8]})
    assert module.nnef.unbound is None
    assert "external<scalar>(shape = [3, 4, 8])" in module.nnef.graph_text
    x = _input(path, 3, 4)
    np.testing.assert_allclose(module(torch.from_numpy(x)).detach().numpy(), _expected(path, x), rtol=1e-4,
                               atol=1e-5)


def test_converting_without_shapes_names_the_symbols():
    with pytest.raises(ForeignFormatError, match=r"graph input 'x' has symbolic extents \['batch', 'seq'\].*"
                                                 r"input_shapes="):
        convert(FIXTURES / "attention_seq.onnx")


def test_unnamed_unknown_extent_binds_at_call(tmp_path):
    path = _edited(tmp_path, lambda dim: dim.ClearField("dim_param"))
    module = nnef_torch.load(path)
    for batch in (2, 6):
        x = _input(path, batch)
        np.testing.assert_allclose(module(torch.from_numpy(x)).detach().numpy(), _expected(path, x), rtol=1e-4,
                                   atol=1e-5)


def test_default_save_is_static_standard_nnef(tmp_path):
    nnef = pytest.importorskip("nnef")
    path = FIXTURES / "cnn_N.onnx"
    module = nnef_torch.load(path)
    x = torch.from_numpy(_input(path, 2))
    with pytest.raises(NNEFOptionError, match="saving needs the module's input shapes.*call it once"):
        nnef_torch.save(module, tmp_path / "out", x)
    module(x)
    nnef_torch.save(module, tmp_path / "out", x)
    text = (tmp_path / "out" / "graph.nnef").read_text()
    assert "tract_symbol" not in text and "external<scalar>(shape = [2, 3, 8, 8])" in text
    graph = nnef.load_graph(str(tmp_path / "out"))
    nnef.infer_shapes(graph)
    assert graph.tensors[graph.inputs[0]].shape == [2, 3, 8, 8]
    assert graph.tensors[graph.outputs[0]].shape == [2, 5]


def _tract_outputs(folder: Path, x: np.ndarray) -> np.ndarray:
    tract = pytest.importorskip("tract")
    return tract.nnef().load(str(folder)).into_runnable().run([x])[0].to_numpy()


@pytest.mark.parametrize("name", sorted(SAVED_FOR_TRACT))
def test_tract_save_keeps_dim_params_as_symbols(name, tmp_path):
    pytest.importorskip("tract")
    path = FIXTURES / f"{name}.onnx"
    module = nnef_torch.load(path)
    nnef_torch.save(module, tmp_path / "out", torch.from_numpy(_input(path, 2)), target="tract")
    text = (tmp_path / "out" / "graph.nnef").read_text()
    symbols = SAVED_FOR_TRACT[name]
    assert re.findall(r"extension tract_symbol (\w+);", text) == symbols
    assert re.search(rf"x = external<scalar>\(shape = \[{symbols[0]}, ", text)
    for batch in (2, 5):
        x = _input(path, batch)
        np.testing.assert_allclose(_tract_outputs(tmp_path / "out", x), _expected(path, x), rtol=1e-4, atol=1e-5)


def test_tract_symbols_are_made_identifiers(tmp_path):
    path = _edited(tmp_path, lambda dim: setattr(dim, "dim_param", "batch size"))
    module = nnef_torch.load(path)
    nnef_torch.save(module, tmp_path / "out", torch.from_numpy(_input(path, 3)), target="tract")
    text = (tmp_path / "out" / "graph.nnef").read_text()
    assert "extension tract_symbol batch_size;" in text
    x = _input(path, 4)
    np.testing.assert_allclose(_tract_outputs(tmp_path / "out", x), _expected(path, x), rtol=1e-4, atol=1e-5)


def test_tract_save_of_a_fixed_inner_extent_says_why(tmp_path):
    path = FIXTURES / "attention_seq.onnx"
    module = nnef_torch.load(path)
    with pytest.raises(ExportError, match=r"symbols \['batch', 'seq'\].*leading axis"):
        nnef_torch.save(module, tmp_path / "out", torch.from_numpy(_input(path, 2, 5)), target="tract")


def test_inputs_naming_one_dim_param_share_its_symbol(tmp_path):
    tract = pytest.importorskip("tract")
    helper = onnx.helper
    inputs = [helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, ["batch", 4]) for name in ("a", "b")]
    graph = helper.make_graph([helper.make_node("Mul", ["a", "b"], ["p"]), helper.make_node("Relu", ["p"], ["y"])],
                              "shared", inputs, [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT,
                                                                               ["batch", 4])])
    path = tmp_path / "shared.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    module = nnef_torch.load(path)
    nnef_torch.save(module, tmp_path / "out", (torch.randn(3, 4), torch.randn(3, 4)), target="tract")
    text = (tmp_path / "out" / "graph.nnef").read_text()
    assert re.findall(r"extension tract_symbol (\w+);", text) == ["batch"]
    assert len(re.findall(r"external<scalar>\(shape = \[batch, 4\]\)", text)) == 2
    a, b = np.random.RandomState(1).randn(2, 6, 4).astype(np.float32)
    ran = tract.nnef().load(str(tmp_path / "out")).into_runnable().run([a, b])[0].to_numpy()
    np.testing.assert_allclose(ran, _expected_of(path, {"a": a, "b": b}), rtol=1e-5, atol=1e-6)
