"""Reading whole models: conformance folders, archives, .dat agreement with the Khronos reader, bad tensors."""
from __future__ import annotations

import shutil

import numpy as np
import pytest
from khronos import conformance_cases, khronos, require_conformance

from nnef_torch.errors import NNEFContainerError, NNEFTensorFileError
from nnef_torch.format import container, tensor_file
from nnef_torch.reader import read_model


def test_every_conformance_model_reads_with_data_equal_to_khronos():
    require_conformance()
    nnef = khronos()
    for case in conformance_cases():
        model = read_model(case)
        theirs = nnef.load_graph(str(case))
        for variable in model.graph.signature.variables:
            expected = theirs.tensors[variable.name].data
            np.testing.assert_array_equal(model.tensor(variable).array, expected, err_msg=case.name)


def test_archive_reads_like_the_folder(tmp_path):
    require_conformance()
    case = conformance_cases()[0].parent / "mnist"
    files = container.open_model(case)
    labels = [v.label for v in read_model(case).graph.signature.variables]
    container.write_model(tmp_path / "mnist.tgz", files.graph_text, [(l, files.tensor_bytes(l)) for l in labels])
    folder, archive = read_model(case), read_model(tmp_path / "mnist.tgz")
    assert archive.graph == folder.graph
    for key in folder.tensors:
        np.testing.assert_array_equal(archive.tensors[key].array, folder.tensors[key].array)


def _copy_case(tmp_path, name="conv3x3"):
    require_conformance()
    target = tmp_path / name
    shutil.copytree(conformance_cases()[0].parent / name, target)
    return target


def test_dat_shape_disagreeing_with_the_graph_is_reported(tmp_path):
    model = _copy_case(tmp_path)
    (model / "filter.dat").write_bytes(tensor_file.encode(np.zeros((16, 8, 3, 2), np.float32)))
    with pytest.raises(NNEFTensorFileError, match="shape") as info:
        read_model(model)
    assert "filter.dat" in info.value.location.file


def test_dat_of_the_wrong_kind_is_reported(tmp_path):
    model = _copy_case(tmp_path)
    (model / "bias.dat").write_bytes(tensor_file.encode(np.zeros((1, 16), np.bool_)))
    with pytest.raises(NNEFTensorFileError, match="declared scalar but its file holds logical") as info:
        read_model(model)
    assert info.value.location.offset == 48


def test_truncated_dat_is_reported_with_its_offset(tmp_path):
    model = _copy_case(tmp_path)
    data = (model / "filter.dat").read_bytes()
    (model / "filter.dat").write_bytes(data[:-10])
    with pytest.raises(NNEFTensorFileError) as info:
        read_model(model)
    assert info.value.location.offset is not None


def test_missing_dat_is_reported(tmp_path):
    model = _copy_case(tmp_path)
    (model / "bias.dat").unlink()
    with pytest.raises(NNEFContainerError, match="bias"):
        read_model(model)


def test_graph_nnef_path_and_no_tensor_loading(tmp_path):
    model = _copy_case(tmp_path)
    (model / "bias.dat").unlink()
    data = read_model(model / "graph.nnef", load_tensors=False)
    assert data.tensors == {} and data.graph.outputs == ("output",)
