"""The examples run end to end at their default settings; their claims are checked against independent readers:
the Khronos parser, reader and reference executor, and tract."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch

import nnef_torch

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, argv: list[str]) -> dict:
    """`main(argv)` of an example, on one thread: its tensors are too small to gain from more, and on a busy 2-core
    machine OpenMP's default pool spins (measured there: 33 s against 9 s for the fine-tuning example)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return example(name).main(argv)
    finally:
        torch.set_num_threads(threads)


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as a module imported by name: dataclasses look it up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fine_tuned(tmp_path_factory):
    return run_example("finetune_imported", ["--out", str(tmp_path_factory.mktemp("finetune"))])


def test_fine_tuning_an_imported_model_learns_the_task(fine_tuned):
    assert fine_tuned["frozen"] == ["conv1.filter", "conv1.bias"]
    assert fine_tuned["accuracy_before"] < 40.0  # the shipped weights know nothing of this task (chance: 25%)
    assert fine_tuned["accuracy_after"] > 75.0
    assert fine_tuned["losses"][-1] < fine_tuned["losses"][0]


def test_saved_model_computes_what_the_tuned_module_computes(fine_tuned):
    model, images = fine_tuned["model"], fine_tuned["test_data"][0][:64]
    reimported = nnef_torch.load(fine_tuned["folder"])
    with torch.no_grad():
        assert torch.equal(reimported(images), model(images))


def test_frozen_tensors_are_unchanged_and_trained_ones_saved(fine_tuned):
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    source, folder, model = fine_tuned["source"], fine_tuned["folder"], fine_tuned["model"]
    for name, parameter in model.named_parameters():
        path = name.replace(".", "/") + ".dat"
        with open(source / path, "rb") as original, open(folder / path, "rb") as saved:
            before, after = nnef.read_tensor(original), nnef.read_tensor(saved)
        np.testing.assert_array_equal(after, parameter.detach().numpy().reshape(after.shape))
        assert np.array_equal(after, before) == (name in fine_tuned["frozen"]), name


def test_khronos_tools_accept_the_tuned_model(fine_tuned):
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    folder, model, images = fine_tuned["folder"], fine_tuned["model"], fine_tuned["test_data"][0][:4]
    graph = nnef.load_graph(str(folder))
    nnef.infer_shapes(graph)
    assert [graph.tensors[name].shape for name in graph.outputs] == [[1, 4]]
    assert {name for name, tensor in graph.tensors.items() if tensor.quantization} == {"image", "relu1", "relu2"}
    # the Khronos executor ignores graph.quant: it computes the tuned module with fake quantization off
    with nnef.Session(str(folder), lowered=["linear", "softmax"]) as session:
        found = np.concatenate([np.asarray(session(image[None].numpy())).reshape(1, -1) for image in images])
    model.set_quantization(False)
    try:
        with torch.no_grad():
            expected = model(images).numpy()
    finally:
        model.set_quantization(True)
    np.testing.assert_allclose(found, expected, atol=1e-5)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return run_example("export_for_accelerator", ["--out", str(tmp_path_factory.mktemp("accelerator"))])


@pytest.mark.parametrize("consumer", ["khronos", "tract", "nnef_torch"])
def test_float_export_runs_in_each_consumer(exported, consumer):
    pytest.importorskip({"khronos": "nnef", "tract": "tract", "nnef_torch": "nnef_torch"}[consumer])
    result = exported["float"]
    assert list(result["shapes"].values()) == [(1, 10)]
    assert result["scale"] > 0.01  # outputs are not trivially zero
    assert result["differences"][consumer] <= 1e-5 * max(1.0, result["scale"])


def test_exports_use_only_the_accelerator_operations(exported):
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    allowed = set(example("export_for_accelerator").ACCELERATOR_OPS) | {"external", "variable"}
    for result in (exported["float"], exported["quantized"]):
        graph = nnef.load_graph(str(result["folder"]), lowered=[])  # the operations as written
        assert {op.name for op in graph.operations} <= allowed
        assert "batch_normalization" not in {op.name for op in graph.operations}  # folded
        assert "fragment" not in (result["folder"] / "graph.nnef").read_text()


def test_8_bit_export_runs_in_tract_within_one_step(exported):
    pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")
    result = exported["quantized"]
    assert result["fold_difference"] <= 1e-5  # folding batch norm keeps the function
    assert result["graph_quant_entries"] >= 15  # input, 7 conv weights, conv and ReLU6 outputs, classifier
    assert result["tract_error"] is None
    # tract requantizes every quantized tensor in integers; measured: at most one output step, mean 0.09
    assert result["tract_steps_max"] <= 2.0 and result["tract_steps_mean"] <= 0.5
    assert result["tract_same_class"] >= 0.875


def test_8_bit_export_stores_int8_codes_that_decode_to_the_fake_quantized_weights(exported):
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    folder, model = exported["quantized"]["folder"], exported["quantized"]["model"]
    graph = nnef.load_graph(str(folder))
    tensor, = [op.outputs["output"] for op in graph.operations
               if op.name == "variable" and op.attribs["label"] == "stem/0/weight"]
    entry = graph.tensors[tensor].quantization
    with open(folder / "stem" / "0" / "weight.dat", "rb") as file:
        codes = nnef.read_tensor(file)
    assert codes.dtype.kind == "i" and codes.dtype.itemsize == 1
    decoded = (codes.astype(np.float64) - float(entry["zero_point"])) * float(entry["scale"])
    with torch.no_grad():
        fake_quantized = model.stem[0].weight.numpy()  # the parametrization applies the weight's fake quantizer
    np.testing.assert_allclose(decoded, fake_quantized, rtol=1e-6, atol=1e-9)
