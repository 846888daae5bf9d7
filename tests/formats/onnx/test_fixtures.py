"""ONNX fixtures read by nnef_torch.load, compared with onnxruntime (the oracle), trained and saved as NNEF."""
from pathlib import Path

import numpy as np
import pytest
import torch
from formats.khronos_session import run_khronos

import nnef_torch

ort = pytest.importorskip("onnxruntime")
FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("*.onnx"))


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_outputs_match_onnxruntime(path):
    session = ort.InferenceSession(str(path))
    spec = session.get_inputs()[0]
    x = np.random.RandomState(0).randn(*spec.shape).astype(np.float32)
    expected = session.run(None, {spec.name: x})[0]
    module = nnef_torch.load(path)
    np.testing.assert_allclose(module(torch.from_numpy(x)).detach().numpy(), expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_gradients_reach_parameters_and_saved_nnef_runs_in_the_khronos_executor(path, tmp_path):
    nnef = pytest.importorskip("nnef")
    module = nnef_torch.load(path)
    shape = ort.InferenceSession(str(path)).get_inputs()[0].shape
    x = torch.randn(*shape)
    module(x).sum().backward()
    params = list(module.parameters())
    assert params and all(p.grad is not None for p in params)
    nnef_torch.save(module, tmp_path / "out", x)
    nnef.load_graph(str(tmp_path / "out"))
    session = ort.InferenceSession(str(path))
    expected = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    np.testing.assert_allclose(run_khronos(tmp_path / "out", [x.numpy()])[0], expected, rtol=1e-4, atol=1e-5)
