"""ONNX models saved for tract (`save(..., target="tract")`): the loaded module is traced, so tract's own forms of
what its standard mode lacks (`constant`, `split`, `gather`) are written, and fake quantization as the arithmetic
of its definition (tract's graph.quant reader takes no per-channel entries, and computes entries in integer types). tract
runs each file to onnxruntime's outputs on the same ONNX file."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from onnxruntime_oracle import inputs_of  # this folder

import nnef_torch

ort = pytest.importorskip("onnxruntime")
tract = pytest.importorskip("tract")
FIXTURES = Path(__file__).parent / "fixtures"
CASES = ["recurrent/lstm_2layer_bidir17", "recurrent/gru_2layer_bidir13", "recurrent/lstm_dynamo18",
         "ops/cumsum17", "ops/gather_elements_topk17", "quantized/cnn17_qdq_u8s8", "quantized/mlp13_qop_u8s8",
         "enc17"]


@pytest.mark.parametrize("name", CASES)
def test_tract_runs_the_saved_model_to_onnxruntime_outputs(name, tmp_path):
    path = FIXTURES / f"{name}.onnx"
    xs = inputs_of(path)
    session = ort.InferenceSession(str(path))
    expected = session.run(None, {spec.name: x for spec, x in zip(session.get_inputs(), xs)})
    module = nnef_torch.load(path)
    inputs = tuple(torch.from_numpy(x) for x in xs)
    nnef_torch.save(module, tmp_path / "tract", inputs if len(inputs) > 1 else inputs[0], target="tract")
    runnable = tract.nnef().load(str(tmp_path / "tract")).into_runnable()
    outputs = runnable.run(list(xs))
    for index, want in enumerate(expected):  # the quantized files too: fake quantization written as its arithmetic
        np.testing.assert_allclose(outputs[index].to_numpy(), want, rtol=1e-4, atol=1e-5)
