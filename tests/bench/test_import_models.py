"""The import benchmark's model generators (bench/import_models.py), on the two small models: the generated folder
loads with `nnef_torch.load` and computes what its hand-written twin computes, and the Khronos parser accepts it."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from khronos import khronos

import nnef_torch

BENCH = Path(__file__).resolve().parents[2] / "bench"
SMALL_MODELS = ["mlp", "lstm"]


def _import_models():
    name = "bench_import_models"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, BENCH / "import_models.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.mark.parametrize("model", SMALL_MODELS)
@pytest.mark.parametrize("batch", [1, 3])
def test_generated_model_equals_its_twin(tmp_path, model, batch):
    models = _import_models()
    twin = models.write_model(model, tmp_path)
    module = nnef_torch.load(tmp_path)
    x = models.example_input(model, batch=batch)
    with torch.no_grad():
        expected, actual = twin(x), module(x)
    assert actual.shape == expected.shape
    assert (actual - expected).abs().max().item() <= 1e-5 * expected.abs().max().item()


@pytest.mark.parametrize("model", SMALL_MODELS)
def test_twin_weights_are_the_written_tensors(tmp_path, model):
    models = _import_models()
    twin = models.write_model(model, tmp_path)
    for label, tensor in twin.by_label().items():
        stored = nnef_torch.read_tensor(tmp_path / (label + ".dat"))
        np.testing.assert_array_equal(tensor.detach().numpy().reshape(stored.shape), stored, err_msg=label)


@pytest.mark.parametrize("model", SMALL_MODELS)
def test_khronos_parser_accepts_the_generated_graph(tmp_path, model):
    nnef = khronos()
    models = _import_models()
    twin = models.write_model(model, tmp_path)
    graph = nnef.load_graph(str(tmp_path))
    nnef.infer_shapes(graph)
    with torch.no_grad():
        expected = twin(models.example_input(model))
    assert graph.tensors[graph.outputs[0]].shape == list(expected.shape)
