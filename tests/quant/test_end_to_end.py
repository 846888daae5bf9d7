"""The QAT example end to end, at cheap settings: float training, calibration, 8-bit QAT, export, re-import, and the
4-bit trade-off; the exports are read by the Khronos parser and the per-tensor one is run by tract."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import nnef_torch
from nnef_torch.quant import QuantConfig

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "qat_to_graph_quant.py"


def example():
    spec = importlib.util.spec_from_file_location("qat_to_graph_quant", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def trained():
    qat = example()
    torch.manual_seed(0)
    train_data, test_data = qat.make_images(4000, seed=1), qat.make_images(2000, seed=2)
    model = qat.SmallCNN()
    qat.train(model, train_data, 10, lr=3e-3)
    return qat, model, train_data, test_data


def test_8_bit_qat_keeps_accuracy_and_round_trips(trained, tmp_path):
    qat, model, train_data, test_data = trained
    result, prepared = qat.quantize(model, 8, train_data, test_data, 1, tmp_path / "cnn8")
    assert result.float_accuracy > 60.0  # the task is learnable (chance is 25%)
    assert result.qat_accuracy >= result.float_accuracy - 1.0
    assert result.max_output_difference == 0.0  # the re-imported export computes exactly what the QAT model did
    assert result.reimported_accuracy == result.qat_accuracy
    assert abs(result.codes_accuracy - result.qat_accuracy) <= 1.0  # 8-bit codes, 32-bit biases
    nnef = pytest.importorskip("nnef", reason="the Khronos `nnef` package (test extra) is not installed")
    for folder in (tmp_path / "cnn8", tmp_path / "cnn8_float"):
        graph = nnef.load_graph(str(folder))
        quantized = {name: t.quantization for name, t in graph.tensors.items() if t.quantization}
        assert len(quantized) == len(nnef_torch.load(folder).quantizers()) >= 7  # input, 3 weights, 3 outputs
        assert all(q["op-name"] == "zero_point_linear_quantize" for q in quantized.values())


def test_4_bits_cost_accuracy(trained, tmp_path):
    qat, model, train_data, test_data = trained
    result8, _ = qat.quantize(model, 8, train_data, test_data, 1, tmp_path / "cnn8")
    result4, _ = qat.quantize(model, 4, train_data, test_data, 1, tmp_path / "cnn4")
    assert result4.calibrated_accuracy < result8.calibrated_accuracy
    assert result4.max_output_difference == 0.0


def test_tract_runs_the_per_tensor_export(trained, tmp_path):
    tract = pytest.importorskip("tract", reason="the `tract` package (test extra) is not installed")
    qat, model, train_data, test_data = trained
    config = QuantConfig(bits=8, weights={"per_channel": False})
    result, prepared = qat.quantize(model, 8, train_data, test_data, 1, tmp_path / "per_tensor", config)
    runnable = tract.nnef().without_tract_core().load(str(tmp_path / "per_tensor")).into_runnable()
    images = test_data[0][:64]
    found = []
    for image in images:
        output = runnable.run([image[None].numpy()])[0]
        found.append(output.convert_to(tract.tensor.DatumType.F32).to_numpy()[0])
    with torch.no_grad():
        expected = prepared(images).numpy()
    step = prepared.fc.output_quantizer.scale.item()
    steps = np.abs(np.asarray(found) - expected) / step
    print(f"tract vs torch: max {steps.max():.2f} steps, mean {steps.mean():.3f}, within one step "
          f"{(steps <= 1.001).mean():.3f}, same class {(np.asarray(found).argmax(1) == expected.argmax(1)).mean():.3f}")
    # tract computes in integers (requantizing every quantized tensor); measured: mean 1.1 steps, at most 4
    assert steps.mean() <= 2.0 and steps.max() <= 8.0
    assert (np.asarray(found).argmax(1) == expected.argmax(1)).mean() >= 0.95
