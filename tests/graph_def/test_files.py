"""Saving several networks writes the parameters once: graph.nnef is a standard model the Khronos tools read, each
other network a standard document beside it; loading the folder (or archive) brings them all back."""
from __future__ import annotations

import tarfile

import nnef
import numpy as np
import pytest
import torch

from graph_def.twins import TINY, images, khronos_outputs
from nnef_torch import graph_def
from nnef_torch.errors import NNEFError, NNEFOptionError
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
