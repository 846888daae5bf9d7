"""Saving several networks writes the parameters once: graph.nnef is a standard model the Khronos tools read, each
other network a standard document beside it; loading the folder (or archive) brings them all back."""
from __future__ import annotations

import dataclasses
import math
import os
import tarfile

import nnef
import numpy as np
import pytest
import torch

from graph_def.twins import TINY, images, khronos_outputs
from nnef_torch import graph_def
from nnef_torch.errors import (
    ExportError,
    NNEFContainerError,
    NNEFError,
    NNEFOptionError,
    NNEFSemanticError,
    NNEFShapeError,
)
from nnef_torch.format import tensor_file
from nnef_torch.graph_def import NetworkPass


@pytest.fixture
def two_networks():
    g = graph_def.load(TINY)
    g.add(g.default_graph().promote(NetworkPass(name="features").use_up_to("pooled")))
    return g


@pytest.mark.parametrize("target", ["folder", "model.tgz"])
def test_two_networks_share_one_set_of_dat_files(tmp_path, two_networks, target):
    path = tmp_path / target
    graph_def.save(path, two_networks)
    if target == "folder":
        names = sorted(p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file())
    else:
        with tarfile.open(path) as archive:
            names = sorted(m.name for m in archive.getmembers() if m.isfile())
    labels = [f"{label}.dat" for label in ("conv1/bias", "conv1/filter", "conv2/bias", "conv2/filter",
                                           "fc/bias", "fc/weight")]
    assert names == sorted(["graph.nnef", "graph.quant", "features.nnef", "features.quant", *labels])
    back = graph_def.load(path)
    assert list(back.networks) == ["tiny_cnn", "features"]
    assert back.features.outputs == ["pooled"] and back.default_graph().outputs == ["probabilities"]
    x = torch.from_numpy(images())
    with torch.no_grad():
        for network in [*back.networks.values(), *two_networks.networks.values()]:
            network.module().set_quantization(False)
        torch.testing.assert_close(back.features(x), two_networks.features(x))
        assert back(x).shape == (1, 4)


def test_khronos_reads_the_default_and_the_other_documents(tmp_path, two_networks):
    graph_def.save(tmp_path / "m", two_networks)
    x = images()
    np.testing.assert_allclose(khronos_outputs(tmp_path / "m", x)[0], khronos_outputs(TINY, x)[0], rtol=1e-6)
    other = nnef.parse_string((tmp_path / "m" / "features.nnef").read_text())
    assert list(other.outputs) == ["pooled"]
    labels = {op.attribs["label"] for op in other.operations if op.name == "variable"}
    assert all((tmp_path / "m" / f"{label}.dat").exists() for label in labels)


def test_parameters_are_shared_after_loading(tmp_path, two_networks):
    graph_def.save(tmp_path / "m", two_networks)
    back = graph_def.load(tmp_path / "m")
    a, b = back.default_graph().module(), back.features.module()
    assert a.conv1.filter is b.conv1.filter


def test_exclude_parameter_and_parameter_only(tmp_path, two_networks):
    graph_def.save(tmp_path / "m", two_networks)
    bare = graph_def.load(tmp_path / "m", exclude_parameter=True)
    assert bare.parameters == {} and list(bare.networks) == ["tiny_cnn", "features"]
    with pytest.raises(NNEFError, match="no data"):
        bare.default_graph().module()
    only = graph_def.load(tmp_path / "m", parameter_only=True)
    assert only.networks == {} and set(only.parameters) == {"conv1/filter", "conv1/bias", "conv2/filter",
                                                             "conv2/bias", "fc/weight", "fc/bias"}
    with pytest.raises(NNEFOptionError):
        graph_def.load(tmp_path / "m", exclude_parameter=True, parameter_only=True)


def test_parameters_given_replace_the_files(tmp_path):
    weight = np.zeros((4, 16), np.float32)
    g = graph_def.load(TINY, parameters={"fc/weight": weight})
    np.testing.assert_array_equal(np.asarray(g.parameters["fc/weight"]), weight)
    with torch.no_grad():
        g.default_graph().module().set_quantization(False)
        probabilities = g(torch.from_numpy(images()))
    expected = torch.softmax(torch.from_numpy(np.fromfile(TINY / "fc" / "bias.dat", np.float32)[-4:]), 0)
    torch.testing.assert_close(probabilities[0], expected, rtol=1e-5, atol=1e-6)


def test_include_parameters_false_writes_documents_only(tmp_path, two_networks):
    graph_def.save(tmp_path / "m", two_networks, include_parameters=False)
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["features.nnef", "features.quant", "graph.nnef",
                                                                 "graph.quant"]


