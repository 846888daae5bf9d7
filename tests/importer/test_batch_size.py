"""`batch_size=` (and `batch_axes=`): re-declare the batch axis of every graph input when reading or loading."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import nnef_torch
from importer.model_files import rng, write_model
from nnef_torch.errors import NNEFOptionError

TEXT = """version 1.0;
graph G( x, mask, scale ) -> ( y )
{
    x = external<scalar>(shape = [2, 3, 4]);
    mask = external<scalar>(shape = [3, 2]);
    scale = external<scalar>(shape = [1, 1, 4]);
    w = variable<scalar>(shape = [1, 4], label = 'w');
    t = transpose(mask, axes = [1, 0]);
    m = unsqueeze(t, axes = [2]);
    flat = reshape(x, shape = [0, -1]);
    xm = mul(x, m);
    xs = mul(xm, scale);
    s = reshape(xs, shape = [0, -1]);
    y = add(flat, s);
}
"""


def _shapes(graph):
    return {external.name: external.shape for external in graph.signature.externals}


def test_batch_size_sets_axis_zero_or_the_named_axis():
    graph = nnef_torch.read_graph(TEXT, batch_size=7, batch_axes={"mask": 1, "scale": None})
    assert _shapes(graph) == {"x": (7, 3, 4), "mask": (3, 7), "scale": (1, 1, 4)}
    assert graph.tensors["y"].shape == (7, 12)


def test_input_shapes_win_over_batch_size():
    graph = nnef_torch.read_graph(TEXT, batch_size=5, input_shapes={"mask": [3, 5], "scale": [1, 1, 4]})
    assert _shapes(graph) == {"x": (5, 3, 4), "mask": (3, 5), "scale": (1, 1, 4)}


def test_negative_axis_counts_from_the_end():
    graph = nnef_torch.read_graph(TEXT, batch_size=6, batch_axes={"mask": -1, "scale": None})
    assert _shapes(graph)["mask"] == (3, 6)


def test_axis_out_of_range_is_located_at_the_external():
    with pytest.raises(NNEFOptionError) as caught:
        nnef_torch.read_graph(TEXT, batch_size=7, batch_axes={"mask": 2, "scale": None})
    error = caught.value
    assert "input 'mask' has shape [3, 2], which has no batch axis 2" in str(error)
    assert error.location is not None and error.location.line == 5


def test_bad_batch_options():
    with pytest.raises(NNEFOptionError, match="positive integer"):
        nnef_torch.read_graph(TEXT, batch_size=0)
    with pytest.raises(NNEFOptionError, match="positive integer"):
        nnef_torch.read_graph(TEXT, batch_size=True)
    with pytest.raises(NNEFOptionError, match="needs batch_size="):
        nnef_torch.read_graph(TEXT, batch_axes={"mask": 1})
    with pytest.raises(NNEFOptionError, match=r"batch_axes names \['nothing'\]"):
        nnef_torch.read_graph(TEXT, batch_size=2, batch_axes={"nothing": 1})
    with pytest.raises(NNEFOptionError, match="integer axes"):
        nnef_torch.read_graph(TEXT, batch_size=2, batch_axes={"mask": "1"})


def test_read_model_and_load_take_a_batch_size(tmp_path):
    w = rng().standard_normal((1, 4)).astype(np.float32)
    folder = write_model(tmp_path, TEXT, {"w": w})
    axes = {"mask": 1, "scale": None}
    model = nnef_torch.read_model(folder, batch_size=5, batch_axes=axes)
    assert _shapes(model.graph)["x"] == (5, 3, 4)
    module = nnef_torch.load(folder, batch_size=5, batch_axes=axes)
    x, mask, scale = torch.rand(5, 3, 4), torch.rand(3, 5), torch.rand(1, 1, 4)
    expected = x.reshape(5, -1) + (x * mask.T[:, :, None] * scale).reshape(5, -1)
    torch.testing.assert_close(module(x, mask, scale), expected)


def test_a_module_loaded_on_meta_materializes_at_its_batch_size(tmp_path):
    w = rng().standard_normal((1, 4)).astype(np.float32)
    folder = write_model(tmp_path, TEXT, {"w": w})
    module = nnef_torch.load(folder, batch_size=3, batch_axes={"mask": 1, "scale": None}, device="meta")
    module.materialize()
    options = module.nnef.options  # a ReadOptions: the source opens again at the batch it was loaded with
    assert (options.batch_size, options.axes) == (3, {"mask": 1, "scale": None})
    assert {e.name: list(e.shape) for e in module.nnef_graph.signature.externals} == \
        {"x": [3, 3, 4], "mask": [3, 3], "scale": [1, 1, 4]}
    assert module(torch.rand(3, 3, 4), torch.rand(3, 3), torch.rand(1, 1, 4)).shape == (3, 12)


def test_exported_then_loaded_at_another_batch(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                              torch.nn.Linear(4 * 4 * 4, 2)).eval()
    nnef_torch.save(net, tmp_path / "net", torch.randn(1, 3, 6, 6), dynamic_batch=True)
    module = nnef_torch.load(tmp_path / "net", batch_size=9)
    x = torch.randn(9, 3, 6, 6)
    with torch.no_grad():
        torch.testing.assert_close(module(x), net(x), rtol=1e-5, atol=1e-5)
