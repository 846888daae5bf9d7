"""Saving an imported module: same graph text and graph.quant, current weights, atomic, archives."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from importer.model_files import write_model

import nnef_torch
from nnef_torch.format import tensor_file

TINY_CNN = nnef_torch.__path__[0] + "/models/tiny_cnn"


def _trained(tmp_path):
    module = nnef_torch.load(TINY_CNN)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.5)
    for _ in range(2):
        optimizer.zero_grad()
        module(torch.rand(4, 1, 16, 16)).log().sum().neg().backward()
        optimizer.step()
    return module


def test_save_then_load_gives_identical_outputs_and_text(tmp_path):
    module = _trained(tmp_path)
    module.save(tmp_path / "tuned")
    again = nnef_torch.load(tmp_path / "tuned")
    x = torch.rand(3, 1, 16, 16)
    assert torch.equal(again(x), module(x))
    original = open(TINY_CNN + "/graph.nnef").read()
    assert (tmp_path / "tuned" / "graph.nnef").read_text() == original
    assert (tmp_path / "tuned" / "graph.quant").read_text() == open(TINY_CNN + "/graph.quant").read()
    for name, parameter in module.named_parameters():
        label = module.label_of(name)
        stored = nnef_torch.read_tensor(tmp_path / "tuned" / f"{label}.dat")
        assert np.array_equal(stored, parameter.detach().numpy()), name
    nnef_torch.save(again, tmp_path / "twice")
    assert (tmp_path / "twice" / "graph.nnef").read_text() == original
    assert torch.equal(nnef_torch.load(tmp_path / "twice")(x), module(x))


def test_save_as_archive(tmp_path):
    module = nnef_torch.load(TINY_CNN)
    module.save(tmp_path / "model.tgz")
    x = torch.rand(1, 1, 16, 16)
    assert torch.equal(nnef_torch.load(tmp_path / "model.tgz")(x), module(x))


def test_interrupted_save_leaves_previous_model_intact(tmp_path, monkeypatch):
    module = nnef_torch.load(TINY_CNN)
    target = tmp_path / "model"
    module.save(target)
    before = {path.name: path.read_bytes() for path in target.rglob("*") if path.is_file()}
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.add_(1.0)
    from nnef_torch.writers import nnef as save_module
    calls = []
    real = save_module.encode

    def failing(tensor, storage):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(tensor, storage)
    monkeypatch.setattr(save_module, "encode", failing)
    with pytest.raises(KeyboardInterrupt):
        module.save(target)
    after = {path.name: path.read_bytes() for path in target.rglob("*") if path.is_file()}
    assert after == before
    assert [path.name for path in tmp_path.iterdir()] == ["model"]


def test_stored_layouts_are_kept(tmp_path):
    text = """version 1.0;
extension KHR_enable_operator_expressions;
graph G( x ) -> ( y )
{
    x = external<scalar>(shape = [4]);
    q = variable<scalar>(shape = [4], label = 'q');
    h = variable<scalar>(shape = [4], label = 'h');
    y = x * q + h;
}
"""
    values = np.array([-1.0, 0.0, 0.5, 1.0], np.float32)
    spec = {"op": "linear_quantize", "min": -1.0, "max": 1.0, "bits": 4}
    folder = write_model(tmp_path / "in", text, {"q": values, "h": values.astype(np.float16)},
                         quantization={"q": spec})
    module = nnef_torch.load(folder)
    module.save(tmp_path / "out")
    for label in ("q", "h"):
        original = tensor_file.read_header((folder / f"{label}.dat").read_bytes())
        saved = tensor_file.read_header((tmp_path / "out" / f"{label}.dat").read_bytes())
        assert (saved.code, saved.bits, saved.quantization) == (original.code, original.bits, original.quantization)
    assert (tmp_path / "out" / "q.dat").read_bytes() == (folder / "q.dat").read_bytes()


def test_save_of_a_torch_module_needs_example_inputs(tmp_path):
    with pytest.raises(nnef_torch.ExportError, match="example_inputs"):
        nnef_torch.save(torch.nn.Linear(2, 2), tmp_path / "linear")
    assert not (tmp_path / "linear").exists()