def test_variable_batch_size_refuses_a_network_with_a_fixed_batch(tmp_path):
    text = (TINY / "graph.nnef").read_text().replace("shape = [0, -1]", "shape = [1, 16]")
    (tmp_path / "fixed").mkdir()
    (tmp_path / "fixed" / "graph.nnef").write_text(text)
    g = graph_def.load(tmp_path / "fixed", exclude_parameter=True)
    with pytest.raises(NNEFError, match="does not read at batch size 3"):
        graph_def.save(tmp_path / "out", g, include_parameters=False)
    graph_def.save(tmp_path / "out", g, include_parameters=False, variable_batch_size=False)
    assert (tmp_path / "out" / "graph.nnef").exists()


def test_same_label_with_different_shapes_is_refused(tmp_path):
    g = graph_def.load(TINY)
    other = graph_def.load(TINY).default_graph()
    other.name = "other"
    other.parameters["fc_weight"].shape = (2, 2)
    g.add(other)
    with pytest.raises(NNEFError, match="'fc/weight' has shape"):
        graph_def.save(tmp_path / "m", g)


# ---- a model folder read under the container's rules -------------------------------------------------------------

def _leaky(name: str = "G", alpha: str = "0.5", shape: str = "[2, 3]") -> str:
    return (f"version 1.0;\n\ngraph {name}( input ) -> ( output )\n{{\n    input = external<scalar>(shape = [2, 3]);\n"
            f"    w = variable<scalar>(shape = {shape}, label = 'w');\n    s = add(input, w);\n"
            f"    output = leaky_relu(s, alpha = {alpha});\n}}\n")


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "graph.nnef").write_text(_leaky())
    (tmp_path / "m" / "w.dat").write_bytes(tensor_file.encode(np.ones((2, 3), np.float32)))
    (tmp_path / "outside.txt").write_text("root:x:0:0:TOPSECRET:/root:/bin/bash\n")
    return tmp_path / "m"


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="symbolic links need a POSIX system")
@pytest.mark.parametrize("name", ["train.nnef", "train.quant"])
def test_document_linked_outside_the_folder_is_refused_unread(folder, name):
    (folder / "train.nnef").write_text(_leaky("train"))
    (folder / name).unlink(missing_ok=True)
    os.symlink(folder.parent / "outside.txt", folder / name)
    with pytest.raises(NNEFContainerError, match="resolves outside the model folder") as info:
        graph_def.load(folder)
    assert info.value.location.file == str(folder / name)
    assert "TOPSECRET" not in str(info.value) and "bin/bash" not in str(info.value)


@pytest.mark.parametrize("content", ["root:x:0:0:TOPSECRET:/root:/bin/bash\n", "\x7fELF\x02TOPSECRET\x00",
                                     "graph TOPSECRET( x ) -> ( y )\n"], ids=["password", "binary", "no_version"])
def test_document_that_is_not_nnef_is_refused_quoting_nothing(folder, content):
    (folder / "notes.nnef").write_text(content)
    with pytest.raises(NNEFError, match="expected 'version' at the start") as info:
        graph_def.load(folder)
    shown = str(info.value)
    assert info.value.location.file == str(folder / "notes.nnef") and "\n" not in shown
    assert "TOPSECRET" not in shown and "bin/bash" not in shown


def test_two_networks_of_one_name_are_located_at_the_second(folder):
    (folder / "again.nnef").write_text("# the same name\n" + _leaky())
    with pytest.raises(NNEFSemanticError, match="network 'G' is defined twice") as info:
        graph_def.load(folder)
    error = info.value
    assert (error.location.file, error.location.line, error.location.column) == (str(folder / "again.nnef"), 4, 1)
    assert str(folder / "graph.nnef") in error.message


def test_one_label_with_two_shapes_in_two_networks_is_refused_naming_both(folder):
    (folder / "other.nnef").write_text(_leaky("other", shape="[1, 3]"))
    with pytest.raises(NNEFShapeError, match="label 'w' with shape \\[1, 3\\]") as info:
        graph_def.load(folder, exclude_parameter=True)
    error = info.value
    assert (error.location.file, error.location.line, error.location.column) == (str(folder / "other.nnef"), 6, 9)
    assert "network 'G'" in error.message and f"{folder / 'graph.nnef'}:6:9" in error.message


def test_networks_of_one_label_and_shape_share_it(folder):
    (folder / "other.nnef").write_text(_leaky("other"))
    g = graph_def.load(folder)
    assert list(g.networks) == ["G", "other"] and list(g.parameters) == ["w"]


def test_saving_an_infinite_attribute_names_it(folder, tmp_path):
    g = graph_def.load(folder)
    network = g.default_graph()
    operations = tuple(dataclasses.replace(op, attribs={**op.attribs, "alpha": math.inf})
                       if op.name == "leaky_relu" else op for op in network.graph.operations)
    network.graph = dataclasses.replace(network.graph, operations=operations)
    with pytest.raises(ExportError, match="attribute 'alpha' of 'leaky_relu': NNEF has no literal for the scalar "
                                          "inf") as info:
        graph_def.save(tmp_path / "out", network, variable_batch_size=False)
    assert (info.value.location.file, info.value.location.line) == (str(folder / "graph.nnef"), 8)
    assert not (tmp_path / "out").exists()
