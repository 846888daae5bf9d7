"""ONNX external data (tensors kept in other files): read within the model's folder only, each range checked
against the file and the tensor's declaration before it is read. onnxruntime running the same file is the oracle."""
from __future__ import annotations

import builtins
import hashlib
import os
from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.errors import ForeignFormatError

onnx = pytest.importorskip("onnx")
MLP = Path(__file__).parent / "fixtures" / "mlp13.onnx"


def _saved(tmp_path: Path) -> Path:
    """mlp13 saved with every initializer in one external file, weights.bin, in the folder `tmp_path/model`."""
    folder = tmp_path / "model"
    folder.mkdir()
    path = folder / "mlp.onnx"
    onnx.save_model(onnx.load(str(MLP)), str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    return path


def _relocated(path: Path, edit) -> Path:
    """The model at `path` with `edit(entries)` applied to the external_data entries of its first initializer."""
    model = onnx.load_model_from_string(path.read_bytes())  # external data left in its file
    tensor = model.graph.initializer[0]
    entries = {entry.key: entry.value for entry in tensor.external_data}
    edit(entries)
    del tensor.external_data[:]
    for key, value in entries.items():
        tensor.external_data.add(key=key, value=value)
    path.write_bytes(model.SerializeToString())
    return path


@pytest.fixture
def outside(tmp_path):
    """A file beside the model's folder holding the first initializer's bytes (so a reader that escapes the
    folder would succeed), and a record of every file opened while the test runs."""
    model = onnx.load(str(MLP))
    first = onnx.numpy_helper.to_array(model.graph.initializer[0])
    target = tmp_path / "outside.bin"
    target.write_bytes(first.tobytes())
    return target


@pytest.fixture
def opened(monkeypatch):
    paths: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def spy_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)):
            paths.append(os.path.realpath(file))
        return real_open(file, *args, **kwargs)

    def spy_os_open(file, *args, **kwargs):
        paths.append(os.path.realpath(file))
        return real_os_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(os, "open", spy_os_open)
    return paths


def test_external_data_matches_onnxruntime(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    path = _saved(tmp_path)
    assert (path.parent / "weights.bin").stat().st_size > 0
    session = ort.InferenceSession(str(path))
    spec = session.get_inputs()[0]
    x = np.random.RandomState(0).randn(*spec.shape).astype(np.float32)
    module = nnef_torch.load(path)
    np.testing.assert_allclose(module(torch.from_numpy(x)).detach().numpy(), session.run(None, {spec.name: x})[0],
                               rtol=1e-4, atol=1e-5)


def test_checksum_is_checked(tmp_path):
    path = _saved(tmp_path)
    data = (path.parent / "weights.bin").read_bytes()
    first = onnx.load_model_from_string(path.read_bytes()).graph.initializer[0]
    length = int(next(entry.value for entry in first.external_data if entry.key == "length"))
    _relocated(path, lambda entries: entries.update(checksum=hashlib.sha1(data[:length]).hexdigest()))
    nnef_torch.load(path)
    _relocated(path, lambda entries: entries.update(checksum="0" * 40))
    with pytest.raises(ForeignFormatError, match="initializer '.*' .*SHA-1 checksum"):
        nnef_torch.load(path)


@pytest.mark.parametrize("case", ["parent", "absolute", "symlink"])
def test_a_file_outside_the_folder_is_refused_unread(tmp_path, outside, opened, case):
    path = _saved(tmp_path)
    if case == "symlink":
        (path.parent / "link.bin").symlink_to(outside)
    location = {"parent": "../outside.bin", "absolute": str(outside), "symlink": "link.bin"}[case]
    _relocated(path, lambda entries: entries.update(location=location, offset="0"))
    opened.clear()
    named = {"parent": r"'\.\./outside\.bin'", "absolute": "'/.*outside.bin'", "symlink": "file 'link.bin'"}[case]
    with pytest.raises(ForeignFormatError, match=rf"initializer '.*': external data .*{named}"):
        nnef_torch.load(path)
    assert str(outside.resolve()) not in opened


def test_a_missing_file_is_refused(tmp_path):
    path = _saved(tmp_path)
    (path.parent / "weights.bin").unlink()
    with pytest.raises(ForeignFormatError, match="initializer '.*': external data file 'weights.bin' cannot be "
                                                 "read"):
        nnef_torch.load(path)


def test_a_range_past_the_end_of_the_file_is_refused_before_reading(tmp_path):
    path = _saved(tmp_path)
    data = path.parent / "weights.bin"
    data.write_bytes(data.read_bytes()[:16])
    with pytest.raises(ForeignFormatError, match="runs past the end of 'weights.bin' \\(16 bytes\\)"):
        nnef_torch.load(path)


def test_a_length_that_disagrees_with_the_dims_is_refused(tmp_path):
    path = _saved(tmp_path)
    _relocated(path, lambda entries: entries.update(length=str(int(entries["length"]) - 4)))
    with pytest.raises(ForeignFormatError, match=r"initializer '.*': external data of .* bytes .* dims \[.*\] and "
                                                 "type need"):
        nnef_torch.load(path)


def test_a_constant_with_external_data_is_read_the_same_way(tmp_path, outside, opened):
    """A Constant node's value may keep its data outside too (onnx's own helper would read it relative to the
    working folder): refused alike."""
    value = onnx.helper.make_tensor("c", onnx.TensorProto.FLOAT, [2], [0.0, 0.0])
    value.ClearField("float_data")
    value.data_location = onnx.TensorProto.EXTERNAL
    value.external_data.add(key="location", value="../outside.bin")
    value.external_data.add(key="length", value="8")
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Constant", [], ["c"], value=value), onnx.helper.make_node("Add", ["x", "c"], ["y"])],
        "g", [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])])
    folder = tmp_path / "model"
    folder.mkdir()
    path = folder / "constant.onnx"
    path.write_bytes(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])
                     .SerializeToString())
    opened.clear()
    with pytest.raises(ForeignFormatError, match=r"tensor 'c': external data .*'\.\./outside\.bin'"):
        nnef_torch.load(path)
    assert str(outside.resolve()) not in opened
